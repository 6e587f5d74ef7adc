/* The host backend's collective algorithms, all built on c10di_xfer.
 *
 * Small messages are latency-bound: all_reduce exchanges whole buffers
 * pairwise (n-1 steps, one hop each) and every rank reduces the n inputs
 * in rank order, so every rank gets bit-identical results. Large messages
 * are bandwidth-bound: ring reduce-scatter then ring all-gather (each rank
 * sends 2(n-1)/n of the buffer). Any world size works; nothing assumes a
 * power of two. float16/bfloat16 are widened to float32 for reductions. */
#include "host.h"
#include "reduce.h"

#include <stdlib.h>
#include <string.h>

#define SMALL_ALL_REDUCE_BYTES (32u << 10)
#define SMALL_BCAST_BYTES (256u << 10)
#define BCAST_CHUNK (256u << 10)

static size_t esize(const c10di_coll *c)
{
    return c10d_dtype_size(c->dtype);
}

static int is_half(c10d_dtype d)
{
    return d == C10D_FLOAT16 || d == C10D_BFLOAT16;
}

/* Block b of a count-element buffer split n ways (sizes differ by one). */
static size_t blk_off(size_t count, int n, int b)
{
    size_t q = count / (size_t)n, r = count % (size_t)n;
    return (size_t)b * q + ((size_t)b < r ? (size_t)b : r);
}

static size_t blk_cnt(size_t count, int n, int b)
{
    return count / (size_t)n + ((size_t)b < count % (size_t)n);
}

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* What an AVG divides by: the group's size, or the ranks that contributed
 * data when some have joined (c->divisor, docs/join.md). */
static int avg_divisor(const c10di_host *h, const c10di_coll *c)
{
    return c->divisor > 0 ? c->divisor : h->n;
}

static c10d_status oom(const c10di_coll *c, size_t bytes)
{
    return c10di_error(C10D_ENOMEM, "out of memory: %s needs %zu bytes of scratch", c->what,
                       bytes);
}

/* --- all_reduce --- */

static c10d_status all_reduce_exchange(c10di_host *h, const c10di_coll *c, void *buf)
{
    int n = h->n, me = h->me;
    size_t es = esize(c), bytes = c->count * es;
    uint8_t *tmp = c10di_scratch(h, bytes * (size_t)n);
    if (!tmp)
        return oom(c, bytes * (size_t)n);
    memcpy(tmp + (size_t)me * bytes, buf, bytes);
    for (int k = 1; k < n; k++) {
        int to = mod(me + k, n), from = mod(me - k, n);
        c10d_status st = c10di_xfer(h, c, CH_COLL, to, buf, bytes, from,
                                    tmp + (size_t)from * bytes, bytes);
        if (st != C10D_OK)
            return st;
    }
    if (c->discard) /* a joined rank's: every rank reduces for itself here */
        return C10D_OK;
    memcpy(buf, tmp, bytes);
    for (int i = 1; i < n; i++)
        c10di_reduce(c->dtype, c->op, buf, tmp + (size_t)i * bytes, c->count);
    if (c->op == C10D_AVG)
        c10di_reduce_avg_finish(c->dtype, buf, c->count, avg_divisor(h, c));
    return C10D_OK;
}

static c10d_status all_reduce_ring(c10di_host *h, const c10di_coll *c, void *buf)
{
    int n = h->n, me = h->me, right = mod(me + 1, n), left = mod(me - 1, n);
    size_t es = esize(c), count = c->count;
    uint8_t *b = buf, *tmp = c10di_scratch(h, blk_cnt(count, n, 0) * es);
    if (!tmp)
        return oom(c, blk_cnt(count, n, 0) * es);
    /* reduce-scatter: afterwards block me+1 is complete here */
    for (int s = 0; s < n - 1; s++) {
        int sb = mod(me - s, n), rb = mod(me - s - 1, n);
        c10d_status st = c10di_xfer(h, c, CH_COLL, right, b + blk_off(count, n, sb) * es,
                                    blk_cnt(count, n, sb) * es, left, tmp,
                                    blk_cnt(count, n, rb) * es);
        if (st != C10D_OK)
            return st;
        c10di_reduce(c->dtype, c->op, b + blk_off(count, n, rb) * es, tmp, blk_cnt(count, n, rb));
    }
    int mine = mod(me + 1, n);
    if (c->op == C10D_AVG)
        c10di_reduce_avg_finish(c->dtype, b + blk_off(count, n, mine) * es,
                                blk_cnt(count, n, mine), avg_divisor(h, c));
    /* all-gather of the complete blocks, straight into buf */
    for (int s = 0; s < n - 1; s++) {
        int sb = mod(me + 1 - s, n), rb = mod(me - s, n);
        c10d_status st = c10di_xfer(h, c, CH_COLL, right, b + blk_off(count, n, sb) * es,
                                    blk_cnt(count, n, sb) * es, left,
                                    b + blk_off(count, n, rb) * es, blk_cnt(count, n, rb) * es);
        if (st != C10D_OK)
            return st;
    }
    return C10D_OK;
}

