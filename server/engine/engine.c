/* The engine (engine.h): made with every module's operations, a batch run
 * (dispatch, the token, dedup through the request log, one transaction,
 * what a lost transaction undoes), and its end. Who runs batches (the
 * submitting network thread when idle, else the engine thread, which also
 * keeps the timers) is engine_threads.c's; what a handler answers with is
 * request.c's. */
#include "engine/engine.h"

#include "config.h"
#include "db/db.h"
#include "engine/drain.h"
#include "engine/events.h"
#include "groups/groups.h"
#include "join/join.h"
#include "groups/liveness_ops.h"
#include "engine/ops.h"
#include "engine/reqlog.h"
#include "engine/request.h"
#include "groups/runs.h"
#include "groups/trust.h"
#include "engine/stalls.h"
#include "store/store.h"
#include "verify/verify.h"
#include "engine/waiters.h"

#include "c10d_time.h"
#include "failure.h"
#include "log.h"
#include "recorded_ops.h"

#include <c10d/errors.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How often silent members are looked for (heartbeat timeouts). */
#define SWEEP_INTERVAL_MS 500
/* The WAL is copied into the database and truncated this often, after a
 * batch (c10ds_db_checkpoint: a few ms for a few MB), and at once after a
 * transaction was lost to a full disk, so the space comes back. */
#define CHECKPOINT_INTERVAL_MS 10000

static void on_key_written(void *arg, const char *key)
{
    c10ds_waiters_touch(arg, key);
}

static int register_ops(c10ds_engine *e, const c10ds_op *table)
{
    for (; table->fn; table++) {
        if (table->op_case <= 0 || table->op_case >= (int)(sizeof e->ops / sizeof e->ops[0])) {
            c10ds_error("operation %s has case %d, beyond the dispatch table", table->name,
                        table->op_case);
            return -1;
        }
        if (!(table->flags & C10DS_OP_DEDUP) != !c10dc_op_is_recorded(table->op_case)) {
            /* Clients prune their records by that list (acked_below): a
             * table that disagrees would lose or keep records wrongly. */
            c10ds_error("operation %s is%s flagged C10DS_OP_DEDUP, against "
                        "common/recorded_ops.h", table->name,
                        table->flags & C10DS_OP_DEDUP ? "" : " not");
            return -1;
        }
        e->ops[table->op_case] = table;
    }
    return 0;
}

c10ds_engine *c10ds_engine_new(const c10ds_config *cfg, c10ds_db *db, c10ds_send_fn send,
                               void *send_arg)
{
    c10ds_engine *e = calloc(1, sizeof *e);
    if (!e) {
        c10ds_failed(C10D_ERROR, "out of memory");
        return NULL;
    }
    e->cfg = cfg;
    e->db = db;
    e->send = send;
    e->send_arg = send_arg;
    e->write_guard = c10ds_trust_store_write;
    e->start_ms = c10d_now_ms();
    e->parked_budget.limit = cfg->max_parked_bytes;
    e->parked_budget.what = "the coordinator";
    e->parked_budget.option = "--max-parked-bytes";
    pthread_mutex_init(&e->mu, NULL);
    /* monotonic from the start: the listener may signal it before the
     * engine thread runs (re-making it in engine_start raced with that) */
    c10d_cond_init_monotonic(&e->cv);
    if (!(e->waiters = c10ds_waiters_new()) || c10ds_store_init(&e->store, db) != 0 ||
        c10ds_reqlog_init(&e->reqlog, db, cfg->dedup_window_s) != 0 ||
        c10ds_groups_init(&e->groups, db) != 0 || register_ops(e, c10ds_store_ops) != 0 ||
        register_ops(e, c10ds_admin_ops) != 0 || register_ops(e, c10ds_rendezvous_ops) != 0 ||
        register_ops(e, c10ds_liveness_ops) != 0 ||
        register_ops(e, c10ds_verify_ops) != 0 ||
        register_ops(e, c10ds_trace_ops) != 0 ||
        register_ops(e, c10ds_health_ops) != 0 || register_ops(e, c10ds_join_ops) != 0 ||
        c10ds_join_init(&e->join, db) != 0 || c10ds_runs_init(&e->runs, db) != 0) {
        c10ds_failed(C10D_ERROR, "cannot prepare the database statements (see above)");
        c10ds_engine_free(e);
        return NULL;
    }
    c10ds_ts_keys_init(&e->ts_keys);
    e->store.on_write = on_key_written;
    e->store.on_write_arg = e->waiters;
    return e;
}

