/* The stream beneath the connection to the coordinator: one NNG byte
 * stream (tcp://, ipc:// or tls+tcp://) carrying length-prefixed frames
 * (common/frame.h). A call is one round trip (c10di_conn_roundtrip): it
 * sends its frame and waits for its reply, reading the stream itself when
 * it is its turn (conn_reader.c), and dialling again when the connection
 * broke (conn_dial.c); this file has the calls in flight (c10di_waiter),
 * sending a frame, and saying why a round trip failed. The files and what
 * each calls: conn_stream_internal.h.
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
 * stays armed instead (conn_reader.c says why), and callers only wait. */
#include "conn/conn_stream_internal.h"

#include "budgets.h"
#include "c10d_time.h"
#include "server_probe.h"
#include "stream_fd.h"
#include "tls_inspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define NEWS_GRACE_MS 10
/* Connections in a row that a server took and broke before answering
 * anything, with TLS on one side only, before a call gives up saying so. */
#define NOT_A_COORDINATOR_AFTER 3

/* Asks once what the server at url is, when it may be no coordinator
 * (mu held; let go meanwhile). 1 when it is something else, said in
 * c->not_coord_why. */
static int identify(c10di_conn *c, const char *url)
{
    if (c->identified || c->rx_async)
        return c->not_coord_why != NULL;
    c->identified = 1;
    char what[256];
    pthread_mutex_unlock(&c->mu);
    int found = c10dc_identify_server(url, what, sizeof what);
    pthread_mutex_lock(&c->mu);
    if (found && !c->not_coord_why) {
        c->not_coord_why = strdup(what);
        c->hung_url = url;
    }
    return c->not_coord_why != NULL;
}

/* After a TLS handshake with url failed saying why: where the server
 * does not speak TLS, " It is ...", what it is asked in plain TCP, into
 * out (else ""). A plain coordinator answers no protocol the probe
 * knows, and is left to the TLS engine's words. */
