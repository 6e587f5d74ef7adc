/* The coordinator's options (config_internal.h): the table that says
 * each one once, its --help text, range and default included, the
 * options that take their argument with a function of their own (--peers,
 * --tcpstore-listen, --metrics-listen, --log-level, --help, --version), and --help printed
 * from the table. Apart from config.c, the parser the table drives and
 * the checks across options: adding an option touches this file only. */
#include "config_internal.h"

#include "log.h"
#include "version.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A default's number as text, so --help prints the one in config.h. */
#define STR_(x) #x
#define STR(x) STR_(x)

/* What --help prints around the options. */
static const char usage_head[] =
    "Usage: c10d-coord [OPTIONS]\n"
    "\n"
    "The c10d coordinator: the store (TCPStore's operations, kept in SQLite),\n"
    "group membership and liveness, and the check that every rank calls the\n"
    "same collective in the same order, for the jobs of a host or a cluster.\n"
    "Start it once and leave it running, job after job (deploy/ has systemd\n"
    "units); ranks reach it with libc10dclient or the PyTorch backend,\n"
    "operators with c10d-ctl. Reachable from other hosts only when --listen\n"
    "says so (tcp://0.0.0.0:PORT), and then give it a token.\n"
    "\n"
    "Options:\n";
static const char usage_tail[] =
    "\n"
    "Environment: C10D_TOKEN (shared secret), C10D_LOG_LEVEL, C10D_NO_READINESS=1\n"
    "(read connections in NNG's callbacks, not on the readiness thread).\n"
    "Exit status: 0 after SIGTERM/SIGINT (clean shutdown), 1 on a startup error\n"
    "(port in use, database locked by another coordinator, ...), 2 on bad usage.\n";

/* Each field's kind, checked as the table compiles: a TEXT field is a
 * char * (comparing pointers of two types is an error), a NUMBER field 4
 * or 8 bytes wide (an array of negative size is). */
#define FIELD(field) (((c10ds_config *)0)->field)
#define TEXT(field)                                                                                \
    C10DS_TAKE_TEXT, offsetof(c10ds_config, field) + 0 * sizeof(&FIELD(field) == (char **)0), 0,  \
        0, 0, 0, NULL
#define NUMBER(field, lo, hi, def)                                                                 \
    C10DS_TAKE_NUMBER, offsetof(c10ds_config, field),                                              \
        sizeof(FIELD(field)) +                                                                     \
            0 * sizeof(char[sizeof(FIELD(field)) == 4 || sizeof(FIELD(field)) == 8 ? 1 : -1]),     \
        (lo), (hi), (def), NULL
#define KEPT(field) C10DS_TAKE_KEPT, offsetof(c10ds_parse_state, field), 0, 0, 0, 0, NULL
#define OWN(fn) C10DS_TAKE_OWN, 0, 0, 0, 0, 0, (fn)
#define HEADING C10DS_TAKE_HEADING, 0, 0, 0, 0, 0, NULL

/* --tcpstore-listen's and --metrics-listen's [HOST:]PORT as an NNG URL
 * of scheme; a bare port is bound to loopback: neither asks for a token,
 * so opening one wider is the operator's explicit choice. NULL (after
 * saying why) when malformed. */
static char *host_port_url(const char *arg, const char *option, const char *scheme)
{
    const char *colon = strrchr(arg, ':');
    const char *port = colon ? colon + 1 : arg;
    char *end;
    errno = 0;
    unsigned long p = strtoul(port, &end, 10);
    if (!*port || *end || errno || p > 65535 || (colon && colon == arg)) {
        fprintf(stderr, "c10d-coord: --%s %s: want PORT or HOST:PORT (e.g. 29701 "
                "or 0.0.0.0:29701)\n", option, arg);
        return NULL;
    }
    char url[300];
    if (colon)
        snprintf(url, sizeof url, "%s://%.*s:%lu", scheme, (int)(colon - arg), arg, p);
    else
        snprintf(url, sizeof url, "%s://127.0.0.1:%lu", scheme, p);
    return strdup(url);
}

/* --peers ID=IP:PORT,...: unique ids, IPv4 literals (what dqlite 1.11.1
 * binds and dials). */
