/* How c10d-ctl answers: text for people or --json for scripts, the exit
 * codes, and how a failure is reported. Every command reports through
 * here, so a failure reads the same whichever command met it. */
#ifndef C10D_CTL_OUTPUT_H
#define C10D_CTL_OUTPUT_H

#include <c10d/c10d.h>

enum {
    EXIT_OK = 0,
    EXIT_ERROR = 1,    /* anything not below */
    EXIT_USAGE = 2,
    EXIT_NOTFOUND = 3, /* no such key (get, del), no such job (--job J) */
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
/* A --job J the coordinator does not know (status, keys, desync): says so,
 * returns EXIT_NOTFOUND, so that a script asking after its job never reads
 * "fine" from an empty listing. */
int ctl_fail_no_job(const char *job);
/* Bad usage (fmt has one %s, for arg): says so, returns EXIT_USAGE. */
int ctl_usage_error(const char *fmt, const char *arg);

#endif
