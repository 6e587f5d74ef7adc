/* c10d-ctl: the operator's CLI. A client of the coordinator through
 * libc10dclient, like any rank. Text for people, --json for scripts, and
 * exit codes that say what happened (output.h).
 *
 * Here: --help, the global options, the connection, and which command
 * runs. A command's own arguments are args.c's; each command (status.c,
 * keys.c, desync.c) reports its own failures and returns its exit code. */
#include "args.h"
#include "desync.h"
#include "keys.h"
#include "output.h"
#include "status.h"
#include "summary.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
    "Usage: c10d-ctl [OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "Inspect and edit a c10d coordinator's state.\n"
    "\n"
    "Commands:\n"
    "  status [--job J]    the coordinator (version, uptime, database, keys, clients)\n"
    "                      and its jobs (all, or J: exit 3 if it has none of that name):\n"
    "                      groups, members alive/left/dead and why, join regions (who\n"
    "                      ran out of inputs, what they shadow)\n"
    "  keys [--job J] [PREFIX]\n"
    "                      list keys (with sizes), all or those starting with PREFIX;\n"
    "                      --job J: those of J's current run (its store: the keys\n"
    "                      under jobs/J/GENERATION/, deleted when the run is over)\n"
    "  get KEY             print KEY's value (raw bytes; --json: text or base64)\n"
    "  set --write KEY VALUE\n"
    "                      set KEY to VALUE (a '-' VALUE reads it from stdin)\n"
    "  del --write KEY     delete KEY\n"
    "  add --write KEY N   add the integer N to KEY (creating it at 0); print the result\n"
    "                      (writes need --write; a run's keys, under jobs/J/GENERATION/,\n"
    "                      only its ranks write)\n"
    "  desync [--job J] [--group G] [--finished]\n"
    "                      collective-sequence health of the live runs (--finished: the\n"
    "                      ones that are over too; --job J: J's run either way): per\n"
    "                      group the collective each rank entered and completed, who is\n"
    "                      behind, the finding (desync, lost rank, stall), dead ranks, a\n"
    "                      job still forming; exit 3 no job J, 7 unhealthy\n"
    "  trace --rank R [--group G] [--job J] [-n N]\n"
    "                      rank R's last N collectives (default 50): number, call, state\n"
    "                      (entered, verified, completed, failed); first line: whose\n"
    "                      (without --job the coordinator picks a job, and says which)\n"
    "  trace --format chrome [--job J] [--group G] [-o FILE]\n"
    "                      every rank's collectives as a Chrome Trace Event Format file\n"
    "                      (ui.perfetto.dev, chrome://tracing): a track per rank\n"
    "  watch [--job J] [--group G] [--finished] [--interval MS] [--count K]\n"
    "                      desync every MS (default 1000), K times (default: until\n"
    "                      interrupted): in place on a terminal, one after the other\n"
    "                      into a pipe; --json: one object a line, with \"at_ms\"\n"
    "\n"
    "`c10d-ctl COMMAND --help` shows a command's own help.\n"
    "\n"
    "Options (before or after the command: `get k --wait 100`; `--` ends them):\n"
    "  -c, --coord URL     coordinator (default: $C10D_COORD, else MASTER_ADDR:MASTER_PORT,\n"
    "                      else tcp://127.0.0.1:29700); a replicated one's replicas\n"
    "                      as a list, tcp://a:29700,tcp://b:29700,... (the leader answers)\n"
    "      --tls-ca FILE   for a tls+tcp:// coordinator: the CA (PEM) that signed its\n"
    "                      certificate (default: $C10D_TLS_CA)\n"
    "      --tls-cert FILE, --tls-key FILE\n"
    "                      this client's certificate and key (PEM), for a coordinator\n"
    "                      that requires one (--tls-ca on c10d-coord); default:\n"
    "                      $C10D_TLS_CERT and $C10D_TLS_KEY\n"
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
    "C10D_TLS_CA, C10D_TLS_CERT, C10D_TLS_KEY.\n"
    "\n"
    "Arguments and the URL are checked before the coordinator is asked.\n"
    "Exit status: 0 success; 1 other error (the coordinator's refusals too); 2 bad\n"
    "usage, a bad URL included (--json prints it as JSON); 3 no such key or job;\n"
    "4 coordinator unreachable; 5 timed out; 6 not authorized; 7 (desync, watch)\n"
    "unhealthy.\n";

typedef struct {
    const char *coord, *tls_ca, *tls_cert, *tls_key;
    long long timeout, wait, limit;
} options;

/* Applies option `name` with value v (NULL for flags). Returns -1 after a
 * usage error (its exit code in *rc). */
