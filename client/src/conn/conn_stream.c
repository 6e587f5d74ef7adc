/* The stream beneath the connection to the coordinator: one NNG byte
 * stream (tcp://, ipc:// or tls+tcp://) carrying length-prefixed frames
 * (common/frame.h). This file dials it (again, with back-off, when it
 * breaks), sends a frame, and reads frames, handing each reply to the
 * call waiting for it by request id (c10di_waiter). A call is one round
 * trip (c10di_conn_roundtrip): it sends its frame and waits for its reply,
 * reading the stream itself when it is its turn.
 *
 * Many requests are in flight at once; replies come in any order and are
 * matched by request id. No thread is dedicated to reading. A caller
 * waiting for its reply reads the stream itself when nobody else is,
 * hands every other reply to its caller, and passes the reading on once
 * its own reply has come. So the common case, one caller, wakes once per
 * reply, straight from NNG's poller (an aio without a callback). A caller
 * only waiting for news (the watch) gives the reading up to a caller that
 * arrives: the newcomer's reply should not need a second thread to wake
 * it. And it leaves the reading alone for NEWS_GRACE_MS after such a
 * caller stopped: a rank between two SYNC collectives is back within
 * microseconds, and taking the reading back from the watch each time
 * would cost a cancelled receive. It waits on its own condition variable,
 * which a reply for another caller does not signal. Over TLS a receive
 * stays armed instead (see below), and callers only wait.
 *
 * When the connection breaks (a coordinator restart), whichever caller
 * notices dials again (backing off from 20 to 500 ms) and every waiting
 * call sends its request again, the same bytes with the same request id,
 * until its deadline (the watch is the exception: c10di_call_once), so
 * the coordinator applies a non-idempotent request once however often it
 * arrives.
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
 * and ends it only at its timeout (send_frame).
 *
 * A replicated coordinator (docs/replication.md) is a list of URLs, a
 * dialer each; only the leading replica serves. A dial that fails goes
 * on to the next URL, and the back-off begins once every URL failed us
 * in a row (a round: c->tried). A follower answers every request with
 * C10D_ENOTLEADER, naming the leader when it knows it: dispatch looks at
 * each reply's status for it (reply_status), completes no call with it,
 * and drops the stream as a coordinator restart would, so that every
 * call in flight is sent again (same bytes, same request id), to the
 * leader named (added to the list if it is not there) or else the next
 * URL. Such an answer counts as a failure for the round too: two
 * followers naming each other, or a dead leader, during an election do
 * not make a client dial in a tight loop.
 *
 * TLS is the exception. NNG's TLS stream cannot abandon a receive: a
 * cancelled or timed-out recv aborts the TCP read beneath it, which tears
 * the connection down, and when that read has just finished the abort
 * finds nothing to stop and the recv is never completed at all (a job's
 * ranks hung in c10d_destroy that way). So on tls+tcp:// one receive with
 * no timeout stays armed while connected, its callback hands the replies
 * out, and callers only wait on the condition variable: one more thread
 * hop per reply, paid only where TLS's own costs dwarf it. */
#include "conn/conn_stream.h"

#include "budgets.h"
#include "c10d_time.h"
#include "frame.h"
#include "stream_fd.h"
#include "tls.h"
#include "tls_inspect.h"
#include "url.h"

#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define RBUF_MIN (64u * 1024)
#define NEWS_GRACE_MS 10
/* A reader sleeps in poll(2) on the socket this long at most, then waits
 * through NNG for FALLBACK_RECV_MS, and goes back to poll(2): were the
 * socket found for the stream ever the wrong one (stream_fd.h), a reply
 * would be late, never lost; and a long wait (a parked watch) stays in
 * poll(2) nearly all the time. */
#define POLL_SLICE_MS 1000
#define FALLBACK_RECV_MS 20
/* Connections in a row that a server took and broke before answering
 * anything, with TLS on one side only, before a call gives up saying so. */
#define NOT_A_COORDINATOR_AFTER 3

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* A TLS failure: a wrong CA does not get better by dialling again. */
static int tls_failure(int rv)
{
    return rv == NNG_EPEERAUTH || rv == NNG_ECRYPTO;
}

