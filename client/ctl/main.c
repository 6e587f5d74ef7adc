/* c10d-ctl: the operator's CLI. A client of the coordinator through
 * libc10dclient, like any rank. Text for people, --json for scripts, and
 * exit codes that say what happened. */
#include "desync.h"
#include "summary.h"
#include "json.h"

#include <c10d/c10d.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    EXIT_OK = 0,
    EXIT_ERROR = 1,    /* anything not below */
    EXIT_USAGE = 2,
    EXIT_NOTFOUND = 3, /* get/del of a key that does not exist */
    EXIT_UNAVAIL = 4,  /* no coordinator answered */
    EXIT_TIMEOUT = 5,
    EXIT_AUTH = 6,
};

static const char usage[] =
    "Usage: c10d-ctl [OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "Inspect and edit a c10d coordinator's state.\n"
    "\n"
    "Commands:\n"
    "  status [--job J]    the coordinator (version, uptime, database, keys, clients)\n"
    "                      and its jobs (all, or J): groups, members alive/left/dead and\n"
    "                      why, join regions (who ran out of inputs, what they shadow)\n"
    "  keys [PREFIX]       list keys (with sizes), all or those starting with PREFIX\n"
    "  get KEY             print KEY's value (raw bytes; --json: text or base64)\n"
    "  set KEY VALUE       set KEY to VALUE (a '-' VALUE reads it from stdin)\n"
    "  del KEY             delete KEY\n"
    "  add KEY N           add the integer N to KEY (creating it at 0); print the result\n"
    "  desync [--job J] [--group G]\n"
    "                      collective-sequence health: per group the collective each\n"
    "                      rank entered and completed, who is behind, the finding\n"
    "                      (desync, lost rank, stall) and dead ranks; exit 7 if unhealthy\n"
    "  trace --rank R [--group G] [--job J] [-n N]\n"
    "                      rank R's last N collectives (default 50): number, call, state\n"
    "                      (entered, verified, completed, failed)\n"
    "  watch [--job J] [--interval MS] [--count K]\n"
    "                      desync, refreshed in place every MS (default 1000)\n"
    "\n"
    "Options (before or after the command: `get k --wait 100`; `--` ends them):\n"
    "  -c, --coord URL     coordinator (default: $C10D_COORD, else MASTER_ADDR:MASTER_PORT,\n"
    "                      else tcp://127.0.0.1:29500)\n"
    "      --tls-ca FILE   for a tls+tcp:// coordinator: the CA (PEM) that signed its\n"
    "                      certificate (default: $C10D_TLS_CA)\n"
    "  -j, --json          machine-readable output on stdout (errors too); complete\n"
    "                      however big the job\n"
    "      --all           status, desync, watch: a line per rank; without it a job of\n"
    "                      more than 32 ranks is summarized: ranks that share a state\n"
    "                      as ranges, the first 16 odd ones out by name\n"
    "  -t, --timeout MS    give up after MS milliseconds (default 5000)\n"
    "  -w, --wait MS       get: wait up to MS for the key to appear (default: no wait)\n"
    "  -n, --limit N       keys: list at most N keys (default 1000)\n"
    "  -h, --help          show this help\n"
    "  -V, --version       show the version\n"
    "\n"
    "Environment: C10D_COORD, MASTER_ADDR, MASTER_PORT, C10D_TOKEN (shared secret),\n"
    "C10D_TLS_CA.\n"
    "\n"
    "Exit status: 0 success; 1 other error (the coordinator's refusals too); 2 bad\n"
    "usage (found here; --json prints it as JSON); 3 no such key;\n"
    "4 coordinator unreachable; 5 timed out; 6 not authorized; 7 (desync) unhealthy.\n";

static int json_out;

