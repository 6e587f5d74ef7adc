/* What c10d-ctl's commands share: exit codes, --json, and how a failure
 * is reported (main.c); the commands of status.c and keys.c. */
#ifndef C10D_CTL_H
#define C10D_CTL_H

#include <c10d/c10d.h>

enum {
    EXIT_OK = 0,
    EXIT_ERROR = 1,    /* anything not below */
    EXIT_USAGE = 2,
    EXIT_NOTFOUND = 3, /* get/del of a key that does not exist */
    EXIT_UNAVAIL = 4,  /* no coordinator answered */
    EXIT_TIMEOUT = 5,
    EXIT_AUTH = 6,
};

/* --json: output on stdout as JSON, errors too. */
extern int ctl_json;

/* Reports a failure (stderr for people; a JSON object on stdout with
 * --json) and returns the exit code for it. */
int ctl_fail(c10d_status st, const char *msg);
/* ctl_fail with c10d_errmsg(), the library's detail for st. */
int ctl_fail_last(c10d_status st);
/* Bad usage (fmt has one %s, for arg): says so, returns EXIT_USAGE. */
int ctl_usage_error(const char *fmt, const char *arg);
/* A whole decimal number; 0, or -1 when s is not one. */
int ctl_parse_int(const char *s, long long *out);

/* --- args.c --- */
/* A command's own arguments, read before any coordinator is asked. */
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
} ctl_args;

/* Reads and checks cmd's arguments (what is left of them once the global
 * options are taken out) into *a. 0, or the usage error's exit code after
 * saying what is wrong. */
int ctl_parse_args(const char *cmd, int nargs, char **args, ctl_args *a);

/* --- status.c --- */
/* `status [--job J]`: the coordinator and its jobs; a J it does not know
 * is C10D_ENOTFOUND's exit code. */
int cmd_status(c10d_store *s, const ctl_args *a);

/* --- keys.c: the key-value commands --- */
/* `keys [--job J] [PREFIX]`: all keys, those under PREFIX; with --job,
 * those of J's current run (under PREFIX in its store). */
int cmd_keys(c10d_store *s, const ctl_args *a, long long limit);
int cmd_get(c10d_store *s, const char *key, int wait);
/* A '-' value is read from stdin. */
int cmd_set(c10d_store *s, const char *key, const char *value);
int cmd_del(c10d_store *s, const char *key);
int cmd_add(c10d_store *s, const char *key, long long delta);

#endif
