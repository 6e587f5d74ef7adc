/* Process groups inside the library: the world a rank belongs to, its
 * groups, the description of one collective, and the ops table every data
 * backend fills (host now; NCCL later). The collective front end (coll.c)
 * knows nothing of sockets, shared memory or CUDA: it checks arguments,
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
} c10di_coll;

/* --- the backend ops table --- */
typedef struct c10di_backend_ops {
    const char *name;
    /* Prepares this rank's side of a new group and writes into buf the
     * bytes peers need to reach it (published by the rendezvous). */
    c10d_status (*open)(c10d_pg *pg, void **state, char *buf, size_t cap, size_t *len);
    /* Connects to the members, given every member's endpoint bytes in
     * group-rank order. */
    c10d_status (*connect)(c10d_pg *pg, void *state, const ProtobufCBinaryData *eps);
    /* Runs one collective to completion on the calling thread. A backend
     * that completes on streams (NCCL) would enqueue here and report
     * completion through the work handle instead. */
    c10d_status (*run)(c10d_pg *pg, void *state, const c10di_coll *c);
    void (*close)(void *state);
} c10di_backend_ops;

extern const c10di_backend_ops c10di_host_backend;

/* --- the world: shared by the world group and its subgroups --- */
typedef struct c10di_world {
    atomic_int refs;
    c10di_conn *conn;
    char job[128];
    char host[256];
    uint64_t generation;
    int rank, size;
    int timeout_ms;

    /* liveness (watch.c) */
    pthread_t watcher;
    int watcher_on;
    atomic_int stopping;
    pthread_mutex_t mu;
    atomic_uint lost_version; /* bumped whenever lost[] gains an entry */
    char **lost;              /* per global rank: why it is gone, or NULL (mu) */
    char **lost_seqs;         /* per global rank that left: its final_seqs (mu) */
    char final_seqs[2048];    /* ",name=seq," of this rank's destroyed groups (mu) */
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
} c10di_world;

typedef struct c10di_lane c10di_lane;

struct c10d_pg {
    c10di_world *w;
    char name[32];
    int rank, size;
    int *ranks; /* global rank of each group rank */
    int timeout_ms;
    const c10di_backend_ops *be;
    void *be_state;
    uint64_t seq;       /* collectives issued on this group */
    atomic_uint_least64_t completed; /* the last of them that completed (the watcher reads it) */
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

/* verify.c: collective-sequence verification */
typedef struct c10di_alert {
    struct c10di_alert *next;
    char group[32];
    c10d_status status;
    char *report;
} c10di_alert;
c10d_verify c10di_verify_mode(c10d_verify asked);
c10d_status c10di_verify_start(c10di_world *w);
void c10di_verify_stop(c10di_world *w);
void c10di_alerts_free(c10di_world *w);
/* Before c runs: SYNC asks the coordinator and waits for every member;
 * ASYNC queues a report; OFF does nothing. */
c10d_status c10di_verify_enter(c10d_pg *pg, const c10di_coll *c);
void c10di_record_alert(c10di_world *w, const char *group, c10d_status st, const char *report);

/* coll.c: the lane that runs a group's operations in order */
c10d_status c10di_lane_start(c10d_pg *pg);
void c10di_lane_stop(c10d_pg *pg);

#endif
