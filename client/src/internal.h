/* libc10dclient internals, shared between its modules (c10di_ prefix;
 * never exported). */
#ifndef C10DI_INTERNAL_H
#define C10DI_INTERNAL_H

#include "c10d.pb-c.h"

#include <c10d/c10d.h>
#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>
#include <stdatomic.h>

/* --- errors.c --- */
/* Records the detail for c10d_errmsg() on this thread; returns st. */
c10d_status c10di_error(c10d_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --- env.c --- */
/* Resolves a coordinator URL: url if given ("host:port" becomes
 * "tcp://host:port"), else C10D_COORD, else MASTER_ADDR + MASTER_PORT,
 * else tcp://127.0.0.1:29500. */
void c10di_resolve_url(const char *url, char *out, size_t outlen);
/* An integer from the environment, or def when unset or malformed. */
long c10di_env_long(const char *name, long def);

/* --- conn.c: one NNG connection to the coordinator, shared by a store
 * and its prefix views --- */
typedef struct c10di_conn {
    atomic_int refs;
    nng_socket sock;
    nng_dialer dialer;
    char url[512];
    char *token;
    uint64_t client_id;
    atomic_uint_least64_t next_request_id;
    atomic_int pipes; /* connections up now */
    /* the coordinator's limits, learnt at connect */
    uint64_t max_key_bytes, max_value_bytes, max_message_bytes;
    uint32_t max_multi_keys;
    char server_version[32];
    /* idle NNG contexts, reused across calls */
    nng_mtx *mu;
    struct c10di_ctx *idle;
} c10di_conn;

c10d_status c10di_conn_open(c10di_conn **out, const char *url, const char *token,
                            int connect_timeout_ms);
void c10di_conn_ref(c10di_conn *c);
void c10di_conn_unref(c10di_conn *c);

/* Sends req (request_id, identity and token are filled in) and waits for
 * the reply. server_wait_ms is how long the coordinator itself may hold the
 * request (a get's wait); the call gives up after that plus timeout_ms of
 * not reaching the coordinator. Resends after a lost connection with the
 * same request id. On C10D_OK *rep is the reply (free with
 * c10dpb__reply__free_unpacked); on error c10d_errmsg() says why. */
c10d_status c10di_call(c10di_conn *c, C10dpb__Request *req, int server_wait_ms, int timeout_ms,
                       C10dpb__Reply **rep);

/* --- store.c --- */
c10di_conn *c10di_store_conn(c10d_store *s);
/* A store handle over an existing connection (taking a reference), whose
 * keys all start with prefix ("" or ending in '/'). */
c10d_status c10di_store_over(c10d_store **out, c10di_conn *conn, const char *prefix,
                             int timeout_ms);

#endif
