/* The data plane's side of the library: what a backend (host/ for CPU
 * buffers, nccl/ for CUDA buffers) implements and what it is given.
 *
 * A backend includes this header and nothing about process groups. The
 * world (the job, its connection to the coordinator, liveness,
 * verification, join) stays private to the front end (group.h); a
 * backend learns who it serves from the context it is opened with and
 * asks the front end for anything else through the context's hooks: is a
 * member lost, the endpoint of a peer, a finding to record. So a backend
 * can be driven by a test without a coordinator, and the front end can
 * change without the data planes noticing. */
#ifndef C10DI_BACKEND_H
#define C10DI_BACKEND_H

#include "fingerprint.h"
#include "internal.h"

/* How a call is reported to the coordinator (c10di_plan.reporting). */
typedef enum { C10DI_REPORT_NONE, C10DI_REPORT_QUEUE, C10DI_REPORT_SYNC } c10di_report;

/* A call's plan (plan.c): what the front end's stages need to know of it,
 * computed once on the thread that runs it, before it is verified, from
 * the group's verification mode and join region. */
typedef struct c10di_plan {
    c10d_verify mode;       /* the group's verification mode, read once (pg->w->verify) */
    c10di_report reporting; /* SYNC: wait for every active member; QUEUE: in the background
                            (under OFF held until a join needs it); NONE */
    int region;          /* this rank is inside a join region of the group */
    int inband;          /* ... whose joined ranks learn what to shadow in-band */
    unsigned known;      /* the region's joins this rank knows of (CollEntry.join_known) */
    int avg_by_active;   /* an AVG over the ranks that have not joined: its divisor is set
                            once the coordinator answered */
    uint64_t peer_after; /* a send/recv whose peer this rank knows has joined: the collective
                            it joined after (else C10DI_NOT_JOINED); verification sends
                            its entry at once, then join's stage refuses it */
} c10di_plan;

/* A member's join point while it has not joined (c10di_plan.peer_after,
 * the join region's after[]). */
#define C10DI_NOT_JOINED UINT64_MAX

/* --- one collective, as a backend sees it --- */
typedef struct c10di_coll {
    c10dc_kind kind; /* C10DC_ALL_REDUCE ... (common/fingerprint.h) */
    c10d_dtype dtype;
    c10d_reduce_op op;
    size_t count; /* elements in t / in / out (one rank's block) */
    void *buf;    /* all_reduce, broadcast, reduce, send, recv: the tensor */
    const void *in;
    void *out;
    /* per group rank, size(pg) entries (owned by the caller of run_call) */
    void **outs;
    const void **ins;
    int root; /* broadcast, reduce, gather, scatter: group rank; send/recv: peer; a recv
                 from any member: C10DI_ANY_SOURCE, which the backend replaces with the
                 sender's group rank when it has the message */
    int tag;
    uint64_t seq;        /* collectives: the group's; send/recv: their own count */
    c10dc_fp fp;         /* what is verified across ranks */
    c10d_ms timeout_ms;
    int64_t deadline_ms; /* monotonic */
    char what[160];      /* "#5 ALL_REDUCE float32[4] SUM" for messages */
    /* where it runs (chosen by the front end from the tensors' device) */
    int device; /* C10D_CPU, a CUDA device, or C10DI_GROUP_DEVICE (barrier) */
    const struct c10di_backend_ops *be;
    void *be_state;
    /* backends that complete on CUDA streams (NCCL) */
    void *stream;        /* the caller's cudaStream_t; NULL: the default stream */
    int async;           /* the caller holds a work handle */
    void *ready;         /* what the caller's stream had queued when it called */
    void *pending;       /* async: what the work handle waits on / queries */
    int completes_later; /* run_call only enqueued it: completion is reported later */
    /* join (join.c) */
    int shadow;  /* this rank joined: contribute identities, discard results (the
                    backend uses buffers of its own; buf, ins, outs... are unset) */
    int divisor; /* AVG: divide by this; 0: the group's size */
    int discard; /* the backend's shadow buffers: a result nobody reads may be skipped */
    /* In-band join, every other member joined before c (docs/join.md,
     * "The last active rank"): there is no data to move. The active rank
     * computes its result by itself and sends each joined rank c's header
     * alone; a joined rank (with shadow) takes that header from group rank
     * alone_from and nothing else. */
    int alone;
    int alone_from;
    /* monitored barrier: rank 0 names every missing rank, not the first */
    int wait_all;
    /* the front end's: c10d_recv_any's caller wants the sender here (written
     * on the caller's thread, never by the backend) */
    int *src_out;
    /* the front end's: an async recv into a CPU buffer, posted in the
     * backend's receive queue (recv_post) rather than run on the lane */
    int posted;
    /* the front end's: what the call needs to know, computed once before
     * it is verified (plan.c); a backend never reads it */
    c10di_plan plan;
} c10di_coll;

