/* What the coordinator's network side shares among its files, and no
 * other module sees (they see listener.h):
 *
 *   listener.c    the NNG stream listener: accepting, start and close
 *   connection.c  a connection's life (references, closing, the reaper
 *                 that frees it) and its reply queue
 *   framing.c     a connection's read loop, our own dialect's codec, and
 *                 the hand-off of a decoded request to the engine
 *   readiness.c   the thread that tcp:// and ipc:// connections' read
 *                 loops wait on between requests (woken by the kernel)
 *   tcpstore.c    TCPStore's dialect's codec
 * and beneath them, knowing no connection, each dialect's wire
 * (c10d_wire.h, tcpstore_wire.h) and decode_budget.h.
 *
 * Layered, each calling only down by name: listener.c accepts and gives
 * each connection its dialect's codec (c10ds_codec: ours in framing.c,
 * TCPStore's in tcpstore.c) and starts the readiness loop with the read
 * loop's callbacks (c10ds_ready_ops); framing.c's read loop calls the
 * codec's parse through the table, the reply queue (connection.c) its
 * reply and close; the codecs call the read loop's services (framing.c)
 * and the reply queue; readiness.c calls back only what it was started
 * with; connection.c goes on with a paused read loop through the hook
 * listener.c hands it (c10ds_conn.read_resume). Everything runs in
 * NNG's aio callbacks or on the readiness loop's thread: no thread per
 * connection, and the engine never blocks on a client. */
#ifndef C10DS_LISTENER_INTERNAL_H
#define C10DS_LISTENER_INTERNAL_H

#include "net/listener.h"

#include "c10d.pb-c.h"
#include "engine/request.h"

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A read buffer's size between large requests. */
#define C10DS_RBUF_MIN (64u * 1024)
/* A connection with more unsent replies than this is not read from until
 * they are down to half: a client that does not read its replies cannot
 * make the coordinator produce more (else its replies grow without bound
 * in the coordinator's memory, a GB for a handful of clients). A
 * client that reads keeps well under it; one reply larger is sent whole. */
#define C10DS_READ_PAUSE_BYTES (1u << 20)
/* Requests of one connection handed to the engine and not yet done with
 * (answered, or parked and then answered): past it the connection is not
 * read from until they are down to half. Unread replies alone do not
 * bound a client that sends faster than the engine answers: its requests
 * pile up in the engine's queue before any reply exists. It also bounds
 * how long one client's backlog delays others' requests, which queue
 * behind it (8 x 1024 gets of 1 MiB would hold a normal get for seconds).
 * A rank has a handful in flight (its watch, a SYNC check, a wait per
 * thread). */
#define C10DS_CONN_INFLIGHT_MAX 128
/* Replies this small always go out, even over --max-reply-bytes: an
 * error that says why a large one did not is one of them. */
#define C10DS_SMALL_REPLY 4096u

typedef struct c10ds_conn c10ds_conn;

/* A wire dialect: how a connection's bytes become the engine's requests
 * and its replies become bytes. Each connection gets its listener's
 * (listener.c); the read loop (framing.c) and the reply queue
 * (connection.c) call it only through this table, so a dialect is one
 * file that fills one in: ours (framing.c), TCPStore's (tcpstore.c). */
typedef struct c10ds_codec {
    const char *name;
    /* A new connection's state (NULL: out of memory), freed by close with
     * the connection; both NULL for a codec that keeps none. */
    void *(*open)(void);
    void (*close)(void *state);
    /* The whole requests in c's read buffer handed on. -1: close c (said
     * why); 1: paused for unsent replies; 2: its turn on the readiness
     * loop is over; 0: wants more bytes. */
    int (*parse)(c10ds_conn *c);
    /* The engine's reply to one of c's requests, queued as bytes. */
    void (*reply)(c10ds_conn *c, uint64_t request_id, const void *body, size_t len);
} c10ds_codec;