static void what_is_there(const char *url, const char *why, char *out, size_t cap)
{
    char plain[C10DI_URL_MAX], is[256];
    const char *rest = strstr(url, "://");
    out[0] = '\0';
    if (why && strstr(why, "does not answer in TLS") && rest &&
        snprintf(plain, sizeof plain, "tcp%s", rest) < (int)sizeof plain &&
        c10dc_identify_server(plain, is, sizeof is) == 1)
        snprintf(out, cap, " It is %s.", is);
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
            nng_aio_set_timeout(c->send_now_aio, c10d_nng_ms(left));
            /* Submitted under mu, and only while s is still the stream:
             * NNG 1.5.2 queues a send on a stream already closed (by
             * c10di_conn_broken(), on another thread, after this caller took s) and
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
        nng_aio_set_timeout(c->send_aio, c10d_nng_ms(left));
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

/* A list's replica served that has said nothing since w was sent, nor
 * since its last reply to anyone, for C10DI_CONN_LEADER_SILENCE_MS: a
 * leader frozen or cut off keeps its connections open, and its clients
 * would wait out their timeouts while the others elect. Asks the others
 * who leads (conn_probe.c), and moves there when one leads or names
 * another. Returns when to look next, or -1 after a probe (mu was let
 * go). */
static int64_t look_past_silence(c10di_conn *c, c10di_waiter *w, int64_t now)
{
    int64_t quiet_since = c->heard_ms > w->sent_ms ? c->heard_ms : w->sent_ms;
    int64_t probe_at = quiet_since + C10DI_CONN_LEADER_SILENCE_MS;
    if (probe_at < c->next_probe_ms)
        probe_at = c->next_probe_ms;
    if (c->probing)
        return now + C10DI_CONN_LEADER_PROBE_MS; /* another caller asks: woken if it moves */
    if (now < probe_at)
        return probe_at;
    char leader[C10DI_URL_MAX];
    nng_stream *s = c->stream;
    if (c->heard_ms > c->probed_ms)
        c->quiet_probes = 0; /* it spoke since the last probe */
    c->probing = 1;
    int moved = c10di_conn_probe_leader(c, leader, sizeof leader);
    c->probing = 0;
    /* confirmed leading again and again past an election's time (a get
     * held for minutes): asked less often, up to 4x, so that a job's
     * ranks parked on a key do not dial the followers twice a second */
    int k = c->quiet_probes < 8 ? c->quiet_probes++ / 4 : 2;
    c->probed_ms = c10d_now_ms();
    c->next_probe_ms = c->probed_ms + ((int64_t)C10DI_CONN_LEADER_REPROBE_MS << k);
    /* not when the stream spoke meanwhile: the one served is alive */
    if (moved && c->stream == s && c->heard_ms <= quiet_since)
        c10di_conn_leader_moved(c, leader);
    wake_all(c);
    return -1;
}

/* Sends frame (len bytes) as request id and waits for its reply until
 * deadline. Returns 0 with the reply, decoded, in *reply (the caller's to
 * free; NULL: it did not decode), or NNG's error. */
static int exchange(c10di_conn *c, uint64_t id, uint8_t *frame, size_t len, unsigned how,
                    int resend, int64_t deadline, C10dpb__Reply **reply, int *sent)
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
                continue; /* mu was let go: look at the connection again */
            }
            if (c->unanswered >= NOT_A_COORDINATOR_AFTER && (c->spoke_tls || c->tls_why)) {
                rv = NNG_EPROTO; /* the port speaks TLS and we do not, or the other way */
                break;
            }
            if (c->unanswered >= NOT_A_COORDINATOR_AFTER && !c->identified && !c->ever_answered &&
                !c->rx_async) {
                if (identify(c, c->hung_url)) {
                    rv = NNG_EPROTO; /* a TCPStore, most often */
                    break;
                }
                continue; /* mu was let go: look at the connection again */
            }
            c10di_conn_notice_unreachable(c, now, deadline);
            if (!c->dialing && now >= c->next_dial_ms) {
                c10di_conn_dial(c, deadline);
                /* TLS: the new stream's one receive, armed before mu is
                 * let go. Still armed on the old stream (its callback
                 * late): that callback arms it here. */
                if (c->rx_async && c->stream && !c->rx_armed)
                    c10di_conn_rx_arm(c);
            } else {
                wait_change(c, parked, min64(deadline, c->dialing ? now + 50 : c->next_dial_ms));
            }
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
            if (srv == 0) {
                w.sent_epoch = epoch;
                w.sent_ms = c10d_now_ms();
            } else {
                c10di_conn_broken(c, s, srv);
            }
            pthread_cond_broadcast(&c->cv);
            continue;
        }
        /* Connected, asked, and nothing said back for a while: a
         * coordinator answers in milliseconds; an HTTP server waits for a
         * line that never comes. */
        int64_t until = deadline;
        if (!c->ever_answered && !c->identified && !c->rx_async) {
            int64_t probe_at = c->dialed_ms + C10DI_CONN_SILENT_PROBE_MS;
            if (now >= probe_at) {
                if (identify(c, c->urls[c->cur])) {
                    rv = NNG_EPROTO;
                    break;
                }
                continue;
            }
            until = min64(deadline, probe_at);
        }
        /* A replica of a list silent for a while: a frozen leader? Not
         * for the watch, parked on news for as long as a rank lives:
         * every rank would ask the followers for ever; the next call of
         * any other kind looks past a frozen leader, and the watch is
         * sent again where it lands. */
        if (c->n_urls > 1 && !parked) {
            int64_t probe_at = look_past_silence(c, &w, now);
            if (probe_at < 0)
                continue; /* mu was let go: look at the connection again */
            until = min64(until, probe_at);
        }
        if (c->rx_async) {
            wait_change(c, parked, until); /* the armed receive's callback wakes us */
            continue;
        }
        if (!c->reading) {
            if (parked && now < c->reader_left_ms + NEWS_GRACE_MS) {
                /* a caller wanting an answer read just now: it is likely
                 * back at once (see the top of this file) */
                wait_change(c, 1, min64(deadline, c->reader_left_ms + NEWS_GRACE_MS));
                continue;
            }
            c10di_conn_read_replies(c, &w, parked, until);
            continue;
        }
        /* Someone else reads. One only waiting for news gives it up, and
         * then leaves and wakes us. */
        if (!parked && c->reader_parked) {
            c10di_conn_ask_reading(c);
            wait_change(c, 0, min64(until, now + C10DI_CONN_RELOOK_MS));
        } else if (parked) {
            /* look again when the reader may have left */
            wait_change(c, 1, min64(until, now + NEWS_GRACE_MS));
        } else {
            wait_change(c, 0, min64(until, now + C10DI_CONN_RELOOK_MS));
        }
    }
    unlink_waiter(c, &w);
    pthread_mutex_unlock(&c->mu);
    *sent = w.sent_epoch != 0;
    if (w.done) {
        *reply = w.reply;
        return 0;
    }
    return rv;
}