static int exit_code(c10d_status st)
{
    switch (st) {
    case C10D_OK:
        return EXIT_OK;
    case C10D_ENOTFOUND:
        return EXIT_NOTFOUND;
    case C10D_EUNAVAIL:
        return EXIT_UNAVAIL;
    case C10D_ETIMEDOUT:
        return EXIT_TIMEOUT;
    case C10D_EAUTH:
        return EXIT_AUTH;
    default: /* C10D_EINVAL from the coordinator too: bad usage is found here */
        return EXIT_ERROR;
    }
}

/* Reports a failure (stderr for people; a JSON object on stdout with
 * --json) and returns the exit code for it. */
static int fail(c10d_status st, const char *msg)
{
    if (json_out) {
        printf("{\"ok\":false,\"status\":\"%s\",\"error\":", c10d_status_name(st));
        json_string(stdout, msg, strlen(msg));
        printf("}\n");
    } else {
        fprintf(stderr, "c10d-ctl: %s\n", msg);
    }
    return exit_code(st);
}

static int fail_last(c10d_status st)
{
    const char *m = c10d_errmsg();
    return fail(st, *m ? m : c10d_strerror(st));
}

static int usage_error(const char *fmt, const char *arg)
{
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, arg);
    if (json_out) {
        printf("{\"ok\":false,\"status\":\"usage\",\"error\":");
        json_string(stdout, msg, strlen(msg));
        printf("}\n");
    } else {
        fprintf(stderr, "c10d-ctl: %s\nTry 'c10d-ctl --help'.\n", msg);
    }
    return EXIT_USAGE;
}

static int parse_int(const char *s, long long *out)
{
    char *end;
    errno = 0;
    *out = strtoll(s, &end, 10);
    return errno || end == s || *end ? -1 : 0;
}

static void fmt_duration(int64_t ms, char *out, size_t n)
{
    int64_t s = ms / 1000;
    if (s < 60)
        snprintf(out, n, "%" PRId64 ".%03" PRId64 " s", s, ms % 1000);
    else if (s < 3600)
        snprintf(out, n, "%" PRId64 " min %" PRId64 " s", s / 60, s % 60);
    else
        snprintf(out, n, "%" PRId64 " h %" PRId64 " min", s / 3600, (s % 3600) / 60);
}

static void print_join_json(const c10d_join_info *ji)
{
    printf(",\"join\":{\"region\":%u,\"begun\":%d,\"throw_on_early_termination\":%s,"
           "\"divide_by_initial_world_size\":%s,\"joined\":[", ji->region, ji->begun,
           ji->throw_on_early_termination ? "true" : "false",
           ji->divide_by_initial_world_size ? "true" : "false");
    for (size_t i = 0; i < ji->n_joined; i++)
        printf("%s{\"rank\":%d,\"global_rank\":%d,\"after_seq\":%" PRIu64
               ",\"joined_ms\":%" PRId64 "}", i ? "," : "", ji->joined[i].rank,
               ji->joined[i].global_rank, ji->joined[i].after_seq, ji->joined[i].joined_ms);
    printf("],\"released\":%" PRIu64 ",\"shadowing\":", ji->released);
    json_string(stdout, ji->shadowing, strlen(ji->shadowing));
    printf(",\"caught_up\":%s,\"done\":%s", ji->caught_up ? "true" : "false",
           ji->done ? "true" : "false");
    if (ji->done)
        printf(",\"last_joiner\":%d", ji->last_joiner);
    printf("}");
}

/* "    join region 1   1 of 4 joined: rank 0 after #5, rank 2 after #7;
 *                      shadowing up to #9 ALL_REDUCE float32[2] SUM" */