static c10d_status all_reduce_native(c10di_host *h, const c10di_coll *c, void *buf)
{
    if (h->n == 1 || c->count == 0)
        return C10D_OK;
    if (c->count * esize(c) <= SMALL_ALL_REDUCE_BYTES || c->count < (size_t)h->n)
        return all_reduce_exchange(h, c, buf);
    return all_reduce_ring(h, c, buf);
}

/* Runs an all_reduce on buf, widening 16-bit floats to float32 first. */
static c10d_status all_reduce_on(c10di_host *h, const c10di_coll *c, void *buf)
{
    if (!is_half(c->dtype))
        return all_reduce_native(h, c, buf);
    float *wide = malloc((c->count ? c->count : 1) * sizeof *wide);
    if (!wide)
        return oom(c, c->count * sizeof *wide);
    c10di_half_to_f32(c->dtype, wide, buf, c->count);
    c10di_coll cw = *c;
    cw.dtype = C10D_FLOAT32;
    c10d_status st = all_reduce_native(h, &cw, wide);
    if (st == C10D_OK)
        c10di_f32_to_half(c->dtype, buf, wide, c->count);
    free(wide);
    return st;
}

/* reduce: every rank runs the same all_reduce (non-roots on a copy, so
 * their tensors are left as they were). */
static c10d_status reduce(c10di_host *h, const c10di_coll *c)
{
    if (h->me == c->root)
        return all_reduce_on(h, c, c->buf);
    size_t bytes = c->count * esize(c);
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy)
        return oom(c, bytes);
    memcpy(copy, c->buf, bytes);
    c10d_status st = all_reduce_on(h, c, copy);
    free(copy);
    return st;
}

/* --- broadcast: direct for small, a pipelined chain for large --- */

static c10d_status broadcast(c10di_host *h, const c10di_coll *c)
{
    int n = h->n, me = h->me;
    size_t bytes = c->count * esize(c);
    if (n == 1 || bytes == 0)
        return C10D_OK;
    if (bytes <= SMALL_BCAST_BYTES || n == 2) {
        if (me != c->root)
            return c10di_xfer(h, c, CH_COLL, -1, NULL, 0, c->root, c->buf, bytes);
        for (int i = 0; i < n; i++) {
            if (i == me)
                continue;
            c10d_status st = c10di_xfer(h, c, CH_COLL, i, c->buf, bytes, -1, NULL, 0);
            if (st != C10D_OK)
                return st;
        }
        return C10D_OK;
    }
    int pos = mod(me - c->root, n);
    int prev = pos > 0 ? mod(me - 1, n) : -1, next = pos < n - 1 ? mod(me + 1, n) : -1;
    size_t chunks = (bytes + BCAST_CHUNK - 1) / BCAST_CHUNK;
    uint8_t *b = c->buf;
    for (size_t k = 0; k <= chunks; k++) {
        /* forward chunk k-1 while receiving chunk k */
        size_t soff = (k - 1) * BCAST_CHUNK, roff = k * BCAST_CHUNK;
        size_t slen = k >= 1 && next >= 0 ? (bytes - soff < BCAST_CHUNK ? bytes - soff
                                                                         : BCAST_CHUNK) : 0;
        size_t rlen = k < chunks && prev >= 0 ? (bytes - roff < BCAST_CHUNK ? bytes - roff
                                                                            : BCAST_CHUNK) : 0;
        c10d_status st = c10di_xfer(h, c, CH_COLL, slen ? next : -1, b + (slen ? soff : 0), slen,
                                    rlen ? prev : -1, b + (rlen ? roff : 0), rlen);
        if (st != C10D_OK)
            return st;
    }
    return C10D_OK;
}

/* --- all_gather: a ring over per-rank block pointers (flat or list) --- */

static c10d_status all_gather(c10di_host *h, const c10di_coll *c)
{
    int n = h->n, me = h->me, right = mod(me + 1, n), left = mod(me - 1, n);
    size_t bytes = c->count * esize(c);
    if (c->outs[me] != c->in && bytes)
        memcpy(c->outs[me], c->in, bytes);
    for (int s = 0; s < n - 1 && bytes; s++) {
        int sb = mod(me - s, n), rb = mod(me - s - 1, n);
        c10d_status st =
            c10di_xfer(h, c, CH_COLL, right, c->outs[sb], bytes, left, c->outs[rb], bytes);
        if (st != C10D_OK)
            return st;
    }
    return C10D_OK;
}

/* --- reduce_scatter: a ring carrying partial sums --- */

