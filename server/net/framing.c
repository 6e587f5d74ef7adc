/* A connection's read loop: the byte stream cut into frames and each
 * decoded (c10d_wire.c) and handed to the engine. An undecodable frame gets a
 * protocol-error reply, one that would decode too large ETOOBIG; a frame
 * over --max-message-bytes, a request not whole within --frame-timeout,
 * or unfinished requests over --max-pending-bytes (all connections
 * together) close the connection. A connection whose replies pile up
 * unread is not read from until they are sent. Only the read loop (the
 * receive callback, or the send callback resuming it) touches the read
 * buffer. */
#include "net/listener_internal.h"

#include "config.h"
#include "engine/engine.h"
#include "engine/request.h"
#include "failure.h"

#include "c10d.pb-c.h"
#include "net/c10d_wire.h"
#include "frame.h"
#include "log.h"
#include "tls.h"

#include <c10d/errors.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The engine is done with a request of c's. */
static void release_slot(void *slot)
{
    c10ds_conn_request_done(slot);
    c10ds_conn_unref(slot);
}

/* Whether the connection a request came on is gone (r->gone). */
static int slot_gone(void *slot)
{
    return c10ds_conn_closed(slot);
}

static void reply_error(c10ds_conn *c, uint64_t request_id, c10d_status st, const char *detail)
{
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.request_id = request_id;
    rep.status = st;
    rep.detail = (char *)detail;
    uint8_t buf[1024];
    size_t n = c10dpb__reply__get_packed_size(&rep);
    if (n <= sizeof buf) {
        c10dpb__reply__pack(&rep, buf);
        c10ds_conn_queue(c, request_id, buf, n);
    }
}

int c10ds_conn_hand_on(c10ds_conn *c, C10dpb__Request *pb, const c10ds_reply_sink *sink,
                       void *sink_arg, int vouched)
{
    c->turn_requests++;
    c10ds_request *r = c10ds_request_new(pb, c);
    if (!r) {
        c10dpb__request__free_unpacked(pb, NULL);
        if (sink && sink->free)
            sink->free(sink_arg);
        return c10ds_failed(C10D_ENOMEM, "coordinator out of memory");
    }
    r->sink = sink;
    r->sink_arg = sink_arg;
    r->vouched = vouched;
    r->pipe = c->id;
    r->release = release_slot;
    r->gone = slot_gone;
    r->budgets[1] = &c->parked;
    if (c->l->dialect == C10DS_DIALECT_TCPSTORE) { /* the port's own limits */
        r->budgets[2] = &c->l->parked;
        r->quota = &c->l->quota;
    }
    atomic_fetch_add(&c->refs, 1);
    c10ds_conn_request_sent(c);
    if (c10ds_engine_submit(c->l->engine, r) != 0) {
        /* Shutting down: leave it unanswered; the client resends it to the
         * next coordinator. */
        c10ds_request_free(r);
    }
    return 0;
}

/* One frame's request decoded and handed to the engine; refusals are
 * answered. */
static void submit(c10ds_conn *c, const c10ds_frame *f)
{
    c10ds_decode_refusal why;
    c10d_status st;
    C10dpb__Request *pb = c10ds_c10d_decode(f, c->l->cfg->max_decode_bytes, &why, &st);
    if (!pb) {
        if (why == C10DS_DECODE_OVER_BUDGET)
            c10ds_warn("connection %u: %s", c->id, c10ds_failure());
        else if (why == C10DS_DECODE_GARBLED)
            c10ds_warn("undecodable request of %zu bytes on connection %u; answered with a "
                       "protocol error", f->body_len, c->id);
        reply_error(c, f->id, st, c10ds_failure());
        return;
    }
    if (c10ds_conn_hand_on(c, pb, NULL, NULL, 0) != 0)
        reply_error(c, f->id, C10D_ENOMEM, "coordinator out of memory");
}

/* Whether c has more unsent replies than it may have and still be read. */
int c10ds_conn_backlogged(c10ds_conn *c)
{
    nng_mtx_lock(c->mu);
    int over = c10ds_conn_backlogged_locked(c);
    nng_mtx_unlock(c->mu);
    return over;
}

int c10ds_conn_closed(c10ds_conn *c)
{
    nng_mtx_lock(c->mu);
    int closed = c->closed;
    nng_mtx_unlock(c->mu);
    return closed;
}

/* Makes room in rbuf for more of the frame begun. The buffer doubles as
 * the frame's bytes arrive, up to its size: a 12-byte header promising
 * 16 MiB reserves nothing more, and what a half-sent frame holds is what
 * --max-pending-bytes counts. Returns -1 when out of memory. */
static int make_room(c10ds_conn *c)
{
    if (c->rlen < c->rcap || c->rlen < 4)
        return 0;
    return c10ds_conn_room_for(c, 4 + (size_t)c10dc_get_u32(c->rbuf));
}

static int listener_closing(c10ds_listener *l)
{
    nng_mtx_lock(l->mu);
    int closing = l->closing;
    nng_mtx_unlock(l->mu);
    return closing;
}