static void print_join_text(const c10d_group_info *g)
{
    const c10d_join_info *ji = g->join;
    printf("    join region %-3u", ji->region);
    if (ji->done) {
        printf(" over: all %d ranks joined; last joiner rank %d", g->size, ji->last_joiner);
        for (size_t i = 0; i < ji->n_joined; i++)
            if (ji->joined[i].rank == ji->last_joiner)
                printf(" (after #%" PRIu64 ")", ji->joined[i].after_seq);
        printf("\n");
        return;
    }
    printf(" %zu of %d joined", ji->n_joined, g->size);
    for (size_t i = 0; i < ji->n_joined && i < 16; i++)
        printf("%s rank %d after #%" PRIu64, i ? "," : ":", ji->joined[i].rank,
               ji->joined[i].after_seq);
    if (ji->n_joined > 16)
        printf(" and %zu more", ji->n_joined - 16);
    if (*ji->shadowing && !ji->caught_up)
        printf("; shadowing up to %s", ji->shadowing);
    else if (*ji->shadowing)
        printf("; shadowed up to %s, waiting for the next collective", ji->shadowing);
    else if (ji->n_joined)
        printf("; waiting for the next collective");
    if (ji->throw_on_early_termination)
        printf(" (throw_on_early_termination)");
    printf("\n");
}

static void print_jobs_json(const c10d_job_info *jobs, size_t nj)
{
    printf("\"jobs\":[");
    for (size_t i = 0; i < nj; i++) {
        const c10d_job_info *j = &jobs[i];
        printf("%s{\"job\":", i ? "," : "");
        json_string(stdout, j->job, strlen(j->job));
        printf(",\"generation\":%" PRIu64 ",\"world_size\":%d,\"formed\":%s,\"members\":[",
               j->generation, j->world_size, j->formed ? "true" : "false");
        for (size_t k = 0; k < j->n_members; k++) {
            const c10d_member_info *m = &j->members[k];
            printf("%s{\"rank\":%d,\"state\":", k ? "," : "", m->rank);
            json_string(stdout, m->state, strlen(m->state));
            printf(",\"host\":");
            json_string(stdout, m->host, strlen(m->host));
            printf(",\"pid\":%d,\"reason\":", m->pid);
            json_string(stdout, m->reason, strlen(m->reason));
            printf(",\"activity\":");
            json_string(stdout, m->activity, strlen(m->activity));
            printf(",\"last_seen_ms\":%" PRId64 "}", m->last_seen_ms);
        }
        printf("],\"groups\":[");
        for (size_t k = 0; k < j->n_groups; k++) {
            const c10d_group_info *g = &j->groups[k];
            printf("%s{\"name\":", k ? "," : "");
            json_string(stdout, g->name, strlen(g->name));
            printf(",\"size\":%d,\"joined\":%d,\"formed\":%s,\"ranks\":[", g->size,
                   g->joined, g->formed ? "true" : "false");
            for (int r = 0; r < g->size; r++)
                printf("%s%d", r ? "," : "", g->ranks[r]);
            printf("]");
            if (g->join)
                print_join_json(g->join);
            printf("}");
        }
        printf("]}");
    }
    printf("]");
}

/* Ranks as "0-3,5" for people. */
static void print_member(const c10d_member_info *m)
{
    printf("  rank %-4d %-5s %s pid %d", m->rank, m->state, m->host, m->pid);
    if (*m->reason)
        printf(" - %s", m->reason);
    if (*m->activity)
        printf(" [%s]", m->activity);
    printf("\n");
}

/* A big job's members in a few lines: the ranks of each state (and, for
 * those not alive, each reason) as ranges, then the first few not alive
 * by name. */
