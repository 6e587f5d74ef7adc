/* A joined rank's part in a collective it has no data for (docs/join.md):
 * the same algorithm as every other rank runs, on buffers of the
 * backend's own: the reduce op's identity where it sends data (so the
 * others' results are exact), a discard buffer where it receives. The
 * coordinator hands out only collectives that work this way (all_reduce,
 * reduce and broadcast to or from an active root, reduce_scatter, barrier).
 * Where one active rank is left it sends the header alone, and that is all
 * a joined rank takes. */
#include "host.h"

#include <stdlib.h>
#include <string.h>

static void *shadow_buf(c10di_host *h, size_t len)
{
    if (len > h->shadow_cap) {
        void *p = realloc(h->shadow, len);
        if (!p)
            return NULL;
        h->shadow = p;
        h->shadow_cap = len;
    }
    return h->shadow;
}

c10d_status c10di_host_shadow(c10di_host *h, const c10di_coll *c)
{
    size_t es = c10d_dtype_size(c->dtype), bytes = c->count * es;
    unsigned char elem[8];
    if (c->alone) /* the last active rank ran it by itself: its header is all there is */
        return c10di_xfer(h, c, CH_COLL, -1, NULL, 0, c->alone_from, NULL, 0);
    c10di_coll s = *c;
    s.shadow = 0;
    s.discard = 1;
    c10d_status st = C10D_OK;
    switch (c->kind) {
    case C10DC_BARRIER:
        break;
    case C10DC_BROADCAST: /* from an active root: received and dropped */
        if (!(s.buf = shadow_buf(h, bytes ? bytes : 1)))
            goto oom;
        break;
    case C10DC_ALL_REDUCE:
    case C10DC_REDUCE: /* to an active root; all_reduce is in place: refill each time */
        if (!(s.buf = shadow_buf(h, bytes ? bytes : 1)))
            goto oom;
        c10di_fill_pattern(s.buf, bytes, elem, c10di_identity_element(c->dtype, c->op, elem));
        break;
    case C10DC_REDUCE_SCATTER: {
        /* size(pg) identity blocks in, one block out */
        uint8_t *b = shadow_buf(h, bytes * (size_t)(h->n + 1) + 1);
        const void **ins = malloc((size_t)h->n * sizeof *ins);
        if (!b || !ins) {
            free(ins);
            goto oom;
        }
        c10di_fill_pattern(b, bytes * (size_t)h->n, elem,
                           c10di_identity_element(c->dtype, c->op, elem));
        for (int i = 0; i < h->n; i++)
            ins[i] = b + (size_t)i * bytes;
        s.ins = ins;
        s.out = b + (size_t)h->n * bytes;
        st = c10di_host_run(h, &s);
        free(ins);
        return st;
    }
    default:
        return c10di_error(C10D_EJOINED, "%s: a joined rank cannot take part in it", c->what);
    }
    return c10di_host_run(h, &s);
oom:
    return c10di_error(C10D_ENOMEM, "out of memory: %s needs %zu bytes to shadow", c->what,
                       bytes * (size_t)(h->n + 1));
}