/* The TCPStore port, in words for a TCPStore client's mistake. */
static const char *tcpstore_port(const c10ds_config *cfg)
{
    const char *u = cfg->tcpstore_url;
    if (!u)
        return "this coordinator was started without it";
    size_t n = strlen(u);
    return n > 2 && !strcmp(u + n - 2, ":0") ? "this one's picked its port: c10d-ctl status names it"
                                             : u;
}

/* Decodes the complete frames in rbuf. Returns -1 when the client sent
 * something that is not a frame, or one over the limit; 1 when it stopped
 * because c's unsent replies are over C10DS_READ_PAUSE_BYTES (the frames
 * left stay in rbuf); 2 when its turn on the readiness loop is over (the
 * same); 0 when it wants more bytes. */
static int parse(c10ds_conn *c)
{
    size_t off = 0;
    int rc = 0;
    /* Only the first bytes of a connection are looked at. */
    c10ds_stranger stranger =
        c->framed ? C10DS_STRANGER_NONE : c10ds_c10d_stranger(c->rbuf, c->rlen, c->l->cfg);
    if (stranger == C10DS_STRANGER_TLS) {
        c10ds_warn("connection %u from %s began a TLS handshake, and this listener is plain "
                   "(%s): closing it (the client dials tls+tcp://; dial tcp://, or start the "
                   "coordinator on tls+tcp://)", c->id, c->peer, c->l->url);
        return -1;
    }
    if (stranger == C10DS_STRANGER_TCPSTORE) {
        c10ds_warn("connection %u from %s speaks PyTorch's TCPStore protocol, and this is the "
                   "c10d port (%s): closing it (TCPStore clients, torchrun's --rdzv-endpoint "
                   "among them, dial the port c10d-coord serves with --tcpstore-listen: "
                   "%s)", c->id, c->peer, c->l->url, tcpstore_port(c->l->cfg));
        return -1;
    }
    for (;;) {
        c10ds_frame f;
        size_t used;
        c10ds_frame_result got =
            c10ds_frame_cut(c->rbuf + off, c->rlen - off, c->l->cfg->max_message_bytes, &f, &used);
        if (got == C10DS_FRAME_BAD) {
            c10ds_warn("connection %u sent %s: closing it", c->id, c10ds_failure());
            return -1;
        }
        if (got == C10DS_FRAME_SHORT)
            break;
        if (c10ds_readiness_turn_over(c)) {
            rc = 2;
            break;
        }
        if (c10ds_conn_closed(c))
            return -1; /* the rest is nobody's: see c10ds_conn_closed */
        if (c10ds_conn_backlogged(c)) {
            rc = 1;
            break;
        }
        submit(c, &f);
        c->framed = 1;
        off += used;
    }
    c10ds_conn_consumed(c, off);
    if (rc == 0 && make_room(c) != 0)
        return -1;
    return rc;
}

void c10ds_conn_consumed(c10ds_conn *c, size_t off)
{
    if (off) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    /* A large request done: give its buffer back (forty connections that
     * each sent one 16 MiB set must not keep 640 MiB). */
    if (c->rlen < C10DS_RBUF_MIN && c->rcap > C10DS_RBUF_MIN) {
        uint8_t *nb = realloc(c->rbuf, C10DS_RBUF_MIN);
        if (nb) {
            c->rbuf = nb;
            c->rcap = C10DS_RBUF_MIN;
        }
    }
}

int c10ds_conn_room_for(c10ds_conn *c, size_t whole)
{
    if (c->rlen < c->rcap)
        return 0;
    size_t want = c->rcap * 2 < whole ? c->rcap * 2 : whole;
    if (want <= c->rcap)
        return 0;
    uint8_t *nb = realloc(c->rbuf, want);
    if (!nb) {
        c10ds_warn("out of memory for a %zu-byte request on connection %u", whole, c->id);
        return -1;
    }
    c->rbuf = nb;
    c->rcap = want;
    return 0;
}

/* Counts what c holds of an unfinished request (after parse) in the
 * listener's total. Returns -1 when that total is over the limit and c
 * holds part of it. */
