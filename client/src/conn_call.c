/* The connection to the coordinator: one NNG byte stream (tcp://, ipc://
 * or tls+tcp://) carrying length-prefixed frames (common/frame.h), shared
 * by every thread of the process that talks to the coordinator (conn.c
 * opens it and dials again). This file is its calls: many requests are in
 * flight at once; replies come in any order and are matched by request
 * id.
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
 * The reader's receive is cancelled by the caller that asks for the
 * reading only once it is submitted (c->recv_armed); asked earlier, the
 * reader cancels it itself as soon as nng_stream_recv returns. NNG allows
 * cancelling only an operation already submitted: NNG 1.10's cancel,
 * landing between the start of nng_stream_recv and its queueing, lets
 * nng_aio_wait return while the receive stays queued, and the next
 * nng_stream_recv on that aio panics ("!nni_aio_list_active(aio)"; a rank
 * died so in c10d_destroy, its leave taking the reading from the watch).
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
 * A call whose connection broke waits for conn.c's next dial and sends its
 * request again, the same bytes with the same request id, until its
 * deadline (the watch is the exception: c10di_call_once). */
#include "conn_internal.h"

#include "tls_inspect.h"

#include "c10d_time.h"
#include "frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A reply's frame may be large (a multi_get, a trace); beyond this the
 * stream is taken to be corrupt. */
#define MAX_REPLY_BYTES (1u << 30)
#define RBUF_MIN (64u * 1024)
#define NEWS_GRACE_MS 10
/* Connections in a row that a server took and broke before answering
 * anything, with TLS on one side only, before a call gives up saying so. */
#define NOT_A_COORDINATOR_AFTER 3

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

/* Sends one frame on s (mu not held). Returns 0 or NNG's error; a
 * partial frame leaves the stream unusable, which the caller handles by
 * closing it. */
void c10di_conn_sent(void *arg)
{
    c10di_conn *c = arg;
    pthread_mutex_lock(&c->sent_mu);
    c->sent = 1;
    pthread_cond_broadcast(&c->sent_cv);
    pthread_mutex_unlock(&c->sent_mu);
}

/* Waits for send_aio. NNG 1.5.2's TLS can leave a send pending for ever,
 * its timeout ignored, when the peer closes during the handshake (a TLS
 * client on a plain coordinator, about one time in three): past `until`
 * the stream is closed, which ends it. */
static void wait_sent(c10di_conn *c, nng_stream *s, int64_t until)
{
    struct timespec ts = c10d_deadline_ts(until - c10d_now_ms());
    pthread_mutex_lock(&c->sent_mu);
    int late = 0;
    while (!c->sent && !late)
        late = pthread_cond_timedwait(&c->sent_cv, &c->sent_mu, &ts) != 0 && !c->sent;
    pthread_mutex_unlock(&c->sent_mu);
    if (late) {
        nng_stream_close(s);
        nng_aio_cancel(c->send_aio);
    }
    nng_aio_wait(c->send_aio);
}

static int send_frame(c10di_conn *c, nng_stream *s, uint8_t *buf, size_t len, int64_t deadline,
                      int handshake)
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
        pthread_mutex_lock(&c->sent_mu);
        c->sent = 0;
        pthread_mutex_unlock(&c->sent_mu);
        nng_stream_send(s, c->send_aio);
        /* A TLS connection nothing was answered on yet is in its
         * handshake: a coordinator answers that within seconds. */
        int64_t until = deadline + 1000;
        if (handshake && until > c10d_now_ms() + 3000)
            until = c10d_now_ms() + 3000;
        wait_sent(c, s, until);
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
        if (n < 8 || n > MAX_REPLY_BYTES) {
            /* A TLS record (an alert, a server hello): a TLS port dialled
             * as tcp:// (conn.c says so after a few). */
            c->spoke_tls = (c->rbuf[off] == 0x15 || c->rbuf[off] == 0x16) && c->rbuf[off + 1] == 3;
            return -1;
        }
        if (c->rlen - off < 4 + (size_t)n)
            break;
        uint64_t id = c10dc_get_u64(c->rbuf + off + 4);
        size_t body = n - 8;
        if (!c->answered) { /* a coordinator: dial at once again if it breaks */
            c->answered = 1;
            c->unanswered = 0;
            c->dial_failures = 0;
            c->probed = c->spoke_tls = 0;
            c->down_since_ms = 0; /* the next outage's notices count from its own start */
        }
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

