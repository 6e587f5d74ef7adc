/* The store inside the library (store.c): handles over a connection that
 * is already open, for the front end (the run's store, where the library
 * keeps its own keys) and the operators' calls (store_admin.c, jobs.c).
 * Backends never include this header: they are handed a store
 * (backend.h), never the connection beneath it. */
#ifndef C10DI_STORE_INTERNAL_H
#define C10DI_STORE_INTERNAL_H

#include "conn/conn.h"
#include "internal.h"

c10di_conn *c10di_store_conn(c10d_store *s);
/* The store's prefix ("" or ending in '/'), which its keys start with. */
const char *c10di_store_prefix(const c10d_store *s);
/* c10di_call over the store's connection with the store's timeout (for
 * store_admin.c's calls; on C10D_OK free *rep). */
c10d_status c10di_store_call(c10d_store *s, C10dpb__Request *req, c10d_ms server_wait_ms,
                             C10dpb__Reply **rep);
/* A store handle over an existing connection (taking a reference), whose
 * keys all start with prefix ("" or ending in '/'). */
c10d_status c10di_store_over(c10d_store **out, c10di_conn *conn, const char *prefix,
                             c10d_ms timeout_ms);
/* A store over conn whose keys all start with the run's prefix
 * (jobs/<job>/<generation>/, common/run_scope.h) followed by the tail
 * fmt makes ("" or ending in '/'): the run's store, or a part of it that
 * the library keeps its own keys in. C10D_EINVAL, saying which, when the
 * prefix or the tail does not fit: a key silently written at the store's
 * root would outlive the run and be seen by the next one. */
c10d_status c10di_run_store_over(c10d_store **out, c10di_conn *conn, const char *job,
                                 uint64_t generation, c10d_ms timeout_ms, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

#endif
