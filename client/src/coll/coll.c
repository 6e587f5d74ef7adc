/* The collective front end: check arguments (before anything is sent),
 * pick the group's backend for the tensors' device (c10di_route, backends.c),
 * describe and number the call, then hand it to work.c, which runs it now,
 * queues it on the group's lane or posts it (a receive). It knows nothing
 * of how the backend moves bytes. */
#include "backend/backends.h"
#include "coll/monitored_barrier.h"
#include "coll/plan.h"
#include "coll/work.h"

#include "c10d_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static c10d_status check_pg(const c10d_pg *pg, const char *fn)
{
    if (!pg)
        return c10di_error(C10D_EINVAL, "%s: NULL process group", fn);
    return C10D_OK;
}

/* A usable tensor; its element count in *n. */
static c10d_status check_tensor(const c10d_pg *pg, const c10d_tensor *t, const char *fn,
                                const char *what, int64_t *n)
{
    if (!t)
        return c10di_error(C10D_EINVAL, "%s: %s is NULL", fn, what);
    if (c10d_dtype_size(t->dtype) == 0)
        return c10di_error(C10D_EINVAL, "%s: %s has unknown dtype %d", fn, what, (int)t->dtype);
    if ((*n = c10d_tensor_numel(t)) < 0)
        return c10di_error(C10D_EINVAL, "%s: %s has a bad shape (ndim %d)", fn, what, t->ndim);
    if (!t->data && *n > 0)
        return c10di_error(C10D_EINVAL, "%s: %s has NULL data for %lld elements", fn, what,
                           (long long)*n);
    if (t->device < C10D_CPU)
        return c10di_error(C10D_EINVAL, "%s: %s has device %d (C10D_CPU, or a CUDA device "
                           "index)", fn, what, t->device);
    return C10D_OK;
}

static const char *device_name(int device, char *buf, size_t cap)
{
    if (device == C10D_CPU)
        snprintf(buf, cap, "the CPU");
    else
        snprintf(buf, cap, "cuda:%d", device);
    return buf;
}

static c10d_status check_root(const c10d_pg *pg, int root, const char *fn, const char *what)
{
    if (root < 0 || root >= pg->size)
        return c10di_error(C10D_EINVAL, "%s: %s %d is out of range for group %s of size %d", fn,
                           what, root, pg->name, pg->size);
    return C10D_OK;
}

static c10d_status check_op(c10d_reduce_op op, const char *fn)
{
    if (strcmp(c10d_reduce_op_name(op), "?") == 0)
        return c10di_error(C10D_EINVAL, "%s: unknown reduce op %d", fn, (int)op);
    return C10D_OK;
}

static c10d_status check_same(const c10d_tensor *a, const c10d_tensor *b, const char *fn,
                              const char *an, const char *bn)
{
    if (a->dtype != b->dtype)
        return c10di_error(C10D_EINVAL, "%s: %s is %s but %s is %s", fn, an,
                           c10d_dtype_name(a->dtype), bn, c10d_dtype_name(b->dtype));
    if (a->device != b->device) {
        char da[32], db[32];
        return c10di_error(C10D_EINVAL, "%s: %s is on %s but %s is on %s; the tensors of one "
                           "call must be on one device", fn, an,
                           device_name(a->device, da, sizeof da), bn,
                           device_name(b->device, db, sizeof db));
    }
    return C10D_OK;
}

/* Routes, numbers, then runs c (c10di_work_call). Takes c->outs and
 * c->ins. `device` is the tensors' (or C10DI_GROUP_DEVICE). */
