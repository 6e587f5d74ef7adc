/* c10d-ctl's command arguments, read and checked before any coordinator
 * is asked: a bad one is bad usage (exit 2) whether or not a coordinator
 * runs, and never costs a connection timeout first. */
#include "args.h"
#include "output.h"

#include <c10d/c10d.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A command's own options ("--job J"), by the letter commands list them
 * with below. */
static const struct {
    char id;
    const char *name, *alias;
    long long min, max; /* a number's range; min > max: a name; min == max == -1: a flag */
} options[] = {
    {'j', "--job", NULL, 1, 0},
    {'g', "--group", NULL, 1, 0},
    {'r', "--rank", "-r", 0, 1 << 24},
    {'n', "-n", "--limit", 1, 100000},
    {'i', "--interval", NULL, 10, 3600000},
    {'c', "--count", NULL, 0, 1000000000},
    {'f', "--finished", NULL, -1, -1},
    {'F', "--format", NULL, 1, 0},
    {'o', "--output", "-o", 1, 0},
    {'w', "--write", NULL, -1, -1},
};

/* The store's writers are its jobs: an operator's write changes what a
 * job reads, so it is asked for, never a slip of a command line. */
#define WRITE_HELP                                                                                 \
    "\n"                                                                                           \
    "  --write    required: this changes the store that jobs read. A run's own\n"                  \
    "             keys (under jobs/J/GENERATION/) are written by its ranks only;\n"               \
    "             the coordinator refuses them to anyone else (exit 6)\n"

static const struct {
    const char *name;
    const char *opts; /* the letters of its options */
    int min_pos, max_pos;
    const char *synopsis;
    const char *help; /* `c10d-ctl CMD --help`: what it does, its options, its exit codes */
} commands[] = {
    {"status", "j", 0, 0, "status [--job J]",
     "The coordinator (version, uptime, database, keys, clients) and its jobs:\n"
     "groups, members alive/left/dead and why, join regions (who ran out of\n"
     "inputs, what they shadow).\n"
     "\n"
     "  --job J    only job J\n"
     "\n"
     "Exit status: 0 the coordinator answered; 3 no job J; 4 unreachable.\n"},
    {"keys", "j", 0, 1, "keys [--job J] [PREFIX]",
     "List keys (with sizes), all or those starting with PREFIX (-n N: at most N,\n"
     "default 1000).\n"
     "\n"
     "  --job J    the keys of J's current run (its store: the keys under\n"
     "             jobs/J/GENERATION/, deleted when the run is over)\n"
     "\n"
     "Exit status: 0; 3 no job J.\n"},
    {"get", "", 1, 1, "get KEY",
     "Print KEY's value (raw bytes; --json: text or base64). --wait MS: wait up\n"
     "to MS for the key to appear.\n"
     "\n"
     "Exit status: 0; 3 no such key; 5 timed out.\n"},
    {"set", "w", 2, 2, "set --write KEY VALUE",
     "Set KEY to VALUE (a '-' VALUE reads it from stdin).\n" WRITE_HELP},
    {"del", "w", 1, 1, "del --write KEY",
     "Delete KEY.\n" WRITE_HELP "\nExit status: 0; 3 no such key; 6 refused.\n"},
    {"add", "w", 2, 2, "add --write KEY N",
     "Add the integer N to KEY (creating it at 0); print the result.\n" WRITE_HELP},
    {"desync", "jgf", 0, 0, "desync [--job J] [--group G] [--finished]",
     "Collective-sequence health, usable as a health check: per group of the\n"
     "live runs the collective each rank entered and completed, who is behind,\n"
     "the finding (desync, lost rank, stall) and dead ranks; a job still forming\n"
     "says how many of its ranks joined.\n"
     "\n"
     "  --job J      only job J: its current run, live or finished (a finished\n"
     "               one reads \"finished, N collectives\", or its failure)\n"
     "  --group G    only group G\n"
     "  --finished   also the runs that are over (kept for the coordinator's\n"
     "               --retention): without it a run that failed yesterday does\n"
     "               not make today's check unhealthy\n"
     "\n"
     "Exit status: 0 healthy (a job still forming included); 3 no job J;\n"
     "4 unreachable; 7 unhealthy.\n"},
    {"trace", "rgjnFo", 0, 0,
     "trace --rank R [--group G] [--job J] [-n N] | trace --format chrome [-o FILE]",
     "Rank R's last N collectives (default 50): number, call, state (entered,\n"
     "verified, completed, failed); first line: whose (without --job the\n"
     "coordinator picks a job, and says which).\n"
     "\n"
     "  --format chrome  every rank of the group instead (no --rank): a Chrome\n"
     "                   Trace Event Format file (JSON) for ui.perfetto.dev or\n"
     "                   chrome://tracing, a track per rank, an event per run of\n"
     "                   collectives from its entry on; failed and unfinished\n"
     "                   ones say so in their args\n"
     "  -o FILE          write it to FILE (default: stdout)\n"
     "\n"
     "Exit status: 0; 3 no such job, group or rank.\n"},
    {"watch", "jgicf", 0, 0,
     "watch [--job J] [--group G] [--finished] [--interval MS] [--count K]",
     "desync every MS (default 1000), K times (default: until interrupted): in\n"
     "place on a terminal, one after the other into a pipe; --json: one object\n"
     "a line, with \"at_ms\". A job J not there yet is waited for.\n"
     "\n"
     "Exit status: the last refresh's, as desync's (3: no job J yet).\n"},
};

