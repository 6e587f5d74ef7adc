/* c10d-ctl's command arguments, read and checked before any coordinator
 * is asked. */
#ifndef C10D_CTL_ARGS_H
#define C10D_CTL_ARGS_H

/* A command's own arguments. */
typedef struct ctl_args {
    const char *job, *group; /* --job J, --group G (NULL: not given) */
    const char *pos[2];      /* KEY and VALUE or N; keys's PREFIX */
    int npos;
    int has_rank;
    long long rank;     /* trace --rank */
    long long limit;    /* trace -n (0: the coordinator's default) */
    long long interval; /* watch --interval (default 1000) */
    long long count;    /* watch --count (0: until interrupted) */
    long long delta;    /* add's N */
    int finished;       /* desync, watch --finished: the runs that are over too */
    int write;          /* set, del, add --write: the operator means to write */
    const char *format; /* trace --format (only "chrome"; NULL: the rank's rows) */
    const char *output; /* trace -o FILE (NULL: stdout) */
} ctl_args;

/* Reads and checks cmd's arguments (what is left of them once the global
 * options are taken out) into *a. 0, or the usage error's exit code after
 * saying what is wrong. */
int ctl_parse_args(const char *cmd, int nargs, char **args, ctl_args *a);

/* `c10d-ctl CMD --help`'s text (a static buffer), or NULL for a command
 * there is none of. */
const char *ctl_command_help(const char *cmd);

/* A whole decimal number; 0, or -1 when s is not one. */
int ctl_parse_int(const char *s, long long *out);

#endif