static int apply(options *o, int name, const char *v, int *rc)
{
    switch (name) {
    case 'c':
        if (!*v)
            return *rc = ctl_usage_error("%s", "--coord wants a URL, not an empty string"), -1;
        o->coord = v;
        break;
    case 'A':
        o->tls_ca = v;
        break;
    case 'C':
        o->tls_cert = v;
        break;
    case 'K':
        o->tls_key = v;
        break;
    case 'j':
        ctl_json = 1;
        break;
    case 'a':
        ctl_list_all = 1;
        break;
    case 't':
        if (ctl_parse_int(v, &o->timeout) || o->timeout <= 0 || o->timeout > 86400000)
            return *rc = ctl_usage_error("--timeout wants milliseconds, not '%s'", v), -1;
        break;
    case 'w':
        if (ctl_parse_int(v, &o->wait) || o->wait < 0 || o->wait > 86400000)
            return *rc = ctl_usage_error("--wait wants milliseconds, not '%s'", v), -1;
        break;
    case 'n':
        if (ctl_parse_int(v, &o->limit) || o->limit <= 0 || o->limit > 100000)
            return *rc = ctl_usage_error("--limit wants a number from 1 to 100000, not '%s'", v), -1;
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
                 {"--tls-cert", NULL, 'C', 1}, {"--tls-key", NULL, 'K', 1},
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
                return *rc = ctl_usage_error("%s wants a value", known[k].l), -1;
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
        {"tls-cert", required_argument, 0, 'C'}, {"tls-key", required_argument, 0, 'K'},
        {"all", no_argument, 0, 'a'},
        {0, 0, 0, 0},
    };
    options op = {NULL, NULL, NULL, NULL, 5000, 0, 1000};
    int c, rc = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) /* errors in JSON from the first */
        ctl_json |= !strcmp(argv[i], "--json") || !strcmp(argv[i], "-j");
    /* '+': stop at the command; what follows is take_options's. */
    while ((c = getopt_long(argc, argv, "+c:jt:w:n:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
        case 'A':
        case 'C':
        case 'K':
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
            return ctl_usage_error("%s", "unknown option");
        }
    }
    if (optind >= argc)
        return ctl_usage_error("%s", "no command given (status, keys, get, set, del, add, desync, trace, watch)");
    const char *cmd = argv[optind++];
    /* `c10d-ctl keys --help` is asking for keys's help, not for a
     * coordinator. */
    for (int i = optind; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            const char *help = ctl_command_help(cmd);
            fputs(help ? help : usage, stdout);
            return EXIT_OK;
        }
    char **args = argv + optind; /* compacted in place: what is kept never overtakes */
    int nargs = take_options(&op, cmd, argc - optind, args, args, &rc);
    if (nargs < 0)
        return rc;
    ctl_args a;
    if ((rc = ctl_parse_args(cmd, nargs, args, &a)) != 0)
        return rc;

    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = (int)op.timeout;
    o.connect_timeout_ms = (int)op.timeout;
    o.tls_ca = op.tls_ca;
    o.tls_cert = op.tls_cert;
    o.tls_key = op.tls_key;
    c10d_store *s = NULL;
    c10d_status st = c10d_store_connect(&s, op.coord, &o);
    /* EINVAL before any answer: the URL (or C10D_COORD) is bad, which no
     * retry mends; usage, like any other bad argument. */
    if (st == C10D_EINVAL)
        return ctl_usage_error("%s", c10d_errmsg());
    if (st == C10D_OK && a.write)
        c10d_store_set_operator(s, 1);
    if (st != C10D_OK)
        return ctl_fail_last(st);

    if (strcmp(cmd, "status") == 0)
        rc = cmd_status(s, &a);
    else if (strcmp(cmd, "keys") == 0)
        rc = cmd_keys(s, &a, op.limit);
    else if (strcmp(cmd, "get") == 0)
        rc = cmd_get(s, a.pos[0], op.wait > 0 ? (int)op.wait : C10D_NO_WAIT);
    else if (strcmp(cmd, "set") == 0)
        rc = cmd_set(s, a.pos[0], a.pos[1]);
    else if (strcmp(cmd, "del") == 0)
        rc = cmd_del(s, a.pos[0]);
    else if (strcmp(cmd, "add") == 0)
        rc = cmd_add(s, a.pos[0], a.delta);
    else if (strcmp(cmd, "trace") == 0)
        rc = a.format ? cmd_trace_chrome(s, &a) : cmd_trace(s, &a);
    else if (strcmp(cmd, "watch") == 0)
        rc = cmd_watch(s, &a);
    else
        rc = cmd_desync(s, &a);
    c10d_store_close(s);
    return rc;
}
