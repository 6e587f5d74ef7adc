/* The connection to the coordinator, as the rest of the library sees it:
 * one per process, shared by a store, its prefix views and a world's
 * threads (user calls, the watch, the verification reporter), each holding
 * a reference. It dials again by itself when it breaks and resends the
 * calls in flight with their request ids, so a coordinator that starts
 * late or restarts is found again.
 *
 * Opaque: its state and its lock belong to the module (conn.c: opening,
 * the calls; conn_stream.c and conn_stream.h: the state and the stream
 * beneath). The front end and the store use what is declared here;
 * backends never include this header (they reach the coordinator through
 * their context's hooks and store, backend.h). */
#ifndef C10DI_CONN_H
#define C10DI_CONN_H

#include "c10d.pb-c.h"
#include "c10d_time.h"

#include <c10d/errors.h>
#include <stdint.h>

typedef struct c10di_conn c10di_conn;

/* The files of a tls+tcp:// connection; NULL: C10D_TLS_CA, C10D_TLS_CERT,
 * C10D_TLS_KEY from the environment. */
typedef struct c10di_tls_files {
    const char *ca;   /* verifies the coordinator's certificate */
    const char *cert; /* this client's certificate and key, with cert (a coordinator */
    const char *key;  /* started with --tls-ca requires one) */
} c10di_tls_files;

/* Resolves url (c10di_resolve_url: NULL or "" from the environment; a
 * comma-separated list names a replicated coordinator's replicas, and the
 * connection goes to the one that leads, docs/replication.md),
 * connects (tls: NULL = all from the environment) and says hello, which
 * tells the coordinator's limits; gives up after connect_timeout_ms of not
 * reaching it. On C10D_OK *out holds one reference; else c10d_errmsg()
 * says why (C10D_EINVAL: a bad URL; C10D_EAUTH: TLS; C10D_EUNAVAIL: no
 * coordinator answered). timeout_from names where the calls' timeout
 * came from (c10di_timeout_from), for the notice of a coordinator not
 * reached: a static string. */
c10d_status c10di_conn_open(c10di_conn **out, const char *url, const char *token,
                            const c10di_tls_files *tls, c10d_ms connect_timeout_ms,
                            const char *timeout_from);
/* Takes one more reference; c10di_conn_unref lets one go (NULL is
 * accepted), and the last closes the connection and frees it. */
void c10di_conn_ref(c10di_conn *c);
void c10di_conn_unref(c10di_conn *c);

/* The coordinator's URL as resolved ("tcp://host:port"), fixed at open:
 * valid as long as the reference. For a replicated coordinator, the list
 * of its replicas' URLs, joined by commas (the one served by now changes
 * with the leader). */
const char *c10di_conn_url(const c10di_conn *c);

/* The coordinator's limits, told by its hello (0: none), fixed at open. */
typedef struct c10di_limits {
    uint64_t max_key_bytes;     /* a key, prefix included */
    uint64_t max_value_bytes;   /* a value */
    uint64_t max_message_bytes; /* a whole request (c10di_call refuses a larger one) */
    uint32_t max_multi_keys;    /* keys in one multi_get or multi_set */
} c10di_limits;
c10di_limits c10di_conn_limits(const c10di_conn *c);

/* Which connection to the coordinator this is: a number that changes each
 * time it is dialled again. A caller that told the coordinator something
 * it keeps only in memory (a joined rank shadowing in-band) tells it again
 * when the number changed, since the coordinator may have restarted. */
uint64_t c10di_conn_epoch(c10di_conn *c);

/* Sends req (request_id, identity and token are filled in) and waits for
 * the reply. server_wait_ms is how long the coordinator itself may hold the
 * request (a get's wait); the call gives up after that plus timeout_ms of
 * not reaching the coordinator. Resends after a lost connection with the
 * same request id. On C10D_OK *rep is the reply (free with
 * c10dpb__reply__free_unpacked); on error c10d_errmsg() says why. */
c10d_status c10di_call(c10di_conn *c, C10dpb__Request *req, c10d_ms server_wait_ms, c10d_ms timeout_ms,
                       C10dpb__Reply **rep);
/* c10di_call for a notice whose answer changes nothing (a report, a
 * leave): the reply is dropped; the status says whether it arrived. */
c10d_status c10di_call_drop(c10di_conn *c, C10dpb__Request *req, c10d_ms server_wait_ms,
                            c10d_ms timeout_ms);
/* The same, but a request the connection broke under is not sent again:
 * the call fails with C10D_EUNAVAIL (for requests that are better packed
 * afresh, like the watch, which says where the rank is now). */
c10d_status c10di_call_once(c10di_conn *c, C10dpb__Request *req, c10d_ms server_wait_ms,
                            c10d_ms timeout_ms, C10dpb__Reply **rep);

#endif
