/* A process group and the world it belongs to: the state the front end's
 * modules share (each module's functions are declared in its own header).
 * The world is shared by the world group and its subgroups; a group has
 * its backends, its lane and its join region. Backends never include this
 * header: they see their context (backend.h). */
#ifndef C10DI_GROUP_H
#define C10DI_GROUP_H

#include "backend/backend.h"
#include "conn/conn.h"
#include "group/group_seqs.h"
#include "coll/lane.h"
#include "store/store_internal.h"

#include <pthread.h>

/* A group's backend for one kind of device, and the context it was opened
 * with (backend_ctx.c). */
typedef struct c10di_be_slot {
    const c10di_backend_ops *ops; /* NULL: the group serves no such buffers */
    void *state;                  /* NULL until opened */
    c10di_be_ctx ctx;
} c10di_be_slot;

/* What a call's stages leave for its end (c10di_call_end, liveness.c):
 * whether it announced itself (the heartbeat names it until it ends), and
 * a finding against its group that a stage made (a SYNC check's desync,
 * lost member or stall; a collective a joined rank cannot take part in).
 * Stages return what they found and record nothing; the end records it
 * once, as the group's finding, so that every later call fails with it. */
typedef struct c10di_outcome {
    int announced;
    c10d_status found; /* C10D_OK: nothing found */
    char report[1024]; /* written with found; unread otherwise */
} c10di_outcome;

/* An outcome with nothing in it yet. Not `= {0}`: that would clear the
 * report's kilobyte on every collective, and only a finding writes it. */
#define C10DI_OUTCOME_EMPTY(o) ((o)->announced = 0, (o)->found = C10D_OK)

/* --- the world: shared by the world group and its subgroups --- */
typedef struct c10di_world {
    atomic_int refs;
    c10di_conn *conn;
    char job[128];
    char host[256];
    uint64_t generation;
    int rank, size;
    c10d_ms timeout_ms;
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
    c10di_seqs final_completed; /* and the last of them that completed (mu) */
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

    /* Held while the watcher tells programs' data planes of findings
     * (program_plane.c) and while a group leaves w->groups: a group is
     * never freed under a callback. Taken before mu. */
    pthread_mutex_t alert_cb_mu;
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

struct c10d_pg {
    c10di_world *w;
    char name[32];
    int rank, size;
    int *ranks; /* global rank of each group rank */
    c10d_ms timeout_ms;
    c10d_backend backend;
    c10di_be_slot be[C10DI_DEV_KINDS]; /* its data planes, by kind of device */
    /* The program's own data plane, where it set one (c10d_data_plane_set,
     * program_plane.c): it serves the kinds of device it names in place
     * of be[] */
    struct c10di_program *program;
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

/* A finding on a group (liveness.c): the first one stands. */
typedef struct c10di_alert {
    struct c10di_alert *next;
    char group[32];
    c10d_status status;
    char *report;
} c10di_alert;

#endif
