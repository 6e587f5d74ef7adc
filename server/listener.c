/* The coordinator's network side: an NNG stream listener (tcp://, ipc://,
 * tls+tcp://) and, for each client connection, a loop that reads frames
 * (common/frame.h), decodes them and hands them to the engine, and a queue
 * of reply frames written back in the order the engine answers them.
 *
 * Everything runs in NNG's aio callbacks: no thread per connection, and
 * the engine never blocks on a client. A connection is freed once it is
 * closed, none of its I/O is in flight and the engine holds none of its
 * requests; the freeing itself is done by a reaper callback, never inside
 * a callback of the connection's own aios. */
#include "listener.h"

#include "frame.h"
#include "log.h"
#include "tls.h"

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RBUF_MIN (64u * 1024)

typedef struct conn {
    struct conn *next;        /* in the listener's list (live or dead) */
    c10ds_listener *l;
    nng_stream *s;
    uint32_t id;              /* what requests carry as their pipe */
    atomic_int refs;          /* the read loop, a send in flight, each request */
    nng_mtx *mu;              /* guards what follows */
    int closed;
    uint8_t *out, *fly;       /* queued frames; the frames being written */
    size_t out_len, out_cap, fly_len, fly_cap, fly_done;
    /* the read loop's own (only its callback touches these) */
    nng_aio *recv_aio, *send_aio;
    uint8_t *rbuf;
    size_t rlen, rcap;
    size_t held; /* bytes of an unfinished request counted in l->held */
    nng_time frame_due; /* when the unfinished request must be whole (--frame-timeout) */
} conn;

struct c10ds_listener {
    nng_stream_listener *lst;
    c10ds_engine *engine;
    const c10ds_config *cfg;
    nng_aio *accept_aio;
    nng_thread *reaper;
    nng_mtx *mu;
    nng_cv *cv;        /* on mu: a connection died, or closing */
    conn *live, *dead; /* guarded by mu */
    int closing, reaper_stop, nlive;
    atomic_uint next_id;
    atomic_int sends_in_flight;
    /* Bytes of unfinished requests, all connections together: a client
     * (or forty) holding half-sent 16 MiB frames must not exhaust the
     * coordinator's memory (--max-pending-bytes). */
    atomic_size_t held;
};

static void conn_recv_cb(void *arg);
static void conn_send_cb(void *arg);

/* Frees dead connections on its own thread: a connection's last reference
 * may go inside one of its aio callbacks, where its aios cannot be freed. */
static void free_conns(conn *dead)
{
    for (conn *c = dead, *n; c; c = n) {
        n = c->next;
        nng_aio_free(c->recv_aio); /* waits for a callback still returning */
        atomic_fetch_sub(&c->l->held, c->held);
        nng_aio_free(c->send_aio);
        nng_stream_free(c->s);
        nng_mtx_free(c->mu);
        free(c->rbuf);
        free(c->out);
        free(c->fly);
        free(c);
    }
}

static void reaper_main(void *arg)
{
    c10ds_listener *l = arg;
    nng_mtx_lock(l->mu);
    for (;;) {
        while (!l->dead && !l->reaper_stop)
            nng_cv_wait(l->cv);
        conn *dead = l->dead;
        l->dead = NULL;
        int stop = l->reaper_stop;
        nng_mtx_unlock(l->mu);
        free_conns(dead);
        nng_mtx_lock(l->mu);
        if (stop && !l->dead)
            break;
    }
    nng_mtx_unlock(l->mu);
}

static void conn_unref(conn *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    c10ds_listener *l = c->l;
    nng_mtx_lock(l->mu);
    for (conn **pp = &l->live; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            l->nlive--;
            break;
        }
    c->next = l->dead;
    l->dead = c;
    nng_cv_wake(l->cv);
    nng_mtx_unlock(l->mu);
}

/* Closes c (once): its I/O ends with errors, its ranks are declared dead
 * by the engine, its queued replies are dropped. */
