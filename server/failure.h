/* The coordinator's one way to carry why something failed, as the client
 * library's (c10di_error, client/src/internal.h): a function that fails
 * returns its status, -1 or NULL as its header says, and records what
 * went wrong, in words for people, on this thread; its caller reads that
 * with c10ds_failure() and answers a request with it (c10ds_fail,
 * engine/request.h), logs it, or records it again with its own context
 * ("migration 003 failed: %s", c10ds_failure()).
 *
 * One message per thread, so a detail is read by the thread that failed,
 * before it calls what could fail again. The network threads, the engine
 * thread and a replica's role threads each have their own. */
#ifndef C10DS_FAILURE_H
#define C10DS_FAILURE_H

#include <c10d/errors.h>

#include <sqlite3.h>

/* How long a recorded detail may be; longer ones are cut. As the
 * client's: a message naming a database path or a --data-dir fits. */
#define C10DS_FAILURE_MAX 2048

/* Records the detail for c10ds_failure() on this thread; returns st
 * (C10D_ERROR is -1, so `return c10ds_failed(C10D_ERROR, ...)` is also an
 * int function's -1). The arguments may include c10ds_failure() itself. */
c10d_status c10ds_failed(c10d_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with SQLite's message for h appended ("fmt: <why>"). */
c10d_status c10ds_failed_db(sqlite3 *h, c10d_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* This thread's last recorded detail; "" if none. */
const char *c10ds_failure(void);

#endif
