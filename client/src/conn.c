/* The connection to the coordinator and the one way requests are made.
 *
 * NNG's dialer reconnects by itself (every 20-500 ms) when the coordinator
 * goes away; a call whose connection broke resends its request, with the
 * same request id, once a connection is back, so the coordinator can apply
 * a non-idempotent request once however often it arrives. NNG's own
 * timer-based resend is switched off: a get may legitimately be held by
 * the coordinator for minutes, and NNG's default would resend it after 60 s. */
#include "internal.h"
#include "version.h"

#include "c10d_time.h"
#include "nng_close.h"

#include <nng/protocol/reqrep0/req.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

typedef struct c10di_ctx {
    struct c10di_ctx *next;
    nng_ctx ctx;
    nng_aio *aio;
} c10di_ctx;

static void on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    c10di_conn *c = arg;
    if (ev == NNG_PIPE_EV_ADD_POST)
        atomic_fetch_add(&c->pipes, 1);
    else if (ev == NNG_PIPE_EV_REM_POST)
        atomic_fetch_sub(&c->pipes, 1);
}

static c10di_ctx *ctx_get(c10di_conn *c)
{
    nng_mtx_lock(c->mu);
    c10di_ctx *x = c->idle;
    if (x)
        c->idle = x->next;
    nng_mtx_unlock(c->mu);
    if (x)
        return x;
    if (!(x = calloc(1, sizeof *x)))
        return NULL;
    if (nng_ctx_open(&x->ctx, c->sock) != 0 || nng_aio_alloc(&x->aio, NULL, NULL) != 0) {
        free(x);
        return NULL;
    }
    /* Resend only when the connection breaks (NNG requeues then), never on
     * a timer; see the top of this file. */
    nng_ctx_set_ms(x->ctx, NNG_OPT_REQ_RESENDTIME, 24 * 3600 * 1000);
    return x;
}

static void ctx_put(c10di_conn *c, c10di_ctx *x)
{
    nng_mtx_lock(c->mu);
    x->next = c->idle;
    c->idle = x;
    nng_mtx_unlock(c->mu);
}

static void ctx_free(c10di_ctx *x)
{
    nng_aio_free(x->aio);
    nng_ctx_close(x->ctx);
    free(x);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static const char *op_name(const C10dpb__Request *req)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&c10dpb__request__descriptor, req->op_case);
    return f ? f->name : "request";
}

/* One attempt: send, wait for the reply until deadline. Returns 0 with
 * *reply, or the NNG error. */
static int attempt(c10di_ctx *x, const void *buf, size_t len, int64_t deadline, nng_msg **reply)
{
    nng_msg *m;
    int rv;
    int64_t left = deadline - c10d_now_ms();
    if (left <= 0)
        return NNG_ETIMEDOUT;
    if ((rv = nng_msg_alloc(&m, len)) != 0)
        return rv;
    memcpy(nng_msg_body(m), buf, len);
    nng_aio_set_msg(x->aio, m);
    nng_aio_set_timeout(x->aio, (nng_duration)left);
    nng_ctx_send(x->ctx, x->aio);
    nng_aio_wait(x->aio);
    if ((rv = nng_aio_result(x->aio)) != 0) {
        nng_msg_free(nng_aio_get_msg(x->aio));
        nng_aio_set_msg(x->aio, NULL);
        return rv;
    }
    left = deadline - c10d_now_ms();
    nng_aio_set_timeout(x->aio, (nng_duration)(left > 0 ? left : 1));
    nng_ctx_recv(x->ctx, x->aio);
    nng_aio_wait(x->aio);
    if ((rv = nng_aio_result(x->aio)) != 0)
        return rv;
    *reply = nng_aio_get_msg(x->aio);
    nng_aio_set_msg(x->aio, NULL);
    return 0;
}

