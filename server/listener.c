#include "listener.h"

#include "log.h"
#include "nng_close.h"

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/util/platform.h>
#include <nng/transport/tcp/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A slot is one NNG context with its aio: it receives one request, then
 * (possibly much later, if the request parks) sends its reply. While a slot
 * waits for the engine, another slot takes its place receiving, so parked
 * requests never stop the coordinator from taking new ones. */
typedef struct slot {
    struct slot *next_free;
    struct slot *next_all;
    c10ds_listener *l;
    nng_ctx ctx;
    nng_aio *aio;
    int sending;
} slot;

struct c10ds_listener {
    nng_socket sock;
    nng_listener lst;
    c10ds_engine *engine;
    const c10ds_config *cfg;
    nng_mtx *mu;
    slot *free_slots; /* guarded by mu */
    slot *all_slots;  /* guarded by mu */
    int receiving;    /* guarded by mu */
    int closing;      /* guarded by mu */
    atomic_int sends_in_flight;
};

static void slot_cb(void *arg);

static slot *slot_get(c10ds_listener *l)
{
    /* called with mu held */
    slot *s = l->free_slots;
    if (s) {
        l->free_slots = s->next_free;
        return s;
    }
    if (!(s = calloc(1, sizeof *s)))
        return NULL;
    s->l = l;
    if (nng_ctx_open(&s->ctx, l->sock) != 0 || nng_aio_alloc(&s->aio, slot_cb, s) != 0) {
        free(s);
        return NULL;
    }
    s->next_all = l->all_slots;
    l->all_slots = s;
    return s;
}

static void start_recv_locked(c10ds_listener *l, slot *s)
{
    s->sending = 0;
    l->receiving++;
    nng_ctx_recv(s->ctx, s->aio);
}

/* Keeps `receivers` slots receiving. Called with mu held. */
static void top_up_locked(c10ds_listener *l)
{
    while (!l->closing && l->receiving < l->cfg->receivers) {
        slot *s = slot_get(l);
        if (!s) {
            c10ds_error("out of memory for a new NNG context; %d receiving", l->receiving);
            return;
        }
        start_recv_locked(l, s);
    }
}

static void send_bytes(slot *s, const void *data, size_t len)
{
    nng_msg *m;
    if (nng_msg_alloc(&m, len) != 0) {
        c10ds_error("out of memory for a %zu-byte reply", len);
        nng_mtx_lock(s->l->mu);
        s->next_free = s->l->free_slots;
        s->l->free_slots = s;
        nng_mtx_unlock(s->l->mu);
        return;
    }
    if (len)
        memcpy(nng_msg_body(m), data, len);
    s->sending = 1;
    atomic_fetch_add(&s->l->sends_in_flight, 1);
    nng_aio_set_msg(s->aio, m);
    nng_ctx_send(s->ctx, s->aio);
}

void c10ds_listener_send(void *arg, void *slot_ptr, const void *reply, size_t len)
{
    (void)arg;
    send_bytes(slot_ptr, reply, len);
}

static void reply_error(slot *s, uint64_t request_id, c10d_status st, const char *detail)
{
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.request_id = request_id;
    rep.status = st;
    rep.detail = (char *)detail;
    uint8_t buf[1024];
    size_t n = c10dpb__reply__get_packed_size(&rep);
    if (n <= sizeof buf) {
        c10dpb__reply__pack(&rep, buf);
        send_bytes(s, buf, n);
    }
}

static void on_request(c10ds_listener *l, slot *s, nng_msg *msg)
{
    size_t len = nng_msg_len(msg);
    uint32_t pipe = nng_pipe_id(nng_msg_get_pipe(msg));
    C10dpb__Request *pb = c10dpb__request__unpack(NULL, len, nng_msg_body(msg));
    nng_msg_free(msg);
    if (!pb) {
        c10ds_warn("undecodable request of %zu bytes; answered with a protocol error", len);
        reply_error(s, 0, C10D_EPROTO, "the coordinator could not decode this request (not a "
                                       "c10d protocol message, or truncated)");
        return;
    }
    if (pb->op_case == C10DPB__REQUEST__OP__NOT_SET) {
        uint64_t id = pb->request_id;
        c10dpb__request__free_unpacked(pb, NULL);
        reply_error(s, id, C10D_EPROTO, "request names no operation (is the client newer than "
                                        "the coordinator?)");
        return;
    }
    c10ds_request *r = c10ds_request_new(pb, s);
    if (r)
        r->pipe = pipe;
    if (!r) {
        reply_error(s, pb->request_id, C10D_ENOMEM, "coordinator out of memory");
        c10dpb__request__free_unpacked(pb, NULL);
        return;
    }
    if (c10ds_engine_submit(l->engine, r) != 0) {
        /* Shutting down: leave it unanswered; the client resends it to the
         * next coordinator. The slot goes back to receiving. */
        c10ds_request_free(r);
        nng_mtx_lock(l->mu);
        start_recv_locked(l, s);
        nng_mtx_unlock(l->mu);
    }
}

