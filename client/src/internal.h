/* libc10dclient internals, shared between its modules (c10di_ prefix;
 * never exported). */
#ifndef C10DI_INTERNAL_H
#define C10DI_INTERNAL_H

#include "c10d.pb-c.h"
#include "c10d_time.h"

#include <c10d/c10d.h>
#include <pthread.h>
#include <stdatomic.h>

/* --- waiting for a peer (idle.c) --- */
/* The idle-th wait in a row for another process on this host: spin
 * briefly (a peer on another core answers in a microsecond), then yield
 * (ranks may outnumber cores), then sleep. Returns 1 when the caller
 * should look for a failure or a deadline (every so often), else 0. */
int c10di_idle_wait(unsigned idle);

/* --- errors.c --- */
/* Records the detail for c10d_errmsg() on this thread; returns st. */
c10d_status c10di_error(c10d_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An option struct's version (set by its _INIT macro): C10D_OK for one
 * this library knows (1..known), else C10D_EINVAL naming the struct, e.g.
 * c10di_opts_version("c10d_init", "c10d_init_opts", o->version, 1). */
c10d_status c10di_opts_version(const char *fn, const char *type, unsigned int got,
                               unsigned int known);

/* The API edge of time: a timeout argument or option field under the
 * API's convention (c10d/common.h) into a duration under the library's
 * (common/c10d_time.h), the one place that conversion is made. > 0 as it
 * is; C10D_TIMEOUT_DEFAULT as def (a duration: the store's, the group's,
 * C10D_MS_FOREVER for a work's wait); C10D_NO_WAIT as C10D_MS_NO_WAIT
 * where no_wait_ok, else refused; anything else refused. C10D_EINVAL
 * names fn and what. */
/* Where a timeout whose API value is api_timeout comes from, in words for
 * messages (a static string): the caller's, C10D_TIMEOUT_MS, or the
 * default. */
const char *c10di_timeout_from(int api_timeout);
c10d_status c10di_timeout(const char *fn, const char *what, int timeout_ms, c10d_ms def,
                          int no_wait_ok, c10d_ms *out);

/* --- env.c --- */
/* A coordinator URL's longest form, and the most URLs a list names. */
#define C10DI_URL_MAX 512
#define C10DI_URL_LIST_MAX 16
/* Resolves a coordinator URL: url if given ("host:port" becomes
 * "tcp://host:port"), else C10D_COORD, else MASTER_ADDR + MASTER_PORT
 * (but not under torchrun, where that is torchrun's TCPStore: EINVAL
 * saying to set C10D_COORD), else tcp://127.0.0.1:29700; and checks it:
 * a TCP URL without a port from 1 to 65535 is EINVAL (common/url.h). url
 * and C10D_COORD may be a comma-separated list of a replicated
 * coordinator's replicas (docs/replication.md), each URL resolved and
 * checked so, all tls+tcp:// or none, at most C10DI_URL_LIST_MAX: out is
 * the list, joined by commas. The one place the library reads a
 * coordinator URL it is given. */
c10d_status c10di_resolve_url(const char *url, char *out, size_t outlen);
/* One URL, the len bytes at url (spaces around it ignored), resolved and
 * checked as c10di_resolve_url does each of a list's: into out. */
c10d_status c10di_url_element(const char *url, size_t len, char *out, size_t outlen);
/* The job's name when none is given: C10D_JOB, else torchrun's run id
 * (TORCHELASTIC_RUN_ID; its static rendezvous says "none": then
 * "torchrun-MASTER_ADDR:MASTER_PORT", the host's name for a loopback
 * MASTER_ADDR), else "default". Returns its length, which may be more
 * than fit (snprintf's rule). */
size_t c10di_default_job(char *out, size_t outlen);
/* An integer from the environment, or def when unset or malformed (for
 * switches whose garbage means "off"). */
long c10di_env_long(const char *name, long def);
/* An integer setting from the environment: def when unset or empty; a
 * value that is not a whole number in [min, max] is C10D_EINVAL naming
 * the variable (a typo must not silently become the default). */
c10d_status c10di_env_int(const char *name, long def, long min, long max, long *out);

#endif
