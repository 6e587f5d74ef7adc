/* One call's way through the front end: its plan, then the stages it
 * passes on the thread that runs it (c10di_execute), from its beginning
 * to its end (liveness.c: what it found, completed, broken). Which
 * backend serves it was settled before it was numbered (c10di_route,
 * backends.c). */
#include "coll/plan.h"
#include "join/join_region.h"
#include "group/liveness.h"
#include "coll/verify.h"

#include "c10d_time.h"

#include <stdio.h>

/* --- the plan --- */

void c10di_describe(c10di_coll *c, int64_t numel)
{
    int p2p = c->kind == C10DC_SEND || c->kind == C10DC_RECV;
    int rooted = p2p || c->kind == C10DC_BROADCAST || c->kind == C10DC_REDUCE ||
                 c->kind == C10DC_GATHER || c->kind == C10DC_SCATTER;
    int reduces = c->kind == C10DC_ALL_REDUCE || c->kind == C10DC_REDUCE ||
                  c->kind == C10DC_REDUCE_SCATTER;
    c->fp = (c10dc_fp){(uint32_t)c->kind, (uint32_t)c->dtype, numel,
                       rooted ? c->root : C10DC_NO_ROOT, reduces ? (uint32_t)c->op : C10DC_NO_OP,
                       c->device == C10D_CPU ? C10DC_DEV_CPU : C10DC_DEV_CUDA, 0};
    char f[128];
    snprintf(c->what, sizeof c->what, "#%s%llu %s", p2p ? "p" : "", (unsigned long long)c->seq,
             c10dc_fp_format(&c->fp, f, sizeof f));
}

/* How c is reported to the coordinator, given what the plan knows: the
 * group's verification mode and the join region. */
static c10di_report how_reported(const c10di_coll *c, const c10di_plan *p)
{
    c10d_verify mode = p->mode;
    int p2p = c->kind == C10DC_SEND || c->kind == C10DC_RECV;
    unsigned known = p->known;
    int region = p->region, inband = p->inband;
    if (!p2p) {
        if (mode == C10D_VERIFY_SYNC || p->avg_by_active)
            return C10DI_REPORT_SYNC;
        /* The coordinator tells the joined ranks what to shadow: it must
         * hear of every collective at once. In-band they read it from the
         * data plane, and the mode stands. */
        if (known && !inband)
            return C10DI_REPORT_SYNC;
        if (mode == C10D_VERIFY_OFF) /* held only where the coordinator may need them */
            return region && !inband ? C10DI_REPORT_QUEUE : C10DI_REPORT_NONE;
        return C10DI_REPORT_QUEUE;
    }
    if (mode == C10D_VERIFY_OFF && !known && !region)
        return C10DI_REPORT_NONE;
    return C10DI_REPORT_QUEUE;
}

void c10di_plan_call(c10d_pg *pg, c10di_coll *c)
{
    c10di_plan *p = &c->plan;
    p->mode = pg->w->verify;
    c10di_join_plan(pg, c, p);
    p->reporting = how_reported(c, p);
}

c10d_status c10di_report_sender(c10d_pg *pg, c10di_coll *c, int from, c10di_outcome *o)
{
    c->root = from;
    c->fp.root = from;
    c10di_plan_call(pg, c); /* reported now, as what it turned out to be */
    c->plan.peer_after = C10DI_NOT_JOINED; /* it ran: nothing to refuse, nothing to send at once */
    return c10di_verify_enter(pg, c, o);
}

/* --- the stages --- */

/* A call past its deadline: the message (past_deadline's, and the stages'
 * own check), and the timeout it names: the call's own (its options'); a
 * setup step's is the group's. */
#define TIMED_OUT "%s of group %s (rank %d) timed out after %d ms"
#define TIMEOUT_MS(pg, c) ((c)->timeout_ms > 0 ? (c)->timeout_ms : (pg)->timeout_ms)

/* C10D_ETIMEDOUT, with the message set, once c is past its deadline;
 * `waiting_for` (a group rank or -1) is named. */
static c10d_status past_deadline(c10d_pg *pg, const c10di_coll *c, int waiting_for)
{
    if (c10d_now_ms() > c->deadline_ms) {
        if (waiting_for >= 0)
            return c10di_error(C10D_ETIMEDOUT, TIMED_OUT " waiting for rank %d (global rank %d)",
                               c->what, pg->name, pg->rank, TIMEOUT_MS(pg, c), waiting_for,
                               pg->ranks[waiting_for]);
        return c10di_error(C10D_ETIMEDOUT, TIMED_OUT, c->what, pg->name, pg->rank,
                           TIMEOUT_MS(pg, c));
    }
    return C10D_OK;
}