/* --- running requests --- */

static int token_ok(const c10ds_config *cfg, const char *token)
{
    if (!cfg->token)
        return 1;
    if (!token)
        return 0;
    /* Constant time in the token's content: no timing oracle. */
    size_t a = strlen(cfg->token), b = strlen(token);
    unsigned char diff = (unsigned char)(a != b);
    for (size_t i = 0; i < a; i++)
        diff |= (unsigned char)(cfg->token[i] ^ (i < b ? token[i] : 0));
    return diff == 0;
}

static uint64_t client_of(const c10ds_request *r)
{
    return r->pb->who ? r->pb->who->client_id : 0;
}

static void answered(c10ds_engine *e, c10ds_request *r)
{
    e->outbox_bytes += r->reply_len;
    r->next = NULL;
    if (e->outbox_tail)
        e->outbox_tail->next = r;
    else
        e->outbox = r;
    e->outbox_tail = r;
}

static void begin_txn(c10ds_engine *e)
{
    e->in_txn = c10ds_db_begin(e->db) == 0;
    e->txn_from = e->outbox_tail;
    e->txn_no++;
}

static int parked_in(const c10ds_request *r, void *txn)
{
    return r->pb && r->txn == *(uint64_t *)txn;
}

/* SQLite rolls a transaction back by itself on some errors (a full disk,
 * an I/O error), and later statements would then run in autocommit. So
 * every request answered since the transaction began (the one that failed
 * included) is told, with the cause, that nothing of it was stored, which
 * is now true, and a new transaction holds the rest of the batch. Called
 * after each request, before its reply is recorded for retries. Returns 1
 * when it happened. */
static int txn_lost(c10ds_engine *e, c10ds_request *current)
{
    if (!e->in_txn || !sqlite3_get_autocommit(e->db->h))
        return 0;
    char why[512];
    snprintf(why, sizeof why, "%s", sqlite3_errmsg(e->db->h));
    c10ds_error("the database rolled back a transaction (%s): failing the requests in it", why);
    for (c10ds_request *r = e->txn_from ? e->txn_from->next : e->outbox; r; r = r->next)
        if (!r->txn_free)
            c10ds_fail(r, C10D_ERROR, "the coordinator's database rolled back the transaction "
                       "holding this request (%s); nothing from this request was stored", why);
    if (current)
        c10ds_fail(current, C10D_ERROR, "the coordinator's database failed (%s); nothing from "
                   "this request was stored", why);
    /* Requests that wrote and then parked in it (a group_join's arrival)
     * wait on state that is gone: they fail too, and their clients retry. */
    c10ds_request *gone = c10ds_waiters_take_if(e->waiters, parked_in, &e->txn_no);
    for (c10ds_request *r = gone, *n; r; r = n) {
        n = r->next;
        c10ds_fail(r, C10D_ERROR, "the coordinator's database rolled back the transaction "
                   "holding this request (%s); nothing from this request was stored", why);
        answered(e, r);
    }
    c10ds_store_recount(&e->store); /* cached counts follow the rollback */
    /* So do the caches of what the rolled-back writes made. */
    c10ds_endpoints_clear(&e->endpoints);
    c10ds_lost_cache_clear(&e->lost_cache);
    e->next_checkpoint_ms = 0; /* free the WAL's space after this batch */
    begin_txn(e);
    return 1;
}

/* Parked requests that went (answered, timed out, their connection
 * closed) leave their many small allocations (a wait's keys, one each)
 * in malloc's free lists, where the coordinator's RSS keeps them: 2.4 GB
 * stayed after a flood of waits had closed. Past this many bytes let go
 * since the last time, the heap's free pages go back to the system. */
#define TRIM_AFTER_PARKED_BYTES (16u << 20)

static atomic_int trimming; /* a trim thread runs */

static void *trim_thread(void *arg)
{
    (void)arg;
    malloc_trim(0);
    atomic_store(&trimming, 0);
    return NULL;
}

