/* Process groups inside the library: the world a rank belongs to, its
 * groups, the description of one collective, and the ops table every data
 * backend fills (host for CPU buffers, NCCL for CUDA buffers). The
 * collective front end (coll.c) knows nothing of sockets, shared memory or
 * CUDA: it checks arguments, picks the backend from the tensors' device,
 * numbers the call, orders it on the group's lane and hands a c10di_coll
 * to the backend. */
#ifndef C10DI_PG_INTERNAL_H
#define C10DI_PG_INTERNAL_H

#include "fingerprint.h"
#include "internal.h"

#include <pthread.h>

/* --- one collective, as a backend sees it --- */
typedef struct c10di_coll {
    c10dc_kind kind; /* C10DC_ALL_REDUCE ... (common/fingerprint.h) */
    c10d_dtype dtype;
    c10d_reduce_op op;
    size_t count; /* elements in t / in / out (one rank's block) */
    void *buf;    /* all_reduce, broadcast, reduce, send, recv: the tensor */
    const void *in;
    void *out;
    /* per group rank, size(pg) entries (owned by the caller of run) */
    void **outs;
    const void **ins;
    int root; /* broadcast, reduce, gather, scatter: group rank; send/recv: peer */
    int tag;
    uint64_t seq;        /* collectives: the group's; send/recv: their own count */
    c10dc_fp fp;         /* what is verified across ranks */
    int timeout_ms;
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
    int completes_later; /* run only enqueued it: completion is reported later */
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
} c10di_coll;

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
 * member's comes from c10di_fetch_endpoints when a link to it is first
 * needed, so a rendezvous costs the coordinator O(N), not N endpoints
 * sent to each of N ranks. */
typedef struct c10di_peers {
    size_t n;
    const int32_t *ranks; /* group ranks, ascending */
    const ProtobufCBinaryData *eps;
} c10di_peers;

/* The endpoints of group ranks[0..n) from the coordinator (a formed
 * group's; any number, fetched in requests of at most 1024). eps[i].data
 * is malloc'd: the caller frees each. */
c10d_status c10di_fetch_endpoints(c10d_pg *pg, const int *ranks, size_t n,
                                  ProtobufCBinaryData *eps, int timeout_ms);

/* --- the backend ops table --- */
typedef struct c10di_backend_ops {
    const char *name;
    /* Prepares this rank's side of a new group and writes into buf the
     * bytes peers need to reach it (published by the rendezvous). */
    c10d_status (*open)(c10d_pg *pg, void **state, char *buf, size_t cap, size_t *len);
    /* Connects to the members, given the endpoints of those on this
     * rank's host; others' are fetched when needed (c10di_fetch_endpoints). */
    c10d_status (*connect)(c10d_pg *pg, void *state, const c10di_peers *peers);
    /* Runs one collective to completion on the calling thread. A backend
     * that completes on streams (NCCL) enqueues it, sets completes_later,
     * and for async calls leaves in c->pending what the work handle waits
     * on. With c->shadow the rank has joined (docs/join.md): it takes part
     * with identity buffers of its own and discards what it receives; an
     * AVG divides by c->divisor when it is set. */
    c10d_status (*run)(c10d_pg *pg, void *state, c10di_coll *c);
    void (*close)(void *state);
    /* The rest are optional (NULL for the host backend). */
    /* On the caller's thread when the call is made, before it may be
     * queued on the lane: notes what the caller's stream has queued. */
    c10d_status (*prepare)(c10d_pg *pg, void *state, c10di_coll *c);
    /* Work handles of calls that complete later: wait orders the caller's
     * stream after the call and says how it ended so far; is_done
     * queries; forget drops c->ready and c->pending. */
    c10d_status (*wait)(void *pending, void *stream);
    int (*is_done)(void *pending);
    void (*forget)(c10di_coll *c);
    /* A new group's communicator from its parent's (all of the parent's
     * members call it, in the same order; child is NULL on non-members). */
    c10d_status (*split)(c10d_pg *parent, void *parent_state, c10d_pg *child, void *child_state);
    /* In-band join (docs/join.md), for data planes whose transfers carry a
     * header naming the collective (the host backend; NULL for NCCL, whose
     * joined ranks learn what to shadow from the coordinator). peek: has
     * a peer begun collective seq, and what is it (*found, *out), without
     * consuming anything. announce: c's header alone to group rank `to` (a joined
     * rank), so that it learns of a call it cannot take part in. */
    c10d_status (*peek)(c10d_pg *pg, void *state, uint64_t seq, int *found,
                        struct c10di_peeked *out);
    void (*announce)(c10d_pg *pg, void *state, const c10di_coll *c, int to);
} c10di_backend_ops;