static void print_members_summary(const c10d_job_info *j)
{
    ctl_buckets bs = {0};
    for (size_t k = 0; k < j->n_members; k++) {
        const c10d_member_info *m = &j->members[k];
        char key[600];
        snprintf(key, sizeof key, "%s%s%s", m->state, *m->reason ? ": " : "", m->reason);
        if (ctl_bucket_add(&bs, key, m->rank) != 0)
            break;
    }
    ctl_buckets_sort(&bs);
    for (int i = 0; i < bs.n; i++) {
        printf("  %d %s: ranks ", bs.b[i].n, bs.b[i].key);
        ctl_print_ranges(stdout, bs.b[i].ranks, bs.b[i].n);
        printf("\n");
    }
    ctl_buckets_free(&bs);
    /* By name: the first to go (the likeliest cause of the rest). */
    const c10d_member_info *first[CTL_LIST_ODD];
    int nf = 0, odd = 0;
    for (size_t k = 0; k < j->n_members; k++) {
        const c10d_member_info *m = &j->members[k];
        if (!strcmp(m->state, "alive"))
            continue;
        odd++;
        int at = nf < CTL_LIST_ODD ? nf++ : CTL_LIST_ODD;
        if (at == CTL_LIST_ODD && first[at - 1]->changed_ms <= m->changed_ms)
            continue;
        if (at == CTL_LIST_ODD)
            at--;
        for (; at > 0 && first[at - 1]->changed_ms > m->changed_ms; at--)
            first[at] = first[at - 1];
        first[at] = m;
    }
    for (int i = 0; i < nf; i++)
        print_member(first[i]);
    if (odd > nf)
        printf("  ... %d more not alive (--all lists every rank; --json has them all)\n",
               odd - nf);
}

static void print_jobs_text(const c10d_job_info *jobs, size_t nj)
{
    if (!nj) {
        printf("jobs         none\n");
        return;
    }
    for (size_t i = 0; i < nj; i++) {
        const c10d_job_info *j = &jobs[i];
        int alive = 0, left = 0, dead = 0;
        for (size_t k = 0; k < j->n_members; k++)
            alive += !strcmp(j->members[k].state, "alive"),
                left += !strcmp(j->members[k].state, "left"),
                dead += !strcmp(j->members[k].state, "dead");
        printf("\njob %s  generation %" PRIu64 ", world size %d, %s: %d alive, %d left, %d dead\n",
               j->job, j->generation, j->world_size, j->formed ? "formed" : "forming", alive,
               left, dead);
        for (size_t k = 0; k < j->n_groups; k++) {
            const c10d_group_info *g = &j->groups[k];
            printf("  group %-10s %d ranks [", g->name, g->size);
            ctl_print_ranges(stdout, g->ranks, g->size);
            printf("]%s\n", g->formed ? "" : " (forming)");
            if (g->join)
                print_join_text(g);
        }
        if (j->n_members > CTL_LIST_EACH && !ctl_list_all) {
            print_members_summary(j);
            continue;
        }
        for (size_t k = 0; k < j->n_members; k++)
            print_member(&j->members[k]);
    }
}

static int cmd_status(c10d_store *s, int nargs, char **args)
{
    const char *job = NULL;
    if (nargs == 2 && strcmp(args[0], "--job") == 0)
        job = args[1];
    else if (nargs)
        return usage_error("%s", "status takes no arguments but --job J");
    c10d_coord_info info;
    c10d_status st = c10d_store_coord_info(s, &info);
    if (st != C10D_OK)
        return fail_last(st);
    c10d_job_info *jobs = NULL;
    size_t nj = 0;
    if ((st = c10d_store_jobs(s, job, &jobs, &nj)) != C10D_OK)
        return fail_last(st);
    if (json_out) {
        printf("{\"ok\":true,\"coordinator\":{\"url\":");
        json_string(stdout, c10d_store_url(s), strlen(c10d_store_url(s)));
        printf(",\"listen\":");
        json_string(stdout, info.listen_url, strlen(info.listen_url));
        printf(",\"version\":");
        json_string(stdout, info.version, strlen(info.version));
        printf(",\"database\":");
        json_string(stdout, info.db_path, strlen(info.db_path));
        printf(",\"schema_version\":%d,\"uptime_ms\":%" PRId64 ",\"keys\":%" PRId64
               ",\"clients\":%" PRId64 ",\"requests\":%" PRId64 ",\"parked\":%" PRId64 "},",
               info.schema_version, info.uptime_ms, info.num_keys, info.clients, info.requests,
               info.parked);
        print_jobs_json(jobs, nj);
        printf("}\n");
        c10d_jobs_free(jobs, nj);
        return EXIT_OK;
    }
    char up[64];
    fmt_duration(info.uptime_ms, up, sizeof up);
    printf("coordinator  %s (c10d-coord %s, listening on %s)\n", c10d_store_url(s), info.version,
           info.listen_url);
    printf("uptime       %s\n", up);
    printf("database     %s (schema version %d)\n", info.db_path, info.schema_version);
    printf("keys         %" PRId64 "\n", info.num_keys);
    printf("clients      %" PRId64 " connected\n", info.clients);
    printf("requests     %" PRId64 " served, %" PRId64 " waiting on keys\n", info.requests,
           info.parked);
    print_jobs_text(jobs, nj);
    c10d_jobs_free(jobs, nj);
    return EXIT_OK;
}