static c10d_status reduce_scatter_native(c10di_host *h, const c10di_coll *c, const void **ins,
                                         void *out)
{
    int n = h->n, me = h->me, right = mod(me + 1, n), left = mod(me - 1, n);
    size_t bytes = c->count * esize(c);
    if (n == 1 || bytes == 0) {
        if (bytes && out != ins[me])
            memmove(out, ins[me], bytes);
        return C10D_OK;
    }
    uint8_t *a = c10di_scratch(h, 2 * bytes), *bb = a + bytes;
    if (!a)
        return oom(c, 2 * bytes);
    const void *send = ins[mod(me - 1, n)];
    for (int s = 0; s < n - 1; s++) {
        int rb = mod(me - s - 2, n);
        uint8_t *recv = send == a ? bb : a;
        c10d_status st = c10di_xfer(h, c, CH_COLL, right, send, bytes, left, recv, bytes);
        if (st != C10D_OK)
            return st;
        c10di_reduce(c->dtype, c->op, recv, ins[rb], c->count);
        send = recv;
    }
    memcpy(out, send, bytes);
    if (c->op == C10D_AVG)
        c10di_reduce_avg_finish(c->dtype, out, c->count, avg_divisor(h, c));
    return C10D_OK;
}

static c10d_status reduce_scatter(c10di_host *h, const c10di_coll *c)
{
    if (!is_half(c->dtype))
        return reduce_scatter_native(h, c, c->ins, c->out);
    int n = h->n;
    size_t cnt = c->count ? c->count : 1;
    float *wide = malloc(cnt * (size_t)(n + 1) * sizeof *wide);
    const void **wins = malloc((size_t)n * sizeof *wins);
    c10d_status st;
    if (!wide || !wins) {
        st = oom(c, cnt * (size_t)(n + 1) * sizeof *wide);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        c10di_half_to_f32(c->dtype, wide + (size_t)i * cnt, c->ins[i], c->count);
        wins[i] = wide + (size_t)i * cnt;
    }
    c10di_coll cw = *c;
    cw.dtype = C10D_FLOAT32;
    float *wout = wide + (size_t)n * cnt;
    if ((st = reduce_scatter_native(h, &cw, wins, wout)) == C10D_OK)
        c10di_f32_to_half(c->dtype, c->out, wout, c->count);
out:
    free(wide);
    free(wins);
    return st;
}

/* --- all_to_all, gather, scatter: pairwise and direct --- */

static c10d_status all_to_all(c10di_host *h, const c10di_coll *c)
{
    int n = h->n, me = h->me;
    size_t blk = c->count / (size_t)n * esize(c);
    const uint8_t *in = c->in;
    uint8_t *out = c->out;
    if (blk)
        memcpy(out + (size_t)me * blk, in + (size_t)me * blk, blk);
    for (int k = 1; k < n && blk; k++) {
        int to = mod(me + k, n), from = mod(me - k, n);
        c10d_status st = c10di_xfer(h, c, CH_COLL, to, in + (size_t)to * blk, blk, from,
                                    out + (size_t)from * blk, blk);
        if (st != C10D_OK)
            return st;
    }
    return C10D_OK;
}

static c10d_status gather(c10di_host *h, const c10di_coll *c)
{
    size_t bytes = c->count * esize(c);
    if (h->me != c->root)
        return c10di_xfer(h, c, CH_COLL, c->root, c->in, bytes, -1, NULL, 0);
    if (bytes && c->outs[h->me] != c->in)
        memcpy(c->outs[h->me], c->in, bytes);
    for (int i = 0; i < h->n; i++) {
        if (i == h->me)
            continue;
        c10d_status st = c10di_xfer(h, c, CH_COLL, -1, NULL, 0, i, c->outs[i], bytes);
        if (st != C10D_OK)
            return st;
    }
    return C10D_OK;
}

static c10d_status scatter(c10di_host *h, const c10di_coll *c)
{
    size_t bytes = c->count * esize(c);
    if (h->me != c->root)
        return c10di_xfer(h, c, CH_COLL, -1, NULL, 0, c->root, c->out, bytes);
    if (bytes && c->ins[h->me] != c->out)
        memcpy(c->out, c->ins[h->me], bytes);
    for (int i = 0; i < h->n; i++) {
        if (i == h->me)
            continue;
        c10d_status st = c10di_xfer(h, c, CH_COLL, i, c->ins[i], bytes, -1, NULL, 0);
        if (st != C10D_OK)
            return st;
    }
    return C10D_OK;
}

/* Dissemination barrier: ceil(log2 n) rounds of one byte each way. */
c10d_status c10di_host_barrier(c10di_host *h, const c10di_coll *c)
{
    uint8_t token = 1, got;
    for (int k = 1; k < h->n; k <<= 1) {
        c10d_status st = c10di_xfer(h, c, CH_COLL, mod(h->me + k, h->n), &token, 1,
                                    mod(h->me - k, h->n), &got, 1);
        if (st != C10D_OK)
            return st;
    }
    return C10D_OK;
}

