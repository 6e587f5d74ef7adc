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
 * Operations plug in through tables of c10ds_op (ops.h): one handler per
 * operation of proto/c10d.proto, in the module that owns its state, which
 * answers through request.h. The modules hear of each other's changes
 * through events.h (runs.c has no operation: it only listens, ending runs
 * and reclaiming them).
 *
 * This header declares the engine alone (engine.c; who runs a batch:
 * engine_threads.c; its stalls: engine_stalls.c). It includes the headers
 * of the state the engine holds by value, so that a handler can reach
 * e->store or e->groups; a file includes the header of each module whose
 * functions it calls. */
#ifndef C10DS_ENGINE_H
#define C10DS_ENGINE_H

#include "engine/drain.h"
#include "groups/groups.h"
#include "join/join.h"
#include "engine/reqlog.h"
#include "engine/request.h"
#include "groups/runs.h"
#include "metrics/counters.h"
#include "engine/stalls.h"
#include "store/store.h"
#include "groups/runs_tcpstore.h"
#include "verify/verify.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_engine c10ds_engine;
typedef struct c10ds_config c10ds_config;
typedef struct c10ds_db c10ds_db;
typedef struct c10ds_op c10ds_op;
typedef struct c10ds_request c10ds_request;
typedef struct c10ds_waiters c10ds_waiters;

/* Hands a packed reply to the transport; the engine frees `reply` after. */
typedef void (*c10ds_send_fn)(void *arg, void *slot, uint64_t request_id, const void *reply,
                              size_t len);

struct c10ds_engine {
    const c10ds_config *cfg;
    c10ds_db *db;
    c10ds_store store;
    c10ds_reqlog reqlog;
    c10ds_groups groups;
    /* groups.h's caches, read through e->groups but not part of it (so
     * that groups.c never calls up into members.c and endpoints.c): the
     * formed group's endpoints, and the lost members watch replies name. */
    c10ds_endpoints endpoints;
    c10ds_lost_cache lost_cache;
    c10ds_verify verify;
    c10ds_join join;
    c10ds_runs runs;
    c10ds_ts_keys ts_keys; /* what TCPStore clients' runs leave (groups/runs_tcpstore.h) */
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
    /* guarded by mu: threads gathering a round (c10ds_engine_gather_begin);
     * the queue is theirs to run at its end, and the engine thread waits
     * rather than run half of it as a batch of its own */
    int gatherers;
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
    atomic_llong replies_waited; /* connection.c: writes that waited for a slow reader */
    atomic_llong batches;        /* batches run, one transaction each */
    atomic_llong polled;         /* rounds the readiness loops found by looking (common/busy_poll.h) */
    atomic_uint next_pipe;       /* listener.c: connections numbered (ids from 1), all listeners */
    atomic_llong parked; /* mirror of the waiter count, for status */
    c10ds_budget parked_budget; /* parked requests' bytes, all together (request.c) */
    c10ds_counters counters; /* what /metrics shows (metrics/counters.h) */
    char listen_url[256];
    char tcpstore_url[256]; /* "" when --tcpstore-listen is off */
    /* A replica that does not lead answers every request through this
     * (replica.h) instead of running it; NULL otherwise. */
    int (*refuse)(void *arg, c10ds_request *r);
    void *refuse_arg;
    /* Asked before each store write of a key (c10ds_check_write): 0 lets
     * it through, -1 has failed r. The run's-store rule of groups/trust.h;
     * set by c10ds_engine_new, so the store itself knows no runs. */
    int (*write_guard)(c10ds_engine *e, c10ds_request *r, const char *key);
};

/* NULL on failure, why in c10ds_failure() (failure.h). */
c10ds_engine *c10ds_engine_new(const c10ds_config *cfg, c10ds_db *db, c10ds_send_fn send,
                               void *send_arg);
int c10ds_engine_start(c10ds_engine *e);
/* Hands r to the engine (thread-safe). An idle engine runs it at once on
 * the calling thread (and whatever arrives meanwhile); a busy one queues
 * it for its thread. Returns -1 once the engine is stopping. */
int c10ds_engine_submit(c10ds_engine *e, c10ds_request *r);
/* Like submit, but never runs r on the calling thread: for events raised
 * where a lock is held that a reply to the same connection would take. */
int c10ds_engine_post(c10ds_engine *e, c10ds_request *r);
/* Between these two, requests submitted on the calling thread are
 * queued, and the end runs them as one batch (one commit) on this thread
 * if the engine is idle: the readiness loop (readiness.c) gathers the
 * requests of every connection that woke it together. */
void c10ds_engine_gather_begin(c10ds_engine *e);
void c10ds_engine_gather_end(c10ds_engine *e);
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

/* Runs one batch synchronously (no thread): for unit tests. */
void c10ds_engine_run_batch(c10ds_engine *e, c10ds_request *batch);

#endif
