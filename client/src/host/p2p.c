/* Tagged point-to-point transfers on the P2P channel. Each message is a
 * header (tag, length) and its bytes; a recv takes the first message from
 * src with its tag, keeping others that arrive first (other tags) until
 * their own recv, as torch's send/recv allow; a recv from any member takes
 * the first with its tag from whoever sent it.
 *
 * A send never waits on its receiver alone: while it waits for room, it
 * reads what every peer is sending this rank (c10di_p2p_drain), as MPI
 * keeps unexpected messages. Otherwise two ranks that each send the other
 * more than a link holds before receiving (torch's isend-then-irecv ring,
 * batch_isend_irecv) would wait for each other for ever. */
#include "host.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t magic;
    int32_t tag;
    uint64_t len;
} frame;

#define FRAME_MAGIC 0xc10d2b2bu

_Static_assert(sizeof(frame) == sizeof(((c10di_p2p_partial *)0)->frame), "partial frame size");

static c10d_status keep(c10di_host *h, int src, int tag, size_t len, void *data)
{
    c10di_unexpected *u = calloc(1, sizeof *u);
    if (!u)
        return c10di_error(C10D_ENOMEM, "out of memory keeping a %zu-byte message", len);
    u->src = src;
    u->tag = tag;
    u->len = len;
    u->data = data;
    c10di_unexpected **tail = &h->unexpected;
    while (*tail)
        tail = &(*tail)->next;
    *tail = u;
    return C10D_OK;
}

/* Reads what peer p is sending into its partial message, without waiting;
 * a whole message is kept for its recv. Stops at a garbled frame or when
 * memory runs out: the recv from p finishes (or reports) it. */
static int drain_peer(c10di_host *h, int p)
{
    c10di_p2p_partial *s = &h->partial[p];
    int moved = 0;
    for (;;) {
        frame f;
        if (s->got < sizeof f) {
            ssize_t k = c10di_try_read(h, p, CH_P2P, s->frame + s->got, sizeof f - s->got);
            if (k <= 0)
                return moved;
            s->got += (size_t)k;
            moved = 1;
            if (s->got < sizeof f)
                return moved;
        }
        memcpy(&f, s->frame, sizeof f);
        if (f.magic != FRAME_MAGIC)
            return moved;
        if (!s->data && !(s->data = malloc(f.len ? f.len : 1)))
            return moved;
        if (s->done < f.len) {
            ssize_t k = c10di_try_read(h, p, CH_P2P, (uint8_t *)s->data + s->done,
                                       f.len - s->done);
            if (k <= 0)
                return moved;
            s->done += (size_t)k;
            moved = 1;
            if (s->done < f.len)
                return moved;
        }
        if (keep(h, p, f.tag, f.len, s->data) != C10D_OK)
            return moved; /* kept whole in s: the recv tries again */
        memset(s, 0, sizeof *s);
    }
}

int c10di_p2p_drain(c10di_host *h)
{
    if (!h->partial && !(h->partial = calloc((size_t)h->n, sizeof *h->partial)))
        return 0;
    int moved = 0;
    for (int p = 0; p < h->n; p++)
        if (p != h->me && c10di_tcp_linked(h, p))
            moved |= drain_peer(h, p);
    return moved;
}

/* Finishes the message from src that a send began to read, waiting for
 * the rest, so the stream from src is whole again before a recv reads on. */
static c10d_status finish_partial(c10di_host *h, const c10di_coll *c, int src)
{
    c10di_p2p_partial *s = h->partial ? &h->partial[src] : NULL;
    if (!s || !s->got)
        return C10D_OK;
    frame f;
    c10d_status st;
    if (s->got < sizeof f &&
        (st = c10di_xfer(h, c, CH_P2P, -1, NULL, 0, src, s->frame + s->got,
                         sizeof f - s->got)) != C10D_OK)
        return st;
    s->got = sizeof f;
    memcpy(&f, s->frame, sizeof f);
    if (f.magic != FRAME_MAGIC)
        return c10di_error(C10D_EPROTO, "%s of group %s: garbled message from rank %d", c->what,
                           h->ctx->group, src);
    if (!s->data && !(s->data = malloc(f.len ? f.len : 1)))
        return c10di_error(C10D_ENOMEM, "out of memory keeping a %llu-byte message",
                           (unsigned long long)f.len);
    if (s->done < f.len &&
        (st = c10di_xfer(h, c, CH_P2P, -1, NULL, 0, src, (uint8_t *)s->data + s->done,
                         f.len - s->done)) != C10D_OK)
        return st;
    s->done = f.len;
    if ((st = keep(h, src, f.tag, f.len, s->data)) != C10D_OK)
        return st;
    memset(s, 0, sizeof *s);
    return C10D_OK;
}