struct c10ds_conn {
    struct c10ds_conn *next;  /* in the listener's list (live or dead) */
    c10ds_listener *l;
    nng_stream *s;
    uint32_t id;              /* what requests carry as their pipe */
    atomic_int refs;          /* the read loop, a send in flight, each request */
    nng_mtx *mu;              /* guards what follows */
    int closed;
    int read_paused;          /* the read loop waits for unsent replies to go down */
    uint8_t *out, *fly;       /* queued frames; the frames being written */
    size_t out_len, out_cap, fly_len, fly_cap, fly_done;
    size_t unsent;            /* out_len + what of fly is unwritten, as counted in l->unsent */
    /* the read loop's own (only its callback touches these) */
    nng_aio *recv_aio, *send_aio;
    /* tcp://, ipc://: replies written on the thread that queues them
     * (connection.c); NULL on tls+tcp://, whose writes go through NNG's
     * TLS engine and end on its threads */
    nng_aio *now_aio;
    nng_aio *resume_aio; /* resumes a paused read loop from the engine's thread (connection.c) */
    /* tcp://, ipc://: the stream's socket (common/stream_fd.h), which the
     * readiness loop waits on between requests, and the aio with no
     * callback it reads with; -1 and NULL: the read loop waits through
     * NNG (recv_aio's callback) */
    int fd;
    nng_aio *ready_aio;
    int in_epoll; /* fd was added to the readiness loop's set (mu) */
    /* requests handed on in its turn on the readiness loop; the next
     * waiting for a turn (the loop's pending list: its thread only) */
    int turn_requests;
    struct c10ds_conn *next_turn;
    /* Goes on with c's paused read loop (framing.c's c10ds_conn_read_resume,
     * set by listener.c). connection.c decides when: its sends and the
     * engine's answers are what bring a backlog down. framing.c decides
     * what: the frames left, then the next receive. The read loop uses the
     * connection (closing it, queueing error replies, counting requests);
     * were the connection to call the read loop by name, the two files
     * would call each other. So the connection is handed its reader, as
     * its aios are handed their callbacks. */
    void (*read_resume)(struct c10ds_conn *c);
    uint8_t *rbuf;
    size_t rlen, rcap;
    size_t held; /* bytes of an unfinished request counted in l->held */
    nng_time frame_due; /* when the unfinished request must be whole (--frame-timeout) */
    int framed;         /* a whole frame came: a client of ours, past any TLS handshake */
    /* The client's address ("127.0.0.1:41234", an ipc path, "?"), read when
     * it was accepted: once the client hangs up it can no longer be asked,
     * and a failed TLS handshake is logged after the client gave up. */
    char peer[128];
    int inflight;       /* requests with the engine (mu) */
    /* Of those, the ones its codec waits to see answered before it reads
     * more (TCPStore's queries, parked WAITs aside: tcpstore.c), and how
     * many it may have (0: no such limit) (mu). Counted before the work
     * is done, where unsent replies are counted only after: a client
     * that pipelines gets of a large value and never reads made the
     * engine read and pack each of them. */
    int unanswered, unanswered_max;
    c10ds_budget parked; /* its parked requests' bytes (engine/request.h) */
    const c10ds_codec *codec; /* its listener's dialect */
    void *codec_state;        /* the codec's own (open), or NULL */
};

