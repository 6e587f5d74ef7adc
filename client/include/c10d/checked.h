/* c10d/checked.h — the coordinator's checks over a data plane of the
 * program's own: its NCCL, MPI or anything else moves the bytes, and
 * c10d-coord numbers, fingerprints and verifies each call, counts it in
 * liveness and stall reports, shadows it for a rank that joined, and says
 * when it can never complete (a desync, a dead peer, a stall), so that the
 * program aborts instead of hanging.
 *
 *   c10d_data_plane dp = C10D_DATA_PLANE_INIT;
 *   dp.on_alert = abort_mpi;                 optional: told while inside
 *   c10d_data_plane_set(pg, &dp);            every member, before its first call
 *
 *   c10d_check_opts co = C10D_CHECK_OPTS_INIT;
 *   co.kind = C10D_COLL_ALL_REDUCE; co.dtype = C10D_FLOAT32; co.count = n;
 *   co.op = C10D_SUM;
 *   c10d_checked *h;
 *   if (c10d_check_begin(pg, &co, &h) != C10D_OK)     a desync, named: do not call MPI
 *       fail(c10d_errmsg());
 *   int rc = MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, comm);
 *   c10d_status st = c10d_check_end(h, rc == MPI_SUCCESS ? C10D_OK : C10D_EBACKEND, "MPI");
 *
 * Verification follows the group's mode (c10d_init_opts.verify, or
 * C10D_VERIFY): SYNC checks before c10d_check_begin returns (one round trip;
 * a mismatched call never reaches the data plane); ASYNC reports alongside
 * (a mismatch is found while the data plane is inside the call, and the
 * program hears of it through on_alert or c10d_check_state); OFF only
 * counts. See docs/checked.md. */
#ifndef C10D_CHECKED_H
#define C10D_CHECKED_H

#include "common.h"
#include "errors.h"
#include "pg.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a call is; the values are part of the fingerprint the coordinator
 * compares, so they never change. */
typedef enum {
    C10D_COLL_ALL_REDUCE = 0,
    C10D_COLL_BROADCAST = 1,
    C10D_COLL_REDUCE = 2,
    C10D_COLL_ALL_GATHER = 3,
    C10D_COLL_REDUCE_SCATTER = 4,
    C10D_COLL_ALL_TO_ALL = 5,
    C10D_COLL_GATHER = 6,
    C10D_COLL_SCATTER = 7,
    C10D_COLL_SEND = 8,
    C10D_COLL_RECV = 9,
    C10D_COLL_BARRIER = 10,
    /* torch's monitored_barrier (the data plane names who is missing;
     * its check does not wait for every member) */
    C10D_COLL_MONITORED_BARRIER = 11,
} c10d_coll_kind;

/* c10d_check_opts.device in a shadow's call (c10d_shadow_fn): a CUDA
 * buffer on the device the group's CUDA data plane uses. */
#define C10D_ANY_CUDA (-2)

#define C10D_CHECK_OPTS_VERSION 1

/* A call as the coordinator compares it across ranks. Start with
 * C10D_CHECK_OPTS_INIT (its version first: see c10d/coll.h). */
typedef struct c10d_check_opts {
    unsigned int version;  /* C10D_CHECK_OPTS_VERSION */
    c10d_coll_kind kind;
    c10d_dtype dtype;      /* not compared for a barrier */
    int64_t count;         /* elements of one rank's block, as in c10d/coll.h: all_reduce's
                              whole buffer, all_gather's input, reduce_scatter's output */
    int root;              /* broadcast, reduce, gather, scatter: the root (group rank);
                              send and recv: the peer (group rank) */
    c10d_reduce_op op;     /* all_reduce, reduce, reduce_scatter */
    int device;            /* C10D_CPU or a CUDA device index: which of the group's data
                              planes moves it (c10d_data_plane.devices); in a shadow's
                              call, C10D_ANY_CUDA: the group's CUDA device */
    int tag;               /* send and recv */
    int timeout_ms;        /* how long the call may take; C10D_TIMEOUT_DEFAULT: the group's */
} c10d_check_opts;

#define C10D_CHECK_OPTS_INIT                                                                       \
    {C10D_CHECK_OPTS_VERSION, C10D_COLL_BARRIER, C10D_FLOAT32, 0, 0, C10D_SUM, C10D_CPU, 0,       \
     C10D_TIMEOUT_DEFAULT}

/* Called, from a thread of the library's, when the coordinator found that
 * a call this rank is inside can never complete: st is C10D_EDESYNC (the
 * ranks called different collectives, or the same one differently),
 * C10D_EPEERLOST (a member died or left), or C10D_ETIMEDOUT (a stall the
 * coordinator saw, or the call's timeout passed); report names the ranks
 * and the calls. Once per group (the thread inside the data plane may
 * learn the same from c10d_check_state or c10d_check_end meanwhile). It
 * may call c10d_check_state and c10d_check_end, print, abort the data
 * plane (ncclCommAbort; MPI_Abort where MPI was initialised with
 * MPI_THREAD_MULTIPLE) or leave with _exit (not exit: atexit handlers
 * would run while another thread is inside MPI); it must not destroy a
 * group or wait for the data plane. */