c10d_status c10di_host_send(c10di_host *h, const c10di_coll *c)
{
    size_t bytes = c->count * c10d_dtype_size(c->dtype);
    frame f = {FRAME_MAGIC, c->tag, bytes};
    c10d_status st = c10di_xfer(h, c, CH_P2P, c->root, &f, sizeof f, -1, NULL, 0);
    if (st == C10D_OK && bytes)
        st = c10di_xfer(h, c, CH_P2P, c->root, c->buf, bytes, -1, NULL, 0);
    return st;
}

static c10d_status deliver(const c10di_coll *c, c10di_host *h, size_t len, const void *data,
                           void *dst, size_t want)
{
    if (len != want)
        return c10di_error(C10D_EINVAL, "%s of group %s: rank %d sent %zu bytes with tag %d, this "
                           "recv expects %zu", c->what, h->ctx->group, c->root, len, c->tag, want);
    if (data && len)
        memcpy(dst, data, len);
    return C10D_OK;
}

c10d_status c10di_host_recv(c10di_host *h, const c10di_coll *c)
{
    size_t want = c->count * c10d_dtype_size(c->dtype);
    c10d_status fst = finish_partial(h, c, c->root);
    if (fst != C10D_OK)
        return fst;
    for (c10di_unexpected **pp = &h->unexpected; *pp; pp = &(*pp)->next) {
        c10di_unexpected *u = *pp;
        if (u->src == c->root && u->tag == c->tag) {
            *pp = u->next;
            c10d_status st = deliver(c, h, u->len, u->data, c->buf, want);
            free(u->data);
            free(u);
            return st;
        }
    }
    for (;;) {
        frame f;
        c10d_status st = c10di_xfer(h, c, CH_P2P, -1, NULL, 0, c->root, &f, sizeof f);
        if (st != C10D_OK)
            return st;
        if (f.magic != FRAME_MAGIC)
            return c10di_error(C10D_EPROTO, "%s of group %s: garbled message from rank %d",
                               c->what, h->ctx->group, c->root);
        if (f.tag == c->tag) {
            if (f.len == want)
                return want ? c10di_xfer(h, c, CH_P2P, -1, NULL, 0, c->root, c->buf, want)
                            : C10D_OK;
            /* Wrong size: take it off the channel so the stream stays
             * aligned, then report. */
            void *sink = malloc(f.len ? f.len : 1);
            if (!sink)
                return c10di_error(C10D_ENOMEM, "out of memory");
            st = c10di_xfer(h, c, CH_P2P, -1, NULL, 0, c->root, sink, f.len);
            free(sink);
            return st != C10D_OK ? st : deliver(c, h, f.len, NULL, c->buf, want);
        }
        void *data = malloc(f.len ? f.len : 1);
        if (!data)
            return c10di_error(C10D_ENOMEM, "out of memory keeping a %llu-byte message",
                               (unsigned long long)f.len);
        if ((st = c10di_xfer(h, c, CH_P2P, -1, NULL, 0, c->root, data, f.len)) != C10D_OK ||
            (st = keep(h, c->root, f.tag, f.len, data)) != C10D_OK) {
            free(data);
            return st;
        }
    }
}

/* The first kept message with tag, from anyone (arrival order); NULL if none. */
static c10di_unexpected *take_any(c10di_host *h, int tag)
{
    for (c10di_unexpected **pp = &h->unexpected; *pp; pp = &(*pp)->next)
        if ((*pp)->tag == tag) {
            c10di_unexpected *u = *pp;
            *pp = u->next;
            return u;
        }
    return NULL;
}

c10d_status c10di_host_recv_any(c10di_host *h, c10di_coll *c)
{
    size_t want = c->count * c10d_dtype_size(c->dtype);
    c10d_status st;
    /* Over TCP a lower rank waits for the higher one to dial it (tcp.c):
     * this rank dials every lower peer it has no link to; higher ones dial
     * it and are taken from its listener. */
    for (int p = 0; p < h->me; p++)
        if ((st = c10di_tcp_link(h, p, c)) != C10D_OK)
            return st;
    for (unsigned idle = 0;;) {
        c10di_unexpected *u = take_any(h, c->tag);
        if (u) {
            c->root = u->src;
            st = deliver(c, h, u->len, u->data, c->buf, want);
            free(u->data);
            free(u);
            return st;
        }
        /* a higher rank that dials this one to send, then what every peer sends */
        if (c10di_tcp_accept_ready(h) | c10di_p2p_drain(h)) {
            idle = 0;
            continue;
        }
        if (c10di_idle_wait(++idle) && (st = c10di_be_check(h->ctx, c, -1)) != C10D_OK)
            return st;
    }
}

void c10di_p2p_free(c10di_host *h)
{
    for (c10di_unexpected *u = h->unexpected, *n; u; u = n) {
        n = u->next;
        free(u->data);
        free(u);
    }
    h->unexpected = NULL;
    if (h->partial)
        for (int p = 0; p < h->n; p++)
            free(h->partial[p].data);
    free(h->partial);
    h->partial = NULL;
}