static c10d_status dispatch(c10d_pg *pg, c10di_coll *c, int64_t numel, int device,
                            const char *fn, const c10d_coll_opts *o, c10d_work **work)
{
    c10d_status st = C10D_OK;
    if (o && (st = c10di_opts_version(fn, "c10d_coll_opts", o->version,
                                      C10D_COLL_OPTS_VERSION)) != C10D_OK)
        goto out;
    int async = o && o->async_op;
    if (async && !work) {
        st = c10di_error(C10D_EINVAL, "async_op needs a place for the work handle");
        goto out;
    }
    c->async = async;
    c->stream = o ? o->stream : NULL;
    /* Before the call is numbered: a refused one leaves the count alone. */
    if ((st = c10di_timeout(fn, "opts.timeout_ms", o ? o->timeout_ms : C10D_TIMEOUT_DEFAULT,
                            pg->timeout_ms, 0, &c->timeout_ms)) != C10D_OK)
        goto out;
    if (c->kind == C10DC_MONITORED_BARRIER) { /* meets through the store, not a data plane */
        c->device = C10D_CPU;
        c->be = &c10di_monitored_ops;
        c->be_state = pg;
    } else if ((st = c10di_route(pg, c, device, fn)) != C10D_OK) {
        goto out;
    }
    /* On the caller's thread: what its stream has queued so far comes
     * before the collective, even if the lane runs it later. */
    if (c->be->prepare && (st = c->be->prepare(c->be_state, c)) != C10D_OK)
        goto out;
    /* Numbered: send/recv apart, since only two ranks take part and they
     * must not move the group's collective count. */
    uint64_t *count = c->kind == C10DC_SEND || c->kind == C10DC_RECV ? &pg->p2p_seq : &pg->seq;
    c->seq = ++*count;
    c10di_describe(c, numel);
    c->deadline_ms = c10d_now_ms() + c->timeout_ms;
    int give_back = 0;
    st = c10di_work_call(pg, c, work, &give_back); /* takes c->outs and c->ins */
    /* Refused after it was numbered (no memory for its work handle, no
     * worker thread): its number is given back, so that this rank's count
     * does not move on alone and its next call meets the peers' same one. */
    if (give_back && *count == c->seq)
        (*count)--;
    return st;
out:
    if (c->be && c->be->forget)
        c->be->forget(c);
    free(c->outs);
    free(c->ins);
    return st;
}

static void init_coll(c10di_coll *c, c10dc_kind kind, c10d_dtype dt, size_t count)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->dtype = dt;
    c->count = count;
}

c10d_status c10d_all_reduce(c10d_pg *pg, c10d_tensor *t, c10d_reduce_op op,
                            const c10d_coll_opts *o, c10d_work **work)
{
    int64_t n;
    c10d_status st;
    if ((st = check_pg(pg, "all_reduce")) || (st = check_tensor(pg, t, "all_reduce", "t", &n)) ||
        (st = check_op(op, "all_reduce")))
        return st;
    c10di_coll c;
    init_coll(&c, C10DC_ALL_REDUCE, t->dtype, (size_t)n);
    c.op = op;
    c.buf = t->data;
    return dispatch(pg, &c, n, t->device, "all_reduce", o, work);
}

c10d_status c10d_broadcast(c10d_pg *pg, c10d_tensor *t, int root, const c10d_coll_opts *o,
                           c10d_work **work)
{
    int64_t n;
    c10d_status st;
    if ((st = check_pg(pg, "broadcast")) || (st = check_tensor(pg, t, "broadcast", "t", &n)) ||
        (st = check_root(pg, root, "broadcast", "root")))
        return st;
    c10di_coll c;
    init_coll(&c, C10DC_BROADCAST, t->dtype, (size_t)n);
    c.buf = t->data;
    c.root = root;
    return dispatch(pg, &c, n, t->device, "broadcast", o, work);
}

c10d_status c10d_reduce(c10d_pg *pg, c10d_tensor *t, int root, c10d_reduce_op op,
                        const c10d_coll_opts *o, c10d_work **work)
{
    int64_t n;
    c10d_status st;
    if ((st = check_pg(pg, "reduce")) || (st = check_tensor(pg, t, "reduce", "t", &n)) ||
        (st = check_root(pg, root, "reduce", "root")) || (st = check_op(op, "reduce")))
        return st;
    c10di_coll c;
    init_coll(&c, C10DC_REDUCE, t->dtype, (size_t)n);
    c.buf = t->data;
    c.root = root;
    c.op = op;
    return dispatch(pg, &c, n, t->device, "reduce", o, work);
}