static int cmd_keys(c10d_store *s, const char *prefix, long long limit)
{
    c10d_key_info *keys = NULL;
    size_t n = 0;
    int truncated = 0;
    c10d_status st = c10d_store_list(s, prefix, (size_t)limit, &keys, &n, &truncated);
    if (st != C10D_OK)
        return fail_last(st);
    if (json_out) {
        printf("{\"ok\":true,\"truncated\":%s,\"keys\":[", truncated ? "true" : "false");
        for (size_t i = 0; i < n; i++) {
            printf("%s{\"key\":", i ? "," : "");
            json_string(stdout, keys[i].key, strlen(keys[i].key));
            if (!json_is_text(keys[i].key, strlen(keys[i].key))) { /* its bytes, exactly */
                printf(",\"key_base64\":");
                json_base64(stdout, keys[i].key, strlen(keys[i].key));
            }
            printf(",\"size\":%" PRIu64 ",\"updated_ms\":%" PRId64 "}", keys[i].size,
                   keys[i].updated_ms);
        }
        printf("]}\n");
    } else {
        for (size_t i = 0; i < n; i++)
            printf("%-40s %10" PRIu64 " bytes\n", keys[i].key, keys[i].size);
        if (truncated)
            fprintf(stderr, "c10d-ctl: more keys match; showing the first %zu (use --limit)\n",
                    n);
    }
    c10d_free(keys);
    return EXIT_OK;
}

static int cmd_get(c10d_store *s, const char *key, int wait)
{
    void *v = NULL;
    size_t n = 0;
    c10d_status st = c10d_store_get(s, key, &v, &n, wait);
    if (st != C10D_OK)
        return fail_last(st);
    if (json_out) {
        printf("{\"ok\":true,\"key\":");
        json_string(stdout, key, strlen(key));
        printf(",\"size\":%zu,", n);
        json_value_field(stdout, "value", v, n);
        printf("}\n");
    } else {
        fwrite(v, 1, n, stdout);
        /* A newline for people at a terminal, never inside piped bytes. */
        if (n && ((char *)v)[n - 1] != '\n' && isatty(1))
            putchar('\n');
    }
    c10d_free(v);
    return EXIT_OK;
}

static char *read_stdin(size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += r;
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                return NULL;
            }
            buf = b;
        }
    }
    *len = n;
    return buf;
}

static int cmd_set(c10d_store *s, const char *key, const char *value)
{
    size_t len = strlen(value);
    char *owned = NULL;
    if (strcmp(value, "-") == 0 && !(value = owned = read_stdin(&len)))
        return fail(C10D_ENOMEM, "out of memory reading the value from stdin");
    c10d_status st = c10d_store_set(s, key, value, len);
    free(owned);
    if (st != C10D_OK)
        return fail_last(st);
    if (json_out) {
        printf("{\"ok\":true,\"key\":");
        json_string(stdout, key, strlen(key));
        printf(",\"size\":%zu}\n", len);
    }
    return EXIT_OK;
}

