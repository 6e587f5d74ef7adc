/* Process groups inside the library (the front end): the world a rank
 * belongs to, its groups, and their backends. The collective front end
 * (coll.c) knows nothing of sockets, shared memory or CUDA: it checks
 * arguments, picks the backend from the tensors' device, numbers the call,
 * orders it on the group's lane and hands a c10di_coll to the backend
 * (backend.h). Backends never include this header. */
#ifndef C10DI_PG_INTERNAL_H
#define C10DI_PG_INTERNAL_H

#include "backend.h"
#include "conn.h"
#include "store_internal.h"

#include <pthread.h>

/* The endpoints of group ranks[0..n) from the coordinator (a formed
 * group's; any number, fetched in requests of at most 1024). eps[i].data
 * is malloc'd: the caller frees each. */
c10d_status c10di_fetch_endpoints(c10d_pg *pg, const int *ranks, size_t n,
                                  ProtobufCBinaryData *eps, int timeout_ms);

/* A group's backend for one kind of device, and the context it was opened
 * with (backend_ctx.c). */
typedef struct c10di_be_slot {
    const c10di_backend_ops *ops; /* NULL: the group serves no such buffers */
    void *state;                  /* NULL until opened */
    c10di_be_ctx ctx;
} c10di_be_slot;

/* backend_ctx.c: the backend for a kind of device (never NULL; a backend
 * not built has no open), and whether it can serve now (C10D_OK, or
 * C10D_EBACKEND saying why). */
const c10di_backend_ops *c10di_backend_of(c10di_dev_kind kind);
c10d_status c10di_backend_available(c10di_dev_kind kind);
/* The kinds of buffers a group under `backend` serves (a bit per
 * c10di_dev_kind), and where its barrier runs. */
unsigned c10di_backend_serves(c10d_backend backend);
c10di_dev_kind c10di_backend_home(c10d_backend backend);
/* Opens pg's backends (before its rendezvous; subgroup: made by
 * c10d_new_group): the bytes peers need are written to buf. */
c10d_status c10di_backends_open(c10d_pg *pg, int subgroup, char *buf, size_t cap, size_t *len);
/* After the rendezvous: completes the contexts and connects. */
c10d_status c10di_backends_connect(c10d_pg *pg, const c10di_peers *peers);
/* A new group's backends from its parent's, for those that split (all of
 * the parent's members call it; child is NULL on non-members). */
c10d_status c10di_backends_split(c10d_pg *parent, c10d_pg *child);
void c10di_backends_close(c10d_pg *pg);

/* --- (group, collective number) lists (group_seqs.c) --- */
typedef struct c10di_group_seq {
    char *group;
    uint64_t seq;
} c10di_group_seq;
typedef struct c10di_seqs {
    size_t n;
    c10di_group_seq *v;
} c10di_seqs;
/* Sets group's number (adds it the first time). */
c10d_status c10di_seqs_put(c10di_seqs *s, const char *group, uint64_t seq);
/* 1 and *seq if s (may be NULL) has group, else 0. */
int c10di_seqs_get(const c10di_seqs *s, const char *group, uint64_t *seq);
void c10di_seqs_clear(c10di_seqs *s);
c10d_status c10di_seqs_from_pb(c10di_seqs *s, C10dpb__GroupSeq *const *pb, size_t n);
/* s as GroupSeq messages for a request (pointing into s: valid while s
 * is unchanged); NULL when out of memory. Free with c10di_seqs_pb_free. */
typedef struct c10di_seqs_pb_mem {
    C10dpb__GroupSeq *msgs;
    C10dpb__GroupSeq **ptrs;
} c10di_seqs_pb_mem;
C10dpb__GroupSeq **c10di_seqs_pb(const c10di_seqs *s, c10di_seqs_pb_mem *mem);
void c10di_seqs_pb_free(c10di_seqs_pb_mem *mem);

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
    c10di_seqs *lost_finals;  /* per global rank that left: where it stopped in each group (mu) */
    unsigned *lost_order;     /* per global rank: 1 for the first heard lost, ... (mu) */
    unsigned lost_count;      /* (mu) */
    c10di_seqs finals;        /* this rank's destroyed groups: their last collective (mu) */
    /* What this rank is doing, for peers' reports: written on every
     * collective without a lock (a seqlock over atomic bytes), because a
     * mutex taken millions of times a second starves the watcher. */
    atomic_uint act_seq;
    atomic_int act_idle;
    _Atomic unsigned char act_text[200];
    struct c10di_alert *alerts; /* groups found desynchronised or stalled (mu) */
    c10d_pg *groups;            /* live groups, for the heartbeat's progress (mu) */
    /* Posted receives (posted.c): how many are in the groups' backends,
     * and the thread that moves their bytes while nobody waits for them. */
    atomic_int posted;
    pthread_t progress;
    atomic_int progress_on;    /* started (written under mu) */
    atomic_int progress_asleep; /* waiting on progress_cv for a post */
    int progress_stop;          /* mu */
    _Atomic int64_t progress_last_post; /* c10d_now_ms() of the last post */
    pthread_cond_t progress_cv; /* with mu: a post while it sleeps, or stop */

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
    c10di_be_slot be[C10DI_DEV_KINDS]; /* its data planes, by kind of device */
    atomic_int data_ready; /* be[] is connected: posted.c's progress thread may use it */
    uint64_t secret;    /* the group's data-plane admission secret, from the rendezvous (0: none) */
    uint64_t seq;       /* collectives issued on this group */
    atomic_uint_least64_t completed; /* the last of them that completed (the watcher reads it) */
    atomic_uint_least64_t verified;  /* the last whose SYNC check passed (the watcher reads it) */
    c10d_pg *next_in_world;          /* the world's live groups (w->mu) */
    uint64_t p2p_seq;   /* send/recv, counted apart: only two ranks take part */
    /* c10di_pg_check's memo: nothing lost applied at w->lost_version ==
     * lost_seen, until seq reaches recheck_seq (a member that left after
     * that collective starts to matter there). */
    atomic_uint lost_seen; /* atomic: a posted receive's waiter checks beside the group's thread */
    atomic_uint_least64_t recheck_seq;
    int groups_made; /* names subgroups: every member counts new_group calls alike */
    int monitored;   /* monitored barriers so far: names their keys */
    c10di_lane *lane;
    c10di_join join;
    /* The first failure that left the group unusable (c10di_pg_break):
     * broken_msg is written once, by whoever claimed it, before broken. */
    atomic_int broken; /* a c10d_status */
    atomic_int broken_claimed;
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
/* The group is unusable from now on, for st and msg (the first failure
 * stands); safe from any thread, with any lock held. */
void c10di_pg_break(c10d_pg *pg, c10d_status st, const char *msg);

/* posted.c */
/* Ends, as aborted, the receives posted on pg (it is being destroyed). */
void c10di_posted_abort(c10d_pg *pg);
/* The backend's recv_done hook: a posted receive ended. */
void c10di_posted_done(c10d_pg *pg, c10di_recv *r);
/* Stops w's progress thread (w is being freed). */
void c10di_progress_stop(c10di_world *w);

#endif
