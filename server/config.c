#include "config.h"

#include "log.h"
#include "version.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* A default's number as text, so --help prints the one in config.h. */
#define STR_(x) #x
#define STR(x) STR_(x)

static const char usage[] =
    "Usage: c10d-coord [OPTIONS]\n"
    "\n"
    "The c10d coordinator: a durable key-value store (TCPStore's operations),\n"
    "kept in SQLite, for the ranks of distributed jobs. Run one per job (or per\n"
    "cluster) on the rank-0 host; ranks reach it with libc10dclient, operators\n"
    "with c10d-ctl.\n"
    "\n"
    "Options:\n"
    "  -l, --listen URL          address to serve on (default " C10DS_DEFAULT_LISTEN ";\n"
    "                            also ipc:///path and tls+tcp://host:port; port 0\n"
    "                            picks a free port)\n"
    "      --tcpstore-listen [HOST:]PORT\n"
    "                            also speak PyTorch TCPStore's protocol there,\n"
    "                            for torchrun's c10d rendezvous and unmodified\n"
    "                            TCPStore clients (keys under tcpstore/; off by\n"
    "                            default; HOST defaults to 127.0.0.1: TCPStore\n"
    "                            has no token or TLS, docs/pytorch.md)\n"
    "      --tls-cert PATH       certificate (PEM) for a tls+tcp:// listener\n"
    "      --tls-key PATH        its private key (PEM)\n"
    "      --tls-ca PATH         require client certificates signed by this CA\n"
    "                            (optional; clients always verify the server)\n"
    "  -d, --db PATH             SQLite database file (default ./" C10DS_DEFAULT_DB ";\n"
    "                            :memory: keeps nothing after exit)\n"
    "      --token-file PATH     require this shared secret from every client\n"
    "                            (default: $C10D_TOKEN, if set; set but empty\n"
    "                            is refused)\n"
    "      --max-key-bytes N     longest key accepted (default 4096)\n"
    "      --max-value-bytes N   largest value accepted (default 16777216)\n"
    "      --max-message-bytes N largest request accepted on the wire\n"
    "                            (default max-value-bytes + 1 MiB)\n"
    "      --max-multi-keys N    most keys in one multi_get/multi_set/wait (default 4096)\n"
    "      --max-world-size N    most ranks in one job (default 65536)\n"
    "      --max-connection-buffer N  bytes of replies queued for one client that\n"
    "                            does not read them before it is cut off\n"
    "                            (default 64 MiB)\n"
    "      --max-pending-bytes N  bytes of unfinished requests held for all\n"
    "                            connections together; a connection that would\n"
    "                            go over is closed (default 256 MiB, at least\n"
    "                            max-message-bytes)\n"
    "      --frame-timeout MS    a connection that sends part of a request and\n"
    "                            then nothing for this long is closed (default\n"
    "                            " STR(C10DS_DEFAULT_FRAME_TIMEOUT_MS) ")\n"
    "      --max-decode-bytes N  memory one request may take to decode, counted\n"
    "                            on the wire before it is unpacked (default\n"
    "                            2 x max-message-bytes, at least that)\n"
    "      --max-reply-bytes N   bytes of unsent replies, all connections\n"
    "                            together; a reply beyond is replaced by\n"
    "                            ETOOBIG (default 256 MiB, at least\n"
    "                            max-message-bytes)\n"
    "      --max-parked N        requests parked at once (gets and waits for\n"
    "                            missing keys, rendezvous, watches); more get\n"
    "                            ETOOBIG (default 262144)\n"
    "      --max-connections N   client connections open at once; one more is\n"
    "                            closed as soon as it is accepted (default: the\n"
    "                            file descriptor limit, ulimit -n, less 64)\n"
    "      --drain-timeout MS    on SIGTERM, how long requests already queued\n"
    "                            are still answered; the rest are dropped, and\n"
    "                            their clients resend them (default "
    STR(C10DS_DEFAULT_DRAIN_TIMEOUT_MS) ")\n"
    "      --dedup-window S      how long a client's applied add/append/\n"
    "                            compare_set/delete are remembered after its last\n"
    "                            request, so a retry is applied once (default 600;\n"
    "                            its last 65,536 are kept while it is active)\n"
    "      --heartbeat-timeout MS  a rank whose heartbeats stop this long is\n"
    "                            declared dead (default "
    STR(C10DS_DEFAULT_HEARTBEAT_TIMEOUT_MS) "); a rank whose\n"
    "                            connection closes is declared dead at once\n"
    "      --retention S         how long a finished run's records (members,\n"
    "                            groups, findings, traces; what c10d-ctl status,\n"
    "                            desync and trace show) are kept after it is over\n"
    "                            (default 86400, a day; 0: reclaimed at once). Its\n"
    "                            store keys go as soon as it is over\n"
    "      --busy-poll-us US     while requests come back to back, look for the\n"
    "                            next this long before sleeping, yielding the\n"
    "                            CPU between looks: it spares the wake-up of a\n"
    "                            sleeping thread (30-40 us on a VM); an idle\n"
    "                            coordinator stops looking within ~150 us\n"
    "                            (default "
    STR(C10DS_DEFAULT_BUSY_POLL_US) "; 0: never)\n"
    "      --ready-file PATH     write the URL actually bound once serving\n"
    "\n"
    "Replicas (docs/replication.md; instead of --db):\n"
    "      --replica ID          run as replica ID of a replicated coordinator:\n"
    "                            its state in dqlite (raft), one replica leads\n"
    "                            and serves, the others answer ENOTLEADER with\n"
    "                            the leader's URL\n"
    "      --peers ID=IP:PORT,...  every replica and its dqlite address (raft and\n"
    "                            SQL; IPv4 literals): the same list on each.\n"
    "                            Replica 1 starts a new cluster; the leader adds\n"
    "                            the others, and removes replicas no longer listed\n"
    "      --data-dir PATH       the replica's raft log and snapshots (default\n"
    "                            ./c10d-replica-ID)\n"
    "      --advertise-url URL   the URL clients are sent to while this replica\n"
    "                            leads (default: --listen, with 0.0.0.0 replaced\n"
    "                            by this replica's IP from --peers)\n"
    "      --raft-latency-ms MS  the network's round trip as raft should plan\n"
    "                            for: heartbeats every 1.5x, an election after\n"
    "                            15x without one (default "
    STR(C10DS_DEFAULT_RAFT_LATENCY_MS) ")\n"
    "      --seed PATH           a new replicated coordinator (its replicated\n"
    "                            database empty) starts from this database: a\n"
    "                            single-node one, or an --export (ignored once\n"
    "                            it holds anything)\n"
    "      --export PATH --peers ...  copy the replicated database, from the\n"
    "                            replica that leads, into a new SQLite file (a\n"
    "                            backup; c10d-coord --db PATH serves it), and exit\n"
    "      --log-level LEVEL     error, warn, info (default) or debug\n"
    "  -h, --help                show this help\n"
    "  -V, --version             show versions\n"
    "\n"
    "Environment: C10D_TOKEN (shared secret), C10D_LOG_LEVEL, C10D_NO_READINESS=1\n"
    "(read connections in NNG's callbacks, not on the readiness thread).\n"
    "Exit status: 0 after SIGTERM/SIGINT (clean shutdown), 1 on a startup error\n"
    "(port in use, database locked by another coordinator, ...), 2 on bad usage.\n";

