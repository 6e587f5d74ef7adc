/* libc10dclient internals, shared between its modules (c10di_ prefix;
 * never exported). */
#ifndef C10DI_INTERNAL_H
#define C10DI_INTERNAL_H

#include "c10d.pb-c.h"

#include <c10d/c10d.h>
#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>
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

/* A timeout argument or option field under the API's one convention
 * (c10d/common.h): > 0 as it is, C10D_TIMEOUT_DEFAULT as def, C10D_NO_WAIT
 * as 0 where no_wait_ok (else refused), anything else refused; C10D_EINVAL
 * names fn and what. */
c10d_status c10di_timeout(const char *fn, const char *what, int timeout_ms, int def,
                          int no_wait_ok, int *out);

/* --- env.c --- */
/* Resolves a coordinator URL: url if given ("host:port" becomes
 * "tcp://host:port"), else C10D_COORD, else MASTER_ADDR + MASTER_PORT
 * (but not under torchrun, where that is torchrun's TCPStore: EINVAL
 * saying to set C10D_COORD), else tcp://127.0.0.1:29500; and checks it:
 * a TCP URL without a port from 1 to 65535 is EINVAL (common/url.h). The
 * one place the library reads a coordinator URL it is given. */
c10d_status c10di_resolve_url(const char *url, char *out, size_t outlen);
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

/* --- conn.c: one byte-stream connection to the coordinator, shared by a
 * store, its prefix views, and a world's threads (see conn.c) --- */
typedef struct c10di_waiter c10di_waiter;
typedef struct c10di_conn {
    atomic_int refs;
    char url[512];
    char *token;
    char *tls_ca, *tls_cert, *tls_key; /* tls+tcp://: the files, kept to say why a handshake failed */
    uint64_t client_id;
    atomic_uint_least64_t next_request_id;
    atomic_int pipes; /* 1 while connected */
    /* the coordinator's limits, learnt at connect */
    uint64_t max_key_bytes, max_value_bytes, max_message_bytes;
    uint32_t max_multi_keys;
    char server_version[32];

    pthread_mutex_t mu;  /* guards what follows, except where noted */
    pthread_cond_t cv;   /* any change: a reply, the connection, the reader */
    pthread_cond_t news_cv; /* the same, for callers only waiting for news
                             * (the watch): not woken by every reply */
    int64_t reader_left_ms; /* when a caller wanting an answer last read */
    nng_stream_dialer *dialer;
    nng_stream *stream;  /* NULL while not connected */
    nng_stream *retired; /* closed, freed once no thread uses it */
    uint64_t epoch;      /* bumped at every new connection */
    int users;           /* threads using stream outside mu */
    int dialing, reading, reader_parked, handoff, closing;
    int64_t next_dial_ms;
    int64_t down_since_ms, next_notice_ms; /* no coordinator reached: since when; say so next */
    int dial_failures;
    int last_err;        /* the last dial or I/O error (NNG's) */
    /* Connections that broke before the coordinator answered anything on
     * them (a TLS port dialled as tcp://, a TCPStore): counted with the
     * failed dials for the back-off, reset by a reply. */
    int answered;        /* the connection now has had a reply */
    int unanswered;      /* such connections in a row */
    int spoke_tls;       /* one of them sent a TLS record, or a probe found TLS there */
    int probed;          /* the server was asked once whether (or why not) it speaks TLS */
    char *tls_why;       /* tls+tcp://: why the handshakes fail, once found (c10dc_tls_diagnose) */
    c10di_waiter *waiters;
    /* the reader's (one thread at a time, handed over under mu; or, on
     * TLS, the armed receive's callback) */
    uint8_t *rbuf;
    size_t rcap, rlen;
    nng_aio *recv_aio, *dial_aio;
    /* The reader's recv_aio is submitted (nng_stream_recv returned) and
     * not yet waited for: only then may a caller asking for the reading
     * cancel it. A cancel racing the submission breaks NNG 1.10 (conn_call.c). */
    int recv_armed;
    int rx_async;          /* TLS: replies come by callback (conn.c says why) */
    nng_aio *rx_aio;       /* TLS: the receive always armed while connected */
    nng_stream *rx_stream; /* the stream it reads */
    int rx_armed;          /* submitted, its callback not yet run */
    /* sending: one frame at a time */
    pthread_mutex_t send_mu;
    nng_aio *send_aio;
    /* send_aio's completion, told by its callback: a TLS send is waited
     * for with a bound of our own (conn_call.c, send_frame) */
    pthread_mutex_t sent_mu;
    pthread_cond_t sent_cv;
    int sent;
} c10di_conn;

/* The files of a tls+tcp:// connection; NULL: C10D_TLS_CA, C10D_TLS_CERT,
 * C10D_TLS_KEY from the environment. */
typedef struct c10di_tls_files {
    const char *ca;   /* verifies the coordinator's certificate */
    const char *cert; /* this client's certificate and key, with cert (a coordinator */
    const char *key;  /* started with --tls-ca requires one) */
} c10di_tls_files;

/* Connects (tls: NULL = all from the environment) and says hello. */
c10d_status c10di_conn_open(c10di_conn **out, const char *url, const char *token,
                            const c10di_tls_files *tls, int connect_timeout_ms);
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
/* c10di_call for a notice whose answer changes nothing (a report, a
 * leave): the reply is dropped; the status says whether it arrived. */
c10d_status c10di_call_drop(c10di_conn *c, C10dpb__Request *req, int server_wait_ms,
                            int timeout_ms);
/* The same, but a request the connection broke under is not sent again:
 * the call fails with C10D_EUNAVAIL (for requests that are better packed
 * afresh, like the watch, which says where the rank is now). */
c10d_status c10di_call_once(c10di_conn *c, C10dpb__Request *req, int server_wait_ms,
                            int timeout_ms, C10dpb__Reply **rep);

/* --- store.c --- */
c10di_conn *c10di_store_conn(c10d_store *s);
/* The store's prefix ("" or ending in '/'), which its keys start with. */
const char *c10di_store_prefix(const c10d_store *s);
/* c10di_call over the store's connection with the store's timeout (for
 * store_admin.c's calls; on C10D_OK free *rep). */
c10d_status c10di_store_call(c10d_store *s, C10dpb__Request *req, int server_wait_ms,
                             C10dpb__Reply **rep);
/* A store handle over an existing connection (taking a reference), whose
 * keys all start with prefix ("" or ending in '/'). */
c10d_status c10di_store_over(c10d_store **out, c10di_conn *conn, const char *prefix,
                             int timeout_ms);
/* A store over conn whose keys all start with the run's prefix
 * (jobs/<job>/<generation>/, common/run_scope.h) followed by the tail
 * fmt makes ("" or ending in '/'): the run's store, or a part of it that
 * the library keeps its own keys in. C10D_EINVAL, saying which, when the
 * prefix or the tail does not fit: a key silently written at the store's
 * root would outlive the run and be seen by the next one. */
c10d_status c10di_run_store_over(c10d_store **out, c10di_conn *conn, const char *job,
                                 uint64_t generation, int timeout_ms, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

#endif