/* --- the last active rank: every other member joined (docs/join.md) --- */

/* An AVG's division on buf, by itself (16-bit floats widened). */
static c10d_status avg_alone(c10di_host *h, const c10di_coll *c, void *buf)
{
    if (c->op != C10D_AVG || c->count == 0)
        return C10D_OK;
    if (!is_half(c->dtype)) {
        c10di_reduce_avg_finish(c->dtype, buf, c->count, avg_divisor(h, c));
        return C10D_OK;
    }
    float *wide = malloc(c->count * sizeof *wide);
    if (!wide)
        return oom(c, c->count * sizeof *wide);
    c10di_half_to_f32(c->dtype, wide, buf, c->count);
    c10di_reduce_avg_finish(C10D_FLOAT32, wide, c->count, avg_divisor(h, c));
    c10di_f32_to_half(c->dtype, buf, wide, c->count);
    free(wide);
    return C10D_OK;
}

/* The others contribute identities and read nothing back (c10di_host_shadow),
 * so this rank's result is its own data: nothing needs to move but the
 * header each joined rank learns the call from. Not waiting for a joined
 * rank's reaction is what makes such a step cost no more than a normal one. */
static c10d_status run_alone(c10di_host *h, const c10di_coll *c)
{
    /* Nothing here waits, so nothing else would ask: a joined rank that
     * died fails this call, not the one after a full channel (under SYNC
     * the coordinator's OK does not cover members lost since they joined). */
    c10d_status lost = c10di_be_check(h->ctx, c, -1);
    if (lost != C10D_OK)
        return lost;
    for (int i = 0; i < h->n; i++) {
        if (i == h->me)
            continue;
        c10d_status st = c10di_xfer(h, c, CH_COLL, i, NULL, 0, -1, NULL, 0);
        if (st != C10D_OK)
            return st;
    }
    switch (c->kind) {
    case C10DC_ALL_REDUCE:
    case C10DC_REDUCE: /* rooted here: a joined root is refused before it runs */
        return avg_alone(h, c, c->buf);
    case C10DC_REDUCE_SCATTER: {
        size_t bytes = c->count * esize(c);
        if (bytes && c->out != c->ins[h->me])
            memmove(c->out, c->ins[h->me], bytes);
        return avg_alone(h, c, c->out);
    }
    case C10DC_BROADCAST: /* from here: the joined ranks would drop it */
    case C10DC_BARRIER: return C10D_OK;
    default: break;
    }
    return c10di_error(C10D_EINVAL, "%s: cannot run without the joined ranks", c->what);
}

/* Whether c moves no bytes at all (zero elements): it would send no
 * header either. */
static int moves_nothing(const c10di_host *h, const c10di_coll *c)
{
    switch (c->kind) {
    case C10DC_ALL_REDUCE:
    case C10DC_BROADCAST:
    case C10DC_REDUCE:
    case C10DC_ALL_GATHER:
    case C10DC_REDUCE_SCATTER: return c->count == 0;
    case C10DC_ALL_TO_ALL: return c->count / (size_t)h->n == 0;
    default: return 0;
    }
}

c10d_status c10di_host_run(c10di_host *h, const c10di_coll *c)
{
    if (c->alone) /* whatever its size: one header to each joined rank */
        return c->shadow ? c10di_host_shadow(h, c) : run_alone(h, c);
    /* A collective of no elements still meets its peers, header and all:
     * its number and call are checked like any other's, and a joined rank,
     * which learns what to shadow from headers, sees it (docs/join.md). */
    if (moves_nothing(h, c))
        return c10di_host_barrier(h, c);
    if (c->shadow)
        return c10di_host_shadow(h, c);
    switch (c->kind) {
    case C10DC_ALL_REDUCE: return all_reduce_on(h, c, c->buf);
    case C10DC_BROADCAST: return broadcast(h, c);
    case C10DC_REDUCE: return reduce(h, c);
    case C10DC_ALL_GATHER: return all_gather(h, c);
    case C10DC_REDUCE_SCATTER: return reduce_scatter(h, c);
    case C10DC_ALL_TO_ALL: return all_to_all(h, c);
    case C10DC_GATHER: return gather(h, c);
    case C10DC_SCATTER: return scatter(h, c);
    case C10DC_SEND: return c10di_host_send(h, c);
    case C10DC_RECV: break; /* host_backend.c's host_run: it learns the sender */
    case C10DC_BARRIER: return c10di_host_barrier(h, c);
    case C10DC_MONITORED_BARRIER: /* runs through the store, not here */
    case C10DC_KIND_COUNT: break;
    }
    return c10di_error(C10D_EINVAL, "unknown collective %d", (int)c->kind);
}