struct c10ds_listener {
    char *url;
    c10ds_dialect dialect;
    nng_stream_listener *lst;
    c10ds_engine *engine;
    const c10ds_config *cfg;
    nng_aio *accept_aio;
    /* After an accept that failed for want of file descriptors or memory,
     * the pause before the next (only the accept callbacks touch these:
     * one accept or one pause is in flight at a time). */
    nng_aio *backoff_aio;
    c10d_ms backoff_ms;
    unsigned accept_failures; /* in a row */
    nng_thread *reaper;
    nng_mtx *mu;
    nng_cv *cv;        /* on mu: a connection died, or closing */
    c10ds_conn *live, *dead; /* guarded by mu */
    int closing, reaper_stop, nlive;
    atomic_int sends_in_flight;
    /* Bytes of unfinished requests, all connections together: a client
     * (or forty) holding half-sent 16 MiB frames must not exhaust the
     * coordinator's memory (--max-pending-bytes). */
    atomic_size_t held;
    /* Unsent reply bytes, all connections together (--max-reply-bytes). */
    atomic_size_t unsent;
    struct c10ds_readiness *ready; /* NULL on tls+tcp://, or if it could not start */
    struct c10ds_ts_runs *ts_runs; /* TCPStore's port: its clients' runs (tcpstore_runs.h) */
    /* TCPStore's port: its connections' parked WAITs, together
     * (--tcpstore-max-parked-bytes); unused on ours. */
    c10ds_budget parked;
    /* TCPStore's port: its connections' queries with the engine
     * (c10ds_conn.unanswered), together (--tcpstore-max-port-inflight):
     * one connection's cap alone lets thirty-two flooders queue
     * thirty-two 16 MiB gets ahead of everyone else's requests. */
    atomic_int unanswered;
    atomic_int port_wanted; /* a connection found the port busy (connection.c) */
    atomic_int resumes_off; /* closing: a slot coming free resumes nobody */
    c10ds_quota quota;      /* TCPStore's port: what its keys hold (--tcpstore-quota-bytes) */
};

/* --- connection.c --- */

/* The listener's reaper thread (arg: the listener): frees the connections
 * whose last reference went, until reaper_stop. */
void c10ds_conn_reaper(void *arg);
/* Drops a reference; the last one hands c to the reaper. */
void c10ds_conn_unref(c10ds_conn *c);
/* Closes c (once; why, if any, is logged): its I/O ends with errors, its
 * ranks are declared dead by the engine, its queued replies are dropped. */
void c10ds_conn_close(c10ds_conn *c, const char *why);
/* Queues one reply frame on c (a TCPStore client's: the reply as TCPStore
 * says it, tcpstore.c); a client over --max-connection-buffer of unread
 * replies is closed instead. */
void c10ds_conn_queue(c10ds_conn *c, uint64_t request_id, const void *body, size_t len);
/* Queues bytes as they are, no frame (TCPStore's replies). */
void c10ds_conn_queue_raw(c10ds_conn *c, const void *bytes, size_t len);
/* send_aio's callback. */
void c10ds_conn_send_cb(void *arg);
/* Whether c may not be read from for its unsent replies: over
 * C10DS_READ_PAUSE_BYTES, or any while all connections' are within
 * --max-message-bytes of --max-reply-bytes; or for its requests with the
 * engine: over C10DS_CONN_INFLIGHT_MAX (c->mu held). */
int c10ds_conn_backlogged_locked(const c10ds_conn *c);
/* A request of c's goes to the engine, or the engine is done with one;
 * the last may resume c's read loop (on an NNG thread, never the
 * engine's). */
void c10ds_conn_request_sent(c10ds_conn *c);
void c10ds_conn_request_done(c10ds_conn *c);
/* One of c's queries its codec waits on went to the engine (+1) or was
 * answered (-1); the last may resume c's read loop. */
void c10ds_conn_unanswered(c10ds_conn *c, int delta);
/* resume_aio's callback. */
void c10ds_conn_resume_cb(void *arg);
/* Whether c is backlogged; if so, its read loop is marked paused (the send
 * callback resumes it once c's replies are down to half, or all sent). */
int c10ds_conn_pause_if_backlogged(c10ds_conn *c);

/* --- framing.c --- */

/* Arms the next receive (with the --frame-timeout of a request begun). */
void c10ds_conn_recv_start(c10ds_conn *c);
/* recv_aio's callback: frames cut, decoded, handed to the engine. */
void c10ds_conn_recv_cb(void *arg);
/* Goes on with a read loop that paused for unsent replies: the frames
 * already read, then the next receive. Carries the read loop's reference.
 * connection.c calls it only through c->read_resume. */