static void conn_close(conn *c, const char *why)
{
    nng_mtx_lock(c->mu);
    int was = c->closed;
    c->closed = 1;
    c->out_len = 0;
    nng_mtx_unlock(c->mu);
    if (was)
        return;
    if (why)
        c10ds_warn("closing connection %u: %s", c->id, why);
    nng_stream_close(c->s);
    /* Ranks that joined on this connection are dead: tell the engine (it
     * owns the membership; never block an NNG callback). */
    c10ds_request *r = c10ds_request_new(NULL, NULL);
    if (r) {
        r->event = C10DS_EV_PIPE_CLOSED;
        r->pipe = c->id;
        if (c10ds_engine_submit(c->l->engine, r) != 0)
            c10ds_request_free(r);
    }
    atomic_fetch_sub(&c->l->engine->clients, 1);
}

/* Starts writing what is queued, if nothing is being written (c->mu held). */
static void start_send_locked(conn *c)
{
    if (c->fly_len || !c->out_len || c->closed)
        return;
    uint8_t *b = c->fly;
    size_t cap = c->fly_cap;
    c->fly = c->out;
    c->fly_cap = c->out_cap;
    c->fly_len = c->out_len;
    c->fly_done = 0;
    c->out = b;
    c->out_cap = cap;
    c->out_len = 0;
    atomic_fetch_add(&c->refs, 1);
    atomic_fetch_add(&c->l->sends_in_flight, 1);
    nng_iov iov = {c->fly, c->fly_len};
    nng_aio_set_iov(c->send_aio, 1, &iov);
    nng_stream_send(c->s, c->send_aio);
}

static void conn_send_cb(void *arg)
{
    conn *c = arg;
    int rv = nng_aio_result(c->send_aio);
    nng_mtx_lock(c->mu);
    if (rv == 0) {
        c->fly_done += nng_aio_count(c->send_aio);
        if (c->fly_done < c->fly_len && !c->closed) {
            /* A partial write: go on with the rest of the same buffer. */
            nng_iov iov = {c->fly + c->fly_done, c->fly_len - c->fly_done};
            nng_aio_set_iov(c->send_aio, 1, &iov);
            nng_stream_send(c->s, c->send_aio);
            nng_mtx_unlock(c->mu);
            return;
        }
    }
    c->fly_len = 0;
    if (rv == 0)
        start_send_locked(c); /* takes its own reference */
    nng_mtx_unlock(c->mu);
    atomic_fetch_sub(&c->l->sends_in_flight, 1);
    if (rv != 0)
        conn_close(c, NULL); /* the client went away */
    conn_unref(c);
}

/* Queues one reply frame on c. */
static void queue_frame(conn *c, uint64_t request_id, const void *body, size_t len)
{
    nng_mtx_lock(c->mu);
    if (c->closed) {
        nng_mtx_unlock(c->mu);
        return;
    }
    size_t need = c->out_len + C10DC_FRAME_HDR + len;
    if (need > c->l->cfg->max_conn_buffer) {
        nng_mtx_unlock(c->mu);
        char why[160];
        snprintf(why, sizeof why, "it does not read its replies (%zu bytes queued, over "
                 "--max-connection-buffer)", need);
        conn_close(c, why);
        return;
    }
    if (need > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap < need)
            cap *= 2;
        uint8_t *nb = realloc(c->out, cap);
        if (!nb) {
            nng_mtx_unlock(c->mu);
            conn_close(c, "out of memory for its replies");
            return;
        }
        c->out = nb;
        c->out_cap = cap;
    }
    c10dc_frame_header(c->out + c->out_len, request_id, len);
    if (len)
        memcpy(c->out + c->out_len + C10DC_FRAME_HDR, body, len);
    c->out_len = need;
    start_send_locked(c);
    nng_mtx_unlock(c->mu);
}

void c10ds_listener_send(void *arg, void *slot, uint64_t request_id, const void *reply,
                         size_t len)
{
    (void)arg;
    if (slot)
        queue_frame(slot, request_id, reply, len);
}

/* The engine is done with a request of c's. */
static void release_slot(void *slot)
{
    conn_unref(slot);
}

static void reply_error(conn *c, uint64_t request_id, c10d_status st, const char *detail)
{
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.request_id = request_id;
    rep.status = st;
    rep.detail = (char *)detail;
    uint8_t buf[1024];
    size_t n = c10dpb__reply__get_packed_size(&rep);
    if (n <= sizeof buf) {
        c10dpb__reply__pack(&rep, buf);
        queue_frame(c, request_id, buf, n);
    }
}