static void unlink_waiter(c10di_conn *c, c10di_waiter *w)
{
    for (c10di_waiter **pp = &c->waiters; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
}


/* The connection changed (mu held): everyone looks again. */
static void wake_all(c10di_conn *c)
{
    pthread_cond_broadcast(&c->cv);
    pthread_cond_broadcast(&c->news_cv);
}

static void wait_change(c10di_conn *c, int news, int64_t until_ms)
{
    struct timespec ts = {(time_t)(until_ms / 1000), (long)(until_ms % 1000) * 1000000};
    pthread_cond_timedwait(news ? &c->news_cv : &c->cv, &c->mu, &ts);
}

/* The next dial waits a little longer (mu held): a coordinator being
 * restarted is usually back soon; a port that is no coordinator's is not,
 * and must not be dialled in a tight loop. */
static void back_off(c10di_conn *c)
{
    static const int backoff[] = {20, 50, 100, 200, 500};
    int k = c->dial_failures < 4 ? c->dial_failures++ : 4;
    c->next_dial_ms = c10d_now_ms() + backoff[k];
}

/* The URL now current failed us (mu held): a dial, a connection
 * broken before any reply, a replica that does not lead. The next dial
 * goes to `hint` (an index, or -1) unless it failed us already this
 * round, else to the next URL that did not; once all did, the round ends
 * with a back-off. One URL: a back-off every time, as ever. */
static void miss(c10di_conn *c, int hint)
{
    c->tried |= 1u << c->cur;
    int next = hint >= 0 && !(c->tried & (1u << hint)) ? hint : -1;
    for (int i = 1; next < 0 && i <= c->n_urls; i++) {
        int k = (c->cur + i) % c->n_urls;
        if (!(c->tried & (1u << k)))
            next = k;
    }
    if (next < 0) {
        c->tried = 0;
        back_off(c);
        next = hint >= 0 ? hint : (c->cur + 1) % c->n_urls;
    } else {
        c->next_dial_ms = c10d_now_ms();
    }
    c->cur = next;
}

/* Drops c's stream s (mu held; s is c->stream): closed now, freed by the
 * next dial once nobody uses it. */
static void retire(c10di_conn *c, nng_stream *s, int rv)
{
    c->stream = NULL;
    c10dc_stream_fd_release(c->retired_fd); /* a stream left allocated (dial) */
    c->retired = s;
    c->retired_fd = c->stream_fd;
    c->stream_fd = -1;
    c->last_err = rv;
    c->err_url = c->urls[c->cur];
    atomic_store(&c->pipes, 0);
    nng_stream_close(s);
    wake_all(c);
}

static void broken(c10di_conn *c, nng_stream *s, int rv)
{
    if (c->stream != s)
        return; /* someone saw it first */
    /* Broken before anything was answered on it: the server took the
     * connection but is no coordinator (or no TLS one). Back off, as for a
     * refused dial; a plain client on a TLS port dialled 1,114 times a
     * second. */
    int unanswered = !c->answered;
    retire(c, s, rv);
    if (unanswered) {
        c->unanswered++;
        c->hung_url = c->urls[c->cur];
        miss(c, -1);
    }
}

/* A replica answered on c->stream that it does not lead, naming the
 * leader's URL (len bytes at leader; 0: it knows none) (mu held). The
 * stream is dropped: every call in flight is sent again on the next one,
 * which dial() makes to the leader named, else to the next URL. The
 * replica is a coordinator: not counted among the servers that hang up
 * unanswered. */
static void not_leader(c10di_conn *c, const uint8_t *leader, size_t len, const uint8_t *detail,
                       size_t detail_len)
{
    free(c->hint);
    c->hint = len ? strndup((const char *)leader, len) : NULL;
    /* what the replica said (no leader: an election, or no majority),
     * for the error if no leader is found in time */
    free(c->leaderless_why);
    c->leaderless_why = detail_len ? strndup((const char *)detail, detail_len) : NULL;
    c->redirected = 1;
    c->leaderless = 1;
    c->unanswered = 0;
    retire(c, c->stream, NNG_ECLOSED);
}

static int varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *i < n; shift += 7) {
        uint8_t b = p[(*i)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

/* A reply's status and leader_url, read from its protobuf without
 * unpacking it (replies are handed out as bytes; conn.c unpacks them).
 * Reply's fields 1 to 4 (request_id, status, detail, leader_url) lead
 * its encoding, as protobuf-c writes fields in the order of their
 * numbers: the look stops at the first field past them, so a large reply
 * costs no more than a small one. Returns the status (0 when none). */
static int reply_status(const uint8_t *p, size_t n, const uint8_t **leader, size_t *leader_len,
                        const uint8_t **detail, size_t *detail_len)
{
    size_t i = 0;
    int status = 0;
    *leader = *detail = NULL;
    *leader_len = *detail_len = 0;
    uint64_t key, v;
    while (i < n && varint(p, n, &i, &key) == 0 && key >> 3 <= 4) {
        unsigned field = (unsigned)(key >> 3), type = (unsigned)(key & 7);
        if (type == 0) {
            if (varint(p, n, &i, &v) != 0)
                break;
            if (field == 2) /* sint32: zigzag */
                status = (int)((int64_t)(v >> 1) ^ -(int64_t)(v & 1));
        } else if (type == 2) {
            if (varint(p, n, &i, &v) != 0 || v > n - i)
                break;
            if (field == 4) {
                *leader = p + i;
                *leader_len = (size_t)v;
            } else if (field == 3) {
                *detail = p + i;
                *detail_len = (size_t)v;
            }
            i += (size_t)v;
        } else {
            break; /* Reply's first fields are varints and strings only */
        }
    }
    return status;
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
             * as tcp:// (conn.c says so after a few). */
            c->spoke_tls = (c->rbuf[off] == 0x15 || c->rbuf[off] == 0x16) && c->rbuf[off + 1] == 3;
            return -1;
        }
        if (c->rlen - off < 4 + (size_t)n)
            break;
        uint64_t id = c10dc_get_u64(c->rbuf + off + 4);
        size_t body = n - 8;
        const uint8_t *leader, *detail;
        size_t leader_len, detail_len;
        if (reply_status(c->rbuf + off + C10DC_FRAME_HDR, body, &leader, &leader_len, &detail,
                         &detail_len) == C10D_ENOTLEADER) {
            /* wakes all: those woken above too */
            not_leader(c, leader, leader_len, detail, detail_len);
            return 1;
        }
        if (!c->answered) { /* a coordinator: dial at once again if it breaks */
            c->answered = 1;
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

/* TLS: arms the connection's one receive on c->stream (mu held; not
 * while c->rx_armed). The armed receive counts as a user of the stream, so
 * a redial waits for its callback before freeing it. */
static void rx_arm(c10di_conn *c)
{
    if (make_room(c) != 0) {
        broken(c, c->stream, NNG_ENOMEM);
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
static void rx_done(void *arg)
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
        broken(c, s, rv); /* does nothing if the stream was replaced */
    } else if (c->stream == s) {
        c->rlen += got;
        if (dispatch(c) < 0)
            broken(c, s, NNG_EPROTO);
    }
    /* The next receive, on the stream connected now: also a new one, whose
     * dial found this receive still armed on the old stream and left the
     * arming to us (an aio is submitted again only once it completed). */
    if (c->stream && !c->closing)
        rx_arm(c);
    pthread_mutex_unlock(&c->mu);
}

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

/* A dialer for url, with its TLS configuration (c->tls_*) for a
 * tls+tcp:// one, as c->urls[c->n_urls], not yet counted: the caller
 * counts it, under mu. Only a thread that dials, or the opening, adds
 * one. C10D_EINVAL: NNG refuses the URL, or the list is full; C10D_EAUTH:
 * the TLS files. */
static c10d_status add_url(c10di_conn *c, const char *url)
{
    nng_stream_dialer *d = NULL;
    char *copy = NULL;
    int rv, k = c->n_urls;
    c10d_status st = C10D_OK;
    if (k == C10DI_CONN_URLS)
        return c10di_error(C10D_EINVAL, "more than %d coordinator URLs", C10DI_CONN_URLS);
    if (!(copy = strdup(url)))
        return c10di_error(C10D_ENOMEM, "out of memory");
    if ((rv = nng_stream_dialer_alloc(&d, url)) != 0) {
        st = c10di_error(C10D_EINVAL, "bad coordinator URL '%s': %s (tcp://host:port, "
                         "ipc:///path or tls+tcp://host:port)", url, nng_strerror(rv));
        goto fail;
    }
    /* Raw streams leave Nagle on; a request is one small write. */
    nng_stream_dialer_set_bool(d, NNG_OPT_TCP_NODELAY, true);
    if (c10dc_url_is_tls(url)) {
        nng_tls_config *cfg;
        char err[600];
        if (c10dc_tls_client(&cfg, url, c->tls_ca, c->tls_cert, c->tls_key, err,
                             sizeof err) != 0) {
            st = c10di_error(C10D_EAUTH, "%s", err);
            goto fail;
        }
        rv = nng_stream_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
        nng_tls_config_free(cfg); /* the dialer holds its own reference */
        if (rv != 0) {
            st = c10di_error(C10D_EAUTH, "cannot use TLS for %s: %s", url, nng_strerror(rv));
            goto fail;
        }
    }
    c->urls[k] = copy;
    c->dialers[k] = d;
    return C10D_OK;
fail:
    if (d)
        nng_stream_dialer_free(d);
    free(copy);
    return st;
}

/* After a replica said it does not lead (mu held, c->dialing): makes the
 * leader it named current, adding its URL when the list lacks it (a
 * replica may spell its host otherwise than the list: a leader named is
 * dialled, not matched), or else the next URL; a URL that cannot be ours
 * (TLS where the list is plain, or the other way; a bad one) is passed
 * over. Returns 0 when a round ended (back off before dialling), else 1. */
static int redirect(c10di_conn *c)
{
    char *hint = c->hint, url[C10DI_URL_MAX];
    c->hint = NULL;
    c->redirected = 0;
    int k = -1;
    if (hint && c10di_url_element(hint, strlen(hint), url, sizeof url) == C10D_OK &&
        !c10dc_url_is_tls(url) == !c->rx_async) {
        for (int i = 0; i < c->n_urls && k < 0; i++)
            if (!strcmp(c->urls[i], url))
                k = i;
        if (k < 0) {
            pthread_mutex_unlock(&c->mu);
            int added = add_url(c, url) == C10D_OK; /* it reads files for TLS: not under mu */
            pthread_mutex_lock(&c->mu);
            if (added)
                k = c->n_urls++;
        }
    }
    free(hint);
    miss(c, k);
    return c10d_now_ms() >= c->next_dial_ms && !c->closing;
}

/* ipc:// dials of this process, one at a time with the look for their
 * socket: two new connections to one path would be told apart by nothing
 * (common/stream_fd.h). */
static pthread_mutex_t ipc_dial_mu = PTHREAD_MUTEX_INITIALIZER;

static void dial(c10di_conn *c, int64_t deadline)
{
    c->dialing = 1;
    /* The old stream is freed once nobody uses it: closing it ended their
     * operations, so this is short. Should NNG never finish one of them,
     * the stream is left allocated rather than freed under its user, and
     * the dial goes on. */
    int64_t give_up = c10d_now_ms() + C10DI_CONN_RETIRE_MS;
    while (c->retired && c->users > 0 && c10d_now_ms() < give_up && !c->closing)
        wait_change(c, 0, c10d_now_ms() + 50);
    nng_stream *old = c->users > 0 ? NULL : c->retired;
    c->retired = NULL;
    c10dc_stream_fd_release(c->retired_fd); /* before its number can be reused */
    c->retired_fd = -1;
    if (c->redirected && !redirect(c)) {
        /* a round of URLs failed us: dial after the back-off */
        c->dialing = 0;
        wake_all(c);
        pthread_mutex_unlock(&c->mu);
        if (old)
            nng_stream_free(old);
        pthread_mutex_lock(&c->mu);
        return;
    }
    const char *url = c->urls[c->cur];
    nng_stream_dialer *dialer = c->dialers[c->cur];
    int64_t attempt = c->n_urls > 1 ? C10DI_CONN_LIST_DIAL_ATTEMPT_MS : C10DI_CONN_DIAL_ATTEMPT_MS;
    pthread_mutex_unlock(&c->mu);
    if (old)
        nng_stream_free(old);
    int64_t left = deadline - c10d_now_ms();
    nng_aio_set_timeout(c->dial_aio, (nng_duration)(left > attempt ? attempt : left > 1 ? left : 1));
    int ipc = strncmp(url, "ipc://", 6) == 0;
    if (ipc)
        pthread_mutex_lock(&ipc_dial_mu);
    nng_stream_dialer_dial(dialer, c->dial_aio);
    nng_aio_wait(c->dial_aio);
    int rv = nng_aio_result(c->dial_aio);
    if (rv == 0 && connected_to_itself(nng_aio_get_output(c->dial_aio, 0))) {
        nng_stream_free(nng_aio_get_output(c->dial_aio, 0));
        rv = NNG_ECONNREFUSED;
    }
    int fd = rv == 0 && !c->rx_async && c->wake_fd >= 0
                 ? c10dc_stream_fd(nng_aio_get_output(c->dial_aio, 0))
                 : -1;
    if (ipc)
        pthread_mutex_unlock(&ipc_dial_mu);
    pthread_mutex_lock(&c->mu);
    c->dialing = 0;
    if (rv == 0 && !c->closing) {
        c->stream = nng_aio_get_output(c->dial_aio, 0);
        c->stream_fd = fd;
        c->epoch++;
        c->rlen = 0;
        c->last_err = 0;
        c->answered = 0; /* the back-off and the outage end at a reply, not at a connect */
        atomic_store(&c->pipes, 1);
        /* still armed on the old stream (its callback late): that
         * callback arms it here */
        if (c->rx_async && !c->rx_armed)
            rx_arm(c);
    } else {
        c10dc_stream_fd_release(fd);
        if (rv == 0)
            nng_stream_free(nng_aio_get_output(c->dial_aio, 0));
        c->last_err = rv ? rv : NNG_ECLOSED;
        c->err_url = url;
        miss(c, -1);
    }
    wake_all(c);
}

/* A rank started before its coordinator, or pointed at the wrong place,
 * says so on stderr once it has tried for a second, and every 10 s after,
 * rather than waiting out C10D_TIMEOUT_MS in silence. Short waits (a
 * c10d-ctl call) stay quiet: their error says it. c->mu held. */
static void notice_unreachable(c10di_conn *c, int64_t now, int64_t deadline)
{
    if (!c->last_err && !c->leaderless) {
        c->down_since_ms = 0;
        return;
    }
    if (!c->down_since_ms) {
        c->down_since_ms = now;
        c->next_notice_ms = now + C10DI_CONN_NOTICE_AFTER_MS;
    }
    if (now < c->next_notice_ms || deadline - c->down_since_ms < C10DI_CONN_NOTICE_MIN_WAIT_MS)
        return;
    c->next_notice_ms = now + C10DI_CONN_NOTICE_EVERY_MS;
    /* A coordinator that is down refuses connections; one that takes them
     * and hangs up on our handshake is some other server (a TCPStore). */
    const char *other = c->last_err == NNG_ECONNSHUT
                            ? ": the server there accepts connections and closes them without "
                              "answering, as a c10d-coord would not; is it another server, "
                              "such as torchrun's TCPStore?"
                            : "";
    if (c->leaderless)
        fprintf(stderr, "c10d: pid %d: no leader found among the coordinator's replicas at %s "
                "yet (those that answer do not lead: an election?), after %lld s; still "
                "trying, for up to %lld s more (C10D_TIMEOUT_MS)\n", (int)getpid(),
                c->url_list, (long long)(now - c->down_since_ms) / 1000,
                (long long)(deadline - now) / 1000);
    else
        fprintf(stderr, "c10d: pid %d: no coordinator answers at %s yet (%s%s), after %lld s; "
                "still trying, for up to %lld s more (C10D_TIMEOUT_MS)\n", (int)getpid(),
                c->url_list, nng_strerror(c->last_err), other,
                (long long)(now - c->down_since_ms) / 1000, (long long)(deadline - now) / 1000);
}

/* The reader (mu held; released while it sleeps) sleeps in poll(2) on
 * the stream's socket until it is readable, for at most left ms and
 * POLL_SLICE_MS. Returns 1 when it is readable or the slice passed (read
 * through NNG now: a readable socket's receive completes inside
 * nng_stream_recv, on this thread, and no other thread is woken), 0 when
 * the reader was asked for the reading (ask_reading) or interrupted. */
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

static void read_replies(c10di_conn *c, c10di_waiter *w, int parked, int64_t deadline)
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
            broken(c, s, NNG_ENOMEM);
            break;
        }
        nng_iov iov = {c->rbuf + c->rlen, c->rcap - c->rlen};
        /* after a poll(2) slice: a short receive through NNG, then poll
         * again (a readable socket's receive ends at once anyway) */
        int64_t recv_ms = c->stream_fd >= 0 && left > FALLBACK_RECV_MS ? FALLBACK_RECV_MS : left;
        nng_aio_set_iov(c->recv_aio, 1, &iov);
        nng_aio_set_timeout(c->recv_aio, (nng_duration)recv_ms);
        /* Submitted under mu, on s still the stream (the loop's test): a
         * receive queued on a stream broken() already closed is never
         * ended by NNG 1.5.2 but by its timeout (see send_frame). A caller
         * asking for the reading (under mu) finds it submitted, and may
         * cancel it (never before: see recv_armed). */
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

static void ask_reading(c10di_conn *c)
{
    /* Its receive is cancelled if submitted, else the reader cancels it
     * itself once it is (read_replies). */
    if (c->handoff)
        return;
    c->handoff = 1;
    if (c->recv_armed)
        nng_aio_cancel(c->recv_aio);
    uint64_t one = 1;
    if (c->polling)
        (void)!write(c->wake_fd, &one, sizeof one);
}

/* send_aio's callback: the send completed (sent_mu, sent_cv). */
static void sent_cb(void *arg)
{
    c10di_conn *c = arg;
    pthread_mutex_lock(&c->sent_mu);
    c->sent = 1;
    pthread_cond_broadcast(&c->sent_cv);
    pthread_mutex_unlock(&c->sent_mu);
}

/* Waits for send_aio (TLS only). NNG 1.5.2's TLS can leave a send pending for ever,
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
        if (!c->rx_async) {
            /* tcp://, ipc://: an aio with no callback completes where the
             * send ends, most often inside nng_stream_send on this very
             * thread, and nng_aio_wait returns without a thread hop (a
             * callback runs on NNG's task thread, which must then wake
             * this one: a wake-up per request). Its timeout holds. */
            nng_aio_set_iov(c->send_now_aio, 1, &iov);
            nng_aio_set_timeout(c->send_now_aio, (nng_duration)left);
            /* Submitted under mu, and only while s is still the stream:
             * NNG 1.5.2 queues a send on a stream already closed (by
             * broken(), on another thread, after this caller took s) and
             * never ends it but by its timeout, the whole call's: four
             * threads sharing a connection hung 15 s that way after a
             * coordinator restart. Queued before the close, the close
             * ends it. */
            pthread_mutex_lock(&c->mu);
            int current = c->stream == s;
            if (current)
                nng_stream_send(s, c->send_now_aio);
            pthread_mutex_unlock(&c->mu);
            if (!current) {
                rv = NNG_ECLOSED;
                break;
            }
            nng_aio_wait(c->send_now_aio);
            if ((rv = nng_aio_result(c->send_now_aio)) == 0)
                off += nng_aio_count(c->send_now_aio);
            continue;
        }
        nng_aio_set_iov(c->send_aio, 1, &iov);
        nng_aio_set_timeout(c->send_aio, (nng_duration)left);
        pthread_mutex_lock(&c->sent_mu);
        c->sent = 0;
        pthread_mutex_unlock(&c->sent_mu);
        nng_stream_send(s, c->send_aio);
        /* A TLS connection nothing was answered on yet is in its
         * handshake: a coordinator answers that within seconds. */
        int64_t until = deadline + C10DI_CONN_SEND_OVERRUN_MS;
        if (handshake && until > c10d_now_ms() + C10DI_CONN_HANDSHAKE_MS)
            until = c10d_now_ms() + C10DI_CONN_HANDSHAKE_MS;
        wait_sent(c, s, until);
        if ((rv = nng_aio_result(c->send_aio)) == 0)
            off += nng_aio_count(c->send_aio);
    }
    pthread_mutex_unlock(&c->send_mu);
    return rv;
}

