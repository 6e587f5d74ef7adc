/* The reader of the stream beneath the connection to the coordinator
 * (conn_stream_internal.h): frames cut from the stream (common/frame.h),
 * each reply decoded once, with protobuf-c, and handed to the call
 * waiting for it by request id (c10di_waiter). On tcp:// and ipc:// the
 * reader is a caller whose turn it is (conn_stream.c says how it is
 * chosen): it sleeps in poll(2) on the socket, then receives through NNG.
 *
 * A reader's receive is submitted under mu, and cancelled by the caller
 * that asks for the reading only once it is submitted (c->recv_armed).
 * NNG allows
 * cancelling only an operation already submitted: NNG 1.10's cancel,
 * landing between the start of nng_stream_recv and its queueing, lets
 * nng_aio_wait return while the receive stays queued, and the next
 * nng_stream_recv on that aio panics ("!nni_aio_list_active(aio)"; a rank
 * died so in c10d_destroy, its leave taking the reading from the watch).
 * Sends and receives on tcp:// and ipc:// are submitted under mu, on the
 * stream still current: NNG 1.5.2 queues one on a stream already closed
 * and ends it only at its timeout (send_frame, conn_stream.c).
 *
 * TLS is the exception. NNG's TLS stream cannot abandon a receive: a
 * cancelled or timed-out recv aborts the TCP read beneath it, which tears
 * the connection down, and when that read has just finished the abort
 * finds nothing to stop and the recv is never completed at all (a job's
 * ranks hung in c10d_destroy that way). So on tls+tcp:// one receive with
 * no timeout stays armed while connected, its callback hands the replies
 * out, and callers only wait on the condition variable: one more thread
 * hop per reply, paid only where TLS's own costs dwarf it. */
#include "conn/conn_stream_internal.h"

#include "c10d_time.h"
#include "frame.h"

#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RBUF_MIN (64u * 1024)
/* A reader sleeps in poll(2) on the socket this long at most, then waits
 * through NNG for FALLBACK_RECV_MS, and goes back to poll(2): were the
 * socket found for the stream ever the wrong one (stream_fd.h), a reply
 * would be late, never lost; and a long wait (a parked watch) stays in
 * poll(2) nearly all the time. */
#define POLL_SLICE_MS 1000
#define FALLBACK_RECV_MS 20

/* Room in rbuf for the frame being read (mu held). */
static int make_room(c10di_conn *c)
{
    size_t want = RBUF_MIN;
    if (c->rlen >= 4) {
        size_t frame = 4 + (size_t)c10dc_get_u32(c->rbuf);
        if (frame > want)
            want = frame;
    }
    if (c->rcap >= want && c->rlen < c->rcap)
        return 0;
    if (want <= c->rlen)
        want = c->rlen * 2;
    uint8_t *nb = realloc(c->rbuf, want);
    if (!nb)
        return -1;
    c->rbuf = nb;
    c->rcap = want;
    return 0;
}

/* Hands the complete frames in rbuf to their waiters (mu held). Returns
 * -1 when the stream holds something that is not a frame, 1 when a
 * replica answered that it does not lead (the stream is dropped). */
