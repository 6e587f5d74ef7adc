/* The NCCL backend's collectives: each call is ordered after what the
 * caller's stream had queued when it was made, enqueued on the group's
 * stream, and followed by a CUDA event that the watchdog polls (the
 * coordinator's trace learns of the completion from it) and that async
 * work handles wait on. all_gather and reduce_scatter run on the caller's
 * flat buffer when the per-rank blocks are consecutive (always for the
 * _tensor variants; for lists of views of one buffer), in place when the
 * rank's block is its own slot, and only otherwise through a scratch
 * buffer and copies. */
#include "nccl_backend.h"

#include "c10d_time.h"
#include "host/reduce.h"
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int c10di_nccl_dtype(c10d_dtype dt)
{
    switch (dt) {
    case C10D_FLOAT32: return ncclFloat32;
    case C10D_FLOAT64: return ncclFloat64;
    case C10D_FLOAT16: return ncclFloat16;
    case C10D_BFLOAT16: return ncclBfloat16;
    case C10D_INT8: return ncclInt8;
    case C10D_UINT8: return ncclUint8;
    case C10D_INT32: return ncclInt32;
    case C10D_INT64: return ncclInt64;
    }
    return -1;
}

int c10di_nccl_op(c10d_reduce_op op)
{
    switch (op) {
    case C10D_SUM: return ncclSum;
    case C10D_PROD: return ncclProd;
    case C10D_MIN: return ncclMin;
    case C10D_MAX: return ncclMax;
    case C10D_AVG: return ncclAvg; /* integers: sum, then divided (truncated) */
    }
    return -1;
}

int c10di_nccl_avg_plan(c10d_dtype dt, c10d_reduce_op op, int divisor, int n)
{
    if (op != C10D_AVG || divisor <= 0 || divisor == n)
        return 0; /* ncclAvg divides by the communicator's size */
    switch (dt) {
    case C10D_FLOAT32:
    case C10D_FLOAT64:
    case C10D_FLOAT16:
    case C10D_BFLOAT16:
        return 1;
    default:
        return -1; /* a pre-multiplied sum needs 1/divisor in the dtype */
    }
}

c10d_status c10di_nccl_red_op(c10di_nccl *s, const c10di_coll *c, ncclRedOp_t *op, int *made)
{
    *made = 0;
    *op = (ncclRedOp_t)c10di_nccl_op(c->op);
    int plan = c10di_nccl_avg_plan(c->dtype, c->op, c->divisor, s->ctx->size);
    if (plan == 0)
        return C10D_OK;
    if (plan < 0)
        return c10di_error(C10D_EINVAL, "%s: an AVG of %s over the %d ranks that have not joined "
                           "(divide_by_initial_world_size = 0) needs a floating-point dtype on "
                           "NCCL; use SUM and divide by c10d_active_ranks()", c->what,
                           c10d_dtype_name(c->dtype), c->divisor);
    /* sum of x_i / divisor over every rank, joined ones contributing 0 */
    union {
        float f;
        double d;
        uint16_t h;
    } scalar;
    float f = 1.0f / (float)c->divisor;
    if (c->dtype == C10D_FLOAT64)
        scalar.d = 1.0 / (double)c->divisor;
    else if (c->dtype == C10D_FLOAT32)
        scalar.f = f;
    else
        c10di_f32_to_half(c->dtype, &scalar.h, &f, 1);
    ncclResult_t r = c10di_gpu.ncclRedOpCreatePreMulSum(
        op, &scalar, (ncclDataType_t)c10di_nccl_dtype(c->dtype), ncclScalarHostImmediate, s->comm);
    if (r != ncclSuccess)
        return c10di_error(C10D_EBACKEND, "%s: ncclRedOpCreatePreMulSum: %s", c->what,
                           c10di_gpu.ncclGetErrorString(r));
    *made = 1;
    return C10D_OK;
}

