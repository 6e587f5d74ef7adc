/* Tagged point-to-point transfers on the P2P channel. Each message is a
 * header (tag, length) and its bytes; a recv takes the first message from
 * src with its tag, keeping others that arrive first (other tags) until
 * their own recv, as torch's send/recv allow. */
#include "host.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t magic;
    int32_t tag;
    uint64_t len;
} frame;

#define FRAME_MAGIC 0xc10d2b2bu

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
                           "recv expects %zu", c->what, h->pg->name, c->root, len, c->tag, want);
    if (data && len)
        memcpy(dst, data, len);
    return C10D_OK;
}

c10d_status c10di_host_recv(c10di_host *h, const c10di_coll *c)
{
    size_t want = c->count * c10d_dtype_size(c->dtype);
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
                               c->what, h->pg->name, c->root);
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
        c10di_unexpected *u = calloc(1, sizeof *u);
        if (!u || !(u->data = malloc(f.len ? f.len : 1))) {
            free(u);
            return c10di_error(C10D_ENOMEM, "out of memory keeping a %llu-byte message",
                               (unsigned long long)f.len);
        }
        u->src = c->root;
        u->tag = f.tag;
        u->len = f.len;
        if ((st = c10di_xfer(h, c, CH_P2P, -1, NULL, 0, c->root, u->data, f.len)) != C10D_OK) {
            free(u->data);
            free(u);
            return st;
        }
        c10di_unexpected **tail = &h->unexpected;
        while (*tail)
            tail = &(*tail)->next;
        *tail = u;
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
}