c10d_status c10di_pg_check(c10d_pg *pg, const c10di_coll *c, int waiting_for)
{
    c10d_status st = c10di_pg_lost(pg, c);
    if (st == C10D_OK && c && atomic_load_explicit(&pg->join.in_region, memory_order_relaxed)) {
        /* A member joined while this rank waits in a call it cannot shadow:
         * the group's finding at once (no call's end records it here). */
        c10di_outcome o;
        C10DI_OUTCOME_EMPTY(&o);
        if ((st = c10di_join_check(pg, c, &o)) != C10D_OK && o.found != C10D_OK)
            c10di_record_alert(pg->w, pg->name, o.found, o.report);
    }
    if (st == C10D_OK && c)
        st = past_deadline(pg, c, waiting_for);
    return st;
}

/* The stages before c runs, each a call down (liveness, join's check,
 * verification, join's stage) that returns what it found into o and
 * calls nothing back up; the call's end (c10di_call_end) records it.
 * `announce`: c is what this rank now does (the heartbeat names it), as
 * for a call run now; a posted receive waits later. */
static c10d_status enter(c10d_pg *pg, c10di_coll *c, int announce, c10di_outcome *o)
{
    /* A joined rank's shadow was verified before it was handed out. */
    if (!c->shadow)
        c10di_plan_call(pg, c);
    /* A finding or a lost member, known already, fails the call at once.
     * When the call is reported as in SYNC the coordinator answers that
     * itself (and records it) on the report it makes anyway, so its
     * account, not a race with the watcher, decides what the rank is told. */
    int checked = c->shadow || c->plan.reporting != C10DI_REPORT_SYNC;
    /* A recv from any member is reported once the data plane has its
     * message: the coordinator then matches it with that sender's send. */
    int any_source = c->kind == C10DC_RECV && c->root == C10DI_ANY_SOURCE;
    /* c10di_pg_check's stages, in its order: lost (with the activity), join, deadline. */
    c10d_status st = c10di_call_begin(pg, c, announce, checked, o);
    if (st == C10D_OK && checked && atomic_load_explicit(&pg->join.in_region, memory_order_relaxed))
        st = c10di_join_check(pg, c, o);
    if (st == C10D_OK && checked && c10d_now_ms() > c->deadline_ms) /* as past_deadline */
        st = c10di_error(C10D_ETIMEDOUT, TIMED_OUT, c->what, pg->name, pg->rank, TIMEOUT_MS(pg, c));
    if (st == C10D_OK && !c->shadow && !any_source)
        st = c10di_verify_enter(pg, c, o);
    /* Join's stage, once c was verified (a send/recv it refuses, its peer
     * having joined, went to the coordinator first: see the plan). */
    if (st == C10D_OK)
        st = c10di_join_enter(pg, c, o);
    return st;
}

c10d_status c10di_call_enter(c10d_pg *pg, c10di_coll *c, c10di_outcome *o)
{
    return enter(pg, c, 0, o);
}

c10d_status c10di_call_open(c10d_pg *pg, c10di_coll *c, c10di_outcome *o)
{
    return enter(pg, c, 1, o);
}

c10d_status c10di_execute(c10d_pg *pg, c10di_coll *c)
{
    c10di_outcome o;
    C10DI_OUTCOME_EMPTY(&o);
    int any_source = c->kind == C10DC_RECV && c->root == C10DI_ANY_SOURCE;
    /* A shadow runs inside join_end, which says what the rank does itself:
     * a joined rank reacts to its peers' headers, and every step it saves
     * is theirs. */
    c10d_status st = enter(pg, c, !c->shadow, &o);
    if (st == C10D_OK)
        st = c->be->run_call(c->be_state, c);
    if (st == C10D_OK)
        c10di_join_ran(pg, c);
    /* A message of the wrong size is reported too, under its sender: the
     * coordinator then names the mismatched pair, not a later call. It is
     * planned again: it is reported now, as what it turned out to be. */
    if (any_source && c->root != C10DI_ANY_SOURCE && (st == C10D_OK || st == C10D_EINVAL)) {
        c10d_status vst = c10di_report_sender(pg, c, c->root, &o);
        if (st == C10D_OK)
            st = vst;
    }
    c10di_call_end(pg, c, st, &o);
    return st;
}