c10d_status c10di_nccl_grow(c10di_nccl *s, void **buf, size_t *cap, size_t bytes,
                            const c10di_coll *c)
{
    if (bytes <= *cap)
        return C10D_OK;
    if (bytes < 2 * *cap) /* geometric: the retired ones add up to less than the live one */
        bytes = 2 * *cap;
    void *nb = NULL;
    cudaError_t e = c10di_gpu.cudaMalloc(&nb, bytes);
    if (e != cudaSuccess)
        return c10di_cuda_error(e, "device buffer", c);
    if (*buf) {
        if (s->n_retired == (int)(sizeof s->retired / sizeof s->retired[0])) {
            c10di_gpu.cudaFree(s->retired[0]); /* rare: the oldest, smallest one */
            memmove(s->retired, s->retired + 1, (size_t)(s->n_retired - 1) * sizeof s->retired[0]);
            s->n_retired--;
        }
        s->retired[s->n_retired++] = *buf;
    }
    *buf = nb;
    *cap = bytes;
    return C10D_OK;
}

void c10di_nccl_free_retired(c10di_nccl *s)
{
    for (int i = 0; i < s->n_retired; i++)
        c10di_gpu.cudaFree(s->retired[i]);
    s->n_retired = 0;
}

static c10d_status scratch(c10di_nccl *s, const c10di_coll *c, size_t bytes, void **out)
{
    c10d_status st = c10di_nccl_grow(s, &s->scratch, &s->scratch_cap, bytes, c);
    *out = s->scratch;
    return st;
}

static c10d_status copy(const c10di_coll *c, void *dst, const void *src, size_t bytes,
                        cudaStream_t stream)
{
    if (dst == src || bytes == 0)
        return C10D_OK;
    cudaError_t e = c10di_gpu.cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
    return e == cudaSuccess ? C10D_OK : c10di_cuda_error(e, "copy", c);
}

#define SETTLE(call) c10di_nccl_settle(s, (call), c)

static c10d_status all_gather(c10di_nccl *s, const c10di_coll *c, ncclDataType_t dt,
                              size_t bytes)
{
    int n = s->ctx->size;
    if (c10di_blocks_flat((const void *const *)c->outs, n, bytes))
        return SETTLE(c10di_gpu.ncclAllGather(c->in, c->outs[0], c->count, dt, s->comm,
                                              s->stream));
    void *flat;
    c10d_status st = scratch(s, c, bytes * (size_t)n, &flat);
    if (st == C10D_OK)
        st = SETTLE(c10di_gpu.ncclAllGather(c->in, flat, c->count, dt, s->comm, s->stream));
    for (int i = 0; i < n && st == C10D_OK; i++)
        st = copy(c, c->outs[i], (char *)flat + (size_t)i * bytes, bytes, s->stream);
    return st;
}

static c10d_status reduce_scatter(c10di_nccl *s, const c10di_coll *c, ncclDataType_t dt,
                                  ncclRedOp_t op, size_t bytes)
{
    int n = s->ctx->size;
    if (c10di_blocks_flat((const void *const *)c->ins, n, bytes))
        return SETTLE(c10di_gpu.ncclReduceScatter(c->ins[0], c->out, c->count, dt, op, s->comm,
                                                  s->stream));
    void *flat;
    c10d_status st = scratch(s, c, bytes * (size_t)n, &flat);
    for (int i = 0; i < n && st == C10D_OK; i++)
        st = copy(c, (char *)flat + (size_t)i * bytes, c->ins[i], bytes, s->stream);
    if (st == C10D_OK)
        st = SETTLE(c10di_gpu.ncclReduceScatter(flat, c->out, c->count, dt, op, s->comm,
                                                s->stream));
    return st;
}