static void on_frame(conn *c, uint64_t frame_id, const uint8_t *body, size_t len)
{
    c10ds_listener *l = c->l;
    C10dpb__Request *pb = c10dpb__request__unpack(NULL, len, body);
    if (!pb) {
        c10ds_warn("undecodable request of %zu bytes on connection %u; answered with a "
                   "protocol error", len, c->id);
        reply_error(c, frame_id, C10D_EPROTO, "the coordinator could not decode this request "
                    "(not a c10d protocol message, or truncated)");
        return;
    }
    if (pb->op_case == C10DPB__REQUEST__OP__NOT_SET) {
        c10dpb__request__free_unpacked(pb, NULL);
        reply_error(c, frame_id, C10D_EPROTO, "request names no operation (is the client newer "
                    "than the coordinator?)");
        return;
    }
    /* The protobuf's id is the one the engine deduplicates by; the
     * frame's is the one the client routes by: they must agree. */
    pb->request_id = frame_id;
    c10ds_request *r = c10ds_request_new(pb, c);
    if (!r) {
        reply_error(c, frame_id, C10D_ENOMEM, "coordinator out of memory");
        c10dpb__request__free_unpacked(pb, NULL);
        return;
    }
    r->pipe = c->id;
    r->release = release_slot;
    atomic_fetch_add(&c->refs, 1);
    if (c10ds_engine_submit(l->engine, r) != 0) {
        /* Shutting down: leave it unanswered; the client resends it to the
         * next coordinator. */
        c10ds_request_free(r);
    }
}

/* Decodes the complete frames in rbuf. Returns -1 when the client sent
 * something that is not a frame, or one over the limit. */
static int parse(conn *c)
{
    size_t off = 0;
    uint64_t max = c->l->cfg->max_message_bytes;
    while (c->rlen - off >= C10DC_FRAME_HDR) {
        uint32_t n = c10dc_get_u32(c->rbuf + off);
        if (n < 8 || n - 8 > max) {
            c10ds_warn("connection %u sent a frame of %u bytes (limit %llu, "
                       "--max-message-bytes): closing it", c->id, n, (unsigned long long)max);
            return -1;
        }
        if (c->rlen - off < 4 + (size_t)n)
            break;
        on_frame(c, c10dc_get_u64(c->rbuf + off + 4), c->rbuf + off + C10DC_FRAME_HDR, n - 8);
        off += 4 + (size_t)n;
    }
    if (off) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    /* A large request done: give its buffer back (forty connections that
     * each sent one 16 MiB set must not keep 640 MiB). */
    if (c->rlen < RBUF_MIN && c->rcap > RBUF_MIN) {
        uint8_t *nb = realloc(c->rbuf, RBUF_MIN);
        if (nb) {
            c->rbuf = nb;
            c->rcap = RBUF_MIN;
        }
    }
    /* Room for the next frame, whole. */
    size_t want = RBUF_MIN;
    if (c->rlen >= 4 && 4 + (size_t)c10dc_get_u32(c->rbuf) > want)
        want = 4 + (size_t)c10dc_get_u32(c->rbuf);
    if (want > c->rcap) {
        uint8_t *nb = realloc(c->rbuf, want);
        if (!nb) {
            c10ds_warn("out of memory for a %zu-byte request on connection %u", want, c->id);
            return -1;
        }
        c->rbuf = nb;
        c->rcap = want;
    }
    return 0;
}

/* Counts what c holds of an unfinished request (after parse) in the
 * listener's total. Returns -1 when that total is over the limit and c
 * holds part of it. */
static int account(conn *c)
{
    size_t now = c->rlen, before = c->held;
    c->held = now;
    size_t total = now >= before ? atomic_fetch_add(&c->l->held, now - before) + (now - before)
                                 : atomic_fetch_sub(&c->l->held, before - now) - (before - now);
    if (now && total > c->l->cfg->max_pending_bytes) {
        c10ds_warn("closing connection %u: it holds %zu bytes of an unfinished request, and "
                   "unfinished requests come to %zu bytes (--max-pending-bytes %llu)", c->id,
                   now, total, (unsigned long long)c->l->cfg->max_pending_bytes);
        return -1;
    }
    return 0;
}

