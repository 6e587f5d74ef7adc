/* A joined rank's part in a CUDA collective (docs/join.md): the same NCCL
 * call as the others make, out of place, from an identity buffer on the
 * group's device into a discard buffer. Both are allocated once and grown
 * as needed (outgrown ones are freed at close: cudaFree would wait for the
 * device under comm_mu). The identity is filled on the group's stream, in
 * order with the collectives around it and without waiting for the device
 * (cudaMemsetAsync; a copy from pageable memory is staged at once), and
 * only when its value or size changes: NCCL never writes its send buffer,
 * so the next shadow finds it intact. */
#include "nccl_backend.h"

#include <stdlib.h>
#include <string.h>

#define SETTLE(call) c10di_nccl_settle(s, (call), c)

/* bytes of the identity of c's dtype and op, on the device. */
static c10d_status identity(c10di_nccl *s, const c10di_coll *c, size_t bytes, void **out)
{
    unsigned char elem[8];
    size_t es = c10di_identity_element(c->dtype, c->op, elem);
    if (!es)
        return c10di_error(C10D_EINVAL, "%s: no identity for dtype %d", c->what, (int)c->dtype);
    if (bytes > s->ident_cap) {
        c10d_status st = c10di_nccl_grow(s, &s->ident, &s->ident_cap, bytes, c);
        if (st != C10D_OK)
            return st;
        s->ident_filled = 0;
    }
    if (es != s->ident_es || memcmp(elem, s->ident_elem, es) != 0)
        s->ident_filled = 0;
    if (s->ident_filled < bytes) {
        int zero = 1;
        for (size_t i = 0; i < es; i++)
            zero &= elem[i] == 0;
        cudaError_t e;
        if (zero) {
            e = c10di_gpu.cudaMemsetAsync(s->ident, 0, bytes, s->stream);
        } else {
            /* An async copy from pageable memory is staged before it
             * returns, so the host buffer can go at once. */
            void *host = malloc(bytes);
            if (!host)
                return c10di_error(C10D_ENOMEM, "out of memory: %s needs %zu bytes", c->what,
                                   bytes);
            c10di_fill_pattern(host, bytes, elem, es);
            e = c10di_gpu.cudaMemcpyAsync(s->ident, host, bytes, cudaMemcpyHostToDevice,
                                          s->stream);
            free(host);
        }
        if (e != cudaSuccess)
            return c10di_cuda_error(e, "filling a joined rank's identity", c);
        s->ident_filled = bytes;
        s->ident_es = es;
        memcpy(s->ident_elem, elem, es);
    }
    *out = s->ident;
    return C10D_OK;
}

c10d_status c10di_nccl_enqueue_shadow(c10di_nccl *s, const c10di_coll *c)
{
    ncclDataType_t dt = (ncclDataType_t)c10di_nccl_dtype(c->dtype);
    size_t bytes = c->count * c10d_dtype_size(c->dtype), n = (size_t)s->ctx->size;
    void *in = NULL, *out = NULL;
    ncclRedOp_t op;
    int made = 0;
    c10d_status st = C10D_OK;
    switch (c->kind) {
    case C10DC_BARRIER: {
        c10di_coll b = *c;
        b.shadow = 0; /* a barrier has no data: the same call as everyone's */
        return c10di_nccl_enqueue(s, &b);
    }
    case C10DC_BROADCAST: /* from an active root: received and dropped */
        if ((st = c10di_nccl_grow(s, &s->discard, &s->discard_cap, bytes ? bytes : 16, c)) !=
            C10D_OK)
            return st;
        return SETTLE(c10di_gpu.ncclBroadcast(s->discard, s->discard, c->count, dt, c->root,
                                              s->comm, s->stream));
    case C10DC_ALL_REDUCE:
    case C10DC_REDUCE:
    case C10DC_REDUCE_SCATTER:
        break;
    default:
        return c10di_error(C10D_EJOINED, "%s: a joined rank cannot take part in it", c->what);
    }
    size_t in_bytes = c->kind == C10DC_REDUCE_SCATTER ? bytes * n : bytes;
    if ((st = identity(s, c, in_bytes ? in_bytes : 16, &in)) != C10D_OK ||
        (st = c10di_nccl_grow(s, &s->discard, &s->discard_cap, bytes ? bytes : 16, c)) !=
            C10D_OK ||
        (st = c10di_nccl_red_op(s, c, &op, &made)) != C10D_OK)
        return st;
    out = s->discard;
    if (c->kind == C10DC_ALL_REDUCE)
        st = SETTLE(c10di_gpu.ncclAllReduce(in, out, c->count, dt, op, s->comm, s->stream));
    else if (c->kind == C10DC_REDUCE)
        st = SETTLE(c10di_gpu.ncclReduce(in, out, c->count, dt, op, c->root, s->comm, s->stream));
    else
        st = SETTLE(c10di_gpu.ncclReduceScatter(in, out, c->count, dt, op, s->comm, s->stream));
    if (made)
        c10di_gpu.ncclRedOpDestroy(op, s->comm);
    return st;
}

void c10di_nccl_shadow_free(c10di_nccl *s)
{
    if (s->ident)
        c10di_gpu.cudaFree(s->ident);
    if (s->discard)
        c10di_gpu.cudaFree(s->discard);
    s->ident = s->discard = NULL;
    s->ident_cap = s->discard_cap = s->ident_filled = 0;
}