static int parse_peers(c10ds_config *cfg, const char *arg)
{
    char *copy = strdup(arg), *save = NULL;
    cfg->npeers = 0;
    for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(p, '='), *end;
        unsigned long long id = eq ? strtoull(p, &end, 10) : 0;
        const char *addr = eq ? eq + 1 : "";
        const char *colon = strrchr(addr, ':');
        unsigned a, b, c, d, port;
        char tail;
        if (!eq || !(p[0] >= '0' && p[0] <= '9') || end != eq || id == 0 || !colon ||
            strspn(addr, "0123456789.:") != strlen(addr) ||
            sscanf(addr, "%u.%u.%u.%u:%u%c", &a, &b, &c, &d, &port, &tail) != 5 || a > 255 ||
            b > 255 || c > 255 || d > 255 || port == 0 || port > 65535) {
            fprintf(stderr, "c10d-coord: --peers: '%s' is not ID=IPv4:PORT (e.g. "
                    "1=10.0.0.1:29600; dqlite takes IPv4 literals)\n", p);
            free(copy);
            return -1;
        }
        if (cfg->npeers == C10DS_MAX_REPLICAS) {
            fprintf(stderr, "c10d-coord: --peers: at most %d replicas\n", C10DS_MAX_REPLICAS);
            free(copy);
            return -1;
        }
        for (int i = 0; i < cfg->npeers; i++)
            if (cfg->peers[i].id == id || !strcmp(cfg->peers[i].address, addr)) {
                fprintf(stderr, "c10d-coord: --peers: %s is listed twice\n",
                        cfg->peers[i].id == id ? "a replica's id" : "an address");
                free(copy);
                return -1;
            }
        cfg->peers[cfg->npeers].id = id;
        snprintf(cfg->peers[cfg->npeers].address, sizeof cfg->peers[0].address, "%s", addr);
        cfg->npeers++;
    }
    free(copy);
    return 0;
}

/* The options' own takers. */
static int take_tcpstore(c10ds_config *cfg, c10ds_parse_state *st, const char *arg)
{
    (void)st;
    free(cfg->tcpstore_url);
    return (cfg->tcpstore_url = host_port_url(arg, "tcpstore-listen", "tcp")) ? 0 : -1;
}

static int take_metrics(c10ds_config *cfg, c10ds_parse_state *st, const char *arg)
{
    (void)st;
    free(cfg->metrics_url);
    return (cfg->metrics_url = host_port_url(arg, "metrics-listen", "http")) ? 0 : -1;
}

static int take_peers(c10ds_config *cfg, c10ds_parse_state *st, const char *arg)
{
    (void)st;
    return parse_peers(cfg, arg);
}

static int take_log_level(c10ds_config *cfg, c10ds_parse_state *st, const char *arg)
{
    (void)st;
    if ((cfg->log_level = c10ds_log_parse_level(arg)) < 0) {
        fprintf(stderr, "c10d-coord: --log-level wants error, warn, info or debug\n");
        return -1;
    }
    return 0;
}

static int take_help(c10ds_config *cfg, c10ds_parse_state *st, const char *arg);

static int take_version(c10ds_config *cfg, c10ds_parse_state *st, const char *arg)
{
    (void)cfg, (void)st, (void)arg;
    printf("c10d-coord %s (protocol %d)\n", C10D_VERSION_STRING, C10D_PROTOCOL_VERSION);
#ifdef C10DS_HAVE_DQLITE
    printf("replicas (--replica): on, dqlite\n");
#else
    printf("replicas (--replica): off, built without dqlite (libdqlite-dev)\n");
#endif
    return 1;
}

/* Every option, in --help's order. A number's range is its check and
 * `def` its default (0: none, or one made from others once all are
 * parsed); --help's text says each default, from config.h's macros where
 * they are named. */