static int dispatch(c10di_conn *c)
{
    size_t off = 0;
    int woke = 0, woke_news = 0;
    while (c->rlen - off >= C10DC_FRAME_HDR) {
        uint32_t n = c10dc_get_u32(c->rbuf + off);
        if (n < 8 || n > C10DI_CONN_MAX_FRAME) {
            /* A TLS record (an alert, a server hello): a TLS port dialled
             * as tcp:// (the round trip says so after a few, conn_stream.c). */
            c->spoke_tls = (c->rbuf[off] == 0x15 || c->rbuf[off] == 0x16) && c->rbuf[off + 1] == 3;
            return -1;
        }
        if (c->rlen - off < 4 + (size_t)n)
            break;
        uint64_t id = c10dc_get_u64(c->rbuf + off + 4);
        c->heard_ms = c10d_now_ms(); /* the leader is not silent (conn_probe.c) */
        size_t body = n - 8;
        /* Decoded here, once: its status says whether a replica does not
         * lead, and its waiter is handed the decoded reply, which conn.c
         * reads and frees. NULL, a reply that does not decode, is handed
         * on too: the waiter's round trip fails with C10D_EPROTO. */
        C10dpb__Reply *r = c10dpb__reply__unpack(NULL, body, c->rbuf + off + C10DC_FRAME_HDR);
        if (r && r->status == C10D_ENOTLEADER) {
            /* wakes all: those woken above too */
            c10di_conn_not_leader(c, r->leader_url, r->detail);
            c10dpb__reply__free_unpacked(r, NULL);
            return 1;
        }
        if (!c->answered) { /* a coordinator: dial at once again if it breaks */
            c->answered = 1;
            c->ever_answered = 1;
            c->unanswered = 0;
            c->dial_failures = 0;
            c->tried = 0;
            c->leaderless = 0;
            c->probed = c->spoke_tls = 0;
            c->down_since_ms = 0; /* the next outage's notices count from its own start */
        }
        for (c10di_waiter *w = c->waiters; w; w = w->next) {
            if (w->id != id || w->done)
                continue;
            w->reply = r; /* the waiter's now */
            r = NULL;
            w->done = 1;
            if (w->news)
                woke_news = 1;
            else
                woke = 1;
            break;
        }
        /* Replies nobody waits for any more (a call that timed out) are
         * dropped. */
        if (r)
            c10dpb__reply__free_unpacked(r, NULL);
        off += 4 + (size_t)n;
    }
    if (off) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    if (woke)
        pthread_cond_broadcast(&c->cv);
    if (woke_news)
        pthread_cond_broadcast(&c->news_cv);
    return 0;
}

/* TLS: arms the connection's one receive on c->stream (mu held; not
 * while c->rx_armed). The armed receive counts as a user of the stream, so
 * a redial waits for its callback before freeing it. */
void c10di_conn_rx_arm(c10di_conn *c)
{
    if (make_room(c) != 0) {
        c10di_conn_broken(c, c->stream, NNG_ENOMEM);
        return;
    }
    c->rx_stream = c->stream;
    c->rx_armed = 1;
    c->users++;
    nng_iov iov = {c->rbuf + c->rlen, c->rcap - c->rlen};
    nng_aio_set_iov(c->rx_aio, 1, &iov);
    nng_aio_set_timeout(c->rx_aio, NNG_DURATION_INFINITE);
    /* NNG completes it on its own threads, never inside this call. */
    nng_stream_recv(c->stream, c->rx_aio);
}

/* rx_aio's callback: hands out the replies it read, and arms it again. */
void c10di_conn_rx_done(void *arg)
{
    c10di_conn *c = arg;
    int rv = nng_aio_result(c->rx_aio);
    size_t got = nng_aio_count(c->rx_aio);
    pthread_mutex_lock(&c->mu);
    nng_stream *s = c->rx_stream;
    c->rx_armed = 0;
    if (--c->users == 0 && c->dialing)
        pthread_cond_broadcast(&c->cv); /* dial waits for the old stream's users */
    if (rv != 0) {
        c10di_conn_broken(c, s, rv); /* does nothing if the stream was replaced */
    } else if (c->stream == s) {
        c->rlen += got;
        if (dispatch(c) < 0)
            c10di_conn_broken(c, s, NNG_EPROTO);
    }
    /* The next receive, on the stream connected now: also a new one, whose
     * dial found this receive still armed on the old stream and left the
     * arming to us (an aio is submitted again only once it completed). */
    if (c->stream && !c->closing)
        c10di_conn_rx_arm(c);
    pthread_mutex_unlock(&c->mu);
}

/* The reader (mu held; released while it sleeps) sleeps in poll(2) on
 * the stream's socket until it is readable, for at most left ms and
 * POLL_SLICE_MS. Returns 1 when it is readable or the slice passed (read
 * through NNG now: a readable socket's receive completes inside
 * nng_stream_recv, on this thread, and no other thread is woken), 0 when
 * the reader was asked for the reading (c10di_conn_ask_reading) or
 * interrupted. */