enum {
    OPT_TOKEN_FILE = 256,
    OPT_MAX_KEY,
    OPT_MAX_VALUE,
    OPT_MAX_MSG,
    OPT_MAX_MULTI,
    OPT_MAX_WORLD,
    OPT_CONN_BUFFER,
    OPT_MAX_PENDING,
    OPT_FRAME_TIMEOUT,
    OPT_MAX_DECODE,
    OPT_MAX_REPLY,
    OPT_MAX_PARKED,
    OPT_MAX_CONNS,
    OPT_DRAIN_TIMEOUT,
    OPT_TLS_CERT,
    OPT_TLS_KEY,
    OPT_TLS_CA,
    OPT_TCPSTORE,
    OPT_DEDUP,
    OPT_HEARTBEAT,
    OPT_RETENTION,
    OPT_READY,
    OPT_BUSY_POLL,
    OPT_LOG,
    OPT_REPLICA,
    OPT_PEERS,
    OPT_DATA_DIR,
    OPT_ADVERTISE,
    OPT_RAFT_LATENCY,
    OPT_SEED,
    OPT_EXPORT,
};

static int parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
        fprintf(stderr, "c10d-coord: --%s wants a number from %llu to %llu, not '%s'\n", opt,
                (unsigned long long)min, (unsigned long long)max, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* Past the file descriptor limit a connection cannot be accepted at all,
 * and the database may not open a file it needs: by default, connections
 * stop short of it by C10DS_FD_RESERVE (half the limit, when it is that
 * small). */
static uint32_t default_max_connections(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > (1u << 24))
        return 1u << 24;
    rlim_t n = rl.rlim_cur > 2 * C10DS_FD_RESERVE ? rl.rlim_cur - C10DS_FD_RESERVE
                                                  : rl.rlim_cur / 2;
    return n > 0 ? (uint32_t)n : 1;
}

