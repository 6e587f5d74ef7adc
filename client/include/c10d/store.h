/* c10d/store.h — the coordinator's durable key-value store.
 *
 * Everything torch's TCPStore offers, kept in the coordinator's SQLite
 * database: a write that returned C10D_OK survives a kill -9 of the
 * coordinator and its restart on the same database file.
 *
 * Threads: a c10d_store may be used by many threads at once; each call is
 * one request, and several may be in flight together. If the coordinator
 * goes away, calls keep trying to reach it (a restarted coordinator on the
 * same address is found again) until their timeout; requests that are not
 * idempotent (add, append, compare_set, delete_key) carry an id and are
 * applied once however often they are resent.
 *
 * Values are byte strings (a NUL byte is fine). Keys are NUL-terminated
 * strings. Errors common to every call: C10D_EINVAL (a NULL or empty key or
 * a bad argument), C10D_ETOOBIG (beyond the coordinator's limits),
 * C10D_EUNAVAIL (no coordinator answered within the timeout), C10D_EAUTH
 * (wrong or missing token). c10d_errmsg() says more. */
#ifndef C10D_STORE_H
#define C10D_STORE_H

#include "common.h"
#include "errors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct c10d_store c10d_store;

#define C10D_STORE_OPTS_VERSION 2

/* Start with C10D_STORE_OPTS_INIT (its version first: see c10d/coll.h). */
typedef struct c10d_store_opts {
    unsigned int version; /* C10D_STORE_OPTS_VERSION */
    /* How long a call may take, in ms: a get or wait for a missing key, and
     * any call while the coordinator is unreachable. C10D_TIMEOUT_DEFAULT
     * (C10D_TIMEOUT_MS from the environment, else 300000, TCPStore's). */
    int timeout_ms;
    /* How long c10d_store_connect waits for a coordinator to answer.
     * C10D_TIMEOUT_DEFAULT: timeout_ms. */
    int connect_timeout_ms;
    /* Shared secret the coordinator was started with; NULL = C10D_TOKEN
     * from the environment, if set. */
    const char *token;
    /* For a tls+tcp:// coordinator: the CA file (PEM) that signed its
     * certificate; NULL = C10D_TLS_CA from the environment. */
    const char *tls_ca;
    /* Version 2. This client's certificate and its key (PEM files), for a
     * coordinator that requires one (c10d-coord --tls-ca); NULL =
     * C10D_TLS_CERT / C10D_TLS_KEY from the environment. Both or neither. */
    const char *tls_cert;
    const char *tls_key;
} c10d_store_opts;

#define C10D_STORE_OPTS_INIT                                                                       \
    {C10D_STORE_OPTS_VERSION, C10D_TIMEOUT_DEFAULT, C10D_TIMEOUT_DEFAULT, NULL, NULL, NULL, NULL}

/* Connects to the coordinator at `url` ("tcp://host:port", "host:port",
 * "ipc:///path", "tls+tcp://host:port"); NULL = from the environment
 * (C10D_COORD, or MASTER_ADDR + MASTER_PORT), else tcp://127.0.0.1:29700.
 * A comma-separated list of URLs names a replicated coordinator's
 * replicas: the handle follows the leader (docs/api.md).
 * `o` NULL = defaults + environment. Waits for the coordinator to answer.
 * On success *out is a handle to free with c10d_store_close.
 * Errors: C10D_EUNAVAIL (nobody answered in time, or no replica listed
 * leads), C10D_EINVAL (bad URL),
 * C10D_EAUTH (wrong token; for TLS: no CA, or the server's certificate does
 * not verify against it), C10D_EPROTO (not a c10d-coord, or an incompatible
 * one). */
C10D_API c10d_status c10d_store_connect(c10d_store **out, const char *url,
                                        const c10d_store_opts *o);

/* Closes a store handle. Prefix stores made from it stay usable until they
 * are closed too. NULL is accepted. */
C10D_API void c10d_store_close(c10d_store *s);

/* Marks the writes made through s (on = 1) as an operator's, as
 * `c10d-ctl --write` does: the coordinator logs each one with its key. It
 * grants nothing: a run's store stays written by its ranks only.
 * Errors: C10D_EINVAL (s is NULL). */
C10D_API c10d_status c10d_store_set_operator(c10d_store *s, int on);

/* A view of `parent` in which every key is "<prefix>/<key>", sharing its
 * connection. Views nest. Free with c10d_store_close. */
C10D_API c10d_status c10d_store_prefix(c10d_store **out, c10d_store *parent, const char *prefix);

/* Sets key to the `len` bytes at `val` (NULL allowed when len is 0),
 * waking every get/wait blocked on it. */
C10D_API c10d_status c10d_store_set(c10d_store *s, const char *key, const void *val, size_t len);

/* Gets key's value, waiting up to timeout_ms for the key to be set
 * (C10D_TIMEOUT_DEFAULT: the store's timeout; C10D_NO_WAIT: do not wait;
 * c10d/common.h). On success *val is the value (free it with c10d_free;
 * NUL-terminated for convenience, the NUL not counted in *len) and *len
 * its length; on failure *val is NULL and *len 0, so c10d_free(*val) is
 * always safe. Errors: C10D_ETIMEDOUT (the key did not appear; the
 * message names it), C10D_ENOTFOUND (C10D_NO_WAIT and no such key),
 * C10D_EINVAL (a timeout that is none of those). */