static int await_readable(c10di_conn *c, int64_t left, int spin)
{
    struct pollfd p[2] = {{c->stream_fd, POLLIN, 0}, {c->wake_fd, POLLIN, 0}};
    c->polling = 1;
    spin = spin && c->bp.max_ns;
    int64_t window = c->bp.window_ns, idle_from = spin ? c10dc_busy_poll_now_ns() : 0;
    pthread_mutex_unlock(&c->mu);
    int n = 0;
    if (spin && window) {
        /* look, yielding the CPU between looks, before sleeping */
        int64_t until = idle_from + window;
        while ((n = poll(p, 2, 0)) == 0 && c10dc_busy_poll_now_ns() < until)
            sched_yield();
    }
    int looked = spin && window && n == 0, slept = n == 0;
    if (n == 0)
        n = poll(p, 2, (int)min64(left, POLL_SLICE_MS));
    int64_t idle = spin ? c10dc_busy_poll_now_ns() - idle_from : 0;
    uint64_t asked;
    if (n > 0 && p[1].revents)
        (void)!read(c->wake_fd, &asked, sizeof asked);
    pthread_mutex_lock(&c->mu);
    c->polling = 0;
    if (looked)
        c10dc_busy_poll_missed(&c->bp);
    else if (spin && window && n > 0 && p[0].revents)
        c10dc_busy_poll_caught(&c->bp);
    if (spin && slept && n > 0 && p[0].revents)
        c10dc_busy_poll_slept(&c->bp, idle);
    return n >= 0 && !p[1].revents;
}

void c10di_conn_read_replies(c10di_conn *c, c10di_waiter *w, int parked, int64_t deadline)
{
    nng_stream *s = c->stream;
    c->reading = 1;
    c->reader_parked = parked;
    c->handoff = 0;
    c->users++;
    int polled = 0;
    while (!w->done && !c->handoff && c->stream == s) {
        int64_t left = deadline - c10d_now_ms();
        if (left <= 0)
            break;
        /* The stream's socket is c->stream_fd while c->stream is s. */
        if (c->stream_fd >= 0 && !polled) {
            polled = await_readable(c, left, w->spin);
            continue;
        }
        polled = 0;
        if (make_room(c) != 0) {
            c10di_conn_broken(c, s, NNG_ENOMEM);
            break;
        }
        nng_iov iov = {c->rbuf + c->rlen, c->rcap - c->rlen};
        /* after a poll(2) slice: a short receive through NNG, then poll
         * again (a readable socket's receive ends at once anyway) */
        int64_t recv_ms = c->stream_fd >= 0 && left > FALLBACK_RECV_MS ? FALLBACK_RECV_MS : left;
        nng_aio_set_iov(c->recv_aio, 1, &iov);
        nng_aio_set_timeout(c->recv_aio, c10d_nng_ms(recv_ms));
        /* Submitted under mu, on s still the stream (the loop's test): a
         * receive queued on a stream c10di_conn_broken() already closed is
         * never ended by NNG 1.5.2 but by its timeout (see send_frame,
         * conn_stream.c). A caller asking for the reading (under mu)
         * finds it submitted, and may cancel it (never before: see
         * recv_armed). */
        nng_stream_recv(s, c->recv_aio);
        c->recv_armed = 1;
        pthread_mutex_unlock(&c->mu);
        nng_aio_wait(c->recv_aio);
        int rv = nng_aio_result(c->recv_aio);
        size_t got = nng_aio_count(c->recv_aio);
        pthread_mutex_lock(&c->mu);
        c->recv_armed = 0;
        if (rv == 0) {
            c->rlen += got;
            if (dispatch(c) < 0)
                c10di_conn_broken(c, s, NNG_EPROTO);
        } else if (rv != NNG_ETIMEDOUT && rv != NNG_ECANCELED) {
            c10di_conn_broken(c, s, rv);
        }
    }
    c->users--;
    c->reading = 0;
    /* A caller wanting an answer read, or asked for the reading: either
     * way a parked reader keeps away for the grace period (else it would
     * take the reading straight back, before the asker gets mu). */
    if (!parked || c->handoff)
        c->reader_left_ms = c10d_now_ms();
    c->reader_parked = 0;
    pthread_cond_broadcast(&c->cv); /* another waiter takes the reading */
    if (parked)
        pthread_cond_broadcast(&c->news_cv);
}

void c10di_conn_ask_reading(c10di_conn *c)
{
    /* Its receive is cancelled if submitted, else the reader cancels it
     * itself once it is (c10di_conn_read_replies). */
    if (c->handoff)
        return;
    c->handoff = 1;
    if (c->recv_armed)
        nng_aio_cancel(c->recv_aio);
    uint64_t one = 1;
    if (c->polling)
        (void)!write(c->wake_fd, &one, sizeof one);
}