c10d_status c10di_call(c10di_conn *c, C10dpb__Request *req, int server_wait_ms, int timeout_ms,
                       C10dpb__Reply **rep)
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
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return c10di_error(C10D_ENOMEM, "out of memory packing a %zu-byte request", len);
    c10dpb__request__pack(req, buf);
    if (req->who == &who)
        req->who = NULL;

    c10di_ctx *x = ctx_get(c);
    if (!x) {
        free(buf);
        return c10di_error(C10D_ENOMEM, "cannot open an NNG context");
    }
    int64_t start = c10d_now_ms();
    int64_t deadline = start + (int64_t)(server_wait_ms > 0 ? server_wait_ms : 0) + timeout_ms;
    nng_msg *reply = NULL;
    int rv, resends = 0;
    while ((rv = attempt(x, buf, len, deadline, &reply)) != 0) {
        /* The connection broke under the request (coordinator restarting):
         * wait for the dialer to reconnect and send the same bytes again. */
        if (rv != NNG_ECONNRESET && rv != NNG_ECONNSHUT && rv != NNG_ECLOSED &&
            rv != NNG_ECONNREFUSED)
            break;
        if (rv == NNG_ECLOSED && c->refs <= 0)
            break;
        resends++;
        sleep_ms(20);
    }
    free(buf);
    c10d_status st = C10D_OK;
    if (rv != 0) {
        int64_t waited = c10d_now_ms() - start;
        if (rv == NNG_ETIMEDOUT && atomic_load(&c->pipes) == 0)
            st = c10di_error(C10D_EUNAVAIL, "no coordinator answered at %s within %lld ms (%s; "
                             "is c10d-coord running there?)", c->url, (long long)waited,
                             op_name(req));
        else if (rv == NNG_ETIMEDOUT)
            st = c10di_error(C10D_ETIMEDOUT, "the coordinator at %s did not answer %s within %lld "
                             "ms", c->url, op_name(req), (long long)waited);
        else
            st = c10di_error(C10D_EUNAVAIL, "%s to %s failed: %s", op_name(req), c->url,
                             nng_strerror(rv));
        /* The context may still hold the request: do not reuse it. */
        ctx_free(x);
        return st;
    }
    ctx_put(c, x);
    C10dpb__Reply *r = c10dpb__reply__unpack(NULL, nng_msg_len(reply), nng_msg_body(reply));
    nng_msg_free(reply);
    if (!r)
        return c10di_error(C10D_EPROTO, "undecodable reply to %s from %s (is it a c10d-coord?)",
                           op_name(req), c->url);
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

static uint64_t random_id(void)
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != sizeof id)
        id = (uint64_t)c10d_now_us() ^ ((uint64_t)getpid() << 32);
    return id ? id : 1;
}

c10d_status c10di_conn_open(c10di_conn **out, const char *url, const char *token,
                            int connect_timeout_ms)
{
    c10di_conn *c = calloc(1, sizeof *c);
    c10d_status st;
    int rv;
    if (!c || nng_mtx_alloc(&c->mu) != 0) {
        free(c);
        return c10di_error(C10D_ENOMEM, "out of memory");
    }
    atomic_init(&c->refs, 1);
    c->client_id = random_id();
    atomic_init(&c->next_request_id, 1);
    c10di_resolve_url(url, c->url, sizeof c->url);
    if (token && *token && !(c->token = strdup(token))) {
        st = c10di_error(C10D_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rv = nng_req0_open(&c->sock)) != 0) {
        st = c10di_error(C10D_ERROR, "cannot open an NNG socket: %s", nng_strerror(rv));
        goto fail;
    }
    nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_POST, on_pipe, c);
    nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, on_pipe, c);
    /* Reconnect quickly after a coordinator restart. */
    nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 20);
    nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 500);
    nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, 0); /* replies: trust the coordinator */
    if ((rv = nng_dialer_create(&c->dialer, c->sock, c->url)) != 0) {
        st = c10di_error(C10D_EINVAL, "bad coordinator URL '%s': %s", c->url, nng_strerror(rv));
        goto fail;
    }
    /* Non-blocking: a coordinator that is not up yet is retried in the
     * background, and the hello below waits for it. */
    if ((rv = nng_dialer_start(c->dialer, NNG_FLAG_NONBLOCK)) != 0) {
        st = c10di_error(C10D_EINVAL, "cannot dial %s: %s", c->url, nng_strerror(rv));
        goto fail;
    }
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
    for (c10di_ctx *x = c->idle, *n; x; x = n) {
        n = x->next;
        ctx_free(x);
    }
    /* A zero socket (never opened) is rejected harmlessly. If NNG's close
     * hangs (see common/nng_close.h) the connection is leaked, not freed:
     * its pipe callbacks may still run. */
    if (c10dc_nng_close_bounded(c->sock, 2000) != 0)
        return;
    nng_mtx_free(c->mu);
    free(c->token);
    free(c);
}