static int account(c10ds_conn *c)
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
void c10ds_conn_recv_start(c10ds_conn *c)
{
    if (!c->rlen)
        c->frame_due = 0; /* the next request's deadline starts with its first bytes */
    if (!c->rlen && c->fd >= 0) {
        /* Between requests: wait on the readiness loop. Under c->mu for
         * the same reason as below; a close after it shuts the socket
         * down, which wakes the loop. */
        nng_mtx_lock(c->mu);
        if (c->closed) {
            nng_mtx_unlock(c->mu);
            c10ds_conn_unref(c); /* the read loop's reference */
            return;
        }
        int armed = c10ds_readiness_arm(c) == 0;
        nng_mtx_unlock(c->mu);
        if (armed)
            return;
    }
    nng_iov iov = {c->rbuf + c->rlen, c->rcap - c->rlen};
    nng_aio_set_iov(c->recv_aio, 1, &iov);
    if (!c->rlen) {
        nng_aio_set_timeout(c->recv_aio, NNG_DURATION_INFINITE);
    } else {
        nng_time now = nng_clock();
        if (!c->frame_due)
            c->frame_due = now + (nng_time)c->l->cfg->frame_timeout_ms;
        nng_aio_set_timeout(c->recv_aio,
                            c10d_nng_ms((int64_t)c->frame_due - (int64_t)now));
    }
    /* Under c->mu, which close takes before it closes the stream: NNG 1.5
     * queues a receive on a closed stream and never ends it, and the read
     * loop's reference would stay for good (a close from the engine's
     * thread can come between the loop's last look and here). */
    nng_mtx_lock(c->mu);
    if (c->closed) {
        nng_mtx_unlock(c->mu);
        c10ds_conn_unref(c); /* the read loop's reference */
        return;
    }
    nng_stream_recv(c->s, c->recv_aio);
    nng_mtx_unlock(c->mu);
}

/* Hands on the frames read; then the next receive, a pause while c's
 * replies are sent, or the end. Carries the read loop's reference. */
static void read_on(c10ds_conn *c)
{
    for (;;) {
        int rc = c->codec->parse(c);
        if (rc < 0 || account(c) != 0) {
            c10ds_conn_close(c, NULL);
            c10ds_conn_unref(c); /* the read loop's reference */
            return;
        }
        if (rc == 0) {
            c10ds_conn_recv_start(c);
            return;
        }
        if (rc == 2) {
            c10ds_readiness_defer(c); /* the rest in its next turn */
            return;
        }
        /* The last touch of c: once paused, its send callback may resume
         * it (or a close end it) at once. Not paused: the replies went
         * meanwhile; go on with the frames left. */
        if (c10ds_conn_pause_if_backlogged(c))
            return;
    }
}

void c10ds_conn_read_resume(c10ds_conn *c)
{
    read_on(c);
}

/* c's socket is readable (the readiness loop says): its next request,
 * read on the loop's thread. */
static void read_ready(c10ds_conn *c)
{
    /* The read loop was handed over under c->mu (c10ds_readiness_arm), by
     * whichever thread ran it last; taking it here orders what that thread
     * wrote before what this one reads, as the kernel did through epoll
     * (which ThreadSanitizer does not see). */
    nng_mtx_lock(c->mu);
    nng_mtx_unlock(c->mu);
    c->turn_requests = 0;
    nng_iov iov = {c->rbuf + c->rlen, c->rcap - c->rlen};
    nng_aio_set_iov(c->ready_aio, 1, &iov);
    nng_stream_recv(c->s, c->ready_aio);
    /* Bytes are waiting, so NNG read them inside the call; should it have
     * queued the receive after all (they went), take it back. */
    nng_aio_cancel(c->ready_aio);
    nng_aio_wait(c->ready_aio);
    int rv = nng_aio_result(c->ready_aio);
    if (rv == NNG_ECANCELED) {
        c10ds_conn_recv_start(c); /* nothing read: wait again */
        return;
    }
    c10ds_conn_recv_done(c, rv, nng_aio_count(c->ready_aio));
}

const c10ds_ready_ops c10ds_framing_ready_ops = {read_ready, c10ds_conn_read_resume};

void c10ds_conn_recv_cb(void *arg)
{
    c10ds_conn *c = arg;
    c10ds_conn_recv_done(c, nng_aio_result(c->recv_aio), nng_aio_count(c->recv_aio));
}

void c10ds_conn_recv_done(c10ds_conn *c, int rv, size_t n)
{
    if (rv == 0) {
        c->rlen += n;
        read_on(c);
        return;
    }
    if (rv == NNG_ETIMEDOUT) {
        char why[160];
        snprintf(why, sizeof why, "it sent %zu bytes of a request and not the rest within %d "
                 "ms (--frame-timeout)", c->rlen, c->l->cfg->frame_timeout_ms);
        c10ds_conn_close(c, why);
    } else if (!c->framed && c10dc_url_is_tls(c->l->url) && !listener_closing(c->l)) {
        /* Before any frame on a TLS listener: the handshake failed. Said
         * (limited per call site, log.c), since the client only learns
         * its own side of it. NNG gives no more reason than this. */
        c10ds_warn("TLS handshake with %s failed: %s (a plain tcp:// client, one that does not "
                   "trust this certificate, or, with --tls-ca, one without a certificate that "
                   "CA signed)", c->peer, nng_strerror(rv));
        c10ds_conn_close(c, NULL);
    } else {
        if (rv != NNG_ECLOSED && rv != NNG_ECONNSHUT && rv != NNG_ECONNRESET)
            c10ds_debug("connection %u: %s", c->id, nng_strerror(rv));
        c10ds_conn_close(c, NULL);
    }
    c10ds_conn_unref(c); /* the read loop's reference */
}

const c10ds_codec c10ds_codec_c10d = {
    .name = "c10d",
    .parse = parse,
    .reply = c10ds_conn_queue_framed,
};
