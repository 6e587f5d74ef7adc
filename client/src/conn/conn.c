/* The connection to the coordinator, as the library uses it (conn.h):
 * opening it and the hello, which tells the coordinator's limits; its
 * references; and the calls over it: each request is packed into a frame,
 * taken on one round trip by the stream beneath (conn_stream.c, which
 * dials again when the connection breaks and says why a round trip
 * failed), and its reply, decoded by the stream's reader, checked. */
#include "conn/conn.h"
#include "conn/conn_stream.h"
#include "version.h"

#include "c10d_time.h"
#include "frame.h"
#include "recorded_ops.h"
#include "tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* The store's writes: their outcome is unknown when they were sent and
 * never answered. */
static int is_store_write(int op_case)
{
    switch (op_case) {
    case C10DPB__REQUEST__OP_SET:
    case C10DPB__REQUEST__OP_MULTI_SET:
    case C10DPB__REQUEST__OP_ADD:
    case C10DPB__REQUEST__OP_COMPARE_SET:
    case C10DPB__REQUEST__OP_DELETE_KEY:
    case C10DPB__REQUEST__OP_APPEND:
        return 1;
    default:
        return 0;
    }
}

static const char *op_name(const C10dpb__Request *req)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&c10dpb__request__descriptor, req->op_case);
    return f ? f->name : "request";
}

/* A recorded request takes its id and its place among those in flight in
 * one step: were an id chosen outside recorded_mu, a later request could
 * say acked_below past it before it is even sent, and the coordinator
 * could drop its record before a resend needs it. */
static void recorded_enter(c10di_conn *c, C10dpb__Request *req, c10di_recorded *self)
{
    pthread_mutex_lock(&c->recorded_mu);
    self->id = atomic_fetch_add(&c->next_request_id, 1);
    self->next = NULL;
    self->prev = c->recorded_tail;
    if (c->recorded_tail)
        c->recorded_tail->next = self;
    else
        c->recorded_head = self;
    c->recorded_tail = self;
    req->request_id = self->id;
    req->has_acked_below = 1;
    req->acked_below = c->recorded_head->id;
    pthread_mutex_unlock(&c->recorded_mu);
}

/* The call ended (answered, or given up and never sent again). */
static void recorded_leave(c10di_conn *c, c10di_recorded *self)
{
    pthread_mutex_lock(&c->recorded_mu);
    if (self->prev)
        self->prev->next = self->next;
    else
        c->recorded_head = self->next;
    if (self->next)
        self->next->prev = self->prev;
    else
        c->recorded_tail = self->prev;
    pthread_mutex_unlock(&c->recorded_mu);
}

static c10d_status roundtrip(c10di_conn *c, C10dpb__Request *req, c10d_ms server_wait_ms,
                             c10d_ms timeout_ms, int resend, C10dpb__Reply **rep);

static c10d_status call(c10di_conn *c, C10dpb__Request *req, c10d_ms server_wait_ms, c10d_ms timeout_ms,
                        int resend, C10dpb__Reply **rep)
{
    if (req->request_id || !c10dc_op_is_recorded(req->op_case)) {
        if (!req->request_id)
            req->request_id = atomic_fetch_add(&c->next_request_id, 1);
        return roundtrip(c, req, server_wait_ms, timeout_ms, resend, rep);
    }
    c10di_recorded self;
    recorded_enter(c, req, &self);
    c10d_status st = roundtrip(c, req, server_wait_ms, timeout_ms, resend, rep);
    recorded_leave(c, &self);
    return st;
}

static c10d_status roundtrip(c10di_conn *c, C10dpb__Request *req, c10d_ms server_wait_ms,
                             c10d_ms timeout_ms, int resend, C10dpb__Reply **rep)
{
    C10dpb__Identity who = C10DPB__IDENTITY__INIT;
    who.has_client_id = 1;
    who.client_id = c->client_id;
    if (!req->who)
        req->who = &who;
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

    C10dpb__Reply *r = NULL;
    /* Only the watch waits for news; every other caller, a SYNC check or a
     * get parked on a key included, wants its answer as soon as it comes.
     * A SYNC check keeps looking for its verdict a while before it sleeps:
     * its collective waits for it, and waking a rank from an idle CPU
     * (30-40 us on a VM) was the most of what SYNC cost. */
    unsigned how = 0;
    if (req->op_case == C10DPB__REQUEST__OP_WATCH)
        how = C10DI_WAIT_NEWS;
    else if (req->op_case == C10DPB__REQUEST__OP_COLL_REPORT && req->coll_report->sync)
        how = C10DI_WAIT_SPIN;
    else if (is_store_write(req->op_case))
        how = C10DI_WAIT_WRITE;
    c10d_status st = c10di_conn_roundtrip(c, op_name(req), frame, C10DC_FRAME_HDR + len,
                                          req->request_id, how, resend, server_wait_ms,
                                          timeout_ms, &r);
    free(frame);
    if (st != C10D_OK) /* an undecodable reply included (C10D_EPROTO) */
        return st;
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

c10d_status c10di_call_drop(c10di_conn *c, C10dpb__Request *req, c10d_ms server_wait_ms,
                            c10d_ms timeout_ms)
{
    C10dpb__Reply *rep = NULL;
    c10d_status st = c10di_call(c, req, server_wait_ms, timeout_ms, &rep);
    if (rep)
        c10dpb__reply__free_unpacked(rep, NULL);
    return st;
}

c10d_status c10di_call(c10di_conn *c, C10dpb__Request *req, c10d_ms server_wait_ms, c10d_ms timeout_ms,
                       C10dpb__Reply **rep)
{
    return call(c, req, server_wait_ms, timeout_ms, 1, rep);
}

c10d_status c10di_call_once(c10di_conn *c, C10dpb__Request *req, c10d_ms server_wait_ms,
                            c10d_ms timeout_ms, C10dpb__Reply **rep)
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
                            const c10di_tls_files *tls, c10d_ms connect_timeout_ms,
                            const char *timeout_from)
{
    c10di_conn *c = calloc(1, sizeof *c);
    c10d_status st;
    if (!c)
        return c10di_error(C10D_ENOMEM, "out of memory");
    atomic_init(&c->refs, 1);
    c->timeout_from = timeout_from;
    c->client_id = random_id();
    atomic_init(&c->next_request_id, 1);
    if ((st = c10di_conn_stream_init(c)) != C10D_OK ||
        (st = c10di_resolve_url(url, c->url_list, sizeof c->url_list)) != C10D_OK)
        goto fail;
    c10di_tls_files none = {NULL, NULL, NULL};
    if (!tls)
        tls = &none;
    int is_tls = c10dc_url_is_tls(c->url_list); /* all of a list's, or none */
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
        st = c10di_error(C10D_EPROTO, "%s answered the handshake with something else",
                         c10di_conn_current_url(c));
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
    return c->url_list;
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
