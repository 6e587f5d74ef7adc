/* The connection to the coordinator: one NNG byte stream (tcp://, ipc://
 * or tls+tcp://) carrying length-prefixed frames (common/frame.h), shared
 * by every thread of the process that talks to the coordinator: user
 * calls, heartbeats and watch, the verification reporter. Many requests
 * are in flight at once; replies come in any order and are matched by
 * request id.
 *
 * No thread is dedicated to reading. A caller waiting for its reply reads
 * the stream itself when nobody else is, hands every other reply to its
 * caller, and passes the reading on once its own reply has come. So the
 * common case, one caller, wakes once per reply, straight from NNG's
 * poller (an aio without a callback). A caller only waiting for news (the
 * watch) gives the reading up to a caller that arrives: the newcomer's
 * reply should not need a second thread to wake it. And it leaves the
 * reading alone for NEWS_GRACE_MS after such a caller stopped: a rank
 * between two SYNC collectives is back within microseconds, and taking the
 * reading back from the watch each time would cost a cancelled receive.
 * It waits on its own condition variable, which a reply for another
 * caller does not signal.
 *
 * TLS is the exception. NNG's TLS stream cannot abandon a receive: a
 * cancelled or timed-out recv aborts the TCP read beneath it, which tears
 * the connection down, and when that read has just finished the abort
 * finds nothing to stop and the recv is never completed at all (a job's
 * ranks hung in c10d_destroy that way). So on tls+tcp:// one receive with
 * no timeout stays armed while connected, its callback hands the replies
 * out, and callers only wait on the condition variable: one more thread
 * hop per reply, paid only where TLS's own costs dwarf it.
 *
 * When the connection breaks (a coordinator restart), whichever caller
 * notices dials again (backing off from 20 to 500 ms) and every waiting
 * call sends its request again, with the same request id, so the
 * coordinator applies a non-idempotent request once however often it
 * arrives. */
#include "internal.h"
#include "version.h"

#include "c10d_time.h"
#include "frame.h"
#include "tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* A reply's frame may be large (a multi_get, a trace); beyond this the
 * stream is taken to be corrupt. */
#define MAX_REPLY_BYTES (1u << 30)
#define RBUF_MIN (64u * 1024)
#define NEWS_GRACE_MS 10

struct c10di_waiter {
    c10di_waiter *next;
    uint64_t id;
    int news;            /* only waiting for news: woken on news_cv */
    uint64_t sent_epoch; /* the connection it was last sent on; 0 = none */
    uint8_t *reply;      /* the reply's protobuf, once it came */
    size_t reply_len;
    int done;
};

static const char *op_name(const C10dpb__Request *req)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&c10dpb__request__descriptor, req->op_case);
    return f ? f->name : "request";
}

/* Waits on c->cv, or c->news_cv for a caller only waiting for news (mu
 * held), until the monotonic time until_ms. */
static void wait_for(c10di_conn *c, int news, int64_t until_ms)
{
    struct timespec ts = {(time_t)(until_ms / 1000), (long)(until_ms % 1000) * 1000000};
    pthread_cond_timedwait(news ? &c->news_cv : &c->cv, &c->mu, &ts);
}

static void wait_until(c10di_conn *c, int64_t until_ms)
{
    wait_for(c, 0, until_ms);
}

