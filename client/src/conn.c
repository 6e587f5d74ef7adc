/* The connection to the coordinator: one NNG byte stream (tcp://, ipc://
 * or tls+tcp://) carrying length-prefixed frames (common/frame.h), shared
 * by every thread of the process that talks to the coordinator: user
 * calls, heartbeats and watch, the verification reporter. This file opens
 * it (the dialler, the hello, which tells the coordinator's limits), dials
 * again when it breaks, and frees it; the calls in flight over it, and who
 * reads their replies, are conn_call.c's.
 *
 * When the connection breaks (a coordinator restart), whichever caller
 * notices dials again (backing off from 20 to 500 ms) and every waiting
 * call sends its request again, with the same request id, so the
 * coordinator applies a non-idempotent request once however often it
 * arrives. */
#include "conn_internal.h"
#include "version.h"

#include "c10d_time.h"
#include "tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* The connection s failed with rv (mu held): close it, so that every
 * operation on it ends, and let the next caller dial again. */
/* The next dial waits a little longer (mu held): a coordinator being
 * restarted is usually back soon; a port that is no coordinator's is not,
 * and must not be dialled in a tight loop. */
static void back_off(c10di_conn *c)
{
    static const int backoff[] = {20, 50, 100, 200, 500};
    int k = c->dial_failures < 4 ? c->dial_failures++ : 4;
    c->next_dial_ms = c10d_now_ms() + backoff[k];
}

void c10di_conn_broken(c10di_conn *c, nng_stream *s, int rv)
{
    if (c->stream != s)
        return; /* someone saw it first */
    /* Broken before anything was answered on it: the server took the
     * connection but is no coordinator (or no TLS one). Back off, as for a
     * refused dial; a plain client on a TLS port dialled 1,114 times a
     * second. */
    if (!c->answered) {
        c->unanswered++;
        back_off(c);
    }
    c->stream = NULL;
    c->retired = s;
    c->last_err = rv;
    atomic_store(&c->pipes, 0);
    nng_stream_close(s);
    wake_all(c);
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

/* Dials once (mu held, returns with it held). */
void c10di_conn_dial(c10di_conn *c, int64_t deadline)
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
        c->answered = 0; /* the back-off and the outage end at a reply, not at a connect */
        atomic_store(&c->pipes, 1);
        /* still armed on the old stream (its callback late): that
         * callback arms it here */
        if (c->rx_async && !c->rx_armed)
            c10di_conn_rx_arm(c);
    } else {
        if (rv == 0)
            nng_stream_free(nng_aio_get_output(c->dial_aio, 0));
        c->last_err = rv ? rv : NNG_ECLOSED;
        back_off(c);
    }
    wake_all(c);
}

/* A rank started before its coordinator, or pointed at the wrong place,
 * says so on stderr once it has tried for a second, and every 10 s after,
 * rather than waiting out C10D_TIMEOUT_MS in silence. Short waits (a
 * c10d-ctl call) stay quiet: their error says it. c->mu held. */
void c10di_conn_notice_unreachable(c10di_conn *c, int64_t now, int64_t deadline)
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
    /* A coordinator that is down refuses connections; one that takes them
     * and hangs up on our handshake is some other server (a TCPStore). */
    const char *other = c->last_err == NNG_ECONNSHUT
                            ? ": the server there accepts connections and closes them without "
                              "answering, as a c10d-coord would not; is it another server, "
                              "such as torchrun's TCPStore?"
                            : "";
    fprintf(stderr, "c10d: pid %d: no coordinator answers at %s yet (%s%s), after %lld s; still "
            "trying, for up to %lld s more (C10D_TIMEOUT_MS)\n", (int)getpid(), c->url,
            nng_strerror(c->last_err), other, (long long)(now - c->down_since_ms) / 1000,
            (long long)(deadline - now) / 1000);
}

static uint64_t random_id(void)
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != sizeof id)
        id = (uint64_t)c10d_now_us() ^ ((uint64_t)getpid() << 32);
    return id ? id : 1;
}

static c10d_status make_dialer(c10di_conn *c)
{
    int rv;
    if ((rv = nng_stream_dialer_alloc(&c->dialer, c->url)) != 0)
        return c10di_error(C10D_EINVAL, "bad coordinator URL '%s': %s (tcp://host:port, "
                           "ipc:///path or tls+tcp://host:port)", c->url, nng_strerror(rv));
    /* Raw streams leave Nagle on; a request is one small write. */
    nng_stream_dialer_set_bool(c->dialer, NNG_OPT_TCP_NODELAY, true);
    if (c10dc_url_is_tls(c->url)) {
        nng_tls_config *cfg;
        char err[600];
        if (c10dc_tls_client(&cfg, c->url, c->tls_ca, c->tls_cert, c->tls_key, err,
                             sizeof err) != 0)
            return c10di_error(C10D_EAUTH, "%s", err);
        rv = nng_stream_dialer_set_ptr(c->dialer, NNG_OPT_TLS_CONFIG, cfg);
        nng_tls_config_free(cfg); /* the dialer holds its own reference */
        if (rv != 0)
            return c10di_error(C10D_EAUTH, "cannot use TLS for %s: %s", c->url,
                               nng_strerror(rv));
    }
    return C10D_OK;
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
    c10d_cond_init_monotonic(&c->cv);
    c10d_cond_init_monotonic(&c->news_cv);
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->send_mu, NULL);
    atomic_init(&c->refs, 1);
    c->client_id = random_id();
    atomic_init(&c->next_request_id, 1);
    if ((st = c10di_resolve_url(url, c->url, sizeof c->url)) != C10D_OK)
        goto fail;
    c->rx_async = c10dc_url_is_tls(c->url);
    c10di_tls_files none = {NULL, NULL, NULL};
    if (!tls)
        tls = &none;
    if ((token && *token && !(c->token = strdup(token))) ||
        (c->rx_async && (keep_file(&c->tls_ca, tls->ca, "C10D_TLS_CA") != 0 ||
                         keep_file(&c->tls_cert, tls->cert, "C10D_TLS_CERT") != 0 ||
                         keep_file(&c->tls_key, tls->key, "C10D_TLS_KEY") != 0))) {
        st = c10di_error(C10D_ENOMEM, "out of memory");
        goto fail;
    }
    pthread_mutex_init(&c->sent_mu, NULL);
    c10d_cond_init_monotonic(&c->sent_cv);
    if (nng_aio_alloc(&c->send_aio, c10di_conn_sent, c) != 0 ||
        nng_aio_alloc(&c->recv_aio, NULL, NULL) != 0 ||
        nng_aio_alloc(&c->dial_aio, NULL, NULL) != 0 ||
        nng_aio_alloc(&c->rx_aio, c10di_conn_rx_done, c) != 0) {
        st = c10di_error(C10D_ENOMEM, "out of memory for NNG aios");
        goto fail;
    }
    if ((st = make_dialer(c)) != C10D_OK)
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
    nng_aio_free(c->rx_aio); /* waits for c10di_conn_rx_done, which takes mu */
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
    pthread_mutex_destroy(&c->sent_mu);
    pthread_cond_destroy(&c->sent_cv);
    free(c->rbuf);
    free(c->token);
    free(c->tls_ca);
    free(c->tls_cert);
    free(c->tls_key);
    free(c->tls_why);
    free(c);
}