static int cmd_del(c10d_store *s, const char *key)
{
    int deleted = 0;
    c10d_status st = c10d_store_delete_key(s, key, &deleted);
    if (st != C10D_OK)
        return fail_last(st);
    if (!deleted) {
        char msg[512];
        snprintf(msg, sizeof msg, "no such key: %s", key);
        return fail(C10D_ENOTFOUND, msg);
    }
    if (json_out) {
        printf("{\"ok\":true,\"deleted\":");
        json_string(stdout, key, strlen(key));
        printf("}\n");
    }
    return EXIT_OK;
}

static int cmd_add(c10d_store *s, const char *key, const char *num)
{
    long long delta;
    if (parse_int(num, &delta) != 0)
        return usage_error("add wants an integer, not '%s'", num);
    int64_t result = 0;
    c10d_status st = c10d_store_add(s, key, delta, &result);
    if (st != C10D_OK)
        return fail_last(st);
    if (json_out) {
        printf("{\"ok\":true,\"key\":");
        json_string(stdout, key, strlen(key));
        printf(",\"value\":%" PRId64 "}\n", result);
    } else {
        printf("%" PRId64 "\n", result);
    }
    return EXIT_OK;
}

typedef struct {
    const char *coord, *tls_ca;
    long long timeout, wait, limit;
} options;

/* Applies option `name` with value v (NULL for flags). Returns -1 after a
 * usage error (its exit code in *rc). */
static int apply(options *o, int name, const char *v, int *rc)
{
    switch (name) {
    case 'c':
        if (!*v)
            return *rc = usage_error("%s", "--coord wants a URL, not an empty string"), -1;
        o->coord = v;
        break;
    case 'A':
        o->tls_ca = v;
        break;
    case 'j':
        json_out = 1;
        break;
    case 'a':
        ctl_list_all = 1;
        break;
    case 't':
        if (parse_int(v, &o->timeout) || o->timeout <= 0 || o->timeout > 86400000)
            return *rc = usage_error("--timeout wants milliseconds, not '%s'", v), -1;
        break;
    case 'w':
        if (parse_int(v, &o->wait) || o->wait < 0 || o->wait > 86400000)
            return *rc = usage_error("--wait wants milliseconds, not '%s'", v), -1;
        break;
    case 'n':
        if (parse_int(v, &o->limit) || o->limit <= 0 || o->limit > 100000)
            return *rc = usage_error("--limit wants a number from 1 to 100000, not '%s'", v), -1;
        break;
    }
    return 0;
}

/* Options after the command, as docs/api.md writes them (`get k --wait
 * 100`, `keys p --limit 5`, `desync --json`): the global ones are taken
 * out wherever they stand (`--` ends them; `set k -5` keeps its -5, which
 * is no option); the command's own (--rank, --job, ...) stay. -n is
 * keys's limit only: trace has its own. Returns the count kept in args. */