void c10ds_conn_read_resume(c10ds_conn *c);
/* Hands a decoded request of c's to the engine (owning pb and sink_arg
 * from here on, whatever it returns): answered through sink (NULL: our
 * own protocol), asked for no token if vouched. -1: out of memory
 * (recorded: failure.h), nothing handed on. */
int c10ds_conn_hand_on(c10ds_conn *c, C10dpb__Request *pb, const c10ds_reply_sink *sink,
                       void *sink_arg, int vouched);
/* Whether c has more unsent replies than it may have and still be read. */
int c10ds_conn_backlogged(c10ds_conn *c);
/* Whether c was closed. The parse loops stop there: requests read after
 * the close (a reply's write found the client gone; the engine already
 * dropped the connection's parked requests) would park for nobody and
 * hold the connection until their deadlines. */
int c10ds_conn_closed(c10ds_conn *c);
/* The read buffer: drops its first off bytes (parsed); grows it towards a
 * request of whole bytes, doubling (-1: out of memory). */
void c10ds_conn_consumed(c10ds_conn *c, size_t off);
int c10ds_conn_room_for(c10ds_conn *c, size_t whole);

/* What a receive of c's read loop brought (rv: NNG's result, n bytes):
 * the frames handed on, or c closed saying why. Carries the read loop's
 * reference. */
void c10ds_conn_recv_done(c10ds_conn *c, int rv, size_t n);

/* Our own dialect: length-prefixed frames of protobuf (protocol.md). */
extern const c10ds_codec c10ds_codec_c10d;

/* --- readiness.c: a poller that calls back what registered with it --- */

/* What the readiness loop calls for a connection, on its own thread. */
typedef struct c10ds_ready_ops {
    /* c's socket is readable: its next request read on this thread, and
     * its read loop gone on with (carries the read loop's reference) */
    void (*readable)(c10ds_conn *c);
    /* c's deferred turn came (c10ds_readiness_defer): its read loop goes
     * on with the frames left in its buffer */
    void (*turn)(c10ds_conn *c);
} c10ds_ready_ops;
/* framing.c's: the read loop waits on the readiness loop between requests. */
extern const c10ds_ready_ops c10ds_framing_ready_ops;

typedef struct c10ds_readiness c10ds_readiness;
/* The loop's thread for l's connections, calling ops; NULL if it cannot be
 * had (they are then read through NNG's callbacks). */
c10ds_readiness *c10ds_readiness_start(c10ds_listener *l, const c10ds_ready_ops *ops);
/* Stops and joins it; no connection may be waiting on it any more. */
void c10ds_readiness_stop(c10ds_readiness *r);
/* c's read loop waits for its next request on the readiness loop, which
 * reads it and goes on with the loop (c->mu held, c not closed; carries
 * the read loop's reference). -1: it cannot (wait through NNG). */
int c10ds_readiness_arm(c10ds_conn *c);
/* c is being freed: its socket leaves the loop's set. */
void c10ds_readiness_forget(c10ds_conn *c);
/* Whether c has had its turn: on the readiness loop's thread, a
 * connection hands on at most C10DS_TURN_REQUESTS requests a round (the
 * parse loops stop there and return 2). */
int c10ds_readiness_turn_over(const c10ds_conn *c);
/* c's read loop goes on in the loop's next round, with the frames left in
 * its buffer (the loop's thread only; carries the read loop's reference). */
void c10ds_readiness_defer(c10ds_conn *c);

/* --- tcpstore.c: PyTorch TCPStore's protocol (--tcpstore-listen) --- */

/* Its state per connection: the queries with the engine, in order; its
 * replies go as TCPStore says them, in the order the queries came. */
extern const c10ds_codec c10ds_codec_tcpstore;

/* --- connection.c, for the codecs --- */

/* A reply in our own framing (a frame header, then body). */
void c10ds_conn_queue_framed(c10ds_conn *c, uint64_t request_id, const void *body, size_t len);

#endif