#define N_OPTIONS (sizeof options / sizeof options[0])
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static int usage_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_msg(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ctl_usage_error("%s", msg);
}

/* Which of the command's options `a` is (its value, for `--job=J`, in *eq);
 * -1 if none. */
static int option_of(const char *opts, const char *a, const char **eq)
{
    *eq = NULL;
    for (size_t k = 0; k < N_OPTIONS; k++) {
        if (!strchr(opts, options[k].id))
            continue;
        size_t l = strlen(options[k].name);
        if (!strcmp(a, options[k].name) || (options[k].alias && !strcmp(a, options[k].alias)))
            return (int)k;
        if (!strncmp(a, options[k].name, l) && a[l] == '=') {
            *eq = a + l + 1;
            return (int)k;
        }
    }
    return -1;
}

static int set_option(ctl_args *a, int k, const char *v)
{
    const char *name = options[k].name;
    if (options[k].min > options[k].max) { /* a name */
        if (!*v)
            return usage_msg("%s wants a name, not an empty string", name);
        if (options[k].id == 'j' && strlen(v) > C10D_MAX_JOB_BYTES)
            return usage_msg("--job: a job name is at most %d bytes (C10D_MAX_JOB_BYTES); "
                             "this one is %zu", C10D_MAX_JOB_BYTES, strlen(v));
        if (options[k].id == 'F') {
            if (strcmp(v, "chrome") != 0)
                return usage_msg("--format: only 'chrome' (the Chrome Trace Event Format), "
                                 "not '%s'", v);
            a->format = v;
        } else if (options[k].id == 'o') {
            a->output = v;
        } else {
            *(options[k].id == 'j' ? &a->job : &a->group) = v;
        }
        return 0;
    }
    long long x;
    if (ctl_parse_int(v, &x) || x < options[k].min || x > options[k].max)
        return usage_msg("%s wants a whole number from %lld to %lld, not '%s'", name,
                         options[k].min, options[k].max, v);
    switch (options[k].id) {
    case 'r':
        a->rank = x, a->has_rank = 1;
        break;
    case 'n':
        a->limit = x;
        break;
    case 'i':
        a->interval = x;
        break;
    default:
        a->count = x;
        break;
    }
    return 0;
}

int ctl_parse_args(const char *cmd, int nargs, char **args, ctl_args *a)
{
    *a = (ctl_args){.interval = 1000};
    size_t c;
    for (c = 0; c < N_COMMANDS; c++)
        if (!strcmp(cmd, commands[c].name))
            break;
    if (c == N_COMMANDS)
        return usage_msg("unknown command '%s'", cmd);
    const char *opts = commands[c].opts;
    for (int i = 0; i < nargs; i++) {
        const char *v;
        int k = *opts ? option_of(opts, args[i], &v) : -1;
        if (k < 0) {
            /* keys's PREFIX and the key-value commands' KEY and VALUE may
             * start with '-' ("set k -5"); the other commands take none. */
            if (args[i][0] == '-' && !commands[c].max_pos)
                return usage_msg("unknown option '%s' for %s (%s)", args[i], cmd,
                                 commands[c].synopsis);
            if (a->npos == commands[c].max_pos)
                return usage_msg("too many arguments for %s (%s)", cmd, commands[c].synopsis);
            a->pos[a->npos++] = args[i];
            continue;
        }
        if (options[k].min == -1 && options[k].max == -1) { /* a flag */
            if (v)
                return usage_msg("%s takes no value (%s)", options[k].name, commands[c].synopsis);
            if (options[k].id == 'w')
                a->write = 1;
            else
                a->finished = 1;
            continue;
        }
        if (!v && i + 1 >= nargs)
            return usage_msg("%s wants a value (%s)", options[k].name, commands[c].synopsis);
        if (set_option(a, k, v ? v : args[++i]) != 0)
            return EXIT_USAGE;
    }
    if (a->npos < commands[c].min_pos)
        return usage_msg("too few arguments for %s (%s)", cmd, commands[c].synopsis);
    if (!strcmp(cmd, "trace") && !a->format && !a->has_rank)
        return usage_msg("trace needs --rank R (%s)", commands[c].synopsis);
    if (!strcmp(cmd, "trace") && a->format && a->has_rank)
        return usage_msg("trace --format chrome shows every rank: no --rank (%s)",
                         commands[c].synopsis);
    if (!strcmp(cmd, "trace") && a->output && !a->format)
        return usage_msg("-o FILE is for --format chrome (%s)", commands[c].synopsis);
    if (!strcmp(cmd, "add") && ctl_parse_int(a->pos[1], &a->delta) != 0)
        return usage_msg("add wants an integer, not '%s'", a->pos[1]);
    if (strchr(commands[c].opts, 'w') && !a->write)
        return usage_msg("%s changes the coordinator's store, which jobs read: say so with "
                         "--write (%s)", cmd, commands[c].synopsis);
    return 0;
}

const char *ctl_command_help(const char *cmd)
{
    static char buf[4096];
    for (size_t c = 0; c < N_COMMANDS; c++)
        if (!strcmp(cmd, commands[c].name)) {
            snprintf(buf, sizeof buf,
                     "Usage: c10d-ctl [OPTIONS] %s\n\n%s\n"
                     "The global options (--coord, --json, --timeout, ...): c10d-ctl --help.\n",
                     commands[c].synopsis, commands[c].help);
            return buf;
        }
    return NULL;
}

int ctl_parse_int(const char *s, long long *out)
{
    char *end;
    errno = 0;
    *out = strtoll(s, &end, 10);
    return errno || end == s || *end ? -1 : 0;
}
