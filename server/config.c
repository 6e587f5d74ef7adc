/* The coordinator's command line (config.h): getopt driven by the
 * options' table (config_options.c), each argument taken into its field,
 * the defaults, and the checks across options once all are parsed. */
#include "config.h"

#include "config_internal.h"
#include "log.h"

#include <errno.h>
#include <stddef.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

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

const c10ds_peer *c10ds_config_peer(const c10ds_config *cfg, uint64_t id)
{
    for (int i = 0; i < cfg->npeers; i++)
        if (cfg->peers[i].id == id)
            return &cfg->peers[i];
    return NULL;
}

/* A number into its field: the ranges keep int fields within INT_MAX and
 * 4-byte ones within 32 bits. */
static void store_number(const c10ds_opt_spec *o, c10ds_config *cfg, uint64_t v)
{
    char *field = (char *)cfg + o->at;
    if (o->width == 4) { /* NUMBER allows 4 and 8 only */
        uint32_t v32 = (uint32_t)v;
        memcpy(field, &v32, sizeof v32);
    } else {
        memcpy(field, &v, sizeof v);
    }
}

/* One option's argument into cfg: 0, 1 (exit 0) or -1 (said why). */
static int take(const c10ds_opt_spec *o, c10ds_config *cfg, c10ds_parse_state *st, const char *arg)
{
    char *field = (char *)cfg + o->at;
    switch (o->take) {
    case C10DS_TAKE_TEXT: {
        char **p = (char **)(void *)field;
        free(*p);
        *p = strdup(arg);
        return 0;
    }
    case C10DS_TAKE_NUMBER: {
        uint64_t v;
        if (parse_u64(o->name, arg, o->min, o->max, &v))
            return -1;
        store_number(o, cfg, v);
        return 0;
    }
    case C10DS_TAKE_KEPT: {
        const char *kept = arg;
        memcpy((char *)st + o->at, &kept, sizeof kept);
        return 0;
    }
    case C10DS_TAKE_OWN: return o->own(cfg, st, arg);
    case C10DS_TAKE_HEADING: break;
    }
    return -1;
}

int c10ds_config_parse(c10ds_config *cfg, int argc, char **argv)
{
    struct option longopts[C10DS_CONFIG_MAX_OPTIONS + 1];
    char shortopts[2 * C10DS_CONFIG_MAX_OPTIONS + 1];
    size_t nl = 0, ns = 0;
    for (size_t i = 0; i < c10ds_config_noptions; i++) {
        const c10ds_opt_spec *o = &c10ds_config_options[i];
        if (o->take == C10DS_TAKE_HEADING)
            continue;
        /* getopt_long returns the letter, or 256 + the option's index */
        longopts[nl++] = (struct option){o->name, o->arg ? required_argument : no_argument, 0,
                                         o->letter ? o->letter : 256 + (int)i};
        if (o->letter) {
            shortopts[ns++] = o->letter;
            if (o->arg)
                shortopts[ns++] = ':';
        }
    }
    longopts[nl] = (struct option){0, 0, 0, 0};
    shortopts[ns] = '\0';
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < c10ds_config_noptions; i++)
        if (c10ds_config_options[i].take == C10DS_TAKE_NUMBER)
            store_number(&c10ds_config_options[i], cfg, c10ds_config_options[i].def);
    cfg->log_level = C10DS_LOG_INFO;
    c10ds_parse_state st = {NULL, NULL, NULL};
    const char *env_log = getenv("C10D_LOG_LEVEL");
    if (env_log && *env_log) {
        if ((cfg->log_level = c10ds_log_parse_level(env_log)) < 0) {
            fprintf(stderr, "c10d-coord: C10D_LOG_LEVEL=%s: want error, warn, info or debug\n",
                    env_log);
            return -1;
        }
    }
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        const c10ds_opt_spec *o = NULL;
        if (c >= 256 && (size_t)(c - 256) < c10ds_config_noptions)
            o = &c10ds_config_options[c - 256];
        for (size_t i = 0; !o && c != '?' && i < c10ds_config_noptions; i++)
            if (c10ds_config_options[i].letter == c)
                o = &c10ds_config_options[i];
        if (!o) {
            fprintf(stderr, "Try 'c10d-coord --help'.\n");
            return -1;
        }
        int rv = take(o, cfg, &st, optarg);
        if (rv != 0)
            return rv;
    }
    /* a replica is a cluster's service: reached from other hosts */
    const char *listen = st.listen          ? st.listen
                         : cfg->replica_id ? C10DS_DEFAULT_REPLICA_LISTEN
                                           : C10DS_DEFAULT_LISTEN;
    const char *db = st.db ? st.db : C10DS_DEFAULT_DB, *token_file = st.token_file;
    int db_given = st.db != NULL;
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
    free(cfg->metrics_url);
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