/* Point-to-point steps of one call, as one NCCL group. */
static c10d_status p2p_group(c10di_nccl *s, const c10di_coll *c, ncclDataType_t dt,
                             size_t bytes)
{
    int n = s->ctx->size, me = s->ctx->rank;
    size_t count = c->count;
    c10d_status st = C10D_OK;
    ncclResult_t r = c10di_gpu.ncclGroupStart();
    for (int p = 0; p < n && r == ncclSuccess; p++) {
        switch (c->kind) {
        case C10DC_ALL_TO_ALL: {
            size_t per = count / (size_t)n, pb = bytes / (size_t)n;
            r = c10di_gpu.ncclSend((const char *)c->in + (size_t)p * pb, per, dt, p, s->comm,
                                   s->stream);
            if (r == ncclSuccess)
                r = c10di_gpu.ncclRecv((char *)c->out + (size_t)p * pb, per, dt, p, s->comm,
                                       s->stream);
            break;
        }
        case C10DC_GATHER:
            if (me == c->root && p != me)
                r = c10di_gpu.ncclRecv(c->outs[p], count, dt, p, s->comm, s->stream);
            else if (me != c->root && p == c->root)
                r = c10di_gpu.ncclSend(c->in, count, dt, p, s->comm, s->stream);
            break;
        case C10DC_SCATTER:
            if (me == c->root && p != me)
                r = c10di_gpu.ncclSend(c->ins[p], count, dt, p, s->comm, s->stream);
            else if (me != c->root && p == c->root)
                r = c10di_gpu.ncclRecv(c->out, count, dt, p, s->comm, s->stream);
            break;
        default:
            break;
        }
    }
    ncclResult_t end = c10di_gpu.ncclGroupEnd();
    st = SETTLE(r != ncclSuccess ? r : end);
    if (st == C10D_OK && c->kind == C10DC_GATHER && me == c->root)
        st = copy(c, c->outs[me], c->in, bytes, s->stream);
    if (st == C10D_OK && c->kind == C10DC_SCATTER && me == c->root)
        st = copy(c, c->out, c->ins[me], bytes, s->stream);
    return st;
}

static c10d_status enqueue_op(c10di_nccl *s, const c10di_coll *c, ncclRedOp_t op)
{
    ncclDataType_t dt = (ncclDataType_t)c10di_nccl_dtype(c->dtype);
    size_t bytes = c->count * c10d_dtype_size(c->dtype);
    void *one;
    c10d_status st;
    switch (c->kind) {
    case C10DC_ALL_REDUCE:
        return SETTLE(c10di_gpu.ncclAllReduce(c->buf, c->buf, c->count, dt, op, s->comm,
                                              s->stream));
    case C10DC_BROADCAST:
        return SETTLE(c10di_gpu.ncclBroadcast(c->buf, c->buf, c->count, dt, c->root, s->comm,
                                              s->stream));
    case C10DC_REDUCE:
        return SETTLE(c10di_gpu.ncclReduce(c->buf, c->buf, c->count, dt, op, c->root, s->comm,
                                           s->stream));
    case C10DC_ALL_GATHER:
        return all_gather(s, c, dt, bytes);
    case C10DC_REDUCE_SCATTER:
        return reduce_scatter(s, c, dt, op, bytes);
    case C10DC_ALL_TO_ALL:
    case C10DC_GATHER:
    case C10DC_SCATTER:
        return p2p_group(s, c, dt, bytes);
    case C10DC_SEND:
        return SETTLE(c10di_gpu.ncclSend(c->buf, c->count, dt, c->root, s->comm, s->stream));
    case C10DC_RECV:
        return SETTLE(c10di_gpu.ncclRecv(c->buf, c->count, dt, c->root, s->comm, s->stream));
    case C10DC_BARRIER:
        /* torch's NCCL barrier: a one-element all_reduce, waited for. */
        if ((st = scratch(s, c, 16, &one)) != C10D_OK)
            return st;
        return SETTLE(c10di_gpu.ncclAllReduce(one, one, 1, ncclUint8, ncclSum, s->comm,
                                              s->stream));
    default:
        return c10di_error(C10D_EINVAL, "%s: not a collective the NCCL backend runs", c->what);
    }
}

c10d_status c10di_nccl_enqueue(c10di_nccl *s, const c10di_coll *c)
{
    if (c->shadow)
        return c10di_nccl_enqueue_shadow(s, c);
    ncclRedOp_t op;
    int made;
    c10d_status st = c10di_nccl_red_op(s, c, &op, &made);
    if (st == C10D_OK)
        st = enqueue_op(s, c, op);
    if (made)
        c10di_gpu.ncclRedOpDestroy(op, s->comm);
    return st;
}

