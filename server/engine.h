/* The engine: the coordinator's state, one batch at a time.
 *
 * Requests from every connection come here. The engine runs them in
 * batches, each inside one SQLite transaction (group commit: under load,
 * hundreds of writes share a commit), and only after the commit sends the
 * replies, so an acknowledged write is a committed write. An idle engine
 * runs a request at once on the network thread that received it (an NNG
 * callback: a batch is short, and handing it to the engine thread would
 * cost a thread wake-up per reply); requests that arrive meanwhile queue
 * for the engine thread, which also runs the timers. Requests that must
 * wait (a get of a missing key) are parked and run again when the key is
 * written or their deadline passes; they never hold up anyone else.
 *
 * Operations plug in through tables of c10ds_op (store_ops.c, admin_ops.c,
 * rendezvous_ops.c, liveness_ops.c, verify_ops.c, verify_report.c,
 * verify_trace.c, join_ops.c): one handler per operation of
 * proto/c10d.proto, in the module that owns its state. The modules hear
 * of each other's changes through events.h (runs.c has no operation: it
 * only listens, ending runs and reclaiming them). */
#ifndef C10DS_ENGINE_H
#define C10DS_ENGINE_H

#include "config.h"
#include "db.h"
#include "drain.h"
#include "groups.h"
#include "join.h"
#include "reqlog.h"
#include "request.h"
#include "runs.h"
#include "stalls.h"
#include "store.h"
#include "verify.h"
#include "waiters.h"

#include <c10d/errors.h>
#include <pthread.h>
#include <stdatomic.h>

typedef struct c10ds_engine c10ds_engine;

typedef enum {
    C10DS_FIRST,   /* as received */
    C10DS_RETRY,   /* parked, and a key it waited for was written */
    C10DS_EXPIRED, /* parked, and its deadline passed */
} c10ds_phase;

typedef enum { C10DS_DONE, C10DS_PARKED } c10ds_outcome;

typedef c10ds_outcome (*c10ds_op_fn)(c10ds_engine *e, c10ds_request *r, c10ds_phase ph);

/* Not idempotent: a resent copy must get the first copy's reply. */
#define C10DS_OP_DEDUP 1u
/* Parks for a period, not a timeout (the watch: a heartbeat's answer):
 * the coordinator's stalls do not move its deadline (engine_stalls.c). */
#define C10DS_OP_PERIOD 2u

typedef struct c10ds_op {
    int op_case; /* C10DPB__REQUEST__OP_* */
    const char *name;
    c10ds_op_fn fn;
    unsigned flags;
} c10ds_op;

extern const c10ds_op c10ds_store_ops[];
extern const c10ds_op c10ds_admin_ops[];
extern const c10ds_op c10ds_rendezvous_ops[];
extern const c10ds_op c10ds_liveness_ops[];
extern const c10ds_op c10ds_verify_ops[];
extern const c10ds_op c10ds_trace_ops[];
extern const c10ds_op c10ds_health_ops[];
extern const c10ds_op c10ds_join_ops[];

/* Hands a packed reply to the transport; the engine frees `reply` after. */
typedef void (*c10ds_send_fn)(void *arg, void *slot, uint64_t request_id, const void *reply,
                              size_t len);

struct c10ds_engine {
    const c10ds_config *cfg;
    c10ds_db *db;
    c10ds_store store;
    c10ds_reqlog reqlog;
    c10ds_groups groups;
    c10ds_verify verify;
    c10ds_join join;
    c10ds_runs runs;
    int64_t next_sweep_ms; /* liveness: next heartbeat check (monotonic) */
    /* When the engine could not look (stalls.h), and when the running
     * batch last noted that (the liveness clock, c10d_steady_wall_ms). */
    c10ds_stalls stalls;
    int64_t looked_ms;
    int64_t next_checkpoint_ms; /* the WAL's next deliberate checkpoint (monotonic) */
    c10ds_waiters *waiters;
    const c10ds_op *ops[64]; /* by op_case */

    c10ds_send_fn send;
    void *send_arg;

    pthread_t thread;
    int started;
    int finished; /* c10ds_engine_fini ran */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    c10ds_request *q_head, *q_tail; /* guarded by mu */
    int stopping;                   /* guarded by mu */
    int busy;          /* guarded by mu: a batch is running (on any thread) */
    int thread_waits;  /* guarded by mu: the engine thread waits for busy */
    int64_t thread_due; /* guarded by mu: when the idle engine thread wakes next */

    c10ds_request *outbox, *outbox_tail; /* this batch's answered requests */
    size_t outbox_bytes;                 /* their replies' bytes (engine.c bounds a batch by it) */
    int in_txn;             /* the batch's transaction is open */
    uint64_t txn_no;        /* counts transactions: what a parked request parked in */
    c10ds_request *txn_from; /* the outbox entry before the transaction began (NULL: none) */

    c10ds_drain drain; /* SIGTERM: until when queued requests still run; what was dropped */

    int64_t start_ms;
    atomic_llong requests;
    atomic_llong clients;
    atomic_llong parked; /* mirror of the waiter count, for status */
    char listen_url[256];
};

c10ds_engine *c10ds_engine_new(const c10ds_config *cfg, c10ds_db *db, c10ds_send_fn send,
                               void *send_arg, char *err, size_t errlen);