C10D_API c10d_status c10d_store_get(c10d_store *s, const char *key, void **val, size_t *len,
                                    int timeout_ms);

/* Adds delta to the integer stored (as decimal text, as TCPStore does) at
 * key, creating it at 0 first; *result (may be NULL) is the new value.
 * Errors: C10D_EINVAL (the value is not a decimal integer, or overflows). */
C10D_API c10d_status c10d_store_add(c10d_store *s, const char *key, int64_t delta,
                                    int64_t *result);

/* Atomically: if key holds `expected`, set it to `desired`. A missing key
 * counts as holding the empty value, so elen == 0 creates it. *cur / *clen
 * (optional; free *cur with c10d_free) receive the value after the call:
 * `desired` if it was stored, else the value that was there.
 * Unlike TCPStore, a missing key with a non-empty `expected` is not reported
 * as stored: it returns C10D_ENOTFOUND and stores nothing. */
C10D_API c10d_status c10d_store_compare_set(c10d_store *s, const char *key, const void *expected,
                                            size_t elen, const void *desired, size_t dlen,
                                            void **cur, size_t *clen);

/* Waits until all n keys exist (timeout_ms as for c10d_store_get).
 * Errors: C10D_ETIMEDOUT, naming the keys still missing; with
 * C10D_NO_WAIT, C10D_ENOTFOUND if one is missing now. */
C10D_API c10d_status c10d_store_wait(c10d_store *s, const char *const *keys, size_t n,
                                     int timeout_ms);

/* *all_exist = 1 if every one of the n keys exists now, else 0. No waiting. */
C10D_API c10d_status c10d_store_check(c10d_store *s, const char *const *keys, size_t n,
                                      int *all_exist);

/* Number of keys in this store: all keys for a root store, the keys under
 * the prefix for a prefix store (TCPStore counts the whole store). */
C10D_API c10d_status c10d_store_num_keys(c10d_store *s, int64_t *n);

/* Deletes key; *deleted (may be NULL) = 1 if it existed. */
C10D_API c10d_status c10d_store_delete_key(c10d_store *s, const char *key, int *deleted);

/* Appends len bytes to key's value, creating the key if missing. */
C10D_API c10d_status c10d_store_append(c10d_store *s, const char *key, const void *val,
                                       size_t len);

/* Gets n keys at once, waiting up to timeout_ms (as for c10d_store_get)
 * for all to exist. On success vals[i] (free each with c10d_free) and
 * lens[i] are set for every i; on failure none is. */
C10D_API c10d_status c10d_store_multi_get(c10d_store *s, const char *const *keys, size_t n,
                                          void **vals, size_t *lens, int timeout_ms);

/* Sets n keys in one atomic, durable step. */
C10D_API c10d_status c10d_store_multi_set(c10d_store *s, const char *const *keys,
                                          const void *const *vals, const size_t *lens, size_t n);

/* One key in a listing. */
typedef struct c10d_key_info {
    const char *key;   /* without this store's prefix */
    uint64_t size;     /* bytes in the value */
    int64_t updated_ms; /* wall clock, ms since the epoch */
} c10d_key_info;

/* Lists up to `limit` (0 = 10000) keys of this store starting with
 * `prefix` (NULL or "" = all), in byte order. *keys is one allocation
 * holding the array and its strings: free it with one c10d_free.
 * *truncated (may be NULL) = 1 if more keys matched than were returned. */
C10D_API c10d_status c10d_store_list(c10d_store *s, const char *prefix, size_t limit,
                                     c10d_key_info **keys, size_t *n, int *truncated);

/* What the coordinator says about itself (c10d-ctl status). */
typedef struct c10d_coord_info {
    const char *version;
    const char *listen_url;
    const char *db_path;
    int schema_version;
    int64_t uptime_ms;
    int64_t num_keys;
    int64_t clients;  /* connections open now */
    int64_t requests; /* requests served since start */
    int64_t parked;   /* requests waiting on keys now */
    /* Reply writes that waited for their client to read (its socket was
     * full), tcp:// and ipc:// only; a client that reads its replies
     * should leave this still. */
    int64_t replies_waited;
    /* Where it speaks PyTorch TCPStore's protocol (c10d-coord
     * --tcpstore-listen, tcp://host:port), or NULL. */
    const char *tcpstore_url;
    /* Batches of requests the engine ran since start, each one
     * transaction (one commit): requests / batches says how many shared
     * one. */
    int64_t batches;
    /* Rounds of requests the coordinator found while it looked for them
     * before sleeping (c10d-coord --busy-poll-us): each spared a wake-up;
     * 0 with --busy-poll-us 0. */
    int64_t polled;
} c10d_coord_info;

/* *info is one allocation with its strings: free it with c10d_free. */
C10D_API c10d_status c10d_store_coord_info(c10d_store *s, c10d_coord_info **info);

/* The URL this handle is connected to (owned by the handle): for a
 * replicated coordinator, the list of its replicas' URLs as given. */
C10D_API const char *c10d_store_url(const c10d_store *s);

#ifdef __cplusplus
}
#endif
#endif