/* --- the ops table --- */

static c10d_status nccl_prepare(void *state, c10di_coll *c)
{
    c10di_nccl *s = state;
    const c10di_be_ctx *x = s->ctx;
    /* Refused before the call is numbered, on every rank alike: after a
     * join it could not run (c10di_nccl_red_op), and a joined rank would
     * wait for it. */
    if (!c->shadow && x->hooks->avg_by_active(x, c) &&
        c10di_nccl_avg_plan(c->dtype, c->op, 1, 2) < 0)
        return c10di_error(C10D_EINVAL, "%s on CUDA: an AVG of %s over the ranks that have not "
                           "joined (join region with divide_by_initial_world_size = 0) needs a "
                           "floating-point dtype on NCCL; use SUM and divide by "
                           "c10d_active_ranks()", c10dc_kind_name(c->kind),
                           c10d_dtype_name(c->dtype));
    int dev = c10di_nccl_device(s, c->device);
    if (c->device >= 0 && c->device != dev)
        return c10di_error(C10D_EINVAL, "%s: the tensors are on cuda:%d, but group %s runs on "
                           "cuda:%d (set by c10d_init_opts.device, LOCAL_RANK or the group's "
                           "first CUDA collective)", c->kind < C10DC_KIND_COUNT ?
                           c10dc_kind_name(c->kind) : "?", c->device, x->group, dev);
    if (dev >= c10di_gpu.devices)
        return c10di_error(C10D_EINVAL, "group %s: CUDA device %d does not exist (%d visible)",
                           x->group, dev, c10di_gpu.devices);
    cudaEvent_t ev = NULL;
    cudaError_t e = c10di_gpu.cudaSetDevice(dev);
    if (e == cudaSuccess)
        e = c10di_gpu.cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = c10di_gpu.cudaEventRecord(ev, (cudaStream_t)c->stream);
    if (e != cudaSuccess) {
        if (ev)
            c10di_gpu.cudaEventDestroy(ev);
        return c10di_cuda_error(e, "recording the caller's stream", NULL);
    }
    c->ready = ev;
    return C10D_OK;
}

static c10di_gpu_op *op_new(const c10di_coll *c)
{
    c10di_gpu_op *op = calloc(1, sizeof *op);
    if (!op)
        return NULL;
    atomic_init(&op->refs, 1);
    atomic_init(&op->state, OP_RUNNING);
    if (c10di_gpu.cudaEventCreateWithFlags(&op->done, cudaEventDisableTiming) != cudaSuccess) {
        free(op);
        return NULL;
    }
    int p2p = c->kind == C10DC_SEND || c->kind == C10DC_RECV;
    /* A send/recv is numbered apart; any lost member fails it. */
    op->seq = p2p ? UINT64_MAX : c->seq;
    op->counts = !p2p;
    op->deadline_ms = c->deadline_ms;
    op->timeout_ms = c->timeout_ms;
    snprintf(op->what, sizeof op->what, "%s", c->what);
    return op;
}

/* Blocks this thread until op ends (barriers; C10D_NCCL_BLOCKING_WAIT=1),
 * the watchdog's abort included. */
static c10d_status block_on(c10di_gpu_op *op)
{
    for (;;) {
        int state = atomic_load(&op->state);
        if (state == OP_FAILED)
            return c10di_error(op->st, "%s", op->msg);
        if (state == OP_DONE || c10di_gpu.cudaEventQuery(op->done) == cudaSuccess)
            return C10D_OK;
        struct timespec ts = {0, 20 * 1000};
        nanosleep(&ts, NULL);
    }
}

