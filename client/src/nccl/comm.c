/* The NCCL communicator of a group: made through the store (rank 0's
 * unique id under the job's generation), split from the parent's, closed;
 * and the watchdog that turns a hang into an abort. See nccl_backend.h. */
#include "nccl_backend.h"

#include "budgets.h"
#include "c10d_time.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void sleep_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

c10d_status c10di_cuda_error(cudaError_t e, const char *what, const c10di_coll *c)
{
    return c10di_error(C10D_EBACKEND, "%s%s%s: CUDA error: %s", c ? c->what : "", c ? ": " : "",
                       what, c10di_gpu.cudaGetErrorString(e));
}

void c10di_gpu_op_unref(c10di_gpu_op *op)
{
    if (!op || atomic_fetch_sub(&op->refs, 1) != 1)
        return;
    if (op->done)
        c10di_gpu.cudaEventDestroy(op->done);
    free(op);
}

/* Requires comm_mu. Aborts the communicator once and fails everything
 * enqueued on it. */
static void abort_locked(c10di_nccl *s, c10d_status st, const char *msg)
{
    if (atomic_load(&s->aborted))
        return;
    if (s->comm) {
        c10di_gpu.ncclCommAbort(s->comm);
        s->comm = NULL;
    }
    pthread_mutex_lock(&s->mu);
    s->abort_st = st;
    snprintf(s->abort_msg, sizeof s->abort_msg, "%s", msg);
    c10di_gpu_op *op = s->head;
    s->head = s->tail = NULL;
    atomic_store(&s->aborted, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (c10di_gpu_op *next; op; op = next) {
        next = op->next;
        op->st = st;
        snprintf(op->msg, sizeof op->msg, "%s of group %s (rank %d) was aborted on its GPU: %s",
                 op->what, s->ctx->group, s->ctx->rank, msg);
        atomic_store(&op->state, OP_FAILED);
        c10di_gpu_op_unref(op);
    }
}

void c10di_nccl_abort(c10di_nccl *s, c10d_status st, const char *msg)
{
    pthread_mutex_lock(&s->comm_mu);
    abort_locked(s, st, msg);
    pthread_mutex_unlock(&s->comm_mu);
}

/* What NCCL said went wrong, with the coordinator's account when it has
 * one: a peer's death shows up in NCCL as a "remote error", and the
 * coordinator can say who died. */
static c10d_status nccl_failure(c10di_nccl *s, ncclComm_t comm, ncclResult_t r,
                                const c10di_coll *c, char *msg, size_t cap)
{
    char report[1024];
    c10d_status st = c10di_be_failure(s->ctx, c->seq, report, sizeof report);
    for (int i = 0; st == C10D_OK && r == ncclRemoteError && i < 100; i++) {
        sleep_us(10000); /* up to 1 s for the watcher to learn which peer */
        st = c10di_be_failure(s->ctx, c->seq, report, sizeof report);
    }
    const char *last = comm ? c10di_gpu.ncclGetLastError(comm) : NULL;
    snprintf(msg, cap, "NCCL error on cuda:%d: %s%s%s%s%s", atomic_load(&s->device),
             c10di_gpu.ncclGetErrorString(r), last && *last ? " (" : "", last ? last : "",
             last && *last ? ")" : "", st != C10D_OK ? "; the coordinator reports: " : "");
    if (st != C10D_OK) {
        size_t used = strlen(msg);
        snprintf(msg + used, cap - used, "%s", report);
        return st;
    }
    return C10D_EBACKEND;
}

c10d_status c10di_nccl_settle(c10di_nccl *s, ncclResult_t r, const c10di_coll *c)
{
    char msg[1024];
    c10d_status st = C10D_OK;
    ncclComm_t comm = s->comm;
    for (;;) {
        if (r == ncclSuccess)
            return C10D_OK;
        if (r != ncclInProgress) {
            st = nccl_failure(s, comm, r, c, msg, sizeof msg);
            break;
        }
        if ((st = c10di_be_failure(s->ctx, c->seq, msg, sizeof msg)) != C10D_OK)
            break;
        if (c10d_now_ms() > c->deadline_ms) {
            st = C10D_ETIMEDOUT;
            snprintf(msg, sizeof msg, "NCCL did not finish within %d ms", c->timeout_ms);
            break;
        }
        sched_yield();
        if (c10di_gpu.ncclCommGetAsyncError(comm, &r) != ncclSuccess)
            r = ncclInternalError;
    }
    abort_locked(s, st, msg);
    return c10di_error(st, "%s of group %s (rank %d) failed: %s", c->what, s->ctx->group,
                       s->ctx->rank, msg);
}

/* --- the watchdog --- */

static void *watchdog_main(void *arg)
{
    c10di_nccl *s = arg;
    c10di_gpu.cudaSetDevice(atomic_load(&s->device));
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        if (!s->head) {
            struct timespec ts = c10d_deadline_ts(100);
            pthread_cond_timedwait(&s->cv, &s->mu, &ts);
            continue;
        }
        c10di_gpu_op *op = s->head;
        pthread_mutex_unlock(&s->mu);
        cudaError_t q = c10di_gpu.cudaEventQuery(op->done);
        if (q == cudaSuccess) {
            pthread_mutex_lock(&s->mu);
            if (s->head == op) { /* else an abort took it meanwhile */
                s->head = op->next;
                if (!s->head)
                    s->tail = NULL;
                pthread_cond_broadcast(&s->cv);
                pthread_mutex_unlock(&s->mu);
                atomic_store(&op->state, OP_DONE);
                if (op->counts)
                    s->ctx->hooks->completed(s->ctx, op->seq);
                c10di_gpu_op_unref(op);
            } else {
                pthread_mutex_unlock(&s->mu);
            }
            pthread_mutex_lock(&s->mu);
            continue;
        }
        char msg[1024];
        c10d_status st = C10D_OK;
        c10di_coll c;
        memset(&c, 0, sizeof c);
        c.seq = op->seq;
        snprintf(c.what, sizeof c.what, "%s", op->what);
        if (q != cudaErrorNotReady) {
            st = C10D_EBACKEND;
            snprintf(msg, sizeof msg, "CUDA error on cuda:%d: %s", atomic_load(&s->device),
                     c10di_gpu.cudaGetErrorString(q));
        } else if (pthread_mutex_trylock(&s->comm_mu) == 0) {
            /* Busy collective path: check next time round. */
            ncclResult_t a = ncclSuccess;
            if (s->comm && c10di_gpu.ncclCommGetAsyncError(s->comm, &a) == ncclSuccess &&
                a != ncclSuccess && a != ncclInProgress)
                st = nccl_failure(s, s->comm, a, &c, msg, sizeof msg);
            pthread_mutex_unlock(&s->comm_mu);
        }
        if (st == C10D_OK)
            st = c10di_be_failure(s->ctx, op->seq, msg, sizeof msg);
        if (st == C10D_OK && c10d_now_ms() > op->deadline_ms) {
            st = C10D_ETIMEDOUT;
            snprintf(msg, sizeof msg, "not completed within %d ms (c10d-ctl desync shows who "
                     "is behind)", op->timeout_ms);
        }
        if (st != C10D_OK)
            c10di_nccl_abort(s, st, msg);
        else
            sleep_us(1000);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static c10d_status start_watchdog(c10di_nccl *s)
{
    if (s->watchdog_on)
        return C10D_OK;
    if (pthread_create(&s->watchdog, NULL, watchdog_main, s) != 0)
        return c10di_error(C10D_ENOMEM, "cannot start the NCCL watchdog thread of group %s",
                           s->ctx->group);
    s->watchdog_on = 1;
    return C10D_OK;
}

void c10di_nccl_track(c10di_nccl *s, c10di_gpu_op *op)
{
    atomic_fetch_add(&op->refs, 1);
    op->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (atomic_load(&s->aborted)) { /* nothing will ever watch it */
        op->st = s->abort_st;
        snprintf(op->msg, sizeof op->msg, "%s", s->abort_msg);
        atomic_store(&op->state, OP_FAILED);
        pthread_mutex_unlock(&s->mu);
        c10di_gpu_op_unref(op);
        return;
    }
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* --- making the communicator --- */

/* The device this group runs on, decided once: the options or LOCAL_RANK
 * (the world's), else the first CUDA tensor's, else rank modulo the
 * visible devices. */
int c10di_nccl_device(c10di_nccl *s, int want)
{
    int d = atomic_load(&s->device);
    if (d >= 0)
        return d;
    if (s->ctx->device >= 0)
        d = s->ctx->device;
    else if (want >= 0)
        d = want;
    else
        d = s->ctx->world_rank % (c10di_gpu.devices > 0 ? c10di_gpu.devices : 1);
    int expected = -1;
    if (!atomic_compare_exchange_strong(&s->device, &expected, d))
        d = expected;
    return d;
}


/* Rank 0's unique id, through the coordinator's store: polled in short
 * waits so that a peer's death or the deadline ends it. */
static c10d_status exchange_id(c10di_nccl *s, const c10di_coll *c, ncclUniqueId *id)
{
    const c10di_be_ctx *x = s->ctx;
    char key[32], msg[1024];
    snprintf(key, sizeof key, "id.%u", s->inits);
    c10d_store *store = x->store; /* the group's own prefix (backend_ctx.c) */
    c10d_status st;
    if (x->rank == 0) {
        ncclResult_t r = c10di_gpu.ncclGetUniqueId(id);
        st = r != ncclSuccess ? c10di_error(C10D_EBACKEND, "ncclGetUniqueId: %s",
                                            c10di_gpu.ncclGetErrorString(r))
                              : c10d_store_set(store, key, id, sizeof *id);
    } else {
        for (;;) {
            void *v = NULL;
            size_t len = 0;
            st = c10d_store_get(store, key, &v, &len, 200);
            if (st == C10D_OK) {
                if (len == sizeof *id)
                    memcpy(id, v, sizeof *id);
                else
                    st = c10di_error(C10D_EPROTO, "store key %s of group %s's NCCL prefix "
                                     "holds %zu bytes, not an NCCL unique id", key, x->group,
                                     len);
                c10d_free(v);
                break;
            }
            if (st != C10D_ETIMEDOUT)
                break;
            if ((st = c10di_be_failure(x, c->seq, msg, sizeof msg)) != C10D_OK) {
                c10di_error(st, "%s", msg);
                break;
            }
            if (c10d_now_ms() > c->deadline_ms) {
                st = c10di_error(C10D_ETIMEDOUT, "rank 0 did not publish the NCCL unique id "
                                 "within %d ms", c->timeout_ms);
                break;
            }
        }
    }
    return st;
}

static c10d_status make_stream(c10di_nccl *s, const c10di_coll *c)
{
    cudaError_t e = c10di_gpu.cudaSetDevice(atomic_load(&s->device));
    if (e == cudaSuccess && !s->stream)
        e = c10di_gpu.cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    return e == cudaSuccess ? C10D_OK : c10di_cuda_error(e, "stream", c);
}

c10d_status c10di_nccl_ensure(c10di_nccl *s, const c10di_coll *c)
{
    if (s->comm)
        return C10D_OK;
    if (atomic_load(&s->aborted))
        return c10di_error(s->abort_st, "%s of group %s: the group's NCCL communicator was "
                           "aborted: %s", c->what, s->ctx->group, s->abort_msg);
    c10d_status st = c10di_nccl_available();
    if (st != C10D_OK)
        return st;
    int dev = c10di_nccl_device(s, c->device >= 0 ? c->device : -1);
    if (dev >= c10di_gpu.devices)
        return c10di_error(C10D_EINVAL, "group %s: CUDA device %d does not exist (%d visible)",
                           s->ctx->group, dev, c10di_gpu.devices);
    ncclUniqueId id;
    if ((st = make_stream(s, c)) != C10D_OK || (st = exchange_id(s, c, &id)) != C10D_OK)
        return st;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; /* so that an abort can end a hang */
    ncclComm_t comm = NULL;
    ncclResult_t r = c10di_gpu.ncclCommInitRankConfig(&comm, s->ctx->size, id, s->ctx->rank,
                                                      &config);
    s->comm = comm;
    s->inits++;
    if ((st = c10di_nccl_settle(s, r, c)) != C10D_OK)
        return c10di_error(st, "cannot make the NCCL communicator of group %s on cuda:%d: %s",
                           s->ctx->group, dev, c10d_errmsg());
    return start_watchdog(s);
}

/* A stand-in collective for setup steps: their deadline and messages. */
static void setup_coll(c10di_coll *c, const c10di_be_ctx *x, const char *what)
{
    memset(c, 0, sizeof *c);
    c->seq = x->hooks->issued(x) + 1;
    c->device = C10DI_GROUP_DEVICE;
    c->timeout_ms = x->timeout_ms;
    c->deadline_ms = c10d_now_ms() + x->timeout_ms;
    snprintf(c->what, sizeof c->what, "%s", what);
}

c10d_status c10di_nccl_open(const c10di_be_ctx *ctx, void **state, char *buf, size_t cap,
                            size_t *len)
{
    (void)buf, (void)cap;
    *len = 0; /* nothing to publish: NCCL bootstraps through the store */
    c10di_nccl *s = calloc(1, sizeof *s);
    if (!s)
        return c10di_error(C10D_ENOMEM, "out of memory");
    s->ctx = ctx;
    s->blocking_wait = c10di_env_long("C10D_NCCL_BLOCKING_WAIT", 0) != 0;
    atomic_init(&s->device, -1);
    pthread_mutex_init(&s->comm_mu, NULL);
    pthread_mutex_init(&s->mu, NULL);
    c10d_cond_init_monotonic(&s->cv);
    *state = s;
    return C10D_OK;
}

c10d_status c10di_nccl_connect(void *state, const c10di_peers *peers)
{
    (void)peers;
    c10di_nccl *s = state;
    /* Made at the first CUDA collective, unless NCCL is the group's only
     * data plane; subgroups get theirs from c10di_nccl_split, which every
     * member of the parent calls. */
    if (!s->ctx->primary || s->ctx->subgroup)
        return C10D_OK;
    c10di_coll c;
    setup_coll(&c, s->ctx, "NCCL communicator setup");
    pthread_mutex_lock(&s->comm_mu);
    c10d_status st = c10di_nccl_ensure(s, &c);
    pthread_mutex_unlock(&s->comm_mu);
    return st;
}

c10d_status c10di_nccl_split(void *pstate, void *cstate)
{
    c10di_nccl *p = pstate, *s = cstate;
    c10di_coll c;
    if (!p || !p->comm || atomic_load(&p->aborted)) {
        if (!s || !s->ctx->primary)
            return C10D_OK; /* made at the group's first CUDA collective */
        setup_coll(&c, s->ctx, "NCCL communicator setup");
        pthread_mutex_lock(&s->comm_mu);
        c10d_status st = c10di_nccl_ensure(s, &c);
        pthread_mutex_unlock(&s->comm_mu);
        return st;
    }
    /* Everything the parent's lane queued must reach NCCL first: the split
     * is a call on the parent's communicator, in the same order on every
     * rank. */
    p->ctx->hooks->drain(p->ctx);
    setup_coll(&c, p->ctx, "NCCL communicator split");
    pthread_mutex_lock(&p->comm_mu);
    c10di_gpu.cudaSetDevice(atomic_load(&p->device));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t nc = NULL;
    ncclResult_t r = c10di_gpu.ncclCommSplit(p->comm, s ? 0 : NCCL_SPLIT_NOCOLOR,
                                             s ? s->ctx->rank : 0, &nc, &config);
    c10d_status st = c10di_nccl_settle(p, r, &c);
    pthread_mutex_unlock(&p->comm_mu);
    if (st != C10D_OK || !s)
        return st;
    atomic_store(&s->device, atomic_load(&p->device));
    pthread_mutex_lock(&s->comm_mu);
    s->comm = nc;
    s->inits++;
    setup_coll(&c, s->ctx, "NCCL communicator split");
    if (c10di_gpu.ncclCommGetAsyncError(nc, &r) != ncclSuccess)
        r = ncclInternalError;
    st = c10di_nccl_settle(s, r, &c);
    if (st == C10D_OK)
        st = make_stream(s, &c);
    pthread_mutex_unlock(&s->comm_mu);
    return st != C10D_OK ? st : start_watchdog(s);
}

void c10di_nccl_close(void *state)
{
    c10di_nccl *s = state;
    if (!s)
        return;
    /* What is enqueued ends first: completes, or is aborted by the
     * watchdog (a lost peer, a finding, its deadline). */
    pthread_mutex_lock(&s->mu);
    while (s->head && s->watchdog_on)
        pthread_cond_wait(&s->cv, &s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->watchdog_on)
        pthread_join(s->watchdog, NULL);
    if (s->comm) {
        /* A clean finalize, bounded: a communicator that cannot flush is
         * aborted instead. */
        ncclResult_t r = c10di_gpu.ncclCommFinalize(s->comm);
        int64_t until = c10d_now_ms() + C10DI_NCCL_FINALIZE_BUDGET_MS;
        while (r == ncclInProgress && c10d_now_ms() < until) {
            sleep_us(1000);
            if (c10di_gpu.ncclCommGetAsyncError(s->comm, &r) != ncclSuccess)
                r = ncclInternalError;
        }
        if (r == ncclSuccess)
            c10di_gpu.ncclCommDestroy(s->comm);
        else
            c10di_gpu.ncclCommAbort(s->comm);
    }
    if (s->scratch)
        c10di_gpu.cudaFree(s->scratch);
    c10di_nccl_shadow_free(s);
    c10di_nccl_free_retired(s);
    if (s->stream)
        c10di_gpu.cudaStreamDestroy(s->stream);
    pthread_mutex_destroy(&s->comm_mu);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