int c10ds_engine_start(c10ds_engine *e);
/* Hands r to the engine (thread-safe). An idle engine runs it at once on
 * the calling thread (and whatever arrives meanwhile); a busy one queues
 * it for its thread. Returns -1 once the engine is stopping. */
int c10ds_engine_submit(c10ds_engine *e, c10ds_request *r);
/* Answers what is queued, for --drain-timeout at most (the rest is
 * dropped unanswered, and counted in the log), commits, and stops the
 * thread. Parked requests are dropped unanswered: their clients resend
 * them to the next coordinator. */
void c10ds_engine_stop(c10ds_engine *e);
/* Logs the requests a stopping engine dropped unanswered (drain.h), once
 * no more can come (the listener closed). */
void c10ds_engine_report_dropped(c10ds_engine *e);
/* Stops the engine and lets go of the database: statements finalized,
 * parked requests dropped. The struct stays valid (submit refuses) for
 * listener callbacks still running; c10ds_engine_free frees it. */
void c10ds_engine_fini(c10ds_engine *e);
void c10ds_engine_free(c10ds_engine *e);

/* Liveness (liveness_ops.c): members that arrived on a closed connection are
 * dead; so are members silent for --heartbeat-timeout. */
void c10ds_groups_pipe_closed(c10ds_engine *e, uint32_t pipe);
/* Judges silence as of now_ms (c10d_steady_wall_ms(), or earlier: when the
 * oldest request not yet run arrived), not counting e->stalls. */
void c10ds_groups_sweep(c10ds_engine *e, int64_t now_ms);

/* --- the engine's own stalls (engine_stalls.c): nobody's fault --- */
/* A batch held the engine beyond C10DS_STALL_GRACE_MS since it last
 * looked: that part is a stall. Called before a sweep and after a commit. */
void c10ds_engine_note_stall(c10ds_engine *e);
/* At a batch's start: a sweep overdue by more than the grace means nobody
 * ran the engine since it was due (the process was stopped). */
void c10ds_engine_note_pause(c10ds_engine *e);
/* When the liveness judge looks from: now (c10d_steady_wall_ms), or just
 * before the oldest request still queued arrived. */
int64_t c10ds_engine_judge_time(c10ds_engine *e);
/* The heard clock: monotonic ms less every stall so far. It stands still
 * while the engine cannot listen; a timeout measured on it counts against
 * nobody the coordinator's own stalls (verification's pending times). */
int64_t c10ds_engine_heard_ms(const c10ds_engine *e);
/* What r's deadline gains when it parks: the stalls since it arrived (it
 * waited in the queue through them; kept for a heartbeat timeout), or 0
 * for a C10DS_OP_PERIOD. */
int64_t c10ds_engine_park_credit(const c10ds_engine *e, const c10ds_request *r);
/* Whether the member (job, gen, rank) arrived from the client that sent
 * r (its who.client_id, random per client). Requests that speak for a
 * member (leave, watch, collective reports, join) must come from it:
 * another client must not mark it left, bind its liveness to another
 * connection, or report collectives for it. Fails r with C10D_EAUTH and
 * returns -1 when it was not; 0 when it was, or when there is no such
 * member (the handler says so its own way). */
int c10ds_check_member_caller(c10ds_engine *e, c10ds_request *r, const char *job, uint64_t gen,
                              int rank);
/* The job's version goes up and its watchers are answered. */
void c10ds_groups_bump(c10ds_engine *e, const char *job, uint64_t gen);
/* Moves a member to state (left or dead) with reason, once: its peers'
 * watches and any rendezvous still forming in its generation hear of it.
 * A rank that leaves says where it stopped in each group (finals). */
void c10ds_member_mark(c10ds_engine *e, const char *job, uint64_t gen, int rank,
                       C10dpb__MemberState state, const char *reason,
                       C10dpb__GroupSeq *const *finals, size_t n_finals);
/* Members of a generation that are not alive (free with _lost_free). */
C10dpb__MemberInfo **c10ds_groups_lost(c10ds_engine *e, const char *job, uint64_t gen, size_t *n);


/* Runs one batch synchronously (no thread): for unit tests. */
void c10ds_engine_run_batch(c10ds_engine *e, c10ds_request *batch);

/* --- requests and what handlers answer with (request.c) --- */
c10ds_request *c10ds_request_new(C10dpb__Request *pb, void *slot);
void c10ds_request_free(c10ds_request *r);
/* Answers r with rep (request_id is filled in; status is rep->status). */
c10ds_outcome c10ds_reply(c10ds_request *r, C10dpb__Reply *rep);
c10ds_outcome c10ds_fail(c10ds_request *r, c10d_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Parks r on key: on FIRST its deadline becomes timeout_ms after it was
 * received, plus any stall of the engine's since (it waited in the queue
 * through it); the engine moves it on by the stalls that follow, unless
 * r's op is a C10DS_OP_PERIOD. */
c10ds_outcome c10ds_park(c10ds_engine *e, c10ds_request *r, c10ds_phase ph, const char *key,
                         int timeout_ms);
/* Checks a key against the limits; fails r and returns -1 if it is bad. */
int c10ds_check_key(c10ds_engine *e, c10ds_request *r, const char *key);
int c10ds_check_value(c10ds_engine *e, c10ds_request *r, const char *key, size_t len);

#endif