typedef void (*c10d_alert_fn)(void *arg, c10d_pg *pg, c10d_status st, const char *report);

/* A joined rank's part (c10d/join.h) in `call`, which the group's other
 * members issued: issue it on the program's data plane with this rank
 * contributing identities (c10d_identity_fill: 0 for SUM, 1 for PROD, ...)
 * and discard what comes back (a broadcast's data, a barrier). Called on
 * the thread in c10d_join_end, in the order the others called them.
 * Return C10D_OK, or a failure (the others are told). */
typedef c10d_status (*c10d_shadow_fn)(void *arg, c10d_pg *pg, const c10d_check_opts *call);

/* Which buffers the program's data plane moves (bits). */
#define C10D_DATA_PLANE_CPU 1u
#define C10D_DATA_PLANE_CUDA 2u

#define C10D_DATA_PLANE_VERSION 1

/* Start with C10D_DATA_PLANE_INIT (its version first). */
typedef struct c10d_data_plane {
    unsigned int version; /* C10D_DATA_PLANE_VERSION */
    unsigned devices;     /* C10D_DATA_PLANE_CPU and/or _CUDA */
    c10d_alert_fn on_alert;   /* NULL: poll c10d_check_state instead */
    c10d_shadow_fn shadow;    /* NULL: this rank cannot join (c10d_join_end says so) */
    void *arg;                /* passed to both */
} c10d_data_plane;

#define C10D_DATA_PLANE_INIT {C10D_DATA_PLANE_VERSION, C10D_DATA_PLANE_CPU, NULL, NULL, NULL}

/* From now on the program moves pg's calls on the devices dp names: the
 * library's own collectives on those buffers are refused (C10D_EINVAL),
 * and c10d_check_begin numbers and checks the program's. Every member
 * sets it, before its first call on pg; subgroups made from pg afterwards
 * (c10d_new_group) get the same. Errors: C10D_EINVAL (NULL, no devices,
 * a version this library does not know, already set), C10D_ENOMEM. */
C10D_API c10d_status c10d_data_plane_set(c10d_pg *pg, const c10d_data_plane *dp);
/* (End every handle of a group before c10d_destroy: a handle names its
 * group, and one left open is neither ended nor freed.) */

typedef struct c10d_checked c10d_checked;

/* The program is about to run call o on pg's data plane: it is numbered
 * (pg's next collective, or its next send/recv), checked against what is
 * known of the group (a member lost, an earlier finding, a joined rank
 * the call cannot do without) and verified as the group's mode says;
 * the rank's heartbeat names it until it ends. On C10D_OK *out is its
 * handle, to be ended with c10d_check_end (from any thread). Errors,
 * with c10d_errmsg() naming the ranks and the calls; the data plane must
 * then not be entered: C10D_EINVAL (bad arguments, no data plane set for
 * o->device), C10D_EDESYNC, C10D_EPEERLOST, C10D_ETIMEDOUT (SYNC: the
 * others did not arrive in time), C10D_EJOINED (a rank joined that the
 * call needs), C10D_EABORTED (an earlier failure left pg unusable). */
C10D_API c10d_status c10d_check_begin(c10d_pg *pg, const c10d_check_opts *o,
                                      c10d_checked **out);

/* How call h stands, without waiting (a few atomic reads): C10D_OK while
 * nothing is known against it; else why it can never complete, as
 * on_alert says (C10D_EDESYNC, C10D_EPEERLOST, C10D_ETIMEDOUT: a stall,
 * or its timeout passed), with c10d_errmsg() set. From any thread. */
C10D_API c10d_status c10d_check_state(const c10d_checked *h);

/* The data plane finished call h: outcome C10D_OK (it completed),
 * C10D_EINVAL (the data plane refused it before it started, for its
 * arguments: pg stays usable) or the failure the data plane reported (any
 * other status; pg becomes unusable, as after any data-plane failure);
 * why, if not NULL, says what failed. Frees h. Returns C10D_OK, or what the coordinator found
 * against the call (a desync seen alongside under ASYNC, the peer whose
 * death made MPI fail), else the outcome, with c10d_errmsg() set. From
 * any thread, once per handle. */
C10D_API c10d_status c10d_check_end(c10d_checked *h, c10d_status outcome, const char *why);

/* The call's number on its group ("#N" in reports); 0 for NULL. */
C10D_API uint64_t c10d_check_seq(const c10d_checked *h);

/* Fills count elements of dtype at buf (host memory) with op's identity:
 * 0 for SUM and AVG, 1 for PROD, the dtype's largest (MIN) or lowest (MAX)
 * value, infinities for floats. Errors: C10D_EINVAL (unknown dtype or op,
 * NULL buf with count > 0). */
C10D_API c10d_status c10d_identity_fill(void *buf, int64_t count, c10d_dtype dtype,
                                        c10d_reduce_op op);

#ifdef __cplusplus
}
#endif
#endif
