/* c10d/coll.h — collectives and point-to-point transfers on a c10d_pg.
 *
 * Semantics follow torch.distributed. Every call checks its arguments
 * before anything is sent (C10D_EINVAL with what is wrong: a tensor of the
 * wrong size for the group, a root out of range, dtypes that differ, a NULL
 * buffer). Data moves rank to rank: CPU buffers through the host backend
 * (shared memory on one host, TCP across hosts).
 *
 * Sync by default: the call returns when this rank's part is done. With
 * opts->async_op the call returns at once with a work handle in *work, to
 * be waited on (c10d_work_wait) and freed (c10d_work_free); the buffers
 * must stay valid until then. Operations on one group run in the order
 * they were called, async or not.
 *
 * Errors every call here may return (c10d_errmsg() says which collective,
 * which ranks, and why):
 *   C10D_EINVAL     bad arguments, found before anything is sent;
 *   C10D_EDESYNC    the ranks called different collectives, or the same
 *                   one differently (verification, docs/verification.md);
 *   C10D_EPEERLOST  a member died or left (the message names it);
 *   C10D_ETIMEDOUT  the call's timeout passed (names who was waited for);
 *   C10D_EJOINED    inside a join region, a call a joined rank cannot
 *                   shadow (docs/join.md);
 *   C10D_EBACKEND   the data plane failed: a tensor on a device no backend
 *                   of the group takes, CUDA or NCCL errors, a peer's link
 *                   that could not be made;
 *   C10D_ENOMEM     out of memory (a work handle, staging buffers);
 *   C10D_EABORTED   an earlier failure left the group unusable.
 * After C10D_EDESYNC, C10D_EPEERLOST, C10D_ETIMEDOUT or C10D_EBACKEND from
 * the data plane the group is unusable (its links may hold half a message):
 * destroy it. */
#ifndef C10D_COLL_H
#define C10D_COLL_H

#include "common.h"
#include "errors.h"
#include "pg.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct c10d_work c10d_work;

/* Option structs start with their version, set by their _INIT macro:
 * fields are only ever added at the end, with a new version, and a library
 * reads only the fields of the version a caller was built with (so a
 * program built against an older header keeps working). A struct not made
 * with its _INIT macro (version 0) is refused with C10D_EINVAL. */
#define C10D_COLL_OPTS_VERSION 1

typedef struct c10d_coll_opts {
    unsigned int version; /* C10D_COLL_OPTS_VERSION */
    int async_op;    /* 1: return at once with *work */
    void *stream;    /* CUDA buffers: a cudaStream_t to order against */
    int timeout_ms;  /* C10D_TIMEOUT_DEFAULT (0): the group's; c10d/common.h */
} c10d_coll_opts;

#define C10D_COLL_OPTS_INIT {C10D_COLL_OPTS_VERSION, 0, NULL, C10D_TIMEOUT_DEFAULT}

/* In place on t, on every rank. AVG on integers truncates. */
C10D_API c10d_status c10d_all_reduce(c10d_pg *pg, c10d_tensor *t, c10d_reduce_op op,
                                     const c10d_coll_opts *o, c10d_work **work);
/* t of root to every rank's t. */
C10D_API c10d_status c10d_broadcast(c10d_pg *pg, c10d_tensor *t, int root,
                                    const c10d_coll_opts *o, c10d_work **work);
/* The reduction lands in root's t; other ranks' t are unchanged. */
C10D_API c10d_status c10d_reduce(c10d_pg *pg, c10d_tensor *t, int root, c10d_reduce_op op,
                                 const c10d_coll_opts *o, c10d_work **work);
/* outs: size(pg) tensors shaped like in; outs[i] gets rank i's in. When
 * outs are consecutive views into one buffer no extra copy is made. */
C10D_API c10d_status c10d_all_gather(c10d_pg *pg, c10d_tensor *outs, const c10d_tensor *in,
                                     const c10d_coll_opts *o, c10d_work **work);
/* out has size(pg) * numel(in) elements; rank i's in lands at i*numel(in).
 * In place (no copy of in) when in->data is this rank's slot of out. */
C10D_API c10d_status c10d_all_gather_into_tensor(c10d_pg *pg, c10d_tensor *out,
                                                 const c10d_tensor *in, const c10d_coll_opts *o,
                                                 c10d_work **work);
/* ins: size(pg) tensors shaped like out; out = reduction of every rank's
 * ins[rank]. */