/* Per-rank block pointers of a list of size(pg) tensors, each like ref. */
static c10d_status list_ptrs(c10d_pg *pg, const c10d_tensor *list, const c10d_tensor *ref,
                             int64_t n, const char *fn, const char *what, void ***out)
{
    if (!list)
        return c10di_error(C10D_EINVAL, "%s: %s is NULL (it needs %d tensors)", fn, what,
                           pg->size);
    void **p = malloc((size_t)pg->size * sizeof *p);
    if (!p)
        return c10di_error(C10D_ENOMEM, "out of memory");
    for (int i = 0; i < pg->size; i++) {
        int64_t m;
        char name[64];
        snprintf(name, sizeof name, "%s[%d]", what, i);
        c10d_status st = check_tensor(pg, &list[i], fn, name, &m);
        if (st == C10D_OK)
            st = check_same(&list[i], ref, fn, name, "the other tensor");
        if (st == C10D_OK && m != n)
            st = c10di_error(C10D_EINVAL, "%s: %s has %lld elements, expected %lld", fn, name,
                             (long long)m, (long long)n);
        if (st != C10D_OK) {
            free(p);
            return st;
        }
        p[i] = list[i].data;
    }
    *out = p;
    return C10D_OK;
}

/* Per-rank block pointers into one flat tensor of size(pg) * n elements. */
static c10d_status flat_ptrs(c10d_pg *pg, const c10d_tensor *flat, const c10d_tensor *ref,
                             int64_t n, const char *fn, const char *what, void ***out)
{
    int64_t m;
    c10d_status st = check_tensor(pg, flat, fn, what, &m);
    if (st == C10D_OK)
        st = check_same(flat, ref, fn, what, "the other tensor");
    if (st == C10D_OK && m != n * pg->size)
        st = c10di_error(C10D_EINVAL, "%s: %s has %lld elements; group %s of size %d needs %d x "
                         "%lld = %lld", fn, what, (long long)m, pg->name, pg->size, pg->size,
                         (long long)n, (long long)(n * pg->size));
    if (st != C10D_OK)
        return st;
    void **p = malloc((size_t)pg->size * sizeof *p);
    if (!p)
        return c10di_error(C10D_ENOMEM, "out of memory");
    size_t bytes = (size_t)n * c10d_dtype_size(ref->dtype);
    for (int i = 0; i < pg->size; i++)
        p[i] = (uint8_t *)flat->data + (size_t)i * bytes;
    *out = p;
    return C10D_OK;
}

static c10d_status gather_like(c10d_pg *pg, c10d_tensor *outs, const c10d_tensor *out_flat,
                               const c10d_tensor *in, const c10d_coll_opts *o, c10d_work **work,
                               c10dc_kind kind, int root, const char *fn)
{
    int64_t n;
    c10d_status st;
    if ((st = check_pg(pg, fn)) || (st = check_tensor(pg, in, fn, "in", &n)))
        return st;
    if (kind == C10DC_GATHER && (st = check_root(pg, root, fn, "root")))
        return st;
    c10di_coll c;
    init_coll(&c, kind, in->dtype, (size_t)n);
    c.in = in->data;
    c.root = root;
    if (kind == C10DC_GATHER && pg->rank != root)
        return dispatch(pg, &c, n, in->device, fn, o, work);
    st = out_flat ? flat_ptrs(pg, out_flat, in, n, fn, "out", &c.outs)
                  : list_ptrs(pg, outs, in, n, fn, "outs", &c.outs);
    return st != C10D_OK ? st : dispatch(pg, &c, n, in->device, fn, o, work);
}

c10d_status c10d_all_gather(c10d_pg *pg, c10d_tensor *outs, const c10d_tensor *in,
                            const c10d_coll_opts *o, c10d_work **work)
{
    return gather_like(pg, outs, NULL, in, o, work, C10DC_ALL_GATHER, 0, "all_gather");
}