/* A request begun must be whole within --frame-timeout of its first
 * bytes (one deadline a request, not a receive: a byte every 29 s would
 * hold it open for ever). Between requests a connection may stay quiet
 * for ever. */
static void start_recv(conn *c)
{
    nng_iov iov = {c->rbuf + c->rlen, c->rcap - c->rlen};
    nng_aio_set_iov(c->recv_aio, 1, &iov);
    if (!c->rlen) {
        c->frame_due = 0;
        nng_aio_set_timeout(c->recv_aio, NNG_DURATION_INFINITE);
    } else {
        nng_time now = nng_clock();
        if (!c->frame_due)
            c->frame_due = now + (nng_time)c->l->cfg->frame_timeout_ms;
        nng_aio_set_timeout(c->recv_aio,
                            c->frame_due > now ? (nng_duration)(c->frame_due - now) : 1);
    }
    nng_stream_recv(c->s, c->recv_aio);
}

static void conn_recv_cb(void *arg)
{
    conn *c = arg;
    int rv = nng_aio_result(c->recv_aio);
    if (rv == 0) {
        c->rlen += nng_aio_count(c->recv_aio);
        if (parse(c) == 0 && account(c) == 0) {
            start_recv(c);
            return;
        }
        conn_close(c, NULL);
    } else if (rv == NNG_ETIMEDOUT) {
        char why[160];
        snprintf(why, sizeof why, "it sent %zu bytes of a request and not the rest within %d "
                 "ms (--frame-timeout)", c->rlen, c->l->cfg->frame_timeout_ms);
        conn_close(c, why);
    } else {
        if (rv != NNG_ECLOSED && rv != NNG_ECONNSHUT && rv != NNG_ECONNRESET)
            c10ds_debug("connection %u: %s", c->id, nng_strerror(rv));
        conn_close(c, NULL);
    }
    conn_unref(c); /* the read loop's reference */
}

static void accept_cb(void *arg)
{
    c10ds_listener *l = arg;
    int rv = nng_aio_result(l->accept_aio);
    if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
        return;
    nng_mtx_lock(l->mu);
    int closing = l->closing;
    nng_mtx_unlock(l->mu);
    if (closing) {
        if (rv == 0)
            nng_stream_free(nng_aio_get_output(l->accept_aio, 0));
        return;
    }
    if (rv != 0) {
        /* A TLS handshake that failed, a client that vanished: others are
         * unaffected. */
        c10ds_warn("a connection was not accepted: %s", nng_strerror(rv));
        nng_stream_listener_accept(l->lst, l->accept_aio);
        return;
    }
    nng_stream *s = nng_aio_get_output(l->accept_aio, 0);
    conn *c = calloc(1, sizeof *c);
    if (!c || nng_mtx_alloc(&c->mu) != 0 || nng_aio_alloc(&c->recv_aio, conn_recv_cb, c) != 0 ||
        nng_aio_alloc(&c->send_aio, conn_send_cb, c) != 0 || !(c->rbuf = malloc(RBUF_MIN))) {
        c10ds_error("out of memory for a new connection; refused");
        if (c) {
            nng_aio_free(c->recv_aio);
            nng_aio_free(c->send_aio);
            if (c->mu)
                nng_mtx_free(c->mu);
            free(c);
        }
        nng_stream_free(s);
        nng_stream_listener_accept(l->lst, l->accept_aio);
        return;
    }
    c->l = l;
    c->s = s;
    c->rcap = RBUF_MIN;
    c->id = atomic_fetch_add(&l->next_id, 1);
    atomic_init(&c->refs, 1);
    nng_stream_set_bool(s, NNG_OPT_TCP_NODELAY, true);
    nng_mtx_lock(l->mu);
    c->next = l->live;
    l->live = c;
    l->nlive++;
    nng_mtx_unlock(l->mu);
    atomic_fetch_add(&l->engine->clients, 1);
    start_recv(c);
    nng_stream_listener_accept(l->lst, l->accept_aio);
}

/* Writes into out the URL actually bound: the same as asked, but with the
 * port filled in when the caller asked for port 0. */