/* Sends frame (len bytes) as request id and waits for its reply until
 * deadline. Returns 0 with the reply's bytes in *reply, or NNG's error. */
static int exchange(c10di_conn *c, uint64_t id, uint8_t *frame, size_t len, unsigned how,
                    int resend, int64_t deadline, uint8_t **reply, size_t *reply_len)
{
    int parked = (how & C10DI_WAIT_NEWS) != 0;
    c10di_waiter w = {.id = id, .news = parked, .spin = (how & C10DI_WAIT_SPIN) != 0};
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
                const char *hung = c->hung_url;
                pthread_mutex_unlock(&c->mu);
                int tls = c->rx_async ? 0 : c10dc_tls_probe(hung);
                int found = c->rx_async ? c10dc_tls_diagnose(hung, c->tls_ca, c->tls_cert,
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
            notice_unreachable(c, now, deadline);
            if (!c->dialing && now >= c->next_dial_ms)
                dial(c, deadline);
            else
                wait_change(c, parked,
                                min64(deadline, c->dialing ? now + 50 : c->next_dial_ms));
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
                broken(c, s, srv);
            pthread_cond_broadcast(&c->cv);
            continue;
        }
        if (c->rx_async) {
            wait_change(c, parked, deadline); /* the armed receive's callback wakes us */
            continue;
        }
        if (!c->reading) {
            if (parked && now < c->reader_left_ms + NEWS_GRACE_MS) {
                /* a caller wanting an answer read just now: it is likely
                 * back at once (see the top of this file) */
                wait_change(c, 1, min64(deadline, c->reader_left_ms + NEWS_GRACE_MS));
                continue;
            }
            read_replies(c, &w, parked, deadline);
            continue;
        }
        /* Someone else reads. One only waiting for news gives it up, and
         * then leaves and wakes us. */
        if (!parked && c->reader_parked) {
            ask_reading(c);
            wait_change(c, 0, min64(deadline, now + C10DI_CONN_RELOOK_MS));
        } else if (parked) {
            /* look again when the reader may have left */
            wait_change(c, 1, min64(deadline, now + NEWS_GRACE_MS));
        } else {
            wait_change(c, 0, min64(deadline, now + C10DI_CONN_RELOOK_MS));
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

c10d_status c10di_conn_roundtrip(c10di_conn *c, const char *what, uint8_t *frame, size_t len,
                                 uint64_t id, unsigned how, int resend, int server_wait_ms,
                                 int timeout_ms, uint8_t **reply, size_t *reply_len)
{
    int64_t start = c10d_now_ms();
    int64_t deadline = start + (int64_t)(server_wait_ms > 0 ? server_wait_ms : 0) + timeout_ms;
    int rv = exchange(c, id, frame, len, how, resend, deadline, reply, reply_len);
    if (rv == 0)
        return C10D_OK;
    long long waited = (long long)(c10d_now_ms() - start);
    pthread_mutex_lock(&c->mu);
    int last = c->last_err, leaderless = c->leaderless;
    char said[512] = "";
    if (c->leaderless_why)
        snprintf(said, sizeof said, "; the last said: %s", c->leaderless_why);
    /* the URL the failure was met at; the list, when all were tried */
    const char *url = c->err_url ? c->err_url : c->urls[c->cur];
    const char *hung = c->hung_url ? c->hung_url : url;
    const char *now_url = c->urls[c->cur];
    pthread_mutex_unlock(&c->mu);
    const char *all = c->url_list;
    int list = c->n_urls > 1 || strchr(all, ',') != NULL;
    if (tls_failure(rv)) {
        /* NNG says "Peer could not be authenticated" for an expired
         * certificate, an unknown CA and a wrong host alike: ask the
         * TLS engine itself what it found, with one more handshake. */
        char why[600];
        if (c10dc_tls_diagnose(url, c->tls_ca, c->tls_cert, c->tls_key, why,
                               sizeof why) != 0)
            snprintf(why, sizeof why, "%s (is the CA file the one that signed its "
                     "certificate, and does the certificate name this host?)",
                     nng_strerror(rv));
        return c10di_error(C10D_EAUTH, "TLS handshake with the coordinator at %s failed: %s",
                           url, why);
    }
    if (rv == NNG_EPROTO && c->rx_async) {
        pthread_mutex_lock(&c->mu);
        c10d_status st = c10di_error(C10D_EAUTH, "TLS handshake with the coordinator at %s "
                                     "failed: %s", hung, c->tls_why ? c->tls_why : "?");
        pthread_mutex_unlock(&c->mu);
        return st;
    }
    if (rv == NNG_EPROTO)
        return c10di_error(C10D_EPROTO, "the server at %s answers in TLS: it is a tls+tcp:// "
                           "coordinator; dial it as tls+tcp://%s, with C10D_TLS_CA naming "
                           "the CA that signed its certificate", hung,
                           strstr(hung, "://") ? strstr(hung, "://") + 3 : hung);
    if (rv == NNG_ETIMEDOUT && leaderless) {
        int other = last && last != NNG_ECLOSED; /* ECLOSED: a follower's stream, dropped */
        return c10di_error(C10D_EUNAVAIL, "no leader found among the coordinator's replicas at "
                           "%s within %lld ms (%s: those that answered do not lead%s%s%s)", all,
                           waited, what, said, other ? "; the last dial: " : "",
                           other ? nng_strerror(last) : "");
    }
    if (rv == NNG_ETIMEDOUT && atomic_load(&c->pipes) == 0)
        return c10di_error(C10D_EUNAVAIL, "no coordinator answered at %s%s within %lld ms (%s%s%s;"
                           " is c10d-coord running there?)", list ? "any of " : "", all, waited,
                           what, last ? ": " : "", last ? nng_strerror(last) : "");
    if (rv == NNG_ETIMEDOUT)
        return c10di_error(C10D_ETIMEDOUT, "the coordinator at %s did not answer %s within "
                           "%lld ms", now_url, what, waited);
    if (rv == NNG_ECONNRESET && leaderless)
        return c10di_error(C10D_EUNAVAIL, "%s to %s failed: that replica of the coordinator "
                           "does not lead (%s)", what, url, all);
    return c10di_error(C10D_EUNAVAIL, "%s to %s failed: %s", what, now_url,
                       nng_strerror(rv));
}

/* C10D_BUSY_POLL_US: how long a SYNC check looks for its verdict before
 * sleeping (0: never); unset, empty or not a number from 0 to 10000: the
 * default. */
static int busy_poll_us(void)
{
    const char *v = getenv("C10D_BUSY_POLL_US");
    char *end;
    long us = v && *v ? strtol(v, &end, 10) : -1;
    return us >= 0 && us <= 10000 && !*end ? (int)us : C10DC_BUSY_POLL_DEFAULT_US;
}

c10d_status c10di_conn_stream_init(c10di_conn *c)
{
    c->stream_fd = c->retired_fd = -1;
    c10dc_busy_poll_init(&c->bp, busy_poll_us());
    /* none: readers wait through NNG only */
    c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    c10d_cond_init_monotonic(&c->cv);
    c10d_cond_init_monotonic(&c->news_cv);
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->recorded_mu, NULL);
    pthread_mutex_init(&c->send_mu, NULL);
    pthread_mutex_init(&c->sent_mu, NULL);
    c10d_cond_init_monotonic(&c->sent_cv);
    if (nng_aio_alloc(&c->send_aio, sent_cb, c) != 0 ||
        nng_aio_alloc(&c->send_now_aio, NULL, NULL) != 0 ||
        nng_aio_alloc(&c->recv_aio, NULL, NULL) != 0 ||
        nng_aio_alloc(&c->dial_aio, NULL, NULL) != 0 ||
        nng_aio_alloc(&c->rx_aio, rx_done, c) != 0)
        return c10di_error(C10D_ENOMEM, "out of memory for NNG aios");
    return C10D_OK;
}

c10d_status c10di_conn_stream_dialer(c10di_conn *c)
{
    /* c10di_resolve_url checked each URL, and that all are TLS or none */
    c->rx_async = c10dc_url_is_tls(c->url_list);
    const char *p = c->url_list, *elem;
    size_t len;
    while (c10dc_url_list_next(&p, &elem, &len)) {
        char url[C10DI_URL_MAX];
        snprintf(url, sizeof url, "%.*s", (int)len, elem);
        c10d_status st = add_url(c, url);
        if (st != C10D_OK)
            return st;
        c->n_urls++;
    }
    return C10D_OK;
}

const char *c10di_conn_current_url(c10di_conn *c)
{
    pthread_mutex_lock(&c->mu);
    const char *url = c->n_urls ? c->urls[c->cur] : c->url_list;
    pthread_mutex_unlock(&c->mu);
    return url;
}

void c10di_conn_stream_fini(c10di_conn *c)
{
    pthread_mutex_lock(&c->mu);
    c->closing = 1;
    if (c->stream)
        nng_stream_close(c->stream);
    wake_all(c);
    pthread_mutex_unlock(&c->mu);
    /* Each waits for its operation to end: nobody else is left calling. */
    nng_aio_free(c->send_aio);
    nng_aio_free(c->send_now_aio);
    nng_aio_free(c->recv_aio);
    nng_aio_free(c->dial_aio);
    nng_aio_free(c->rx_aio); /* waits for rx_done, which takes mu */
    c10dc_stream_fd_release(c->stream_fd);
    c10dc_stream_fd_release(c->retired_fd);
    if (c->stream)
        nng_stream_free(c->stream);
    if (c->retired)
        nng_stream_free(c->retired);
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    for (int i = 0; i < c->n_urls; i++) {
        nng_stream_dialer_free(c->dialers[i]);
        free(c->urls[i]);
    }
    free(c->hint);
    free(c->leaderless_why);
    pthread_cond_destroy(&c->cv);
    pthread_cond_destroy(&c->news_cv);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->recorded_mu);
    pthread_mutex_destroy(&c->send_mu);
    pthread_mutex_destroy(&c->sent_mu);
    pthread_cond_destroy(&c->sent_cv);
    free(c->rbuf);
}
