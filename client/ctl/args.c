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
    long long min, max; /* a number's range; min > max: a name */
} options[] = {
    {'j', "--job", NULL, 1, 0},
    {'g', "--group", NULL, 1, 0},
    {'r', "--rank", "-r", 0, 1 << 24},
    {'n', "-n", "--limit", 1, 100000},
    {'i', "--interval", NULL, 10, 3600000},
    {'c', "--count", NULL, 0, 1000000000},
};

static const struct {
    const char *name;
    const char *opts; /* the letters of its options */
    int min_pos, max_pos;
    const char *synopsis;
} commands[] = {
    {"status", "j", 0, 0, "status [--job J]"},
    {"keys", "j", 0, 1, "keys [--job J] [PREFIX]"},
    {"get", "", 1, 1, "get KEY"},
    {"set", "", 2, 2, "set KEY VALUE"},
    {"del", "", 1, 1, "del KEY"},
    {"add", "", 2, 2, "add KEY N"},
    {"desync", "jg", 0, 0, "desync [--job J] [--group G]"},
    {"trace", "rgjn", 0, 0, "trace --rank R [--group G] [--job J] [-n N]"},
    {"watch", "jgic", 0, 0, "watch [--job J] [--group G] [--interval MS] [--count K]"},
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
        *(options[k].id == 'j' ? &a->job : &a->group) = v;
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
        if (!v && i + 1 >= nargs)
            return usage_msg("%s wants a value (%s)", options[k].name, commands[c].synopsis);
        if (set_option(a, k, v ? v : args[++i]) != 0)
            return EXIT_USAGE;
    }
    if (a->npos < commands[c].min_pos)
        return usage_msg("too few arguments for %s (%s)", cmd, commands[c].synopsis);
    if (!strcmp(cmd, "trace") && !a->has_rank)
        return usage_msg("trace needs --rank R (%s)", commands[c].synopsis);
    if (!strcmp(cmd, "add") && ctl_parse_int(a->pos[1], &a->delta) != 0)
        return usage_msg("add wants an integer, not '%s'", a->pos[1]);
    return 0;
}

int ctl_parse_int(const char *s, long long *out)
{
    char *end;
    errno = 0;
    *out = strtoll(s, &end, 10);
    return errno || end == s || *end ? -1 : 0;
}