static void bound_url(c10ds_listener *l, const char *url, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", url);
    int port = 0;
    if (strstr(url, "tcp://") == NULL ||
        nng_stream_listener_get_int(l->lst, NNG_OPT_TCP_BOUND_PORT, &port) != 0)
        return;
    const char *colon = strrchr(url, ':');
    if (colon && colon > strstr(url, "://") + 2)
        snprintf(out, outlen, "%.*s:%d", (int)(colon - url), url, port);
}

c10ds_listener *c10ds_listener_new(const c10ds_config *cfg, c10ds_engine *engine, char *url_out,
                                   size_t url_len, char *err, size_t errlen)
{
    c10ds_listener *l = calloc(1, sizeof *l);
    int rv;
    if (!l || nng_mtx_alloc(&l->mu) != 0) {
        snprintf(err, errlen, "out of memory");
        free(l);
        return NULL;
    }
    l->cfg = cfg;
    l->engine = engine;
    atomic_init(&l->next_id, 1);
    if (nng_cv_alloc(&l->cv, l->mu) != 0 || nng_aio_alloc(&l->accept_aio, accept_cb, l) != 0 ||
        nng_thread_create(&l->reaper, reaper_main, l) != 0) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if ((rv = nng_stream_listener_alloc(&l->lst, cfg->listen_url)) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s (tcp://host:port, ipc:///path or "
                 "tls+tcp://host:port)", cfg->listen_url, nng_strerror(rv));
        goto fail;
    }
    nng_stream_listener_set_bool(l->lst, NNG_OPT_TCP_NODELAY, true);
    if (c10dc_url_is_tls(cfg->listen_url)) {
        nng_tls_config *tls;
        if (c10dc_tls_server(&tls, cfg->tls_cert, cfg->tls_key, cfg->tls_ca, err, errlen) != 0)
            goto fail;
        rv = nng_stream_listener_set_ptr(l->lst, NNG_OPT_TLS_CONFIG, tls);
        nng_tls_config_free(tls); /* the listener holds its own reference */
        if (rv != 0) {
            snprintf(err, errlen, "cannot use TLS on %s: %s", cfg->listen_url,
                     nng_strerror(rv));
            goto fail;
        }
    }
    if ((rv = nng_stream_listener_listen(l->lst)) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s%s", cfg->listen_url, nng_strerror(rv),
                 rv == NNG_EADDRINUSE ? " (another coordinator, or another program, has this "
                                        "port; pick another with --listen)"
                                      : "");
        goto fail;
    }
    bound_url(l, cfg->listen_url, url_out, url_len);
    nng_stream_listener_accept(l->lst, l->accept_aio);
    return l;
fail:
    c10ds_listener_close(l, 2000);
    return NULL;
}

void c10ds_listener_drain(c10ds_listener *l, int timeout_ms)
{
    for (int waited = 0; atomic_load(&l->sends_in_flight) > 0 && waited < timeout_ms; waited++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

int c10ds_listener_close(c10ds_listener *l, int timeout_ms)
{
    if (!l)
        return 0;
    nng_mtx_lock(l->mu);
    l->closing = 1;
    nng_mtx_unlock(l->mu);
    if (l->lst)
        nng_stream_listener_close(l->lst);
    if (l->accept_aio)
        nng_aio_stop(l->accept_aio);
    /* Close every connection (closing only aborts their I/O; the callbacks
     * run on NNG's threads). Each is freed once its I/O has ended and the
     * engine - stopped before this - has let go of its requests. */
    nng_mtx_lock(l->mu);
    for (conn *c = l->live; c; c = c->next)
        conn_close(c, NULL);
    nng_mtx_unlock(l->mu);
    int left = 0;
    for (int waited = 0; waited <= timeout_ms; waited++) {
        nng_mtx_lock(l->mu);
        left = l->nlive;
        nng_mtx_unlock(l->mu);
        if (!left)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (left)
        return -1; /* a connection still held: leave everything allocated */
    if (l->reaper) {
        nng_mtx_lock(l->mu);
        l->reaper_stop = 1;
        nng_cv_wake(l->cv);
        nng_mtx_unlock(l->mu);
        nng_thread_destroy(l->reaper); /* joins it, after the last frees */
    }
    nng_aio_free(l->accept_aio);
    if (l->lst)
        nng_stream_listener_free(l->lst);
    if (l->cv)
        nng_cv_free(l->cv);
    nng_mtx_free(l->mu);
    free(l);
    return 0;
}