/* On a thread of its own: a trim of a heap of hundreds of MB takes ~100
 * ms, which the engine's thread would hold every request up for. */
static void give_back_parked_memory(c10ds_engine *e)
{
    if (atomic_load(&e->parked_budget.freed) < TRIM_AFTER_PARKED_BYTES ||
        atomic_exchange(&trimming, 1))
        return;
    atomic_store(&e->parked_budget.freed, 0);
    pthread_attr_t a;
    pthread_t t;
    int ok = 0;
    if (pthread_attr_init(&a) == 0) {
        ok = pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED) == 0 &&
             pthread_create(&t, &a, trim_thread, NULL) == 0;
        pthread_attr_destroy(&a);
    }
    if (!ok)
        atomic_store(&trimming, 0); /* the next batch tries again */
}

/* Whether parked request r is the one a cancel event (arg) names. */
static int cancelled_by(const c10ds_request *r, void *arg)
{
    const c10ds_request *ev = arg;
    return r->pipe == ev->pipe && r->pb && r->pb->request_id == ev->cancel_id;
}

static void run(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    txn_lost(e, NULL); /* by whatever ran before (an event, a reqlog record) */
    if (!r->pb) {
        if (r->event == C10DS_EV_CANCEL) {
            /* Unanswered: its client said it no longer waits (a request
             * already answered, or not parked, is not found: nothing). */
            for (c10ds_request *p = c10ds_waiters_take_if(e->waiters, cancelled_by, r), *n; p;
                 p = n) {
                n = p->next;
                c10ds_request_free(p);
            }
        }
        if (r->event == C10DS_EV_DROP_KEYS && r->drop_prefix)
            c10ds_ts_keys_drop(e, r->drop_prefix);
        if (r->event == C10DS_EV_PIPE_CLOSED) {
            /* Its parked requests go first: they hold the connection's
             * memory, and a rank's dead connection must not leave a SYNC
             * check or a long get behind until its deadline. */
            c10ds_waiters_drop_pipe(e->waiters, r->pipe, c10ds_request_free);
            c10ds_groups_pipe_closed(e, r->pipe);
            txn_lost(e, NULL);
        }
        c10ds_request_free(r);
        return;
    }
    int oc = r->pb->op_case;
    const c10ds_op *op = oc > 0 && oc < (int)(sizeof e->ops / sizeof e->ops[0]) ? e->ops[oc] : NULL;
    if (ph == C10DS_FIRST) {
        atomic_fetch_add(&e->requests, 1);
        if (!op) {
            c10ds_fail(r, C10D_EPROTO, "unknown operation %d (is the client newer than this "
                       "coordinator, %s?)", oc, e->cfg->listen_url);
            r->txn_free = 1;
            answered(e, r);
            return;
        }
        if (!r->vouched && !token_ok(e->cfg, r->pb->token)) {
            c10ds_warn("refused %s from client #%08x: %s token", op->name,
                       c10ds_client_tag(client_of(r)), r->pb->token ? "wrong" : "no");
            c10ds_fail(r, C10D_EAUTH, "the coordinator requires a token (C10D_TOKEN) and the one "
                       "given %s", r->pb->token ? "does not match" : "is missing");
            r->txn_free = 1;
            answered(e, r);
            return;
        }
        /* a replica that does not lead: after the token, so that only a
         * client holding it learns where the leader is */
        if (e->refuse && e->refuse(e->refuse_arg, r)) {
            r->txn_free = 1;
            answered(e, r);
            return;
        }
        if ((op->flags & C10DS_OP_DEDUP) && client_of(r) &&
            c10ds_reqlog_find(&e->reqlog, client_of(r), r->pb->request_id, &r->reply,
                              &r->reply_len)) {
            c10ds_debug("request %llu of client #%08x (%s) was applied before; resending its "
                        "reply", (unsigned long long)r->pb->request_id,
                        c10ds_client_tag(client_of(r)), op->name);
            r->txn_free = 1; /* committed in an earlier batch */
            answered(e, r);
            return;
        }
        if ((op->flags & C10DS_OP_DEDUP) && client_of(r) &&
            r->pb->request_id < c10ds_reqlog_acked(&e->reqlog, client_of(r))) {
            /* Its record went when the client said it had the reply: this
             * is a copy left on a connection it gave up, not a resend. */
            c10ds_warn("request %llu of client #%08x (%s) came after the client acknowledged "
                       "its reply: a late copy, not applied", (unsigned long long)r->pb->request_id,
                       c10ds_client_tag(client_of(r)), op->name);
            c10ds_fail(r, C10D_EPROTO, "request %llu came after this client acknowledged its "
                       "reply (acked_below): a late copy is not applied again",
                       (unsigned long long)r->pb->request_id);
            r->txn_free = 1;
            answered(e, r);
            return;
        }
    }
    if (ph == C10DS_FIRST && (op->flags & C10DS_OP_READS) && r->gone && r->gone(r->slot)) {
        /* Its reply could never be sent: reading a 16 MiB value for each
         * of a closed flooder's queued gets held everyone else up. */
        c10ds_request_free(r);
        return;
    }
    r->txn_free = 0;
    c10ds_outcome o = op->fn(e, r, ph);
    if (o == C10DS_PARKED) {
        r->txn = e->txn_no;
        txn_lost(e, NULL); /* r itself too, if its writes were lost */
        return;
    }
    int lost = txn_lost(e, r);
    if (!lost && (op->flags & C10DS_OP_DEDUP) && client_of(r) && r->reply) {
        c10ds_reqlog_record(&e->reqlog, client_of(r), r->pb->request_id,
                            r->pb->has_acked_below ? r->pb->acked_below : 0, r->reply,
                            r->reply_len);
        txn_lost(e, r); /* the record's write lost the transaction: r is not stored either */
    }
    answered(e, r);
}