c10d_status c10d_all_gather_into_tensor(c10d_pg *pg, c10d_tensor *out, const c10d_tensor *in,
                                        const c10d_coll_opts *o, c10d_work **work)
{
    if (!out)
        return c10di_error(C10D_EINVAL, "all_gather_into_tensor: out is NULL");
    return gather_like(pg, NULL, out, in, o, work, C10DC_ALL_GATHER, 0,
                       "all_gather_into_tensor");
}

c10d_status c10d_gather(c10d_pg *pg, c10d_tensor *outs, const c10d_tensor *in, int root,
                        const c10d_coll_opts *o, c10d_work **work)
{
    return gather_like(pg, outs, NULL, in, o, work, C10DC_GATHER, root, "gather");
}

static c10d_status scatter_like(c10d_pg *pg, c10d_tensor *out, const c10d_tensor *ins,
                                const c10d_tensor *in_flat, c10d_reduce_op op,
                                const c10d_coll_opts *o, c10d_work **work, c10dc_kind kind,
                                int root, const char *fn)
{
    int64_t n;
    c10d_status st;
    if ((st = check_pg(pg, fn)) || (st = check_tensor(pg, out, fn, "out", &n)))
        return st;
    if (kind == C10DC_SCATTER && (st = check_root(pg, root, fn, "root")))
        return st;
    if (kind == C10DC_REDUCE_SCATTER && (st = check_op(op, fn)))
        return st;
    c10di_coll c;
    init_coll(&c, kind, out->dtype, (size_t)n);
    c.out = out->data;
    c.root = root;
    c.op = op;
    if (kind == C10DC_SCATTER && pg->rank != root)
        return dispatch(pg, &c, n, out->device, fn, o, work);
    void **p = NULL;
    st = in_flat ? flat_ptrs(pg, in_flat, out, n, fn, "in", &p)
                 : list_ptrs(pg, ins, out, n, fn, "ins", &p);
    if (st != C10D_OK)
        return st;
    c.ins = (const void **)p;
    return dispatch(pg, &c, n, out->device, fn, o, work);
}

c10d_status c10d_reduce_scatter(c10d_pg *pg, c10d_tensor *out, const c10d_tensor *ins,
                                c10d_reduce_op op, const c10d_coll_opts *o, c10d_work **work)
{
    return scatter_like(pg, out, ins, NULL, op, o, work, C10DC_REDUCE_SCATTER, 0,
                        "reduce_scatter");
}

c10d_status c10d_reduce_scatter_tensor(c10d_pg *pg, c10d_tensor *out, const c10d_tensor *in,
                                       c10d_reduce_op op, const c10d_coll_opts *o,
                                       c10d_work **work)
{
    if (!in)
        return c10di_error(C10D_EINVAL, "reduce_scatter_tensor: in is NULL");
    return scatter_like(pg, out, NULL, in, op, o, work, C10DC_REDUCE_SCATTER, 0,
                        "reduce_scatter_tensor");
}

c10d_status c10d_scatter(c10d_pg *pg, c10d_tensor *out, const c10d_tensor *ins, int root,
                         const c10d_coll_opts *o, c10d_work **work)
{
    return scatter_like(pg, out, ins, NULL, C10D_SUM, o, work, C10DC_SCATTER, root, "scatter");
}

c10d_status c10d_all_to_all_single(c10d_pg *pg, c10d_tensor *out, const c10d_tensor *in,
                                   const c10d_coll_opts *o, c10d_work **work)
{
    int64_t n, m;
    c10d_status st;
    const char *fn = "all_to_all_single";
    if ((st = check_pg(pg, fn)) || (st = check_tensor(pg, out, fn, "out", &n)) ||
        (st = check_tensor(pg, in, fn, "in", &m)) || (st = check_same(out, in, fn, "out", "in")))
        return st;
    if (n != m || n % pg->size != 0)
        return c10di_error(C10D_EINVAL, "%s: in has %lld elements and out %lld; both must be "
                           "equal and divisible by the group size %d", fn, (long long)m,
                           (long long)n, pg->size);
    if (n > 0 && in->data == out->data)
        return c10di_error(C10D_EINVAL, "%s: in and out must be different buffers", fn);
    c10di_coll c;
    init_coll(&c, C10DC_ALL_TO_ALL, in->dtype, (size_t)n);
    c.in = in->data;
    c.out = out->data;
    return dispatch(pg, &c, n, in->device, fn, o, work);
}

