/* The connection's state and the stream beneath it (conn_stream.c:
 * sending a frame and waiting for its reply, and saying why a round trip
 * failed; conn_reader.c: reading frames, decoding each reply and handing
 * it to the call waiting for it; conn_dial.c: dialling, and where to dial
 * next; conn_stream_internal.h says what they share), for conn.c above
 * it, which opens the connection, packs the calls and reads their
 * decoded replies: one c10di_conn_roundtrip per call. Only the files of
 * client/src/conn/ include this header; the rest of the library has
 * conn.h, where the connection is opaque.
 *
 * Calls go one way: conn.c uses the stream's files, which use nothing of
 * conn.c (they do not include conn.h). */
#ifndef C10DI_CONN_STREAM_H
#define C10DI_CONN_STREAM_H

#include "internal.h"

#include "busy_poll.h"
#include "c10d.pb-c.h"

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>

/* A reply's frame may be large (a multi_get, a trace); beyond this the
 * stream is taken to be corrupt, and no request is framed larger. */
#define C10DI_CONN_MAX_FRAME (1u << 30)

/* A call waiting for its reply, linked in c->waiters while it does; the
 * reader hands it the reply, decoded. */
typedef struct c10di_waiter {
    struct c10di_waiter *next;
    uint64_t id;
    int news;            /* only waiting for news: woken on news_cv */
    int spin;            /* as the reader, looks before sleeping (C10DI_WAIT_SPIN) */
    uint64_t sent_epoch; /* the connection it was last sent on; 0 = none */
    int64_t sent_ms;     /* when it was */
    /* once done: the reply, decoded by the reader, now the waiter's to
     * free; NULL: its protobuf did not decode */
    C10dpb__Reply *reply;
    int done;
} c10di_waiter;

/* A recorded request (common/recorded_ops.h) in flight: from its id's
 * choosing to its call's end (conn.c). On the caller's stack. */
typedef struct c10di_recorded {
    struct c10di_recorded *prev, *next;
    uint64_t id;
} c10di_recorded;

/* The most URLs a connection dials: a list's and the leaders its
 * followers name (a bit each in c10di_conn.tried). */
#define C10DI_CONN_URLS 32

typedef struct c10di_conn c10di_conn; /* as in conn.h */
struct c10di_conn {
    atomic_int refs;
    /* The URL as given and resolved (c10di_resolve_url), fixed at open: one
     * coordinator's, or a comma-separated list of a replicated one's
     * replicas (docs/replication.md). */
    char url_list[4096];
    char *token;
    char *tls_ca, *tls_cert, *tls_key; /* tls+tcp://: the files, kept to say why a handshake failed */
    uint64_t client_id;
    atomic_uint_least64_t next_request_id;
    atomic_int pipes; /* 1 while connected */
    /* the coordinator's limits, learnt at connect (c10di_limits) */
    uint64_t max_key_bytes, max_value_bytes, max_message_bytes;
    uint32_t max_multi_keys;

    /* Recorded requests in flight, oldest first: their ids are chosen
     * under recorded_mu, so the head is the lowest id whose reply this
     * client may still need (Request.acked_below). */
    pthread_mutex_t recorded_mu;
    c10di_recorded *recorded_head, *recorded_tail;