C10D_API c10d_status c10d_reduce_scatter(c10d_pg *pg, c10d_tensor *out, const c10d_tensor *ins,
                                         c10d_reduce_op op, const c10d_coll_opts *o,
                                         c10d_work **work);
/* in has size(pg) * numel(out) elements; out = reduction of block rank. */
C10D_API c10d_status c10d_reduce_scatter_tensor(c10d_pg *pg, c10d_tensor *out,
                                                const c10d_tensor *in, c10d_reduce_op op,
                                                const c10d_coll_opts *o, c10d_work **work);
/* Equal splits: numel(in) == numel(out), divisible by size(pg); block j of
 * in goes to rank j, block i of out comes from rank i. */
C10D_API c10d_status c10d_all_to_all_single(c10d_pg *pg, c10d_tensor *out,
                                            const c10d_tensor *in, const c10d_coll_opts *o,
                                            c10d_work **work);
/* outs (size(pg) tensors, used on root only; may be NULL elsewhere). */
C10D_API c10d_status c10d_gather(c10d_pg *pg, c10d_tensor *outs, const c10d_tensor *in, int root,
                                 const c10d_coll_opts *o, c10d_work **work);
/* ins (size(pg) tensors, used on root only; may be NULL elsewhere). */
C10D_API c10d_status c10d_scatter(c10d_pg *pg, c10d_tensor *out, const c10d_tensor *ins,
                                  int root, const c10d_coll_opts *o, c10d_work **work);
/* Point to point, matched by (peer, tag) in call order; sizes must agree.
 * A send returns once its data is handed to the transport (it may block
 * until the peer receives, for large messages). An async recv is posted:
 * it starts when it is waited for (c10d_work_wait, C10D_NO_WAIT included),
 * when a later sync recv is called on its group, or before any collective
 * on any group; so the sends after it are not held up behind it (an isend
 * to the peer it receives from: torch's batch_isend_irecv), and a rank in
 * a collective does not hold up a peer's send to it. Its timeout runs
 * from its start. Freed before it
 * started, it is cancelled: it takes no message and its buffer is free.
 * Posted receives not started when the group is destroyed fail with
 * C10D_EABORTED. */
C10D_API c10d_status c10d_send(c10d_pg *pg, const c10d_tensor *t, int dst, int tag,
                               const c10d_coll_opts *o, c10d_work **work);
C10D_API c10d_status c10d_recv(c10d_pg *pg, c10d_tensor *t, int src, int tag,
                               const c10d_coll_opts *o, c10d_work **work);
/* From any other member: the first message with tag to reach this rank,
 * whoever sent it (torch's recv with no src). *src (may be NULL) gets the
 * sender's group rank when the receive is known done: before a sync call
 * returns, or when c10d_work_wait returns C10D_OK (keep it valid until
 * then). The coordinator verifies it against that sender's send. */
C10D_API c10d_status c10d_recv_any(c10d_pg *pg, c10d_tensor *t, int tag, int *src,
                                   const c10d_coll_opts *o, c10d_work **work);
C10D_API c10d_status c10d_barrier(c10d_pg *pg, const c10d_coll_opts *o, c10d_work **work);
/* A barrier through the coordinator that names the ranks that did not
 * arrive within timeout_ms (C10D_TIMEOUT_DEFAULT: the group's timeout;
 * all of them when wait_all_ranks, else the first). Errors: C10D_ETIMEDOUT on rank 0 naming the missing ranks, and
 * on the others. */
C10D_API c10d_status c10d_monitored_barrier(c10d_pg *pg, int timeout_ms, int wait_all_ranks);

/* Waits for an async operation: its status (and c10d_errmsg()). timeout_ms:
 * C10D_TIMEOUT_DEFAULT waits until it ends (the call's own timeout ends it),
 * C10D_NO_WAIT says how it stands now. C10D_ETIMEDOUT leaves it running. */
C10D_API c10d_status c10d_work_wait(c10d_work *w, int timeout_ms);
/* 1 when finished (successfully or not). NULL is 1: a sync call leaves no
 * work handle, and what it did is finished. Asking does not start a posted
 * recv (c10d_work_wait with C10D_NO_WAIT does). */
C10D_API int c10d_work_is_completed(const c10d_work *w);
/* Frees a work handle; if it is still running it finishes on its own.
 * NULL is accepted. */
C10D_API void c10d_work_free(c10d_work *w);

#ifdef __cplusplus
}
#endif
#endif