extern const c10di_backend_ops c10di_host_backend;
/* The NCCL backend, or NULL in a build without CUDA/NCCL (nccl/). */
const c10di_backend_ops *c10di_nccl_ops(void);
/* Whether CUDA buffers can be served: C10D_OK, or C10D_EBACKEND saying
 * why ("built without NCCL", "libnccl.so.2 not found", "no CUDA device
 * visible"). Loads NCCL the first time. */
c10d_status c10di_nccl_available(void);

/* --- the world: shared by the world group and its subgroups --- */
typedef struct c10di_world {
    atomic_int refs;
    c10di_conn *conn;
    char job[128];
    char host[256];
    uint64_t generation;
    int rank, size;
    int timeout_ms;
    c10d_backend backend;
    int device; /* CUDA device from the options or LOCAL_RANK; -1: the first tensor's */

    /* liveness (watch.c) */
    pthread_t watcher;
    int watcher_on;
    atomic_int stopping;
    pthread_mutex_t mu;
    atomic_uint lost_version; /* bumped whenever lost[] gains an entry */
    char **lost;              /* per global rank: why it is gone, or NULL (mu) */
    char **lost_seqs;         /* per global rank that left: its final_seqs (mu) */
    unsigned *lost_order;     /* per global rank: 1 for the first heard lost, ... (mu) */
    unsigned lost_count;      /* (mu) */
    char *final_seqs;         /* ",name=seq," of this rank's destroyed groups, grown (mu) */
    /* What this rank is doing, for peers' reports: written on every
     * collective without a lock (a seqlock over atomic bytes), because a
     * mutex taken millions of times a second starves the watcher. */
    atomic_uint act_seq;
    atomic_int act_idle;
    _Atomic unsigned char act_text[200];
    struct c10di_alert *alerts; /* groups found desynchronised or stalled (mu) */
    c10d_pg *groups;            /* live groups, for the heartbeat's progress (mu) */

    /* verification (verify.c) */
    c10d_verify verify;
    pthread_t reporter;
    int reporter_on;
    /* A spinlock, not a mutex: the rank takes it on every collective, and
     * a mutex re-taken that often never lets the reporter in. */
    pthread_spinlock_t rmu;
    struct c10di_pending *pending; /* ASYNC entries not yet sent (rmu) */
    size_t n_pending, cap_pending;
    /* Held while a batch is taken from the queue and sent, so that batches
     * reach the coordinator in the order they were queued. */
    pthread_mutex_t flush_mu;
} c10di_world;

/* A group's join region, as this rank sees it (join.c). */
typedef struct c10di_join {
    atomic_int in_region; /* between c10d_join_begin and c10d_join_end's return */
    unsigned region;      /* regions begun on this group */
    unsigned ended;       /* the last region that ended here */
    c10d_join_opts opts;
    /* What the coordinator said of the region's joins (the watcher writes
     * them under w->mu; version last, so a nonzero version means the rest
     * is there). */
    atomic_uint version;   /* joins known; 0: nobody has joined */
    unsigned state_region; /* the region version and after[] describe */
    uint64_t *after;       /* per group rank: joined after this seq, or UINT64_MAX */
    int active_last;       /* c10d_active_ranks */
    /* In-band (docs/join.md): the region's joined ranks learn what to
     * shadow from their peers' transfer headers, not from the coordinator
     * (every collective of the group runs on the host data plane). Set by
     * c10d_join_begin. */
    int inband;
    /* Joins heard in-band, from a joined peer's header (written to after[]
     * under w->mu), before or instead of the coordinator's JoinState. */
    atomic_int heard;
    /* While this rank shadows: 1 + the collective it joined after, in the
     * header of everything it sends (0 while active). */
    uint64_t shadow_after1;
    /* The end of the region, from the watch (JoinState.done): done_region
     * is written last (w->mu), so done_final is there once it is set (the
     * last joiner comes from the coordinator's answer to the last ask). */
    atomic_uint done_region;
    uint64_t done_final; /* the group's last collective of the region */
    uint64_t *told;      /* per group rank: the last collective announced to it */
    c10dc_fp fp_last;    /* the last call shadowed, and its description */
    char fp_text[128];
    /* active_at's memo: from collective stable_from on, stable_active
     * ranks contribute, while epoch is what it was (bumped whenever
     * after[] changes). */
    atomic_uint epoch;
    unsigned stable_epoch;
    uint64_t stable_from;
    int stable_active;
} c10di_join;