static int take_options(options *o, const char *cmd, int argc, char **argv, char **args, int *rc)
{
    static const struct {
        const char *l, *s;
        int name, has_arg;
    } known[] = {{"--json", "-j", 'j', 0},     {"--coord", "-c", 'c', 1},
                 {"--all", NULL, 'a', 0},
                 {"--tls-ca", NULL, 'A', 1},   {"--timeout", "-t", 't', 1},
                 {"--wait", "-w", 'w', 1},     {"--limit", "-n", 'n', 1}};
    int kept = 0, literal = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!literal && !strcmp(a, "--")) {
            literal = 1;
            continue;
        }
        size_t k, n = sizeof known / sizeof known[0];
        const char *v = NULL;
        for (k = 0; !literal && k < n; k++) {
            size_t ll = strlen(known[k].l);
            if (known[k].name == 'n' && strcmp(cmd, "keys") != 0)
                continue;
            if (!strcmp(a, known[k].l) || (known[k].s && !strcmp(a, known[k].s)))
                break;
            if (known[k].has_arg && !strncmp(a, known[k].l, ll) && a[ll] == '=') {
                v = a + ll + 1;
                break;
            }
        }
        if (k == n || literal) {
            args[kept++] = argv[i];
            continue;
        }
        if (known[k].has_arg && !v) {
            if (i + 1 >= argc)
                return *rc = usage_error("%s wants a value", known[k].l), -1;
            v = argv[++i];
        }
        if (apply(o, known[k].name, v, rc) != 0)
            return -1;
    }
    return kept;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"coord", required_argument, 0, 'c'}, {"json", no_argument, 0, 'j'},
        {"timeout", required_argument, 0, 't'}, {"wait", required_argument, 0, 'w'},
        {"limit", required_argument, 0, 'n'}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'}, {"tls-ca", required_argument, 0, 'A'},
        {"all", no_argument, 0, 'a'},
        {0, 0, 0, 0},
    };
    options op = {NULL, NULL, 5000, 0, 1000};
    int c, rc = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) /* errors in JSON from the first */
        json_out |= !strcmp(argv[i], "--json") || !strcmp(argv[i], "-j");
    /* '+': stop at the command; what follows is take_options's. */
    while ((c = getopt_long(argc, argv, "+c:jt:w:n:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
        case 'A':
        case 'j':
        case 'a':
        case 't':
        case 'w':
        case 'n':
            if (apply(&op, c, optarg, &rc) != 0)
                return rc;
            break;
        case 'h':
            fputs(usage, stdout);
            return EXIT_OK;
        case 'V':
            printf("c10d-ctl %s\n", c10d_version());
            return EXIT_OK;
        default:
            return usage_error("%s", "unknown option");
        }
    }
    if (optind >= argc)
        return usage_error("%s", "no command given (status, keys, get, set, del, add, desync, trace, watch)");
    const char *cmd = argv[optind++];
    char **args = argv + optind; /* compacted in place: what is kept never overtakes */
    int nargs = take_options(&op, cmd, argc - optind, args, args, &rc);
    if (nargs < 0)
        return rc;
    struct {
        const char *name;
        int min, max;
    } cmds[] = {{"status", 0, 2}, {"keys", 0, 1}, {"get", 1, 1},
                {"set", 2, 2},    {"del", 1, 1},  {"add", 2, 2}, {"desync", 0, 4},
                {"trace", 2, 8}, {"watch", 0, 6}};
    size_t i;
    for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(cmd, cmds[i].name) == 0)
            break;
    if (i == sizeof cmds / sizeof cmds[0])
        return usage_error("unknown command '%s'", cmd);
    if (nargs < cmds[i].min || nargs > cmds[i].max)
        return usage_error("wrong number of arguments for '%s'", cmd);

    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = (int)op.timeout;
    o.connect_timeout_ms = (int)op.timeout;
    o.tls_ca = op.tls_ca;
    c10d_store *s = NULL;
    c10d_status st = c10d_store_connect(&s, op.coord, &o);
    if (st != C10D_OK)
        return fail_last(st);

    if (strcmp(cmd, "status") == 0)
        rc = cmd_status(s, nargs, args);
    else if (strcmp(cmd, "keys") == 0)
        rc = cmd_keys(s, nargs ? args[0] : NULL, op.limit);
    else if (strcmp(cmd, "get") == 0)
        rc = cmd_get(s, args[0], (int)op.wait);
    else if (strcmp(cmd, "set") == 0)
        rc = cmd_set(s, args[0], args[1]);
    else if (strcmp(cmd, "del") == 0)
        rc = cmd_del(s, args[0]);
    else if (strcmp(cmd, "add") == 0)
        rc = cmd_add(s, args[0], args[1]);
    else if (strcmp(cmd, "trace") == 0)
        rc = cmd_trace(s, nargs, args, json_out, &st);
    else if (strcmp(cmd, "watch") == 0)
        rc = cmd_watch(s, nargs, args, &st);
    else
        rc = cmd_desync(s, nargs, args, json_out, &st);
    if (rc < 0)
        rc = fail_last(st);
    c10d_store_close(s);
    return rc;
}