/* A receive posted ahead of its wait (an async recv into a CPU buffer;
 * docs/host-backend.md, "Ordering and async"). The front end embeds it in
 * the work handle and sets c; the backend queues it and completes it from
 * whichever thread makes progress on the group: a thread waiting for it,
 * the group's own sends and receives, the world's progress thread. The
 * rest is the backend's, under its lock, until the receive ended. */
typedef struct c10di_recv {
    const c10di_coll *c; /* buf, count, dtype, root (a peer or C10DI_ANY_SOURCE), tag, what */
    struct c10di_recv *next;
    int state;       /* C10DI_RECV_QUEUED, _MATCHED (its message is arriving), _ENDED */
    int from;        /* the sender, once matched */
    c10d_status st;  /* once ended */
    char msg[1024];  /* why, when st is not C10D_OK */
} c10di_recv;

enum { C10DI_RECV_QUEUED = 1, C10DI_RECV_MATCHED, C10DI_RECV_ENDED };

/* c10di_coll.root of a recv from any member of the group. */
#define C10DI_ANY_SOURCE (-1)

/* A barrier runs where the group's default data plane is: its NCCL
 * communicator's device under C10D_BACKEND_NCCL, else the CPU. */
#define C10DI_GROUP_DEVICE (-2)
/* A joined rank's shadow of a CUDA collective: on the group's CUDA device. */
#define C10DI_ANY_CUDA (-3)

/* What a peer's transfer header says of the collective it began (join). */
typedef struct c10di_peeked {
    c10dc_fp fp;
    int divisor;     /* what an AVG divides by (0: the group's size) */
    int from;        /* the peer (group rank) */
    uint32_t region; /* the join region it is in (0: none) */
    int alone;       /* it runs c by itself: the header is all it sends (c10di_coll.alone) */
} c10di_peeked;

/* What the rendezvous told a rank of its peers: the endpoints of the
 * members on its own host (shared memory), by group rank. Any other
 * member's comes from the fetch_endpoints hook when a link to it is first
 * needed, so a rendezvous costs the coordinator O(N), not N endpoints
 * sent to each of N ranks. */
typedef struct c10di_peers {
    size_t n;
    const int32_t *ranks; /* group ranks, ascending */
    const ProtobufCBinaryData *eps;
} c10di_peers;

/* --- what a backend is given --- */

/* The kinds of device a backend serves; a group has one backend per kind. */
typedef enum { C10DI_DEV_CPU = 0, C10DI_DEV_CUDA = 1, C10DI_DEV_KINDS = 2 } c10di_dev_kind;

typedef struct c10di_be_ctx c10di_be_ctx;

/* What a backend may ask of the front end, each about the group it serves
 * (the front end's own state is reached through ctx->pg, which a backend
 * never dereferences). */