const c10ds_opt_spec c10ds_config_options[] = {
    {"listen", 'l', "URL",
     "address to serve on (default " C10DS_DEFAULT_LISTEN ",\n"
     "this host only; a replica's " C10DS_DEFAULT_REPLICA_LISTEN ";\n"
     "also ipc:///path and tls+tcp://host:port; port 0\n"
     "picks a free port)",
     KEPT(listen)},
    {"tcpstore-listen", 0, "[HOST:]PORT",
     "\nalso speak PyTorch TCPStore's protocol there,\n"
     "for torchrun's c10d rendezvous and unmodified\n"
     "TCPStore clients (keys under tcpstore/; off by\n"
     "default; HOST defaults to 127.0.0.1). It checks\n"
     "no token and has no TLS: anyone who can connect\n"
     "reads and writes its keys, so bind it to\n"
     "loopback or firewall it. Its clients are held\n"
     "to the --tcpstore-* limits below as well as the\n"
     "others (docs/operations.md, \"The TCPStore port\")",
     OWN(take_tcpstore)},
    {"tcpstore-max-parked-bytes", 0, "N",
     "\n"
     "bytes of WAITs parked by all TCPStore clients\n"
     "together, within max-parked-bytes; a WAIT\n"
     "beyond closes its connection (default 64 MiB)",
     NUMBER(ts_max_parked_bytes, 1u << 16, 1ull << 40, 64u << 20)},
    {"tcpstore-max-inflight", 0, "N",
     "\n"
     "queries of one TCPStore connection being\n"
     "answered at once (parked WAITs aside); its next\n"
     "ones are not read until then (default 1:\n"
     "TCPStore's client asks one at a time)",
     NUMBER(ts_max_inflight, 1, 1024, 1)},
    {"tcpstore-max-port-inflight", 0, "N",
     "\n"
     "the same, all TCPStore connections together:\n"
     "how much of the coordinator they may hold at\n"
     "once, whatever their number (default 2)",
     NUMBER(ts_max_port_inflight, 1, 65536, 2)},
    {"tcpstore-quota-bytes", 0, "N",
     "\n"
     "bytes of keys and values TCPStore clients may\n"
     "hold in the store, all together; a write beyond\n"
     "closes its connection, saying why in the log\n"
     "(default 1 GiB)",
     NUMBER(ts_quota_bytes, 1u << 16, 1ull << 44, 1u << 30)},
    {"metrics-listen", 0, "[HOST:]PORT",
     "\nserve Prometheus metrics at\n"
     "http://HOST:PORT/metrics (off by default; HOST\n"
     "defaults to 127.0.0.1; port 0 picks one, logged;\n"
     "docs/operations.md, \"Metrics\")",
     OWN(take_metrics)},
    {"tls-cert", 0, "PATH", "certificate (PEM) for a tls+tcp:// listener", TEXT(tls_cert)},
    {"tls-key", 0, "PATH", "its private key (PEM)", TEXT(tls_key)},
    {"tls-ca", 0, "PATH",
     "require client certificates signed by this CA\n"
     "(optional; clients always verify the server)",
     TEXT(tls_ca)},
    {"db", 'd', "PATH",
     "SQLite database file (default ./" C10DS_DEFAULT_DB ";\n"
     ":memory: keeps nothing after exit)",
     KEPT(db)},
    {"token-file", 0, "PATH",
     "require this shared secret from every client\n"
     "(default: $C10D_TOKEN, if set; set but empty\n"
     "is refused)",
     KEPT(token_file)},
    {"max-key-bytes", 0, "N", "longest key accepted (default 4096)",
     NUMBER(max_key_bytes, 1, 1u << 20, 4096)},
    {"max-value-bytes", 0, "N", "largest value accepted (default 16777216)",
     NUMBER(max_value_bytes, 1, 1u << 30, 16u << 20)},
    {"max-message-bytes", 0, "N",
     "largest request accepted on the wire\n"
     "(default max-value-bytes + 1 MiB)",
     NUMBER(max_message_bytes, 1024, 2u << 30, 0)},
    {"max-multi-keys", 0, "N", "most keys in one multi_get/multi_set/wait (default 4096)",
     NUMBER(max_multi_keys, 1, 1u << 20, 4096)},
    {"max-world-size", 0, "N", "most ranks in one job (default 65536)",
     NUMBER(max_world_size, 1, 1u << 24, 65536)},
    {"max-connection-buffer", 0, "N",
     "bytes of replies queued for one client that\n"
     "does not read them before it is cut off\n"
     "(default 64 MiB)",
     NUMBER(max_conn_buffer, 1u << 16, 1ull << 40, 64u << 20)},
    {"max-pending-bytes", 0, "N",
     "bytes of unfinished requests held for all\n"
     "connections together; a connection that would\n"
     "go over is closed (default 256 MiB, at least\n"
     "max-message-bytes)",
     NUMBER(max_pending_bytes, 1u << 16, 1ull << 40, 0)},
    {"frame-timeout", 0, "MS",
     "a connection that sends part of a request and\n"
     "then nothing for this long is closed (default\n" STR(C10DS_DEFAULT_FRAME_TIMEOUT_MS) ")",
     NUMBER(frame_timeout_ms, 100, C10DS_MAX_TIMEOUT_OPTION_MS,
            C10DS_DEFAULT_FRAME_TIMEOUT_MS)},
    {"max-decode-bytes", 0, "N",
     "memory one request may take to decode, counted\n"
     "on the wire before it is unpacked (default\n"
     "2 x max-message-bytes, at least that)",
     NUMBER(max_decode_bytes, 1u << 16, 1ull << 40, 0)},
    {"max-reply-bytes", 0, "N",
     "bytes of unsent replies, all connections\n"
     "together; a reply beyond is replaced by\n"
     "ETOOBIG (default 256 MiB, at least\n"
     "max-message-bytes)",
     NUMBER(max_reply_bytes, 1u << 16, 1ull << 40, 0)},
    {"max-parked", 0, "N",
     "requests parked at once (gets and waits for\n"
     "missing keys, rendezvous, watches); more get\n"
     "ETOOBIG (default 262144)",
     NUMBER(max_parked, 1, 1ull << 32, 262144)},
    {"max-parked-bytes", 0, "N",
     "bytes of parked requests (as sent: a wait's\n"
     "keys), all connections together; a wait beyond\n"
     "gets ETOOBIG (default 256 MiB)",
     NUMBER(max_parked_bytes, 1u << 16, 1ull << 40, 256u << 20)},
    {"max-connection-parked-bytes", 0, "N",
     "\n"
     "the same, one connection's, on either port\n"
     "(default 64 MiB)",
     NUMBER(max_conn_parked_bytes, 1u << 16, 1ull << 40, 64u << 20)},
    {"max-connections", 0, "N",
     "client connections open at once; one more is\n"
     "closed as soon as it is accepted (default: the\n"
     "file descriptor limit, ulimit -n, less 64)",
     NUMBER(max_connections, 1, 1u << 24, 0)},
    {"drain-timeout", 0, "MS",
     "on SIGTERM, how long requests already queued\n"
     "are still answered; the rest are dropped, and\n"
     "their clients resend them (default " STR(C10DS_DEFAULT_DRAIN_TIMEOUT_MS) ")",
     NUMBER(drain_timeout_ms, 0, C10DS_MAX_TIMEOUT_OPTION_MS,
            C10DS_DEFAULT_DRAIN_TIMEOUT_MS)},
    {"dedup-window", 0, "S",
     "how long a client's applied add/append/\n"
     "compare_set/delete are remembered after its last\n"
     "request, so a retry is applied once (default 600;\n"
     "its last 65,536 are kept while it is active)",
     NUMBER(dedup_window_s, 1, 86400 * 7, 600)},
    {"heartbeat-timeout", 0, "MS",
     "a rank whose heartbeats stop this long is\n"
     "declared dead (default " STR(C10DS_DEFAULT_HEARTBEAT_TIMEOUT_MS) "); a rank whose\n"
     "connection closes is declared dead at once",
     NUMBER(heartbeat_timeout_ms, 200, C10DS_MAX_TIMEOUT_OPTION_MS,
            C10DS_DEFAULT_HEARTBEAT_TIMEOUT_MS)},
    {"retention", 0, "S",
     "how long a finished run's records (members,\n"
     "groups, findings, traces; what c10d-ctl status,\n"
     "desync and trace show) are kept after it is over\n"
     "(default " STR(C10DS_DEFAULT_RETENTION_S) ", a day; 0: reclaimed at once). Its\n"
     "store keys go as soon as it is over",
     NUMBER(retention_s, 0, 86400ull * 3650, C10DS_DEFAULT_RETENTION_S)},
    {"busy-poll-us", 0, "US",
     "while requests come back to back, look for the\n"
     "next this long before sleeping, yielding the\n"
     "CPU between looks: it spares the wake-up of a\n"
     "sleeping thread (30-40 us on a VM); an idle\n"
     "coordinator stops looking within ~150 us\n"
     "(default " STR(C10DS_DEFAULT_BUSY_POLL_US) "; 0: never)",
     NUMBER(busy_poll_us, 0, 10000, C10DS_DEFAULT_BUSY_POLL_US)},
    {"ready-file", 0, "PATH", "write the URL actually bound once serving", TEXT(ready_file)},
    {"log-level", 0, "LEVEL", "error, warn, info (default) or debug", OWN(take_log_level)},
    {"help", 'h', NULL, "show this help", OWN(take_help)},
    {"version", 'V', NULL, "show versions", OWN(take_version)},
    {NULL, 0, NULL, "Replicas (docs/replication.md; instead of --db):", HEADING},
    {"replica", 0, "ID",
     "run as replica ID of a replicated coordinator:\n"
     "its state in dqlite (raft), one replica leads\n"
     "and serves, the others answer ENOTLEADER with\n"
     "the leader's URL",
     NUMBER(replica_id, 1, UINT32_MAX, 0)},
    {"peers", 0, "ID=IP:PORT,...",
     "every replica and its dqlite address (raft and\n"
     "SQL; IPv4 literals): the same list on each.\n"
     "Replica 1 starts a new cluster; the leader adds\n"
     "the others, and removes replicas no longer listed",
     OWN(take_peers)},
    {"data-dir", 0, "PATH",
     "the replica's raft log and snapshots (default\n"
     "./c10d-replica-ID)",
     TEXT(data_dir)},
    {"advertise-url", 0, "URL",
     "the URL clients are sent to while this replica\n"
     "leads (default: --listen, with 0.0.0.0 replaced\n"
     "by this replica's IP from --peers)",
     TEXT(advertise_url)},
    {"raft-latency-ms", 0, "MS",
     "the network's round trip as raft should plan\n"
     "for: heartbeats every 1.5x, an election after\n"
     "15x without one (default " STR(C10DS_DEFAULT_RAFT_LATENCY_MS) ")",
     NUMBER(raft_latency_ms, 1, 10000, C10DS_DEFAULT_RAFT_LATENCY_MS)},
    {"seed", 0, "PATH",
     "a new replicated coordinator (its replicated\n"
     "database empty) starts from this database: a\n"
     "single-node one, or an --export (ignored once\n"
     "it holds anything)",
     TEXT(seed_path)},
    {"export", 0, "PATH --peers ...",
     "copy the replicated database, from the\n"
     "replica that leads, into a new SQLite file (a\n"
     "backup; c10d-coord --db PATH serves it), and exit",
     TEXT(export_path)},
};
#define N_OPTIONS (sizeof c10ds_config_options / sizeof c10ds_config_options[0])
const size_t c10ds_config_noptions = N_OPTIONS;
_Static_assert(N_OPTIONS <= C10DS_CONFIG_MAX_OPTIONS, "C10DS_CONFIG_MAX_OPTIONS bounds the table");