/* Called at once after c10ds_db_commit failed: why is SQLite's word for
 * the commit, as recorded before its rollback (db.h). */
static void fail_batch_on_commit_error(c10ds_engine *e)
{
    char why[C10DS_FAILURE_MAX];
    snprintf(why, sizeof why, "%s", c10ds_failure());
    for (c10ds_request *r = e->outbox; r; r = r->next)
        c10ds_fail(r, C10D_ERROR, "the coordinator could not commit to its database (%s); "
                   "nothing from this request was stored", why);
    /* The transaction rolled back: counts cached in memory must follow. */
    c10ds_store_recount(&e->store);
}

/* Runs again the parked requests whose key was written (or whose group
 * changed); running them may wake others, hence the loop. */
static void run_ready(c10ds_engine *e)
{
    for (c10ds_request *r; (r = c10ds_waiters_take_ready(e->waiters)) != NULL;) {
        for (c10ds_request *n; r; r = n) {
            n = r->next;
            run(e, r, C10DS_RETRY);
        }
    }
}

/* A batch's replies wait for its commit: eight clients with a thousand
 * gets of a 1 MiB value each in the queue made one batch hold 3.4 GB of
 * replies. Past this many bytes of replies a batch ends, and the requests
 * not yet run go back to the front of the queue for the next one. */
#define BATCH_REPLY_BYTES (64u << 20)

/* A leading replica sends a batch's writes to dqlite in one message, as
 * SQL (blobs in hex, twice their size), and waits for it: 33 values of
 * 16 MiB in one batch took over 10 s and 6 GB there, and starved Raft's
 * heartbeats. Past this many bytes of keys and values set, a replica's
 * batch ends (a single node's WAL takes any batch in stride). */
#define BATCH_REPLICATED_BYTES (32u << 20)

/* Puts rest (a list) back at the front of the queue. */
static void requeue_front(c10ds_engine *e, c10ds_request *rest)
{
    c10ds_request *last = rest;
    while (last->next)
        last = last->next;
    pthread_mutex_lock(&e->mu);
    last->next = e->q_head;
    if (!e->q_head)
        e->q_tail = last;
    e->q_head = rest;
    pthread_mutex_unlock(&e->mu);
}

