/* The connection to the coordinator, as the library uses it (conn.h):
 * opening it and the hello, which tells the coordinator's limits; its
 * references; and the calls over it. The stream beneath, dialled again
 * when it breaks, is conn_stream.c's.
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
 * stays armed instead (conn_stream.c says why), and callers only wait.
 *
 * When the connection breaks (a coordinator restart), whichever caller
 * notices dials again (backing off from 20 to 500 ms) and every waiting
 * call sends its request again, the same bytes with the same request id,
 * until its deadline (the watch is the exception: c10di_call_once), so
 * the coordinator applies a non-idempotent request once however often it
 * arrives. */
#include "conn.h"
#include "conn_stream.h"
#include "version.h"

#include "budgets.h"
#include "c10d_time.h"
#include "frame.h"
#include "tls.h"
#include "tls_inspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define NEWS_GRACE_MS 10
/* Connections in a row that a server took and broke before answering
 * anything, with TLS on one side only, before a call gives up saying so. */
#define NOT_A_COORDINATOR_AFTER 3

static const char *op_name(const C10dpb__Request *req)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&c10dpb__request__descriptor, req->op_case);
    return f ? f->name : "request";
}

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
                c10di_conn_wait(c, parked,
                                min64(deadline, c->dialing ? now + 50 : c->next_dial_ms));
            continue;
        }
        if (w.sent_epoch != c->epoch) {
            nng_stream *s = c->stream;
            uint64_t epoch = c->epoch;
            c->users++;
            int handshake = c->rx_async && !c->answered; /* (mu held) */
            pthread_mutex_unlock(&c->mu);
            int srv = c10di_conn_send(c, s, frame, len, deadline, handshake);
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
            c10di_conn_wait(c, parked, deadline); /* the armed receive's callback wakes us */
            continue;
        }
        if (!c->reading) {
            if (parked && now < c->reader_left_ms + NEWS_GRACE_MS) {
                /* a caller wanting an answer read just now: it is likely
                 * back at once (see the top of this file) */
                c10di_conn_wait(c, 1, min64(deadline, c->reader_left_ms + NEWS_GRACE_MS));
                continue;
            }
            c10di_conn_read(c, &w, parked, deadline);
            continue;
        }
        /* Someone else reads. One only waiting for news gives it up, and
         * then leaves and wakes us. */
        if (!parked && c->reader_parked) {
            c10di_conn_ask_reading(c);
            c10di_conn_wait(c, 0, min64(deadline, now + C10DI_CONN_RELOOK_MS));
        } else if (parked) {
            /* look again when the reader may have left */
            c10di_conn_wait(c, 1, min64(deadline, now + NEWS_GRACE_MS));
        } else {
            c10di_conn_wait(c, 0, min64(deadline, now + C10DI_CONN_RELOOK_MS));
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
    if (len > C10DI_CONN_MAX_FRAME)
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

static uint64_t random_id(void)
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != sizeof id)
        id = (uint64_t)c10d_now_us() ^ ((uint64_t)getpid() << 32);
    return id ? id : 1;
}

/* *to = a copy of given, else of the environment's name, else NULL. */
static int keep_file(char **to, const char *given, const char *env)
{
    const char *v = given ? given : getenv(env);
    *to = v && *v ? strdup(v) : NULL;
    return v && *v && !*to ? -1 : 0;
}

c10d_status c10di_conn_open(c10di_conn **out, const char *url, const char *token,
                            const c10di_tls_files *tls, int connect_timeout_ms)
{
    c10di_conn *c = calloc(1, sizeof *c);
    c10d_status st;
    if (!c)
        return c10di_error(C10D_ENOMEM, "out of memory");
    atomic_init(&c->refs, 1);
    c->client_id = random_id();
    atomic_init(&c->next_request_id, 1);
    if ((st = c10di_conn_stream_init(c)) != C10D_OK ||
        (st = c10di_resolve_url(url, c->url, sizeof c->url)) != C10D_OK)
        goto fail;
    c10di_tls_files none = {NULL, NULL, NULL};
    if (!tls)
        tls = &none;
    int is_tls = c10dc_url_is_tls(c->url);
    if ((token && *token && !(c->token = strdup(token))) ||
        (is_tls && (keep_file(&c->tls_ca, tls->ca, "C10D_TLS_CA") != 0 ||
                    keep_file(&c->tls_cert, tls->cert, "C10D_TLS_CERT") != 0 ||
                    keep_file(&c->tls_key, tls->key, "C10D_TLS_KEY") != 0))) {
        st = c10di_error(C10D_ENOMEM, "out of memory");
        goto fail;
    }
    if ((st = c10di_conn_stream_dialer(c)) != C10D_OK)
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
    c10di_conn_stream_fini(c);
    free(c->token);
    free(c->tls_ca);
    free(c->tls_cert);
    free(c->tls_key);
    free(c->tls_why);
    free(c);
}

const char *c10di_conn_url(const c10di_conn *c)
{
    return c->url;
}

c10di_limits c10di_conn_limits(const c10di_conn *c)
{
    return (c10di_limits){c->max_key_bytes, c->max_value_bytes, c->max_message_bytes,
                          c->max_multi_keys};
}

uint64_t c10di_conn_epoch(c10di_conn *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t e = c->epoch;
    pthread_mutex_unlock(&c->mu);
    return e;
}
