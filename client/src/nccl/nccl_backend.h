/* The NCCL backend's state: one communicator per group (made lazily at
 * the group's first CUDA collective, or at c10d_init under
 * C10D_BACKEND_NCCL, or split from the parent's), the group's internal
 * stream, and a watchdog that follows every enqueued collective until its
 * CUDA event fires, and aborts the communicator (ncclCommAbort) when the
 * coordinator reports a desync, a lost peer or a stall, when NCCL reports
 * an error, or at the collective's timeout, so nothing stays hung in a
 * kernel. */
#ifndef C10DI_NCCL_BACKEND_H
#define C10DI_NCCL_BACKEND_H

#include "gpu_api.h"
#include "backend/backend.h"

typedef struct c10di_nccl c10di_nccl;

/* One enqueued collective: the watchdog holds a reference until it ends,
 * an async work handle another. */
typedef struct c10di_gpu_op {
    atomic_int refs;
    cudaEvent_t done;
    uint64_t seq;
    int counts; /* a collective of the group (moves its completed count) */
    int blocking_wait; /* the group's C10D_NCCL_BLOCKING_WAIT */
    int64_t deadline_ms;
    c10d_ms timeout_ms;
    char what[160];
    atomic_int state; /* OP_RUNNING, OP_DONE, OP_FAILED */
    c10d_status st;   /* OP_FAILED: why (msg), written before state */
    char msg[1024];
    struct c10di_gpu_op *next;
} c10di_gpu_op;

enum { OP_RUNNING, OP_DONE, OP_FAILED };

struct c10di_nccl {
    const c10di_be_ctx *ctx; /* the group it serves */
    int blocking_wait;  /* C10D_NCCL_BLOCKING_WAIT=1: calls block the CPU until done */
    atomic_int device;  /* -1 until decided */
    ncclComm_t comm;    /* NULL until made, and again after an abort */
    cudaStream_t stream;
    unsigned inits;     /* communicators made for this group: names store keys */
    void *scratch;      /* device memory: the flatten path, the barrier */
    size_t scratch_cap;
    /* a joined rank's shadows (shadow.c): the identity it contributes,
     * filled for one element value, and where what it receives goes */
    void *ident;
    size_t ident_cap, ident_filled;
    unsigned char ident_elem[8];
    size_t ident_es;
    void *discard;
    size_t discard_cap;
    /* Device buffers outgrown while comm_mu was held: cudaFree waits for
     * the device, which must not happen under comm_mu (the watchdog could
     * not abort a hung collective), so they are freed at close. */
    void *retired[8];
    int n_retired;
    /* Serialises NCCL calls on comm: the collective path, the split, the
     * watchdog's abort. */
    pthread_mutex_t comm_mu;
    /* the enqueued collectives, oldest first (mu) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    c10di_gpu_op *head, *tail;
    int stop;
    pthread_t watchdog;
    int watchdog_on;
    /* set once, by the first abort: every later call fails with it */
    atomic_int aborted;
    c10d_status abort_st;
    char abort_msg[1024];
};

/* comm.c */
c10d_status c10di_nccl_open(const c10di_be_ctx *ctx, void **state, char *buf, size_t cap,
                            size_t *len);
c10d_status c10di_nccl_connect(void *state, const c10di_peers *peers);
void c10di_nccl_close(void *state);
c10d_status c10di_nccl_split(void *pstate, void *cstate);
/* Whether NCCL can serve (loads CUDA and NCCL the first time). */
c10d_status c10di_nccl_available(void);
/* The communicator, made now if need be (the device decided first). */
c10d_status c10di_nccl_ensure(c10di_nccl *s, const c10di_coll *c);
/* After an NCCL call returned r: waits out ncclInProgress (non-blocking
 * communicator), aborting if the group fails or c's deadline passes
 * meanwhile. Called with comm_mu held. */
c10d_status c10di_nccl_settle(c10di_nccl *s, ncclResult_t r, const c10di_coll *c);
/* Aborts the communicator once; every enqueued collective fails with
 * st and msg. */
void c10di_nccl_abort(c10di_nccl *s, c10d_status st, const char *msg);
/* Hands op to the watchdog (which takes a reference). */
void c10di_nccl_track(c10di_nccl *s, c10di_gpu_op *op);
void c10di_gpu_op_unref(c10di_gpu_op *op);
/* The group's device, decided on first use (see comm.c). */
int c10di_nccl_device(c10di_nccl *s, int want);
/* C10D_EBACKEND naming the call, the step and CUDA's error string. */
c10d_status c10di_cuda_error(cudaError_t e, const char *what, const c10di_coll *c);

/* enqueue.c: dtype and reduce-op mapping (-1 when NCCL has none) */
int c10di_nccl_dtype(c10d_dtype dt);
int c10di_nccl_op(c10d_reduce_op op);
/* How c's reduction runs: its NCCL op, or for an AVG over fewer ranks
 * than the group (c->divisor, join) a pre-multiplied sum made for it
 * (*made = 1: destroy it with ncclRedOpDestroy once enqueued). */
c10d_status c10di_nccl_red_op(c10di_nccl *s, const c10di_coll *c, ncclRedOp_t *op, int *made);
/* Whether an AVG divided by `divisor` of `n` ranks needs the pre-multiplied
 * sum (and whether NCCL can do it for dtype): 0 no, 1 yes, -1 impossible
 * (integers). Pure: unit-tested. */
int c10di_nccl_avg_plan(c10d_dtype dt, c10d_reduce_op op, int divisor, int n);

/* Makes *buf (a device buffer of *cap bytes) hold at least bytes, at
 * least doubling; the old one is retired, not freed (see retired). */
c10d_status c10di_nccl_grow(c10di_nccl *s, void **buf, size_t *cap, size_t bytes,
                            const c10di_coll *c);
/* Frees the retired buffers (at close). */
void c10di_nccl_free_retired(c10di_nccl *s);

/* Enqueues c on s's stream (comm_mu held, communicator made). */
c10d_status c10di_nccl_enqueue(c10di_nccl *s, const c10di_coll *c);

/* shadow.c: a joined rank's part in c (c->shadow), enqueued on s's stream
 * with device buffers of its own. */
c10d_status c10di_nccl_enqueue_shadow(c10di_nccl *s, const c10di_coll *c);
/* Releases the shadow buffers (at close). */
void c10di_nccl_shadow_free(c10di_nccl *s);

#endif