typedef struct c10di_be_hooks {
    /* While blocked in c: C10D_OK, or C10D_EPEERLOST (a member is gone) /
     * C10D_ETIMEDOUT (past c's deadline), with the message set.
     * waiting_for (a group rank or -1) is named in a timeout. */
    c10d_status (*check)(const c10di_be_ctx *x, const c10di_coll *c, int waiting_for);
    /* Without side effects, from any thread: why collective seq cannot
     * complete (a finding, a member lost), its report in msg; C10D_OK if
     * nothing is known against it. */
    c10d_status (*failure)(const c10di_be_ctx *x, uint64_t seq, char *msg, size_t cap);
    /* The endpoints of group ranks[0..n) (eps[i].data malloc'd: the
     * caller frees each). */
    c10d_status (*fetch_endpoints)(const c10di_be_ctx *x, const int *ranks, size_t n,
                                   ProtobufCBinaryData *eps, c10d_ms timeout_ms);
    /* A finding of the data plane's (a desync seen in a header), so that
     * every later call on the group reports it. */
    void (*alert)(const c10di_be_ctx *x, c10d_status st, const char *report);
    /* Collective seq completed (backends that complete later). */
    void (*completed)(const c10di_be_ctx *x, uint64_t seq);
    /* The collectives issued on the group so far (a setup step's number). */
    uint64_t (*issued)(const c10di_be_ctx *x);
    /* Waits until everything the group's lane queued has run. */
    void (*drain)(const c10di_be_ctx *x);
    /* Join (docs/join.md): what this rank's transfer headers say of it
     * (1 + the collective it joined after, 0 while active; its region, 0
     * outside one); a peer's header said it joined after `after`; whether
     * c is an AVG over the ranks that have not joined. */
    void (*join_mark)(const c10di_be_ctx *x, uint64_t *joined_after1, uint32_t *region);
    void (*join_heard)(const c10di_be_ctx *x, int peer, uint64_t after);
    int (*avg_by_active)(const c10di_be_ctx *x, const c10di_coll *c);
    /* A posted receive (c->posted) ended (r->st, r->msg, r->from): called
     * once, unless it was cancelled first, with the backend's receive
     * lock held, from whichever thread made the progress: it must not
     * wait. */
    void (*recv_done)(const c10di_be_ctx *x, c10di_recv *r);
} c10di_be_hooks;

/* Who a backend serves: set by the front end before open and valid until
 * close. generation, secret and store are set once the rendezvous has
 * answered, before connect. */
struct c10di_be_ctx {
    const char *job;
    uint64_t generation;
    const char *group;     /* the group's name */
    const char *host;      /* this rank's host name: peers on it share memory */
    const char *coord_url; /* peers are told the address this host reaches it from */
    int rank, size;        /* in the group */
    int world_rank;
    int device;     /* the CUDA device the options or LOCAL_RANK named; -1: none */
    c10d_ms timeout_ms; /* the group's: the deadline of setup steps */
    uint64_t secret; /* the group's data-plane admission secret (0: none) */
    int primary;     /* the group's only data plane (C10D_BACKEND_NCCL): set up at connect */
    int subgroup;    /* made by c10d_new_group: a backend that splits gets its state from split */
    int verify_off;  /* verification is OFF: no finding of the coordinator's is coming */
    c10d_store *store; /* the coordinator's store, under a prefix of this group and backend */
    const c10di_be_hooks *hooks;
    struct c10d_pg *pg; /* the front end's: opaque here */
};

/* The hooks, spelt short. */
static inline c10d_status c10di_be_check(const c10di_be_ctx *x, const c10di_coll *c, int who)
{
    return x->hooks->check(x, c, who);
}
static inline c10d_status c10di_be_failure(const c10di_be_ctx *x, uint64_t seq, char *msg,
                                           size_t cap)
{
    return x->hooks->failure(x, seq, msg, cap);
}
static inline void c10di_be_alert(const c10di_be_ctx *x, c10d_status st, const char *report)
{
    x->hooks->alert(x, st, report);
}

