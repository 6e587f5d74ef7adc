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

/* --- status.c --- */
/* `status [--job J]`: the coordinator and its jobs. */
int cmd_status(c10d_store *s, int nargs, char **args);

/* --- keys.c: the key-value commands --- */
/* `keys [--job J] [PREFIX]`: all keys, those under PREFIX; with --job,
 * those of J's current run (under PREFIX in its store). */
int cmd_keys(c10d_store *s, int nargs, char **args, long long limit);
int cmd_get(c10d_store *s, const char *key, int wait);
/* A '-' value is read from stdin. */
int cmd_set(c10d_store *s, const char *key, const char *value);
int cmd_del(c10d_store *s, const char *key);
int cmd_add(c10d_store *s, const char *key, const char *num);

#endif