static void slot_cb(void *arg)
{
    slot *s = arg;
    c10ds_listener *l = s->l;
    int rv = nng_aio_result(s->aio);
    if (s->sending) {
        if (rv != 0) {
            /* The client went away before its reply: nothing to do. */
            nng_msg_free(nng_aio_get_msg(s->aio));
            nng_aio_set_msg(s->aio, NULL);
        }
        atomic_fetch_sub(&l->sends_in_flight, 1);
        nng_mtx_lock(l->mu);
        s->sending = 0;
        if (!l->closing && l->receiving < l->cfg->receivers) {
            start_recv_locked(l, s);
        } else {
            s->next_free = l->free_slots;
            l->free_slots = s;
        }
        nng_mtx_unlock(l->mu);
        return;
    }
    nng_mtx_lock(l->mu);
    l->receiving--;
    if (rv != 0) {
        if (rv != NNG_ECLOSED && !l->closing) {
            c10ds_warn("receive failed: %s", nng_strerror(rv));
            start_recv_locked(l, s);
        }
        nng_mtx_unlock(l->mu);
        return;
    }
    top_up_locked(l); /* someone else receives while this slot is busy */
    nng_mtx_unlock(l->mu);
    /* Take the message off the aio before the engine sees the request:
     * the engine may answer (reusing this aio for the send) at once. */
    nng_msg *m = nng_aio_get_msg(s->aio);
    nng_aio_set_msg(s->aio, NULL);
    on_request(l, s, m);
}

static void on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    c10ds_listener *l = arg;
    if (ev == NNG_PIPE_EV_ADD_POST)
        atomic_fetch_add(&l->engine->clients, 1);
    else if (ev == NNG_PIPE_EV_REM_POST) {
        atomic_fetch_sub(&l->engine->clients, 1);
        /* Ranks that joined on this connection are dead: tell the engine
         * (it owns the membership; never block an NNG callback). */
        c10ds_request *r = c10ds_request_new(NULL, NULL);
        if (r) {
            r->event = C10DS_EV_PIPE_CLOSED;
            r->pipe = nng_pipe_id(p);
            if (c10ds_engine_submit(l->engine, r) != 0)
                c10ds_request_free(r);
        }
    }
}

/* Writes into out the URL actually bound: the same as asked, but with the
 * port filled in when the caller asked for port 0. */
static void bound_url(c10ds_listener *l, const char *url, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", url);
    int port = 0;
    if (strncmp(url, "tcp://", 6) != 0 ||
        nng_listener_get_int(l->lst, NNG_OPT_TCP_BOUND_PORT, &port) != 0)
        return;
    const char *colon = strrchr(url, ':');
    if (colon && colon > url + 5)
        snprintf(out, outlen, "%.*s:%d", (int)(colon - url), url, port);
}

c10ds_listener *c10ds_listener_new(const c10ds_config *cfg, c10ds_engine *engine, char *url_out,
                                   size_t url_len, char *err, size_t errlen)
{
    c10ds_listener *l = calloc(1, sizeof *l);
    int rv;
    if (!l || nng_mtx_alloc(&l->mu) != 0) {
        snprintf(err, errlen, "out of memory");
        free(l);
        return NULL;
    }
    l->cfg = cfg;
    l->engine = engine;
    if ((rv = nng_rep0_open(&l->sock)) != 0) {
        snprintf(err, errlen, "cannot open the NNG socket: %s", nng_strerror(rv));
        goto fail;
    }
    /* NNG 1.5.2 accepts messages of any size by default; a peer could make
     * us allocate without bound. Beyond this the connection is dropped. */
    nng_socket_set_size(l->sock, NNG_OPT_RECVMAXSZ, (size_t)cfg->max_message_bytes);
    nng_pipe_notify(l->sock, NNG_PIPE_EV_ADD_POST, on_pipe, l);
    nng_pipe_notify(l->sock, NNG_PIPE_EV_REM_POST, on_pipe, l);
    if ((rv = nng_listener_create(&l->lst, l->sock, cfg->listen_url)) != 0 ||
        (rv = nng_listener_start(l->lst, 0)) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s%s", cfg->listen_url, nng_strerror(rv),
                 rv == NNG_EADDRINUSE ? " (another coordinator, or another program, has this "
                                        "port; pick another with --listen)"
                                      : "");
        goto fail;
    }
    bound_url(l, cfg->listen_url, url_out, url_len);
    nng_mtx_lock(l->mu);
    top_up_locked(l);
    nng_mtx_unlock(l->mu);
    return l;
fail:
    c10ds_listener_close(l, 2000);
    return NULL;
}

void c10ds_listener_drain(c10ds_listener *l, int timeout_ms)
{
    for (int waited = 0; atomic_load(&l->sends_in_flight) > 0 && waited < timeout_ms; waited++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

int c10ds_listener_close(c10ds_listener *l, int timeout_ms)
{
    if (!l)
        return 0;
    nng_mtx_lock(l->mu);
    l->closing = 1;
    nng_mtx_unlock(l->mu);
    /* Completes every aio with NNG_ECLOSED, unless NNG 1.5.2's close race
     * hangs it (common/nng_close.h): then the slots stay allocated, since
     * their callbacks may still run, and the process exits around them. */
    if (c10dc_nng_close_bounded(l->sock, timeout_ms) != 0)
        return -1;
    for (slot *s = l->all_slots, *n; s; s = n) {
        n = s->next_all;
        nng_aio_free(s->aio); /* waits for its callback */
        free(s);
    }
    nng_mtx_free(l->mu);
    free(l);
    return 0;
}