/* --- the backend ops table --- */
typedef struct c10di_backend_ops {
    const char *name;
    c10di_dev_kind kind; /* the buffers it serves */
    /* Whether it can serve now: C10D_OK, or C10D_EBACKEND saying why
     * ("built without NCCL", "libnccl.so.2 not found", "no CUDA device
     * visible"). NULL: always. */
    c10d_status (*available)(void);
    /* Prepares this rank's side of a new group and writes into buf the
     * bytes peers need to reach it (published by the rendezvous; at most
     * one backend of a group publishes any). NULL: not built. */
    c10d_status (*open)(const c10di_be_ctx *ctx, void **state, char *buf, size_t cap,
                        size_t *len);
    /* Connects to the members, given the endpoints of those on this
     * rank's host; others' are fetched when needed (fetch_endpoints). */
    c10d_status (*connect)(void *state, const c10di_peers *peers);
    /* Runs one collective to completion on the calling thread. A backend
     * that completes on streams (NCCL) enqueues it, sets completes_later,
     * and for async calls leaves in c->pending what the work handle waits
     * on. With c->shadow the rank has joined (docs/join.md): it takes part
     * with identity buffers of its own and discards what it receives; an
     * AVG divides by c->divisor when it is set. */
    c10d_status (*run_call)(void *state, c10di_coll *c);
    void (*close)(void *state);
    /* The rest are optional (NULL for the host backend). */
    /* On the caller's thread when the call is made, before it may be
     * queued on the lane: notes what the caller's stream has queued. */
    c10d_status (*prepare)(void *state, c10di_coll *c);
    /* Work handles of calls that complete later: wait orders the caller's
     * stream after the call and says how it ended so far; is_done
     * queries; forget drops c->ready and c->pending. */
    c10d_status (*wait)(void *pending, void *stream);
    int (*is_done)(void *pending);
    void (*forget)(c10di_coll *c);
    /* A new group's state from its parent's (all of the parent's members
     * call it, in the same order; child_state is NULL on non-members). */
    c10d_status (*split)(void *parent_state, void *child_state);
    /* In-band join (docs/join.md), for data planes whose transfers carry a
     * header naming the collective (the host backend; NULL for NCCL, whose
     * joined ranks learn what to shadow from the coordinator). peek: has
     * a peer begun collective seq, and what is it (*found, *out), without
     * consuming anything. announce: c's header alone to group rank `to` (a
     * joined rank), so that it learns of a call it cannot take part in. */
    c10d_status (*peek)(void *state, uint64_t seq, int *found, c10di_peeked *out);
    void (*announce)(void *state, const c10di_coll *c, int to);
    /* Posted receives (the host backend; NULL where an async recv is
     * queued on the lane instead: NCCL receives in stream order).
     * recv_post: r joins the backend's receives, behind those posted
     * before (a sync recv's `run_call` queues behind them too); from then on
     * any progress on the group may end it. recv_wait: makes progress
     * until r ended (C10D_OK: recv_done was called), or until until_ms
     * (monotonic) passed: C10D_ETIMEDOUT, r still posted; a failure the
     * check hook reports for probe (a lost member, a finding, probe's
     * deadline passed) ends r with it. recv_progress: moves what has
     * arrived without waiting (1 if anything moved). recv_cancel: r is
     * forgotten (no recv_done comes, its buffer is not touched after; a
     * message that began to arrive for it is read and dropped): 1 if it
     * was still posted, 0 if it had ended. recv_abort: ends every posted
     * receive with st and msg (the group is destroyed). */
    c10d_status (*recv_post)(void *state, c10di_recv *r);
    c10d_status (*recv_wait)(void *state, c10di_recv *r, const c10di_coll *probe,
                             int64_t until_ms);
    int (*recv_progress)(void *state);
    int (*recv_cancel)(void *state, c10di_recv *r);
    void (*recv_abort)(void *state, c10d_status st, const char *msg);
} c10di_backend_ops;

/* The backends this library was built with (host/, nccl/ or absent.c). */
extern const c10di_backend_ops c10di_host_backend;
extern const c10di_backend_ops c10di_nccl_backend;

/* --- helpers for joined ranks' identity buffers (tensor.c) --- */
/* One identity element of dtype for op into out (8 bytes room): 0 for
 * SUM/AVG, 1 for PROD, the largest/lowest value for MIN/MAX (inf for
 * floats). Returns its size in bytes (0 for an unknown dtype). */
size_t c10di_identity_element(c10d_dtype dtype, c10d_reduce_op op, void *out);
/* Fills bytes of buf with copies of the element (esize bytes). */
void c10di_fill_pattern(void *buf, size_t bytes, const void *elem, size_t esize);

#endif