void c10di_conn_rx_done(void *arg)
{
    c10di_conn *c = arg;
    int rv = nng_aio_result(c->rx_aio);
    size_t got = nng_aio_count(c->rx_aio);
    pthread_mutex_lock(&c->mu);
    nng_stream *s = c->rx_stream;
    c->rx_armed = 0;
    if (--c->users == 0 && c->dialing)
        pthread_cond_broadcast(&c->cv); /* c10di_conn_dial waits for the old stream's users */
    if (rv != 0) {
        c10di_conn_broken(c, s, rv); /* does nothing if the stream was replaced */
    } else if (c->stream == s) {
        c->rlen += got;
        if (dispatch(c) != 0)
            c10di_conn_broken(c, s, NNG_EPROTO);
    }
    /* The next receive, on the stream connected now: also a new one, whose
     * dial found this receive still armed on the old stream and left the
     * arming to us (an aio is submitted again only once it completed). */
    if (c->stream && !c->closing)
        c10di_conn_rx_arm(c);
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
            c10di_conn_broken(c, s, NNG_ENOMEM);
            break;
        }
        nng_iov iov = {c->rbuf + c->rlen, c->rcap - c->rlen};
        pthread_mutex_unlock(&c->mu);
        nng_aio_set_iov(c->recv_aio, 1, &iov);
        nng_aio_set_timeout(c->recv_aio, (nng_duration)left);
        nng_stream_recv(s, c->recv_aio);
        /* Submitted: from now on a caller asking for the reading may
         * cancel it (never before: see recv_armed); one that asked while
         * it was being submitted left that to us. */
        pthread_mutex_lock(&c->mu);
        if (c->handoff)
            nng_aio_cancel(c->recv_aio);
        c->recv_armed = 1;
        pthread_mutex_unlock(&c->mu);
        nng_aio_wait(c->recv_aio);
        int rv = nng_aio_result(c->recv_aio);
        size_t got = nng_aio_count(c->recv_aio);
        pthread_mutex_lock(&c->mu);
        c->recv_armed = 0;
        if (rv == 0) {
            c->rlen += got;
            if (dispatch(c) != 0)
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
            if (c->unanswered >= NOT_A_COORDINATOR_AFTER && !c->probed) {
                /* The server took the connections and hung up, each time.
                 * tcp://: a TLS port (mbed TLS closes on a plain hello
                 * without a word) or another server; one TLS hello tells
                 * them apart. tls+tcp://: a plain port, a coordinator that
                 * wants a client certificate...: one more handshake, by
                 * the TLS engine itself, says which. */
                c->probed = 1;
                char why[600];
                pthread_mutex_unlock(&c->mu);
                int tls = c->rx_async ? 0 : c10dc_tls_probe(c->url);
                int found = c->rx_async ? c10dc_tls_diagnose(c->url, c->tls_ca, c->tls_cert,
                                                             c->tls_key, why, sizeof why)
                                        : -1;
                pthread_mutex_lock(&c->mu);
                c->spoke_tls |= tls;
                if (found == 0 && !c->tls_why)
                    c->tls_why = strdup(why);
            }
            if (c->unanswered >= NOT_A_COORDINATOR_AFTER && (c->spoke_tls || c->tls_why)) {
                rv = NNG_EPROTO; /* the port speaks TLS and we do not, or the other way */
                break;
            }
            c10di_conn_notice_unreachable(c, now, deadline);
            if (!c->dialing && now >= c->next_dial_ms)
                c10di_conn_dial(c, deadline);
            else
                wait_for(c, parked, min64(deadline, c->dialing ? now + 50 : c->next_dial_ms));
            continue;
        }
        if (w.sent_epoch != c->epoch) {
            nng_stream *s = c->stream;
            uint64_t epoch = c->epoch;
            c->users++;
            int handshake = c->rx_async && !c->answered; /* (mu held) */
            pthread_mutex_unlock(&c->mu);
            int srv = send_frame(c, s, frame, len, deadline, handshake);
            pthread_mutex_lock(&c->mu);
            c->users--;
            if (srv == 0)
                w.sent_epoch = epoch;
            else
                c10di_conn_broken(c, s, srv);
            pthread_cond_broadcast(&c->cv);
            continue;
        }
        if (c->rx_async) {
            wait_for(c, parked, deadline); /* c10di_conn_rx_done wakes us */
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
        /* Someone else reads. One only waiting for news gives it up: its
         * receive is cancelled if submitted, else it cancels it itself
         * once it is (read_for); either way it then leaves and wakes us. */
        if (!parked && c->reader_parked) {
            if (!c->handoff) {
                c->handoff = 1;
                if (c->recv_armed)
                    nng_aio_cancel(c->recv_aio);
            }
            wait_until(c, min64(deadline, now + 1000));
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
        if (tls_failure(rv)) {
            /* NNG says "Peer could not be authenticated" for an expired
             * certificate, an unknown CA and a wrong host alike: ask the
             * TLS engine itself what it found, with one more handshake. */
            char why[600];
            if (c10dc_tls_diagnose(c->url, c->tls_ca, c->tls_cert, c->tls_key, why,
                                   sizeof why) != 0)
                snprintf(why, sizeof why, "%s (is the CA file the one that signed its "
                         "certificate, and does the certificate name this host?)",
                         nng_strerror(rv));
            return c10di_error(C10D_EAUTH, "TLS handshake with the coordinator at %s failed: %s",
                               c->url, why);
        }
        if (rv == NNG_EPROTO && c->rx_async) {
            pthread_mutex_lock(&c->mu);
            c10d_status st = c10di_error(C10D_EAUTH, "TLS handshake with the coordinator at %s "
                                         "failed: %s", c->url, c->tls_why ? c->tls_why : "?");
            pthread_mutex_unlock(&c->mu);
            return st;
        }
        if (rv == NNG_EPROTO)
            return c10di_error(C10D_EPROTO, "the server at %s answers in TLS: it is a tls+tcp:// "
                               "coordinator; dial it as tls+tcp://%s, with C10D_TLS_CA naming "
                               "the CA that signed its certificate", c->url,
                               strstr(c->url, "://") ? strstr(c->url, "://") + 3 : c->url);
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
