/* The connection's state and the stream beneath it (conn_stream.c:
 * dialling, sending a frame, reading frames and handing each reply to the
 * call waiting for it), for conn.c above it, which opens the connection
 * and carries the calls. Only those two files include this header; the
 * rest of the library has conn.h, where the connection is opaque.
 *
 * Calls go one way: conn.c uses conn_stream.c, which uses nothing of
 * conn.c (it does not include conn.h). */
#ifndef C10DI_CONN_STREAM_H
#define C10DI_CONN_STREAM_H

#include "internal.h"

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>

/* A reply's frame may be large (a multi_get, a trace); beyond this the
 * stream is taken to be corrupt, and no request is framed larger. */
#define C10DI_CONN_MAX_FRAME (1u << 30)

/* A call waiting for its reply, linked in c->waiters while it does
 * (conn.c); the reader hands it the reply. */
typedef struct c10di_waiter {
    struct c10di_waiter *next;
    uint64_t id;
    int news;            /* only waiting for news: woken on news_cv */
    uint64_t sent_epoch; /* the connection it was last sent on; 0 = none */
    uint8_t *reply;      /* the reply's protobuf, once it came */
    size_t reply_len;
    int done;
} c10di_waiter;

typedef struct c10di_conn c10di_conn; /* as in conn.h */
struct c10di_conn {
    atomic_int refs;
    char url[512];
    char *token;
    char *tls_ca, *tls_cert, *tls_key; /* tls+tcp://: the files, kept to say why a handshake failed */
    uint64_t client_id;
    atomic_uint_least64_t next_request_id;
    atomic_int pipes; /* 1 while connected */
    /* the coordinator's limits, learnt at connect (c10di_limits) */
    uint64_t max_key_bytes, max_value_bytes, max_message_bytes;
    uint32_t max_multi_keys;

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
     * cancel it. A cancel racing the submission breaks NNG 1.10
     * (conn_stream.c). */
    int recv_armed;
    int rx_async;          /* TLS: replies come by callback (conn_stream.c says why) */
    nng_aio *rx_aio;       /* TLS: the receive always armed while connected */
    nng_stream *rx_stream; /* the stream it reads */
    int rx_armed;          /* submitted, its callback not yet run */
    /* sending: one frame at a time */
    pthread_mutex_t send_mu;
    nng_aio *send_aio;
    /* send_aio's completion, told by its callback: a TLS send is waited
     * for with a bound of our own (conn_stream.c, c10di_conn_send) */
    pthread_mutex_t sent_mu;
    pthread_cond_t sent_cv;
    int sent;
};

/* The locks, condition variables and NNG aios of a zeroed c (first, so
 * that c10di_conn_stream_fini may always run). C10D_ENOMEM when an aio
 * cannot be had. */
c10d_status c10di_conn_stream_init(c10di_conn *c);
/* The dialer for c->url, with its TLS configuration from c->tls_* for a
 * tls+tcp:// URL (C10D_EINVAL: NNG refuses the URL; C10D_EAUTH: the TLS
 * files). */
c10d_status c10di_conn_stream_dialer(c10di_conn *c);
/* Ends every operation on the stream, waits for NNG's callbacks and frees
 * what c10di_conn_stream_init and _dialer made (nobody else uses c any
 * more). */
void c10di_conn_stream_fini(c10di_conn *c);

/* Waits on c->cv, or c->news_cv for a caller only waiting for news (mu
 * held), until the monotonic time until_ms. */
void c10di_conn_wait(c10di_conn *c, int news, int64_t until_ms);

/* The connection s failed with rv (mu held): close it, so that every
 * operation on it ends, and let the next caller dial again. */
void c10di_conn_broken(c10di_conn *c, nng_stream *s, int rv);
/* Dials once (mu held, returns with it held); on failure the next dial
 * waits for the back-off (c->next_dial_ms). */
void c10di_conn_dial(c10di_conn *c, int64_t deadline);
/* Says on stderr, now and then, that no coordinator answers (mu held). */
void c10di_conn_notice_unreachable(c10di_conn *c, int64_t now, int64_t deadline);

/* Sends one frame on s (mu not held; s counted in c->users). Returns 0 or
 * NNG's error; a partial frame leaves the stream unusable, which the
 * caller handles with c10di_conn_broken. handshake: a TLS connection
 * nothing was answered on yet, whose send is bounded more tightly. */
int c10di_conn_send(c10di_conn *c, nng_stream *s, uint8_t *buf, size_t len, int64_t deadline,
                    int handshake);
/* Reads as the connection's reader (not over TLS, where the armed receive
 * reads) until w's reply came, its deadline passed, someone asked for the
 * reading, or the connection broke (mu held; returns with it held).
 * parked: w only waits for news, and gives the reading up when asked. */
void c10di_conn_read(c10di_conn *c, c10di_waiter *w, int parked, int64_t deadline);
/* Asks a reader only waiting for news (c->reader_parked) to give the
 * reading up (mu held): it leaves c10di_conn_read soon and wakes c->cv. */
void c10di_conn_ask_reading(c10di_conn *c);

#endif