    pthread_mutex_t mu;  /* guards what follows, except where noted */
    pthread_cond_t cv;   /* any change: a reply, the connection, the reader */
    pthread_cond_t news_cv; /* the same, for callers only waiting for news
                             * (the watch): not woken by every reply */
    int64_t reader_left_ms; /* when a caller wanting an answer last read */
    /* The URLs dialled, one dialer each: the list's, then leaders a
     * follower named that the list did not (conn_dial.c). Written once,
     * before n_urls counts them (under mu), freed at fini: a URL read under
     * mu may be used after. Only a dialling thread adds one. */
    char *urls[C10DI_CONN_URLS];
    nng_stream_dialer *dialers[C10DI_CONN_URLS];
    int n_urls;
    int cur;           /* the URL connected, or dialled next */
    uint32_t tried;    /* URLs that failed us since a reply or a back-off (bits) */
    const char *err_url; /* where last_err happened */
    /* A replica answered C10D_ENOTLEADER (the stream was dropped): the
     * next dial goes where it said the leader is (hint, may be NULL). */
    int redirected;
    char *hint;
    char *leaderless_why; /* the last such replica's words (its detail) */
    int leaderless;    /* replicas said they do not lead, since the last reply */
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
    const char *hung_url; /* the URL of the last of them */
    int spoke_tls;       /* one of them sent a TLS record, or a probe found TLS there */
    int probed;          /* the server was asked once whether (or why not) it speaks TLS */
    char *tls_why;       /* tls+tcp://: why the handshakes fail, once found (c10dc_tls_diagnose) */
    /* What the server is when it is no coordinator (c10dc_identify_server,
     * asked once: after NOT_A_COORDINATOR_AFTER connections it broke, or a
     * connection silent for C10DI_CONN_SILENT_PROBE_MS), or NULL. */
    int identified;
    char *not_coord_why;
    int ever_answered; /* a coordinator answered on some stream: asked no more what it is */
    int64_t dialed_ms; /* when the stream now connected was dialled */
    /* A list's leader gone silent (conn_probe.c): when the stream last
     * carried a reply, when the last probe ended and when to probe
     * again, a probe under way, probes in a row that found it leading */
    int64_t heard_ms, probed_ms, next_probe_ms;
    int probing, quiet_probes;
    const char *timeout_from; /* the timeout's source, in words (c10di_conn_open) */
    c10di_waiter *waiters;
    /* the reader's (one thread at a time, handed over under mu; or, on
     * TLS, the armed receive's callback) */
    uint8_t *rbuf;
    size_t rcap, rlen;
    nng_aio *recv_aio, *dial_aio;
    /* The reader's recv_aio is submitted (nng_stream_recv returned) and
     * not yet waited for: only then may a caller asking for the reading
     * cancel it. A cancel racing the submission breaks NNG 1.10
     * (conn_reader.c). */
    int recv_armed;
    /* tcp://, ipc://: the stream's socket, which the reader sleeps on in
     * poll(2) (stream_fd.h), or -1; the retired stream's, released when
     * it is freed; the eventfd that wakes a polling reader asked for the
     * reading (-1: nobody polls) */
    int stream_fd, retired_fd, wake_fd;
    int polling; /* the reader is in poll(2) */
    c10dc_busy_poll bp; /* how long a reader waiting with C10DI_WAIT_SPIN looks first */
    int rx_async;          /* TLS: replies come by callback (conn_reader.c says why) */
    nng_aio *rx_aio;       /* TLS: the receive always armed while connected */
    nng_stream *rx_stream; /* the stream it reads */
    int rx_armed;          /* submitted, its callback not yet run */
    /* sending: one frame at a time */
    pthread_mutex_t send_mu;
    nng_aio *send_now_aio; /* tcp://, ipc://: no callback, completes where the send ends */
    nng_aio *send_aio;     /* tls+tcp:// */
    /* send_aio's completion, told by its callback: a TLS send is waited
     * for with a bound of our own (conn_stream.c, send_frame) */
    pthread_mutex_t sent_mu;
    pthread_cond_t sent_cv;
    int sent;
};

/* The locks, condition variables and NNG aios of a zeroed c (first, so
 * that c10di_conn_stream_fini may always run). C10D_ENOMEM when an aio
 * cannot be had. */
c10d_status c10di_conn_stream_init(c10di_conn *c);
/* A dialer for each URL of c->url_list, with its TLS configuration from
 * c->tls_* for tls+tcp:// (C10D_EINVAL: NNG refuses a URL; C10D_EAUTH:
 * the TLS files). */
c10d_status c10di_conn_stream_dialer(c10di_conn *c);
/* The URL connected to now, or dialled next: valid as long as c. */
const char *c10di_conn_current_url(c10di_conn *c);
/* Ends every operation on the stream, waits for NNG's callbacks and frees
 * what c10di_conn_stream_init and _dialer made (nobody else uses c any
 * more). */
void c10di_conn_stream_fini(c10di_conn *c);

/* How a round trip's caller waits (c10di_conn_roundtrip's `how`, 0 or): */
/* only for news (the watch): it gives the reading up to any caller that
 * wants an answer */
#define C10DI_WAIT_NEWS 1u
/* looking for its reply a while before it sleeps (common/busy_poll.h): a
 * SYNC check, whose verdict the collective waits for; its rank has
 * nothing else to run meanwhile */
#define C10DI_WAIT_SPIN 2u
/* a store write: a failure after it was sent says its outcome is unknown */
#define C10DI_WAIT_WRITE 4u

/* One round trip: sends frame (len bytes, request id) and waits for its
 * reply as `how` says, dialling again and resending it when the
 * connection breaks (not when resend is 0: then the call fails), for
 * server_wait_ms (how long the coordinator may hold it) plus timeout_ms.
 * On C10D_OK *reply holds the reply, decoded once by the reader (the
 * caller frees it with c10dpb__reply__free_unpacked); else c10d_errmsg()
 * says why, in the words of what the stream found (a TLS handshake
 * diagnosed, no coordinator, a timeout), naming the request `what`:
 * C10D_EPROTO for a reply that does not decode. */
c10d_status c10di_conn_roundtrip(c10di_conn *c, const char *what, uint8_t *frame, size_t len,
                                 uint64_t id, unsigned how, int resend, c10d_ms server_wait_ms,
                                 c10d_ms timeout_ms, C10dpb__Reply **reply);

#endif