void c10ds_engine_run_batch(c10ds_engine *e, c10ds_request *batch)
{
    c10ds_engine_note_pause(e);
    if (batch) /* not the timers' own rounds */
        atomic_fetch_add(&e->batches, 1);
    begin_txn(e);
    uint64_t written_from = e->store.bytes_written;
    for (c10ds_request *r = batch, *n; r; r = n) {
        n = r->next;
        if (e->outbox_bytes > BATCH_REPLY_BYTES ||
            (e->db->mirror && e->store.bytes_written - written_from > BATCH_REPLICATED_BYTES)) {
            requeue_front(e, r);
            break;
        }
        if (r->pb && c10ds_drain_over(&e->drain)) {
            /* Stopping, and out of time: unanswered (drain.h). Events
             * (a connection closed) still run: they are cheap, and the
             * database should know who is dead. */
            c10ds_drain_count(&e->drain, r->pb->op_case);
            c10ds_request_free(r);
            continue;
        }
        run(e, r, C10DS_FIRST);
    }
    /* Writes in this batch may have woken parked requests; running them
     * may not write, but loop in case a future op does. */
    run_ready(e);
    if (c10d_now_ms() >= e->next_sweep_ms) {
        c10ds_engine_note_stall(e);
        c10ds_groups_sweep(e, c10ds_engine_judge_time(e));
        c10ds_emit_sweep(e);
        c10ds_counters_refresh(&e->counters, e->db); /* only while /metrics is on */
        e->next_sweep_ms = c10d_now_ms() + SWEEP_INTERVAL_MS;
        txn_lost(e, NULL);
        run_ready(e);
    }
    for (c10ds_request *r; (r = c10ds_waiters_pop_expired(e->waiters, c10d_now_ms())) != NULL;)
        run(e, r, C10DS_EXPIRED);
    c10ds_reqlog_prune(&e->reqlog);
    if (e->in_txn && c10ds_db_commit(e->db) != 0) {
        fail_batch_on_commit_error(e);
        e->next_checkpoint_ms = 0;
    }
    e->in_txn = 0;
    if (c10d_now_ms() >= e->next_checkpoint_ms) {
        c10ds_db_checkpoint(e->db);
        e->next_checkpoint_ms = c10d_now_ms() + CHECKPOINT_INTERVAL_MS;
    }
    c10ds_engine_note_stall(e); /* a slow commit or checkpoint: the next sweep must know */
    atomic_store(&e->parked, (long long)c10ds_waiters_count(e->waiters));
    give_back_parked_memory(e);

    c10ds_request *out = e->outbox;
    e->outbox = e->outbox_tail = NULL;
    e->outbox_bytes = 0;
    for (c10ds_request *n; out; out = n) {
        n = out->next;
        if (out->pb)
            c10ds_counters_served(&e->counters, out->pb->op_case,
                                  c10d_now_us() - out->received_us);
        if (out->reply && e->send)
            e->send(e->send_arg, out->slot, out->pb ? out->pb->request_id : 0, out->reply,
                    out->reply_len);
        c10ds_request_free(out);
    }
}

void c10ds_engine_report_dropped(c10ds_engine *e)
{
    if (!e)
        return;
    const char *names[C10DS_DRAIN_OPS] = {0};
    for (size_t i = 0; i < C10DS_DRAIN_OPS && i < sizeof e->ops / sizeof e->ops[0]; i++)
        names[i] = e->ops[i] ? e->ops[i]->name : NULL;
    c10ds_drain_report(&e->drain, names, e->cfg->drain_timeout_ms);
}

void c10ds_engine_fini(c10ds_engine *e)
{
    if (!e || e->finished)
        return;
    c10ds_engine_stop(e);
    if (e->waiters)
        c10ds_waiters_free(e->waiters, c10ds_request_free);
    e->waiters = NULL;
    c10ds_reqlog_fini(&e->reqlog);
    c10ds_verify_fini(&e->verify);
    c10ds_join_fini(&e->join);
    c10ds_runs_fini(&e->runs);
    c10ds_ts_keys_fini(&e->ts_keys);
    c10ds_counters_fini(&e->counters);
    c10ds_endpoints_clear(&e->endpoints);
    c10ds_lost_cache_clear(&e->lost_cache);
    c10ds_groups_fini(&e->groups);
    c10ds_store_fini(&e->store);
    c10ds_stalls_fini(&e->stalls);
    e->finished = 1;
}

void c10ds_engine_free(c10ds_engine *e)
{
    if (!e)
        return;
    c10ds_engine_fini(e);
    for (c10ds_request *r = e->q_head, *n; r; r = n) {
        n = r->next;
        c10ds_request_free(r);
    }
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}