/* The connection changed (mu held): everyone looks again. */
static void wake_all(c10di_conn *c)
{
    pthread_cond_broadcast(&c->cv);
    pthread_cond_broadcast(&c->news_cv);
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The connection s failed with rv (mu held): close it, so that every
 * operation on it ends, and let the next caller dial again. */
static void broken(c10di_conn *c, nng_stream *s, int rv)
{
    if (c->stream != s)
        return; /* someone saw it first */
    c->stream = NULL;
    c->retired = s;
    c->last_err = rv;
    atomic_store(&c->pipes, 0);
    nng_stream_close(s);
    wake_all(c);
}

static int tls_failure(int rv)
{
    return rv == NNG_EPEERAUTH || rv == NNG_ECRYPTO;
}

static void rx_arm(c10di_conn *c);

/* TCP lets a connection to a free port on this host open to itself, when
 * the port the kernel picks for our end is that same port (simultaneous
 * open). A coordinator bound to a port in the ephemeral range and being
 * restarted is exactly that case, and the client would then hold the port
 * the coordinator needs. Such a connection counts as refused. */
static int connected_to_itself(nng_stream *s)
{
    nng_sockaddr a, b;
    if (nng_stream_get_addr(s, NNG_OPT_LOCADDR, &a) != 0 ||
        nng_stream_get_addr(s, NNG_OPT_REMADDR, &b) != 0 || a.s_family != b.s_family)
        return 0;
    if (a.s_family == NNG_AF_INET)
        return a.s_in.sa_port == b.s_in.sa_port && a.s_in.sa_addr == b.s_in.sa_addr;
    if (a.s_family == NNG_AF_INET6)
        return a.s_in6.sa_port == b.s_in6.sa_port &&
               memcmp(a.s_in6.sa_addr, b.s_in6.sa_addr, sizeof a.s_in6.sa_addr) == 0;
    return 0;
}

/* Dials once (mu held, returns with it held). */
static void dial(c10di_conn *c, int64_t deadline)
{
    c->dialing = 1;
    /* The old stream is freed once nobody uses it: closing it ended their
     * operations, so this is short. Should NNG never finish one of them,
     * the stream is left allocated rather than freed under its user, and
     * the dial goes on. */
    int64_t give_up = c10d_now_ms() + 2000;
    while (c->retired && c->users > 0 && c10d_now_ms() < give_up && !c->closing)
        wait_until(c, c10d_now_ms() + 50);
    nng_stream *old = c->users > 0 ? NULL : c->retired;
    c->retired = NULL;
    pthread_mutex_unlock(&c->mu);
    if (old)
        nng_stream_free(old);
    int64_t left = deadline - c10d_now_ms();
    nng_aio_set_timeout(c->dial_aio, (nng_duration)(left > 5000 ? 5000 : left > 1 ? left : 1));
    nng_stream_dialer_dial(c->dialer, c->dial_aio);
    nng_aio_wait(c->dial_aio);
    int rv = nng_aio_result(c->dial_aio);
    if (rv == 0 && connected_to_itself(nng_aio_get_output(c->dial_aio, 0))) {
        nng_stream_free(nng_aio_get_output(c->dial_aio, 0));
        rv = NNG_ECONNREFUSED;
    }
    pthread_mutex_lock(&c->mu);
    c->dialing = 0;
    if (rv == 0 && !c->closing) {
        c->stream = nng_aio_get_output(c->dial_aio, 0);
        c->epoch++;
        c->rlen = 0;
        c->last_err = 0;
        c->dial_failures = 0;
        atomic_store(&c->pipes, 1);
        if (c->rx_async)
            rx_arm(c);
    } else {
        if (rv == 0)
            nng_stream_free(nng_aio_get_output(c->dial_aio, 0));
        c->last_err = rv ? rv : NNG_ECLOSED;
        /* Back off: a coordinator being restarted is usually back soon. */
        static const int backoff[] = {20, 50, 100, 200, 500};
        int k = c->dial_failures < 4 ? c->dial_failures++ : 4;
        c->next_dial_ms = c10d_now_ms() + backoff[k];
    }
    wake_all(c);
}

/* Sends one frame on s (mu not held). Returns 0 or NNG's error; a
 * partial frame leaves the stream unusable, which the caller handles by
 * closing it. */
static int send_frame(c10di_conn *c, nng_stream *s, uint8_t *buf, size_t len, int64_t deadline)
{
    int rv = 0;
    pthread_mutex_lock(&c->send_mu);
    for (size_t off = 0; off < len && rv == 0;) {
        int64_t left = deadline - c10d_now_ms();
        if (left <= 0) {
            rv = NNG_ETIMEDOUT;
            break;
        }
        nng_iov iov = {buf + off, len - off};
        nng_aio_set_iov(c->send_aio, 1, &iov);
        nng_aio_set_timeout(c->send_aio, (nng_duration)left);
        nng_stream_send(s, c->send_aio);
        nng_aio_wait(c->send_aio);
        if ((rv = nng_aio_result(c->send_aio)) == 0)
            off += nng_aio_count(c->send_aio);
    }
    pthread_mutex_unlock(&c->send_mu);
    return rv;
}

/* Hands the complete frames in rbuf to their waiters (mu held). Returns
 * -1 when the stream holds something that is not a frame. */
static int dispatch(c10di_conn *c)
{
    size_t off = 0;
    int woke = 0, woke_news = 0;
    while (c->rlen - off >= C10DC_FRAME_HDR) {
        uint32_t n = c10dc_get_u32(c->rbuf + off);
        if (n < 8 || n > MAX_REPLY_BYTES)
            return -1;
        if (c->rlen - off < 4 + (size_t)n)
            break;
        uint64_t id = c10dc_get_u64(c->rbuf + off + 4);
        size_t body = n - 8;
        for (c10di_waiter *w = c->waiters; w; w = w->next) {
            if (w->id != id || w->done)
                continue;
            /* Replies nobody waits for any more (a call that timed out)
             * are dropped. */
            if ((w->reply = malloc(body ? body : 1)) != NULL) {
                memcpy(w->reply, c->rbuf + off + C10DC_FRAME_HDR, body);
                w->reply_len = body;
            }
            w->done = 1;
            if (w->news)
                woke_news = 1;
            else
                woke = 1;
            break;
        }
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

/* TLS: arms the connection's one receive on c->stream (mu held). The
 * armed receive counts as a user of the stream, so a redial waits for its
 * callback before freeing it. */
static void rx_arm(c10di_conn *c)
{
    if (make_room(c) != 0) {
        broken(c, c->stream, NNG_ENOMEM);
        return;
    }
    c->rx_stream = c->stream;
    c->users++;
    nng_iov iov = {c->rbuf + c->rlen, c->rcap - c->rlen};
    nng_aio_set_iov(c->rx_aio, 1, &iov);
    nng_aio_set_timeout(c->rx_aio, NNG_DURATION_INFINITE);
    /* NNG completes it on its own threads, never inside this call. */
    nng_stream_recv(c->stream, c->rx_aio);
}

static void rx_done(void *arg)
{
    c10di_conn *c = arg;
    int rv = nng_aio_result(c->rx_aio);
    size_t got = nng_aio_count(c->rx_aio);
    pthread_mutex_lock(&c->mu);
    nng_stream *s = c->rx_stream;
    if (--c->users == 0 && c->dialing)
        pthread_cond_broadcast(&c->cv); /* dial() waits for the old stream's users */
    if (rv != 0) {
        broken(c, s, rv); /* does nothing if the stream was replaced */
    } else if (c->stream == s) {
        c->rlen += got;
        if (dispatch(c) != 0)
            broken(c, s, NNG_EPROTO);
        else if (!c->closing)
            rx_arm(c);
    }
    pthread_mutex_unlock(&c->mu);
}

/* Reads as the connection's reader until w's reply came, its deadline
 * passed, someone asked for the reading, or the connection broke (mu held;
 * returns with it held). */
static void read_for(c10di_conn *c, c10di_waiter *w, int parked, int64_t deadline)
{
    nng_stream *s = c->stream;
    c->reading = 1;
    c->reader_parked = parked;
    c->handoff = 0;
    c->users++;
    while (!w->done && !c->handoff && c->stream == s) {
        int64_t left = deadline - c10d_now_ms();
        if (left <= 0)
            break;
        if (make_room(c) != 0) {
            broken(c, s, NNG_ENOMEM);
            break;
        }
        nng_iov iov = {c->rbuf + c->rlen, c->rcap - c->rlen};
        pthread_mutex_unlock(&c->mu);
        nng_aio_set_iov(c->recv_aio, 1, &iov);
        nng_aio_set_timeout(c->recv_aio, (nng_duration)left);
        nng_stream_recv(s, c->recv_aio);
        nng_aio_wait(c->recv_aio);
        int rv = nng_aio_result(c->recv_aio);
        size_t got = nng_aio_count(c->recv_aio);
        pthread_mutex_lock(&c->mu);
        if (rv == 0) {
            c->rlen += got;
            if (dispatch(c) != 0)
                broken(c, s, NNG_EPROTO);
        } else if (rv != NNG_ETIMEDOUT && rv != NNG_ECANCELED) {
            broken(c, s, rv);
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

static void unlink_waiter(c10di_conn *c, c10di_waiter *w)
{
    for (c10di_waiter **pp = &c->waiters; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
}

/* Sends frame (len bytes) as request id and waits for its reply until
 * deadline. Returns 0 with the reply's bytes in *reply, or NNG's error. */
/* A rank started before its coordinator, or pointed at the wrong place,
 * says so on stderr once it has tried for a second, and every 10 s after,
 * rather than waiting out C10D_TIMEOUT_MS in silence. Short waits (a
 * c10d-ctl call) stay quiet: their error says it. c->mu held. */
static void notice_unreachable(c10di_conn *c, int64_t now, int64_t deadline)
{
    if (!c->last_err) {
        c->down_since_ms = 0;
        return;
    }
    if (!c->down_since_ms) {
        c->down_since_ms = now;
        c->next_notice_ms = now + 1000;
    }
    if (now < c->next_notice_ms || deadline - c->down_since_ms < 5000)
        return;
    c->next_notice_ms = now + 10000;
    fprintf(stderr, "c10d: pid %d: no coordinator answers at %s yet (%s), after %lld s; still "
            "trying, for up to %lld s more (C10D_TIMEOUT_MS)\n", (int)getpid(), c->url,
            nng_strerror(c->last_err), (long long)(now - c->down_since_ms) / 1000,
            (long long)(deadline - now) / 1000);
}

static int exchange(c10di_conn *c, uint64_t id, uint8_t *frame, size_t len, int parked,
                    int resend, int64_t deadline, uint8_t **reply, size_t *reply_len)
{
    c10di_waiter w = {.id = id, .news = parked};
    int rv = 0;
    pthread_mutex_lock(&c->mu);
    w.next = c->waiters;
    c->waiters = &w;
    while (!w.done) {
        int64_t now = c10d_now_ms();
        if (c->closing) {
            rv = NNG_ECLOSED;
            break;
        }
        if (now >= deadline) {
            rv = NNG_ETIMEDOUT;
            break;
        }
        if (!resend && w.sent_epoch && (!c->stream || w.sent_epoch != c->epoch)) {
            rv = NNG_ECONNRESET; /* sent on a connection that broke */
            break;
        }
        if (!c->stream) {
            if (tls_failure(c->last_err)) {
                rv = c->last_err; /* a wrong CA does not get better by retrying */
                break;
            }
            notice_unreachable(c, now, deadline);
            if (!c->dialing && now >= c->next_dial_ms)
                dial(c, deadline);
            else
                wait_for(c, parked, min64(deadline, c->dialing ? now + 50 : c->next_dial_ms));
            continue;
        }
        if (w.sent_epoch != c->epoch) {
            nng_stream *s = c->stream;
            uint64_t epoch = c->epoch;
            c->users++;
            pthread_mutex_unlock(&c->mu);
            int srv = send_frame(c, s, frame, len, deadline);
            pthread_mutex_lock(&c->mu);
            c->users--;
            if (srv == 0)
                w.sent_epoch = epoch;
            else
                broken(c, s, srv);
            pthread_cond_broadcast(&c->cv);
            continue;
        }
        if (c->rx_async) {
            wait_for(c, parked, deadline); /* rx_done wakes us */
            continue;
        }
        if (!c->reading) {
            if (parked && now < c->reader_left_ms + NEWS_GRACE_MS) {
                /* a caller wanting an answer read just now: it is likely
                 * back at once (see the top of this file) */
                wait_for(c, 1, min64(deadline, c->reader_left_ms + NEWS_GRACE_MS));
                continue;
            }
            read_for(c, &w, parked, deadline);
            continue;
        }
        /* Someone else reads. One only waiting for news gives it up. */
        if (!parked && c->reader_parked) {
            c->handoff = 1;
            nng_aio_cancel(c->recv_aio);
            /* A reader between its checks and its recv misses the cancel:
             * ask again shortly. */
            wait_until(c, min64(deadline, now + 1));
        } else if (parked) {
            /* look again when the reader may have left */
            wait_for(c, 1, min64(deadline, now + NEWS_GRACE_MS));
        } else {
            wait_until(c, min64(deadline, now + 1000));
        }
    }
    unlink_waiter(c, &w);
    pthread_mutex_unlock(&c->mu);
    if (w.done && !w.reply)
        return NNG_ENOMEM;
    if (w.done) {
        *reply = w.reply;
        *reply_len = w.reply_len;
        return 0;
    }
    return rv;
}

static c10d_status call(c10di_conn *c, C10dpb__Request *req, int server_wait_ms, int timeout_ms,
                        int resend, C10dpb__Reply **rep)
{
    C10dpb__Identity who = C10DPB__IDENTITY__INIT;
    who.has_client_id = 1;
    who.client_id = c->client_id;
    if (!req->who)
        req->who = &who;
    if (!req->request_id)
        req->request_id = atomic_fetch_add(&c->next_request_id, 1);
    req->token = c->token;

    size_t len = c10dpb__request__get_packed_size(req);
    if (c->max_message_bytes && len > c->max_message_bytes)
        return c10di_error(C10D_ETOOBIG, "%s request of %zu bytes exceeds the coordinator's limit "
                           "of %llu bytes (--max-message-bytes)", op_name(req), len,
                           (unsigned long long)c->max_message_bytes);
    if (len > MAX_REPLY_BYTES)
        return c10di_error(C10D_ETOOBIG, "%s request of %zu bytes is too large to frame",
                           op_name(req), len);
    /* One contiguous buffer: TLS encrypts a send's buffer as a record. */
    uint8_t *frame = malloc(C10DC_FRAME_HDR + len);
    if (!frame)
        return c10di_error(C10D_ENOMEM, "out of memory packing a %zu-byte request", len);
    c10dc_frame_header(frame, req->request_id, len);
    c10dpb__request__pack(req, frame + C10DC_FRAME_HDR);
    if (req->who == &who)
        req->who = NULL;

    int64_t start = c10d_now_ms();
    int64_t deadline = start + (int64_t)(server_wait_ms > 0 ? server_wait_ms : 0) + timeout_ms;
    uint8_t *body = NULL;
    size_t body_len = 0;
    /* Only the watch waits for news; every other caller, a SYNC check or a
     * get parked on a key included, wants its answer as soon as it comes. */
    int news = req->op_case == C10DPB__REQUEST__OP_WATCH;
    int rv = exchange(c, req->request_id, frame, C10DC_FRAME_HDR + len, news,
                      resend, deadline, &body, &body_len);
    free(frame);
    if (rv != 0) {
        long long waited = (long long)(c10d_now_ms() - start);
        pthread_mutex_lock(&c->mu);
        int last = c->last_err;
        pthread_mutex_unlock(&c->mu);
        if (tls_failure(rv))
            return c10di_error(C10D_EAUTH, "TLS handshake with the coordinator at %s failed: %s "
                               "(is the CA file the one that signed its certificate, and does "
                               "the certificate name this host?)", c->url, nng_strerror(rv));
        if (rv == NNG_ETIMEDOUT && atomic_load(&c->pipes) == 0)
            return c10di_error(C10D_EUNAVAIL, "no coordinator answered at %s within %lld ms (%s%s%s;"
                               " is c10d-coord running there?)", c->url, waited, op_name(req),
                               last ? ": " : "", last ? nng_strerror(last) : "");
        if (rv == NNG_ETIMEDOUT)
            return c10di_error(C10D_ETIMEDOUT, "the coordinator at %s did not answer %s within "
                               "%lld ms", c->url, op_name(req), waited);
        return c10di_error(C10D_EUNAVAIL, "%s to %s failed: %s", op_name(req), c->url,
                           nng_strerror(rv));
    }
    C10dpb__Reply *r = c10dpb__reply__unpack(NULL, body_len, body);
    free(body);
    if (!r)
        return c10di_error(C10D_EPROTO, "undecodable reply to %s from %s (is it a c10d-coord?)",
                           op_name(req), c->url);
    c10d_status st;
    if (r->request_id != req->request_id) {
        st = c10di_error(C10D_EPROTO, "reply to request %llu answered request %llu",
                         (unsigned long long)req->request_id, (unsigned long long)r->request_id);
        c10dpb__reply__free_unpacked(r, NULL);
        return st;
    }
    if (r->status != C10D_OK) {
        st = c10di_error((c10d_status)r->status, "%s",
                         r->detail && *r->detail ? r->detail : c10d_strerror(r->status));
        c10dpb__reply__free_unpacked(r, NULL);
        return st;
    }
    *rep = r;
    return C10D_OK;
}

c10d_status c10di_call_drop(c10di_conn *c, C10dpb__Request *req, int server_wait_ms,
                            int timeout_ms)
{
    C10dpb__Reply *rep = NULL;
    c10d_status st = c10di_call(c, req, server_wait_ms, timeout_ms, &rep);
    if (rep)
        c10dpb__reply__free_unpacked(rep, NULL);
    return st;
}

c10d_status c10di_call(c10di_conn *c, C10dpb__Request *req, int server_wait_ms, int timeout_ms,
                       C10dpb__Reply **rep)
{
    return call(c, req, server_wait_ms, timeout_ms, 1, rep);
}

c10d_status c10di_call_once(c10di_conn *c, C10dpb__Request *req, int server_wait_ms,
                            int timeout_ms, C10dpb__Reply **rep)
{
    return call(c, req, server_wait_ms, timeout_ms, 0, rep);
}

static uint64_t random_id(void)
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != sizeof id)
        id = (uint64_t)c10d_now_us() ^ ((uint64_t)getpid() << 32);
    return id ? id : 1;
}

/* A tcp:// or tls+tcp:// URL must end in a port from 1 to 65535: NNG takes
 * 70000 and the dial then fails for ever, read as "no coordinator". */
static c10d_status check_port(const char *url)
{
    const char *scheme_end = strstr(url, "://");
    if (!scheme_end || !strstr(url, "tcp") || strstr(url, "tcp") > scheme_end)
        return C10D_OK;
    const char *colon = strrchr(scheme_end + 3, ':');
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || end == colon + 1 || *end || port < 1 || port > 65535)
        return c10di_error(C10D_EINVAL, "bad coordinator URL '%s': the port must be a number "
                           "from 1 to 65535 (tcp://host:port)", url);
    return C10D_OK;
}

static c10d_status make_dialer(c10di_conn *c, const char *tls_ca)
{
    int rv;
    c10d_status st = check_port(c->url);
    if (st != C10D_OK)
        return st;
    if ((rv = nng_stream_dialer_alloc(&c->dialer, c->url)) != 0)
        return c10di_error(C10D_EINVAL, "bad coordinator URL '%s': %s (tcp://host:port, "
                           "ipc:///path or tls+tcp://host:port)", c->url, nng_strerror(rv));
    /* Raw streams leave Nagle on; a request is one small write. */
    nng_stream_dialer_set_bool(c->dialer, NNG_OPT_TCP_NODELAY, true);
    if (c10dc_url_is_tls(c->url)) {
        nng_tls_config *cfg;
        char err[600];
        if (c10dc_tls_client(&cfg, c->url, tls_ca, err, sizeof err) != 0)
            return c10di_error(C10D_EAUTH, "%s", err);
        rv = nng_stream_dialer_set_ptr(c->dialer, NNG_OPT_TLS_CONFIG, cfg);
        nng_tls_config_free(cfg); /* the dialer holds its own reference */
        if (rv != 0)
            return c10di_error(C10D_EAUTH, "cannot use TLS for %s: %s", c->url,
                               nng_strerror(rv));
    }
    return C10D_OK;
}

c10d_status c10di_conn_open(c10di_conn **out, const char *url, const char *token,
                            const char *tls_ca, int connect_timeout_ms)
{
    c10di_conn *c = calloc(1, sizeof *c);
    c10d_status st;
    if (!c)
        return c10di_error(C10D_ENOMEM, "out of memory");
    c10d_cond_init_monotonic(&c->cv);
    c10d_cond_init_monotonic(&c->news_cv);
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->send_mu, NULL);
    atomic_init(&c->refs, 1);
    c->client_id = random_id();
    atomic_init(&c->next_request_id, 1);
    c10di_resolve_url(url, c->url, sizeof c->url);
    c->rx_async = c10dc_url_is_tls(c->url);
    if (token && *token && !(c->token = strdup(token))) {
        st = c10di_error(C10D_ENOMEM, "out of memory");
        goto fail;
    }
    if (nng_aio_alloc(&c->send_aio, NULL, NULL) != 0 ||
        nng_aio_alloc(&c->recv_aio, NULL, NULL) != 0 ||
        nng_aio_alloc(&c->dial_aio, NULL, NULL) != 0 ||
        nng_aio_alloc(&c->rx_aio, rx_done, c) != 0) {
        st = c10di_error(C10D_ENOMEM, "out of memory for NNG aios");
        goto fail;
    }
    if ((st = make_dialer(c, tls_ca ? tls_ca : getenv("C10D_TLS_CA"))) != C10D_OK)
        goto fail;
    C10dpb__Hello hello = C10DPB__HELLO__INIT;
    hello.has_protocol = 1;
    hello.protocol = C10D_PROTOCOL_VERSION;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_HELLO;
    req.hello = &hello;
    C10dpb__Reply *rep = NULL;
    if ((st = c10di_call(c, &req, 0, connect_timeout_ms, &rep)) != C10D_OK)
        goto fail;
    if (rep->result_case != C10DPB__REPLY__RESULT_HELLO) {
        c10dpb__reply__free_unpacked(rep, NULL);
        st = c10di_error(C10D_EPROTO, "%s answered the handshake with something else", c->url);
        goto fail;
    }
    c->max_key_bytes = rep->hello->max_key_bytes;
    c->max_value_bytes = rep->hello->max_value_bytes;
    c->max_multi_keys = rep->hello->max_multi_keys;
    c->max_message_bytes = rep->hello->max_message_bytes;
    snprintf(c->server_version, sizeof c->server_version, "%s",
             rep->hello->version ? rep->hello->version : "?");
    c10dpb__reply__free_unpacked(rep, NULL);
    *out = c;
    return C10D_OK;
fail:
    c10di_conn_unref(c);
    return st;
}

void c10di_conn_ref(c10di_conn *c)
{
    atomic_fetch_add(&c->refs, 1);
}

void c10di_conn_unref(c10di_conn *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    pthread_mutex_lock(&c->mu);
    c->closing = 1;
    if (c->stream)
        nng_stream_close(c->stream);
    wake_all(c);
    pthread_mutex_unlock(&c->mu);
    /* Each waits for its operation to end: nobody else is left calling. */
    nng_aio_free(c->send_aio);
    nng_aio_free(c->recv_aio);
    nng_aio_free(c->dial_aio);
    nng_aio_free(c->rx_aio); /* waits for rx_done, which takes mu */
    if (c->stream)
        nng_stream_free(c->stream);
    if (c->retired)
        nng_stream_free(c->retired);
    if (c->dialer)
        nng_stream_dialer_free(c->dialer);
    pthread_cond_destroy(&c->cv);
    pthread_cond_destroy(&c->news_cv);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->send_mu);
    free(c->rbuf);
    free(c->token);
    free(c);
}