static char *read_token_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "c10d-coord: cannot read token file %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    if (n == 0) {
        fprintf(stderr, "c10d-coord: token file %s is empty\n", path);
        return NULL;
    }
    return strdup(buf);
}

/* --tcpstore-listen's [HOST:]PORT as an NNG URL; a bare port is bound to
 * loopback: the protocol carries no token, so opening it wider is the
 * operator's explicit choice. NULL (after saying why) when malformed. */
static char *tcpstore_url(const char *arg)
{
    const char *colon = strrchr(arg, ':');
    const char *port = colon ? colon + 1 : arg;
    char *end;
    errno = 0;
    unsigned long p = strtoul(port, &end, 10);
    if (!*port || *end || errno || p > 65535 || (colon && colon == arg)) {
        fprintf(stderr, "c10d-coord: --tcpstore-listen %s: want PORT or HOST:PORT (e.g. 29400 "
                "or 0.0.0.0:29400)\n", arg);
        return NULL;
    }
    char url[300];
    if (colon)
        snprintf(url, sizeof url, "tcp://%.*s:%lu", (int)(colon - arg), arg, p);
    else
        snprintf(url, sizeof url, "tcp://127.0.0.1:%lu", p);
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

const c10ds_peer *c10ds_config_peer(const c10ds_config *cfg, uint64_t id)
{
    for (int i = 0; i < cfg->npeers; i++)
        if (cfg->peers[i].id == id)
            return &cfg->peers[i];
    return NULL;
}

int c10ds_config_parse(c10ds_config *cfg, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"listen", required_argument, 0, 'l'},
        {"db", required_argument, 0, 'd'},
        {"token-file", required_argument, 0, OPT_TOKEN_FILE},
        {"max-key-bytes", required_argument, 0, OPT_MAX_KEY},
        {"max-value-bytes", required_argument, 0, OPT_MAX_VALUE},
        {"max-message-bytes", required_argument, 0, OPT_MAX_MSG},
        {"max-multi-keys", required_argument, 0, OPT_MAX_MULTI},
        {"max-world-size", required_argument, 0, OPT_MAX_WORLD},
        {"max-connection-buffer", required_argument, 0, OPT_CONN_BUFFER},
        {"max-pending-bytes", required_argument, 0, OPT_MAX_PENDING},
        {"frame-timeout", required_argument, 0, OPT_FRAME_TIMEOUT},
        {"max-decode-bytes", required_argument, 0, OPT_MAX_DECODE},
        {"max-reply-bytes", required_argument, 0, OPT_MAX_REPLY},
        {"max-parked", required_argument, 0, OPT_MAX_PARKED},
        {"max-connections", required_argument, 0, OPT_MAX_CONNS},
        {"drain-timeout", required_argument, 0, OPT_DRAIN_TIMEOUT},
        {"tls-cert", required_argument, 0, OPT_TLS_CERT},
        {"tls-key", required_argument, 0, OPT_TLS_KEY},
        {"tls-ca", required_argument, 0, OPT_TLS_CA},
        {"tcpstore-listen", required_argument, 0, OPT_TCPSTORE},
        {"dedup-window", required_argument, 0, OPT_DEDUP},
        {"heartbeat-timeout", required_argument, 0, OPT_HEARTBEAT},
        {"retention", required_argument, 0, OPT_RETENTION},
        {"ready-file", required_argument, 0, OPT_READY},
        {"busy-poll-us", required_argument, 0, OPT_BUSY_POLL},
        {"log-level", required_argument, 0, OPT_LOG},
        {"replica", required_argument, 0, OPT_REPLICA},
        {"peers", required_argument, 0, OPT_PEERS},
        {"data-dir", required_argument, 0, OPT_DATA_DIR},
        {"advertise-url", required_argument, 0, OPT_ADVERTISE},
        {"raft-latency-ms", required_argument, 0, OPT_RAFT_LATENCY},
        {"seed", required_argument, 0, OPT_SEED},
        {"export", required_argument, 0, OPT_EXPORT},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    memset(cfg, 0, sizeof *cfg);
    cfg->max_key_bytes = 4096;
    cfg->max_value_bytes = 16u << 20;
    cfg->max_multi_keys = 4096;
    cfg->max_world_size = 65536;
    cfg->max_conn_buffer = 64u << 20;
    cfg->frame_timeout_ms = C10DS_DEFAULT_FRAME_TIMEOUT_MS;
    cfg->max_parked = 262144;
    cfg->drain_timeout_ms = C10DS_DEFAULT_DRAIN_TIMEOUT_MS;
    cfg->dedup_window_s = 600;
    cfg->heartbeat_timeout_ms = C10DS_DEFAULT_HEARTBEAT_TIMEOUT_MS;
    cfg->busy_poll_us = C10DS_DEFAULT_BUSY_POLL_US;
    cfg->retention_s = C10DS_DEFAULT_RETENTION_S;
    cfg->log_level = C10DS_LOG_INFO;
    cfg->raft_latency_ms = C10DS_DEFAULT_RAFT_LATENCY_MS;
    int db_given = 0;
    const char *listen = C10DS_DEFAULT_LISTEN, *db = C10DS_DEFAULT_DB, *token_file = NULL;
    const char *env_log = getenv("C10D_LOG_LEVEL");
    if (env_log && *env_log) {
        if ((cfg->log_level = c10ds_log_parse_level(env_log)) < 0) {
            fprintf(stderr, "c10d-coord: C10D_LOG_LEVEL=%s: want error, warn, info or debug\n",
                    env_log);
            return -1;
        }
    }
    uint64_t v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "l:d:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            listen = optarg;
            break;
        case 'd':
            db = optarg;
            db_given = 1;
            break;
        case OPT_REPLICA:
            if (parse_u64("replica", optarg, 1, UINT32_MAX, &cfg->replica_id))
                return -1;
            break;
        case OPT_PEERS:
            if (parse_peers(cfg, optarg) != 0)
                return -1;
            break;
        case OPT_DATA_DIR:
            free(cfg->data_dir);
            cfg->data_dir = strdup(optarg);
            break;
        case OPT_ADVERTISE:
            free(cfg->advertise_url);
            cfg->advertise_url = strdup(optarg);
            break;
        case OPT_SEED:
            free(cfg->seed_path);
            cfg->seed_path = strdup(optarg);
            break;
        case OPT_EXPORT:
            free(cfg->export_path);
            cfg->export_path = strdup(optarg);
            break;
        case OPT_RAFT_LATENCY:
            if (parse_u64("raft-latency-ms", optarg, 1, 10000, &v))
                return -1;
            cfg->raft_latency_ms = (int)v;
            break;
        case OPT_TCPSTORE:
            free(cfg->tcpstore_url);
            if (!(cfg->tcpstore_url = tcpstore_url(optarg)))
                return -1;
            break;
        case OPT_TOKEN_FILE:
            token_file = optarg;
            break;
        case OPT_MAX_KEY:
            if (parse_u64("max-key-bytes", optarg, 1, 1u << 20, &cfg->max_key_bytes))
                return -1;
            break;
        case OPT_MAX_VALUE:
            if (parse_u64("max-value-bytes", optarg, 1, 1u << 30, &cfg->max_value_bytes))
                return -1;
            break;
        case OPT_MAX_MSG:
            if (parse_u64("max-message-bytes", optarg, 1024, 2u << 30, &cfg->max_message_bytes))
                return -1;
            break;
        case OPT_MAX_MULTI:
            if (parse_u64("max-multi-keys", optarg, 1, 1u << 20, &v))
                return -1;
            cfg->max_multi_keys = (uint32_t)v;
            break;
        case OPT_MAX_WORLD:
            if (parse_u64("max-world-size", optarg, 1, 1u << 24, &v))
                return -1;
            cfg->max_world_size = (uint32_t)v;
            break;
        case OPT_CONN_BUFFER:
            if (parse_u64("max-connection-buffer", optarg, 1u << 16, 1ull << 40,
                          &cfg->max_conn_buffer))
                return -1;
            break;
        case OPT_MAX_PENDING:
            if (parse_u64("max-pending-bytes", optarg, 1u << 16, 1ull << 40,
                          &cfg->max_pending_bytes))
                return -1;
            break;
        case OPT_BUSY_POLL:
            if (parse_u64("busy-poll-us", optarg, 0, 10000, &v))
                return -1;
            cfg->busy_poll_us = (int)v;
            break;
        case OPT_FRAME_TIMEOUT:
            if (parse_u64("frame-timeout", optarg, 100, C10DS_MAX_TIMEOUT_OPTION_MS, &v))
                return -1;
            cfg->frame_timeout_ms = (int)v;
            break;
        case OPT_MAX_DECODE:
            if (parse_u64("max-decode-bytes", optarg, 1u << 16, 1ull << 40,
                          &cfg->max_decode_bytes))
                return -1;
            break;
        case OPT_MAX_REPLY:
            if (parse_u64("max-reply-bytes", optarg, 1u << 16, 1ull << 40,
                          &cfg->max_reply_bytes))
                return -1;
            break;
        case OPT_MAX_PARKED:
            if (parse_u64("max-parked", optarg, 1, 1ull << 32, &cfg->max_parked))
                return -1;
            break;
        case OPT_MAX_CONNS:
            if (parse_u64("max-connections", optarg, 1, 1u << 24, &v))
                return -1;
            cfg->max_connections = (uint32_t)v;
            break;
        case OPT_DRAIN_TIMEOUT:
            if (parse_u64("drain-timeout", optarg, 0, C10DS_MAX_TIMEOUT_OPTION_MS, &v))
                return -1;
            cfg->drain_timeout_ms = (int)v;
            break;
        case OPT_TLS_CERT:
            free(cfg->tls_cert);
            cfg->tls_cert = strdup(optarg);
            break;
        case OPT_TLS_KEY:
            free(cfg->tls_key);
            cfg->tls_key = strdup(optarg);
            break;
        case OPT_TLS_CA:
            free(cfg->tls_ca);
            cfg->tls_ca = strdup(optarg);
            break;
        case OPT_HEARTBEAT:
            if (parse_u64("heartbeat-timeout", optarg, 200, C10DS_MAX_TIMEOUT_OPTION_MS, &v))
                return -1;
            cfg->heartbeat_timeout_ms = (int)v;
            break;
        case OPT_RETENTION:
            if (parse_u64("retention", optarg, 0, 86400ull * 3650, &v))
                return -1;
            cfg->retention_s = (int64_t)v;
            break;
        case OPT_DEDUP:
            if (parse_u64("dedup-window", optarg, 1, 86400 * 7, &v))
                return -1;
            cfg->dedup_window_s = (int)v;
            break;
        case OPT_READY:
            cfg->ready_file = strdup(optarg);
            break;
        case OPT_LOG:
            if ((cfg->log_level = c10ds_log_parse_level(optarg)) < 0) {
                fprintf(stderr, "c10d-coord: --log-level wants error, warn, info or debug\n");
                return -1;
            }
            break;
        case 'h':
            fputs(usage, stdout);
            return 1;
        case 'V':
            printf("c10d-coord %s (protocol %d)\n", C10D_VERSION_STRING, C10D_PROTOCOL_VERSION);
#ifdef C10DS_HAVE_DQLITE
            printf("replicas (--replica): on, dqlite\n");
#else
            printf("replicas (--replica): off, built without dqlite (libdqlite-dev)\n");
#endif
            return 1;
        default:
            fprintf(stderr, "Try 'c10d-coord --help'.\n");
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "c10d-coord: unexpected argument '%s'\nTry 'c10d-coord --help'.\n",
                argv[optind]);
        return -1;
    }
    if (cfg->max_message_bytes == 0)
        cfg->max_message_bytes = cfg->max_value_bytes + (1u << 20);
    if (cfg->max_message_bytes < cfg->max_value_bytes + cfg->max_key_bytes + 256) {
        fprintf(stderr, "c10d-coord: --max-message-bytes must leave room for the largest key "
                        "and value (at least %llu)\n",
                (unsigned long long)(cfg->max_value_bytes + cfg->max_key_bytes + 256));
        return -1;
    }
    int tls = strncmp(listen, "tls+", 4) == 0;
    if (tls && (!cfg->tls_cert || !cfg->tls_key)) {
        fprintf(stderr, "c10d-coord: a tls+tcp:// listener needs --tls-cert and --tls-key\n");
        return -1;
    }
    if (!tls && (cfg->tls_cert || cfg->tls_key || cfg->tls_ca)) {
        fprintf(stderr, "c10d-coord: --tls-cert/--tls-key/--tls-ca need a tls+tcp:// --listen "
                        "address (not %s)\n", listen);
        return -1;
    }
    if (cfg->max_message_bytes > cfg->max_conn_buffer)
        cfg->max_conn_buffer = cfg->max_message_bytes;
    if (cfg->max_pending_bytes == 0)
        cfg->max_pending_bytes = 256u << 20;
    if (cfg->max_pending_bytes < cfg->max_message_bytes)
        cfg->max_pending_bytes = cfg->max_message_bytes; /* one largest request always fits */
    if (cfg->max_decode_bytes == 0)
        cfg->max_decode_bytes = 2 * cfg->max_message_bytes;
    if (cfg->max_decode_bytes < cfg->max_message_bytes)
        cfg->max_decode_bytes = cfg->max_message_bytes; /* the largest value always decodes */
    if (cfg->max_reply_bytes == 0)
        cfg->max_reply_bytes = 256u << 20;
    if (cfg->max_reply_bytes < cfg->max_message_bytes)
        cfg->max_reply_bytes = cfg->max_message_bytes; /* one largest reply always fits */
    if (cfg->max_connections == 0)
        cfg->max_connections = default_max_connections();
    if (token_file) {
        if (!(cfg->token = read_token_file(token_file)))
            return -1;
    } else if (getenv("C10D_TOKEN")) {
        /* Set but empty is a mistake (an export of a file that was not
         * there), not a wish to run open: an empty token file is refused
         * too. */
        if (!*getenv("C10D_TOKEN")) {
            fprintf(stderr, "c10d-coord: C10D_TOKEN is set but empty: give it the shared "
                    "secret, or unset it to run without a token\n");
            return -1;
        }
        cfg->token = strdup(getenv("C10D_TOKEN"));
    }
    if (cfg->export_path) {
        const char *why = cfg->replica_id ? "--export runs on its own, not with --replica"
                          : !cfg->npeers  ? "--export needs --peers, the replicas to ask"
                          : db_given      ? "--export writes PATH, not --db"
                                          : NULL;
        if (why) {
            fprintf(stderr, "c10d-coord: %s\n", why);
            return -1;
        }
    } else if (cfg->replica_id || cfg->npeers || cfg->data_dir || cfg->advertise_url ||
               cfg->seed_path) {
        const char *why = !cfg->replica_id ? "--peers, --data-dir, --advertise-url and --seed "
                                             "go with --replica ID"
                          : db_given ? "--replica keeps its state in dqlite, not in --db"
                          : !cfg->npeers ? "--replica needs --peers, the list of every replica"
                          : !c10ds_config_peer(cfg, cfg->replica_id)
                              ? "--replica's ID is not in --peers"
                              : NULL;
        if (why) {
            fprintf(stderr, "c10d-coord: %s\n", why);
            return -1;
        }
        const char *mine = strrchr(c10ds_config_peer(cfg, cfg->replica_id)->address, ':');
        const char *lport = strrchr(listen, ':');
        if (lport && !strcmp(lport, mine) && !strstr(listen, "ipc://")) {
            fprintf(stderr, "c10d-coord: --listen %s takes the port of this replica's dqlite "
                    "node in --peers (%s): give the clients another port\n", listen,
                    c10ds_config_peer(cfg, cfg->replica_id)->address);
            return -1;
        }
        if (!cfg->data_dir) {
            char dir[64];
            snprintf(dir, sizeof dir, "c10d-replica-%llu", (unsigned long long)cfg->replica_id);
            cfg->data_dir = strdup(dir);
        }
        db = ":memory:"; /* the leader's working copy (replica_mirror.h) */
    }
    cfg->listen_url = strdup(listen);
    cfg->db_path = strdup(db);
    return 0;
}

void c10ds_config_free(c10ds_config *cfg)
{
    free(cfg->listen_url);
    free(cfg->tcpstore_url);
    free(cfg->db_path);
    free(cfg->ready_file);
    free(cfg->token);
    free(cfg->tls_cert);
    free(cfg->tls_key);
    free(cfg->tls_ca);
    free(cfg->data_dir);
    free(cfg->advertise_url);
    free(cfg->seed_path);
    free(cfg->export_path);
    memset(cfg, 0, sizeof *cfg);
}
