/* The engine's own stalls (stalls.h), noticed and forgiven: a batch held
 * for seconds, or the coordinator stopped, could not hear anyone, so
 * nobody is to blame for that time (docs/liveness.md, "When the
 * coordinator stalls"):
 *
 * - the liveness judge leaves it out of each member's silence
 *   (c10ds_groups_sweep, from c10ds_engine_judge_time);
 * - a parked request's timeout does not run meanwhile: its deadline moves
 *   on by the stall (a SYNC check, a rendezvous, a join or a store wait
 *   that expired then would blame ranks whose messages were waiting in the
 *   coordinator's queue or had not been sent: they follow its replies);
 * - verification measures how long a collective is pending on the heard
 *   clock, which stands still while the engine stalls (ASYNC's sweep). */
#include "engine/engine.h"

#include "config.h"
#include "engine/ops.h"
#include "engine/request.h"
#include "engine/stalls.h"
#include "engine/waiters.h"

#include "c10d_time.h"
#include "log.h"

/* A watch's park is a heartbeat period, not a timeout: moved on, its rank
 * would stay silent for as long again, and be declared dead. */
static int is_period(const c10ds_engine *e, const c10ds_request *r)
{
    int oc = r->pb ? r->pb->op_case : 0;
    const c10ds_op *op = oc > 0 && oc < (int)(sizeof e->ops / sizeof e->ops[0]) ? e->ops[oc] : NULL;
    return op && (op->flags & C10DS_OP_PERIOD);
}

static int keeps_deadline(const c10ds_request *r, void *e)
{
    return is_period(e, r);
}

/* Records [from, now) as a stall and moves parked deadlines on by what
 * it adds. */
static void stalled(c10ds_engine *e, int64_t from, int64_t now)
{
    int64_t added = c10ds_stalls_note(&e->stalls, from, now, now - e->cfg->heartbeat_timeout_ms);
    c10ds_waiters_postpone(e->waiters, added, keeps_deadline, e);
}

void c10ds_engine_note_stall(c10ds_engine *e)
{
    int64_t now = c10d_steady_wall_ms();
    if (now - e->looked_ms > C10DS_STALL_GRACE_MS) {
        stalled(e, e->looked_ms + C10DS_STALL_GRACE_MS, now);
        if (now - e->looked_ms >= 1000) /* worth an operator's look */
            c10ds_warn("a batch held the engine for %lld ms (a slow request or disk?); "
                       "heartbeats and timeouts do not count that time against anyone",
                       (long long)(now - e->looked_ms));
    }
    e->looked_ms = now;
}

void c10ds_engine_note_pause(c10ds_engine *e)
{
    int64_t mono = c10d_now_ms(), now = c10d_steady_wall_ms();
    e->looked_ms = now;
    if (!e->next_sweep_ms || mono - e->next_sweep_ms <= C10DS_STALL_GRACE_MS)
        return;
    int64_t overdue = mono - e->next_sweep_ms;
    stalled(e, now - overdue + C10DS_STALL_GRACE_MS, now);
    if (overdue >= 1000)
        c10ds_warn("the engine ran %lld ms late (the coordinator was stopped or starved); "
                   "heartbeats and timeouts do not count that time against anyone",
                   (long long)overdue);
}

int64_t c10ds_engine_judge_time(c10ds_engine *e)
{
    int64_t now = c10d_steady_wall_ms(), mono = c10d_now_ms(), oldest = mono;
    pthread_mutex_lock(&e->mu);
    for (c10ds_request *r = e->q_head; r; r = r->next) /* FIFO: the first has a time */
        if (r->received_ms > 0) {
            oldest = r->received_ms < mono ? r->received_ms : mono;
            break;
        }
    pthread_mutex_unlock(&e->mu);
    return now - (mono - oldest);
}

int64_t c10ds_engine_heard_ms(const c10ds_engine *e)
{
    return c10d_now_ms() - e->stalls.total_ms;
}

int64_t c10ds_engine_park_credit(const c10ds_engine *e, const c10ds_request *r)
{
    int64_t mono = c10d_now_ms(), now = c10d_steady_wall_ms();
    if (r->received_ms >= mono || is_period(e, r))
        return 0;
    return c10ds_stalls_within(&e->stalls, now - (mono - r->received_ms), now);
}