typedef struct c10di_lane c10di_lane;

struct c10d_pg {
    c10di_world *w;
    char name[32];
    int rank, size;
    int *ranks; /* global rank of each group rank */
    int timeout_ms;
    c10d_backend backend;
    const c10di_backend_ops *be; /* CPU buffers: the host backend */
    void *be_state;
    const c10di_backend_ops *gpu_be; /* CUDA buffers: NCCL, or NULL (not built) */
    void *gpu_state;
    uint64_t secret;    /* the group's data-plane admission secret, from the rendezvous (0: none) */
    uint64_t seq;       /* collectives issued on this group */
    atomic_uint_least64_t completed; /* the last of them that completed (the watcher reads it) */
    atomic_uint_least64_t verified;  /* the last whose SYNC check passed (the watcher reads it) */
    c10d_pg *next_in_world;          /* the world's live groups (w->mu) */
    uint64_t p2p_seq;   /* send/recv, counted apart: only two ranks take part */
    /* c10di_pg_check's memo: nothing lost applied at w->lost_version ==
     * lost_seen, until seq reaches recheck_seq (a member that left after
     * that collective starts to matter there). */
    unsigned lost_seen;
    uint64_t recheck_seq;
    int groups_made; /* names subgroups: every member counts new_group calls alike */
    int monitored;   /* monitored barriers so far: names their keys */
    c10di_lane *lane;
    c10di_join join;
    /* the first failure that left the group unusable */
    c10d_status broken;
    char broken_msg[1024];
};

/* pg.c */
void c10di_world_unref(c10di_world *w);

/* watch.c */
c10d_status c10di_watch_start(c10di_world *w);
void c10di_watch_stop(c10di_world *w);
/* "in <a><b><c><d>" until c10di_activity_done makes it "idle after ...". */
void c10di_activity(c10di_world *w, const char *a, const char *b, const char *c, const char *d);
void c10di_activity_done(c10di_world *w);
void c10di_activity_read(c10di_world *w, char *out, size_t cap);
/* While blocked in c on pg: C10D_OK, or C10D_EPEERLOST (a member of pg is
 * gone) / C10D_ETIMEDOUT (past c's deadline), with the message set.
 * `waiting_for` (a group rank or -1) is named in a timeout. */
c10d_status c10di_pg_check(c10d_pg *pg, const c10di_coll *c, int waiting_for);
/* Without side effects, from any thread: why collective seq of pg cannot
 * complete (a finding on the group, or a member lost that had not
 * finished seq), as C10D_EDESYNC / C10D_EPEERLOST / C10D_ETIMEDOUT with the
 * report in msg; C10D_OK if nothing is known against it. */
c10d_status c10di_pg_failure(c10d_pg *pg, uint64_t seq, char *msg, size_t cap);

/* verify.c: collective-sequence verification */
typedef struct c10di_alert {
    struct c10di_alert *next;
    char group[32];
    c10d_status status;
    char *report;
} c10di_alert;
/* The mode asked for, else C10D_VERIFY's (sync, async, off; SYNC when
 * unset); an unknown C10D_VERIFY is C10D_EINVAL. */
c10d_status c10di_verify_mode(c10d_verify asked, c10d_verify *out);
c10d_status c10di_verify_start(c10di_world *w);
void c10di_verify_stop(c10di_world *w);
void c10di_alerts_free(c10di_world *w);
/* Before c runs: SYNC asks the coordinator and waits for every member;
 * ASYNC queues a report; OFF does nothing. */