/* peer: the group rank sent to or received from; any: a recv from
 * whichever member sends first (src_out, if not NULL, gets its rank). */
static c10d_status p2p(c10d_pg *pg, const c10d_tensor *t, int peer, int any, int tag,
                       int *src_out, const c10d_coll_opts *o, c10d_work **work, c10dc_kind kind)
{
    int64_t n;
    c10d_status st;
    const char *fn = kind == C10DC_SEND ? "send" : any ? "recv_any" : "recv";
    if ((st = check_pg(pg, fn)) || (st = check_tensor(pg, t, fn, "t", &n)))
        return st;
    if (!any) {
        if ((st = check_root(pg, peer, fn, kind == C10DC_SEND ? "dst" : "src")))
            return st;
        if (peer == pg->rank)
            return c10di_error(C10D_EINVAL, "%s: rank %d cannot %s itself", fn, peer,
                               kind == C10DC_SEND ? "send to" : "receive from");
    } else if (pg->size < 2) {
        return c10di_error(C10D_EINVAL, "%s: group %s has no other member to receive from", fn,
                           pg->name);
    } else if (t->device != C10D_CPU) {
        return c10di_error(C10D_EINVAL, "%s: CUDA buffers are received through NCCL, which "
                           "cannot receive from any member (as torch's nccl backend); name the "
                           "sender", fn);
    }
    c10di_coll c;
    init_coll(&c, kind, t->dtype, (size_t)n);
    c.buf = t->data;
    c.root = any ? C10DI_ANY_SOURCE : peer;
    c.tag = tag;
    c.src_out = src_out;
    return dispatch(pg, &c, n, t->device, fn, o, work);
}

c10d_status c10d_send(c10d_pg *pg, const c10d_tensor *t, int dst, int tag,
                      const c10d_coll_opts *o, c10d_work **work)
{
    return p2p(pg, t, dst, 0, tag, NULL, o, work, C10DC_SEND);
}

c10d_status c10d_recv(c10d_pg *pg, c10d_tensor *t, int src, int tag, const c10d_coll_opts *o,
                      c10d_work **work)
{
    return p2p(pg, t, src, 0, tag, NULL, o, work, C10DC_RECV);
}

c10d_status c10d_recv_any(c10d_pg *pg, c10d_tensor *t, int tag, int *src,
                          const c10d_coll_opts *o, c10d_work **work)
{
    return p2p(pg, t, C10DI_ANY_SOURCE, 1, tag, src, o, work, C10DC_RECV);
}

/* One path with every collective: numbered, ordered after the group's
 * queued calls, refused on a broken group, verified; only its meeting is
 * the store's (monitored_barrier.c). */
c10d_status c10d_monitored_barrier(c10d_pg *pg, int timeout_ms, int wait_all_ranks)
{
    if (!pg)
        return c10di_error(C10D_EINVAL, "monitored_barrier: NULL process group");
    c10di_coll c;
    init_coll(&c, C10DC_MONITORED_BARRIER, C10D_FLOAT32, 0);
    c.wait_all = wait_all_ranks;
    c10d_coll_opts o = C10D_COLL_OPTS_INIT;
    o.timeout_ms = timeout_ms; /* checked with the rest: C10D_TIMEOUT_DEFAULT, the group's */
    return dispatch(pg, &c, 0, C10D_CPU, "monitored_barrier", &o, NULL);
}

c10d_status c10d_barrier(c10d_pg *pg, const c10d_coll_opts *o, c10d_work **work)
{
    c10d_status st;
    if ((st = check_pg(pg, "barrier")))
        return st;
    c10di_coll c;
    init_coll(&c, C10DC_BARRIER, C10D_UINT8, 0);
    return dispatch(pg, &c, 0, C10DI_GROUP_DEVICE, "barrier", o, work);
}