static c10d_status nccl_run(void *state, c10di_coll *c)
{
    c10di_nccl *s = state;
    if (atomic_load(&s->aborted))
        return c10di_error(s->abort_st, "%s of group %s (rank %d) did not run: the group's NCCL "
                           "communicator was aborted: %s", c->what, s->ctx->group, s->ctx->rank,
                           s->abort_msg);
    c10di_gpu_op *op = NULL;
    pthread_mutex_lock(&s->comm_mu);
    c10d_status st = c10di_nccl_ensure(s, c);
    cudaError_t e = cudaSuccess;
    if (st == C10D_OK && (e = c10di_gpu.cudaSetDevice(atomic_load(&s->device))) == cudaSuccess &&
        c->ready) {
        e = c10di_gpu.cudaStreamWaitEvent(s->stream, (cudaEvent_t)c->ready, 0);
        c10di_gpu.cudaEventDestroy((cudaEvent_t)c->ready);
        c->ready = NULL;
    }
    if (st == C10D_OK && e != cudaSuccess)
        st = c10di_cuda_error(e, "ordering after the caller's stream", c);
    if (st == C10D_OK && !(op = op_new(c)))
        st = c10di_error(C10D_ENOMEM, "%s: cannot make a CUDA event", c->what);
    if (op)
        op->blocking_wait = s->blocking_wait;
    if (st == C10D_OK)
        st = c10di_nccl_enqueue(s, c);
    if (st == C10D_OK && (e = c10di_gpu.cudaEventRecord(op->done, s->stream)) != cudaSuccess)
        st = c10di_cuda_error(e, "recording completion", c);
    pthread_mutex_unlock(&s->comm_mu);
    if (st != C10D_OK) {
        c10di_gpu_op_unref(op);
        return st;
    }
    c->completes_later = 1;
    c10di_nccl_track(s, op);
    /* The caller's stream goes on after the collective; the caller's
     * thread does not wait (torch's semantics), except for a barrier and
     * under C10D_NCCL_BLOCKING_WAIT. */
    if (!c->async &&
        (e = c10di_gpu.cudaStreamWaitEvent((cudaStream_t)c->stream, op->done, 0)) != cudaSuccess)
        st = c10di_cuda_error(e, "ordering the caller's stream", c);
    if (st == C10D_OK && (c->kind == C10DC_BARRIER || s->blocking_wait))
        st = block_on(op);
    if (c->async && st == C10D_OK)
        c->pending = op; /* the work handle's reference */
    else
        c10di_gpu_op_unref(op);
    return st;
}

static c10d_status nccl_wait(void *pending, void *stream)
{
    c10di_gpu_op *op = pending;
    if (atomic_load(&op->state) == OP_FAILED)
        return c10di_error(op->st, "%s", op->msg);
    cudaError_t e = c10di_gpu.cudaStreamWaitEvent((cudaStream_t)stream, op->done, 0);
    if (e != cudaSuccess)
        return c10di_error(C10D_EBACKEND, "%s: ordering the caller's stream: CUDA error: %s",
                           op->what, c10di_gpu.cudaGetErrorString(e));
    if (op->blocking_wait)
        return block_on(op);
    return C10D_OK;
}

static int nccl_is_done(void *pending)
{
    c10di_gpu_op *op = pending;
    int state = atomic_load(&op->state);
    return state != OP_RUNNING || c10di_gpu.cudaEventQuery(op->done) == cudaSuccess;
}

static void nccl_forget(c10di_coll *c)
{
    if (c->ready) {
        c10di_gpu.cudaEventDestroy((cudaEvent_t)c->ready);
        c->ready = NULL;
    }
    if (c->pending) {
        c10di_gpu_op_unref(c->pending);
        c->pending = NULL;
    }
}

c10d_status c10di_nccl_available(void)
{
    return c10di_gpu_load();
}

const c10di_backend_ops c10di_nccl_backend = {
    .name = "nccl",
    .kind = C10DI_DEV_CUDA,
    .available = c10di_nccl_available,
    .open = c10di_nccl_open,
    .connect = c10di_nccl_connect,
    .run_call = nccl_run,
    .close = c10di_nccl_close,
    .prepare = nccl_prepare,
    .wait = nccl_wait,
    .is_done = nccl_is_done,
    .forget = nccl_forget,
    .split = c10di_nccl_split,
};