c10d_status c10di_verify_enter(c10d_pg *pg, const c10di_coll *c);
void c10di_record_alert(c10di_world *w, const char *group, c10d_status st, const char *report);

/* Sends the queued entries now (the reporter's batch; OFF's held ones). */
void c10di_verify_flush(c10di_world *w);

/* join.c: uneven inputs */
typedef enum { C10DI_REPORT_NONE, C10DI_REPORT_QUEUE, C10DI_REPORT_SYNC } c10di_report;
/* How c is reported to the coordinator, given the group's verification
 * mode and join region: SYNC (wait for every active member), QUEUE (in
 * the background; under OFF held until a join needs it), or NONE. */
c10di_report c10di_join_reporting(c10d_pg *pg, const c10di_coll *c);
/* Whether c is an AVG over the ranks that have not joined (in a region
 * with divide_by_initial_world_size = 0): its divisor is known only once
 * the coordinator answered. */
int c10di_join_avg_by_active(c10d_pg *pg, const c10di_coll *c);
/* The joins this rank knows of in pg's region (CollEntry.join_known). */
unsigned c10di_join_known(c10d_pg *pg);
/* Before c runs: C10D_EJOINED if it cannot, a peer having joined (a
 * send/recv with it); sets c->divisor for an AVG that divides by the
 * active ranks. */
c10d_status c10di_join_prepare(c10d_pg *pg, c10di_coll *c);
/* Inside a region whose joined ranks shadow in-band, while c (not a
 * shadow) runs or waits: C10D_EJOINED if a member joined before c and c
 * needs it (c10dc_join_unshadowable), after telling the joined ranks on
 * the data plane; a monitored barrier is announced to them. */
c10d_status c10di_join_check(c10d_pg *pg, const c10di_coll *c);
/* A peer's transfer header said it joined after collective `after`. */
void c10di_join_heard(c10d_pg *pg, int peer, uint64_t after);
/* After c ran: what c10d_active_ranks says. */
void c10di_join_ran(c10d_pg *pg, const c10di_coll *c);
/* The watcher: applies a JoinState from the coordinator (1 if it told
 * something new), and lists what to acknowledge on the next watch (free
 * *acks and its entries with c10di_join_acks_free). */
int c10di_join_apply(c10di_world *w, const C10dpb__JoinState *js);
size_t c10di_join_acks(c10di_world *w, C10dpb__JoinKnown ***acks);
void c10di_join_acks_free(C10dpb__JoinKnown **acks, size_t n);
/* One identity element of dtype for op into out (8 bytes room): 0 for
 * SUM/AVG, 1 for PROD, the largest/lowest value for MIN/MAX (inf for
 * floats). Returns its size in bytes (0 for an unknown dtype). */
size_t c10di_identity_element(c10d_dtype dtype, c10d_reduce_op op, void *out);
/* Fills bytes of buf with copies of the element (esize bytes). */
void c10di_fill_pattern(void *buf, size_t bytes, const void *elem, size_t esize);

/* coll.c: which backend serves a call on `device` (C10D_CPU, a CUDA
 * device, C10DI_GROUP_DEVICE or C10DI_ANY_CUDA); fills c->device, c->be. */
c10d_status c10di_route(c10d_pg *pg, c10di_coll *c, int device, const char *fn);

/* monitored_barrier.c: the barrier itself, through the store, once c is
 * numbered and verified (a joined rank's shadow runs it too). */
c10d_status c10di_monitored_barrier_meet(c10d_pg *pg, const c10di_coll *c, int wait_all_ranks);
/* The "backend" a monitored barrier runs on: the coordinator's store (it
 * is numbered, verified, ordered on the lane and checked for a broken
 * group like every collective; only where it meets differs). */
extern const struct c10di_backend_ops c10di_monitored_ops;

/* work.c: the lane that runs a group's operations in order */
c10d_status c10di_lane_start(c10d_pg *pg);
void c10di_lane_stop(c10d_pg *pg);
/* Waits until everything queued on pg's lane has run (been enqueued). */
void c10di_lane_drain(c10d_pg *pg);
/* Collective seq of pg completed (the highest so far stands). */
void c10di_pg_completed(c10d_pg *pg, uint64_t seq);

#endif