/* Where an option's help begins (at least two spaces after its name),
 * and the column of its lines below. */
#define HELP_COLUMN 28

static void print_help(FILE *f)
{
    fputs(usage_head, f);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const c10ds_opt_spec *o = &c10ds_config_options[i];
        if (o->take == C10DS_TAKE_HEADING) {
            fprintf(f, "\n%s\n", o->help);
            continue;
        }
        char left[96];
        int n = o->letter ? snprintf(left, sizeof left, "  -%c, --%s", o->letter, o->name)
                          : snprintf(left, sizeof left, "      --%s", o->name);
        if (o->arg)
            n += snprintf(left + n, sizeof left - (size_t)n, " %s", o->arg);
        const char *h = o->help;
        if (*h == '\n') /* the help goes below the name */
            fprintf(f, "%s\n%*s", left, HELP_COLUMN, ""), h++;
        else
            fprintf(f, "%-*s", n + 2 <= HELP_COLUMN ? HELP_COLUMN : n + 2, left);
        for (const char *nl; (nl = strchr(h, '\n')); h = nl + 1)
            fprintf(f, "%.*s\n%*s", (int)(nl - h), h, HELP_COLUMN, "");
        fprintf(f, "%s\n", h);
    }
    fputs(usage_tail, f);
}

static int take_help(c10ds_config *cfg, c10ds_parse_state *st, const char *arg)
{
    (void)cfg, (void)st, (void)arg;
    print_help(stdout);
    return 1;
}