static c10d_status why_failed(c10di_conn *c, const char *what, int rv, int64_t start);

c10d_status c10di_conn_roundtrip(c10di_conn *c, const char *what, uint8_t *frame, size_t len,
                                 uint64_t id, unsigned how, int resend, c10d_ms server_wait_ms,
                                 c10d_ms timeout_ms, C10dpb__Reply **reply)
{
    int64_t start = c10d_now_ms();
    int64_t deadline = start + (int64_t)(server_wait_ms > 0 ? server_wait_ms : 0) + timeout_ms;
    C10dpb__Reply *r = NULL;
    int sent = 0;
    int rv = exchange(c, id, frame, len, how, resend, deadline, &r, &sent);
    if (rv == 0 && r) {
        *reply = r;
        return C10D_OK;
    }
    if (rv == 0) /* a frame whose protobuf is no Reply (dispatch, conn_reader.c) */
        return c10di_error(C10D_EPROTO, "undecodable reply to %s from %s (is it a c10d-coord?)",
                           what, c10di_conn_current_url(c));
    c10d_status st = why_failed(c, what, rv, start);
    /* A write that went out and was never answered may have been applied:
     * its outcome is unknown, unlike a refusal, which carries the
     * coordinator's own code and reason and applied nothing. */
    if ((how & C10DI_WAIT_WRITE) && sent && (st == C10D_ETIMEDOUT || st == C10D_EUNAVAIL))
        st = c10di_error(st, "%s; the outcome is unknown: the %s was sent and may have been "
                         "applied (read the key to know)", c10d_errmsg(), what);
    return st;
}

/* Why the round trip of `what` failed with NNG's rv, in the words of what
 * the stream found (c10di_conn_roundtrip). */
static c10d_status why_failed(c10di_conn *c, const char *what, int rv, int64_t start)
{
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
        char is[300];
        what_is_there(url, why, is, sizeof is);
        return c10di_error(C10D_EAUTH, "TLS handshake with the coordinator at %s failed: %s%s",
                           url, why, is);
    }
    pthread_mutex_lock(&c->mu);
    char *what_is = c->not_coord_why ? strdup(c->not_coord_why) : NULL;
    pthread_mutex_unlock(&c->mu);
    if (rv == NNG_EPROTO && what_is) {
        int store = strstr(what_is, "TCPStore") != NULL;
        c10d_status st = c10di_error(
            C10D_EPROTO, "the server at %s is %s, not a c10d-coord: %s", hung, what_is,
            store ? "under torchrun, MASTER_ADDR:MASTER_PORT is torchrun's own store, and a "
                    "coordinator's --tcpstore-listen port is for TCPStore clients; set "
                    "C10D_COORD to the coordinator's --listen URL"
                  : "set C10D_COORD (c10d-ctl: --coord) to the coordinator's --listen URL");
        free(what_is);
        return st;
    }
    free(what_is);
    if (rv == NNG_EPROTO && c->rx_async) {
        pthread_mutex_lock(&c->mu);
        char *why = c->tls_why ? strdup(c->tls_why) : NULL;
        pthread_mutex_unlock(&c->mu);
        char is[300];
        what_is_there(hung, why, is, sizeof is);
        c10d_status st = c10di_error(C10D_EAUTH, "TLS handshake with the coordinator at %s "
                                     "failed: %s%s", hung, why ? why : "?", is);
        free(why);
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
        nng_aio_alloc(&c->rx_aio, c10di_conn_rx_done, c) != 0)
        return c10di_error(C10D_ENOMEM, "out of memory for NNG aios");
    return C10D_OK;
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
    nng_aio_free(c->rx_aio); /* waits for c10di_conn_rx_done, which takes mu */
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
    free(c->not_coord_why);
    pthread_cond_destroy(&c->cv);
    pthread_cond_destroy(&c->news_cv);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->recorded_mu);
    pthread_mutex_destroy(&c->send_mu);
    pthread_mutex_destroy(&c->sent_mu);
    pthread_cond_destroy(&c->sent_cv);
    free(c->rbuf);
}
