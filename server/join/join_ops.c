/* Join on the wire: join_begin (a member enters a join region) and
 * join_shadow (a joined rank asking what to shadow). See join.h for the
 * rule, join_release.c for its application and docs/join.md for the
 * semantics; what join hears from the rest of the coordinator is
 * join_events.c's.
 *
 * A joined rank's join_shadow is parked on the group's join key until the
 * collectives it asks for are released, the region is over, or the group
 * fails (a finding: a desync between the active ranks, a collective no
 * joined rank can take part in, a member lost, a stall). */
#include "engine/engine.h"
#include "join/join.h"
#include "join/join_release.h"
#include "groups/liveness_ops.h"
#include "engine/ops.h"
#include "engine/request.h"
#include "verify/verify.h"

#include <c10d/errors.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS_PER_REPLY 256

/* "EINVAL" for -2 (the client's status names, from the one error list). */
static const char *status_name(int st)
{
    switch (st) {
#define C10DS_STATUS_NAME(name, value, msg)                                                        \
    case value: return #name;
        C10D_ERROR_LIST(C10DS_STATUS_NAME)
#undef C10DS_STATUS_NAME
    }
    return "unknown status";
}

/* --- the request's group and region --- */

static c10ds_vgroup *group_for(c10ds_engine *e, c10ds_request *r, const char *job, uint64_t gen,
                               const char *name, int rank, int *idx)
{
    c10ds_vgroup *g = c10ds_verify_group(e, job, gen, name);
    if (!g) {
        c10ds_fail(r, C10D_ENOTFOUND, "no formed group %s in job %s generation %llu", name, job,
                   (unsigned long long)gen);
        return NULL;
    }
    *idx = rank >= 0 && rank < g->world ? g->index_of[rank] : -1;
    if (*idx < 0) {
        c10ds_fail(r, C10D_EINVAL, "rank %d is not a member of group %s", rank, name);
        return NULL;
    }
    return g;
}

static c10ds_jregion *region_for(c10ds_engine *e, c10ds_request *r, const c10ds_vgroup *g,
                                 uint32_t region, int throw_early, int divide_initial)
{
    if (region == 0) {
        c10ds_fail(r, C10D_EINVAL, "join region 0 of group %s: regions count from 1", g->name);
        return NULL;
    }
    c10ds_jregion *jr = c10ds_join_region(&e->join, g->job, g->gen, g->name, region, g->size,
                                          g->ranks, 1, throw_early, divide_initial);
    if (!jr)
        c10ds_fail(r, C10D_ERROR, "the coordinator cannot record join region %u of group %s",
                   region, g->name);
    return jr;
}

static c10ds_outcome op_join_begin(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    (void)ph;
    C10dpb__JoinBegin *m = r->pb->join_begin;
    int idx;
    if (c10ds_check_member_caller(e, r, m->job, m->generation, m->rank) != 0)
        return C10DS_DONE;
    c10ds_vgroup *g = group_for(e, r, m->job, m->generation, m->group, m->rank, &idx);
    if (!g)
        return C10DS_DONE;
    c10ds_join_prune(&e->join, m->job, m->generation);
    c10ds_jregion *jr = region_for(e, r, g, m->region, m->throw_on_early_termination,
                                   m->divide_by_initial_world_size);
    if (!jr)
        return C10DS_DONE;
    if (jr->throw_early != (int)m->throw_on_early_termination ||
        jr->divide_initial != (int)m->divide_by_initial_world_size) {
        char w[64];
        return c10ds_fail(r, C10D_EINVAL, "join region %u of group %s: %s asks for "
                          "throw_on_early_termination=%d divide_by_initial_world_size=%d, but "
                          "the region was begun with %d and %d; every member must pass the same "
                          "options", m->region, g->name, c10ds_verify_who(g, idx, w, sizeof w),
                          m->throw_on_early_termination, m->divide_by_initial_world_size,
                          jr->throw_early, jr->divide_initial);
    }
    if (m->has_inband && jr->inband < 0) {
        jr->inband = m->inband;
    } else if (m->has_inband && jr->inband != (int)m->inband) {
        char w[64];
        return c10ds_fail(r, C10D_EINVAL, "join region %u of group %s: %s would learn what to "
                          "shadow %s, but the members that began the region before it would "
                          "%s; every member must see the same data planes (NCCL available "
                          "for the group on all ranks, or on none)", m->region, g->name,
                          c10ds_verify_who(g, idx, w, sizeof w),
                          m->inband ? "from the host data plane (no NCCL here)"
                                    : "from the coordinator (NCCL here)",
                          jr->inband ? "read it from the host data plane"
                                     : "hear it from the coordinator");
    }
    jr->m[idx].begun = 1;
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    return c10ds_reply(r, &rep);
}

/* The region is over: member idx hears it (and its last joiner). */
static void tell_done(c10ds_jregion *jr, int idx, C10dpb__JoinShadowReply *out)
{
    out->has_done = out->has_last_joiner = out->has_final_seq = 1;
    out->done = 1;
    out->last_joiner = jr->last_joiner;
    out->final_seq = jr->final_seq;
    jr->m[idx].told_done = 1;
}

/* Sends a join_shadow reply; a region every member heard the end of is
 * forgotten. */
static c10ds_outcome reply_shadow(c10ds_engine *e, c10ds_request *r, const c10ds_vgroup *g,
                                  C10dpb__JoinShadowReply *out)
{
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_JOIN_SHADOW;
    rep.join_shadow = out;
    c10ds_outcome o = c10ds_reply(r, &rep);
    if (out->done)
        c10ds_join_prune(&e->join, g->job, g->gen);
    return o;
}

/* Answers a joined rank: the released collectives from next_seq, or the
 * end of the region, or why the group cannot go on; else parks it. */
static c10ds_outcome answer(c10ds_engine *e, c10ds_request *r, c10ds_phase ph, c10ds_jregion *jr,
                            c10ds_vgroup *g, int idx)
{
    C10dpb__JoinShadow *m = r->pb->join_shadow;
    uint64_t next = m->next_seq;
    if (g->status)
        return c10ds_fail(r, (c10d_status)g->status, "%s", g->report);
    C10dpb__ShadowRun runs[MAX_RUNS_PER_REPLY], *ptrs[MAX_RUNS_PER_REPLY];
    C10dpb__CollEntry calls[MAX_RUNS_PER_REPLY];
    size_t n = 0;
    for (size_t i = 0; i < jr->run_count && n < MAX_RUNS_PER_REPLY; i++) {
        const c10ds_jrun *x = c10ds_join_run(jr, i);
        if (x->last < next)
            continue;
        c10dpb__shadow_run__init(&runs[n]);
        c10dpb__coll_entry__init(&calls[n]);
        calls[n].group = g->name;
        calls[n].seq = x->first;
        calls[n].kind = x->fp.kind;
        calls[n].has_dtype = calls[n].has_count = calls[n].has_root = calls[n].has_op = 1;
        calls[n].dtype = x->fp.dtype;
        calls[n].count = x->fp.count;
        calls[n].root = x->fp.root;
        calls[n].op = x->fp.op;
        calls[n].has_device = 1;
        calls[n].device = x->fp.device;
        runs[n].first_seq = x->first > next ? x->first : next;
        runs[n].last_seq = x->last;
        runs[n].call = &calls[n];
        runs[n].active = x->active;
        ptrs[n] = &runs[n];
        n++;
    }
    C10dpb__JoinShadowReply out = C10DPB__JOIN_SHADOW_REPLY__INIT;
    if (n) {
        out.n_runs = n;
        out.runs = ptrs;
    } else if (jr->done && next > jr->final_seq) {
        tell_done(jr, idx, &out);
    } else if (next <= jr->released) {
        /* Released once, but no longer logged: only after a restart. */
        char report[512];
        snprintf(report, sizeof report, "join in group %s (job %s): the coordinator restarted "
                 "while the joined ranks shadowed collective #%llu and no longer knows what it "
                 "was", g->name, g->job, (unsigned long long)next);
        c10ds_verify_finding(e, g, next, C10D_EABORTED, report);
        return c10ds_fail(r, C10D_EABORTED, "%s", report);
    } else {
        c10d_ms timeout =
            c10ds_wire_ms(m->has_timeout_ms, m->timeout_ms, C10D_COLL_TIMEOUT_DEFAULT_MS);
        char w[64], desc[256];
        snprintf(desc, sizeof desc, "%s (joined after #%llu) waits to shadow #%llu",
                 c10ds_verify_who(g, idx, w, sizeof w), (unsigned long long)jr->m[idx].after,
                 (unsigned long long)next);
        if (c10ds_verify_member_lost(e, g, next, desc))
            return c10ds_fail(r, (c10d_status)g->status, "%s", g->report);
        if (ph == C10DS_EXPIRED) {
            char where[640], report[1200];
            c10ds_verify_whereabouts(g, where, sizeof where);
            snprintf(report, sizeof report, "stall in group %s (job %s) at collective #%llu: %s "
                     "for %d ms; %s", g->name, g->job, (unsigned long long)next, desc,
                     timeout, where);
            c10ds_verify_finding(e, g, next, C10D_ETIMEDOUT, report);
            return c10ds_fail(r, C10D_ETIMEDOUT, "%s", report);
        }
        char key[512];
        c10ds_join_key(key, sizeof key, g->job, g->gen, g->name);
        return c10ds_park(e, r, ph, key, timeout);
    }
    return reply_shadow(e, r, g, &out);
}

/* A joined rank (in-band) saw nothing to shadow for the group's timeout:
 * the stall is the group's finding, worded with where every rank is. */
static c10ds_outcome stalled(c10ds_engine *e, c10ds_request *r, c10ds_jregion *jr,
                             c10ds_vgroup *g, int idx)
{
    C10dpb__JoinShadow *m = r->pb->join_shadow;
    char w[64], where[640], report[1200];
    c10ds_verify_whereabouts(g, where, sizeof where);
    snprintf(report, sizeof report, "stall in group %s (job %s) at collective #%llu: %s (joined "
             "after #%llu) waited %d ms to shadow #%llu, and no other rank began it; %s", g->name,
             g->job, (unsigned long long)m->next_seq, c10ds_verify_who(g, idx, w, sizeof w),
             (unsigned long long)jr->m[idx].after,
             c10ds_wire_ms(m->has_timeout_ms, m->timeout_ms, C10D_COLL_TIMEOUT_DEFAULT_MS),
             (unsigned long long)m->next_seq, where);
    c10ds_verify_finding(e, g, m->next_seq, C10D_ETIMEDOUT, report);
    return c10ds_fail(r, C10D_ETIMEDOUT, "%s", report);
}

/* A rank that shadows in-band is answered at once: the end of the region
 * once it is over and the rank has shadowed up to its last collective,
 * else nothing (it hears of the end on its watch, JoinState.done). */
static c10ds_outcome answer_inband(c10ds_engine *e, c10ds_request *r, c10ds_jregion *jr,
                                   c10ds_vgroup *g, int idx)
{
    C10dpb__JoinShadow *m = r->pb->join_shadow;
    if (g->status)
        return c10ds_fail(r, (c10d_status)g->status, "%s", g->report);
    C10dpb__JoinShadowReply out = C10DPB__JOIN_SHADOW_REPLY__INIT;
    if (m->next_seq - 1 > jr->m[idx].asked)
        jr->m[idx].asked = m->next_seq - 1;
    if (jr->done && m->next_seq > jr->final_seq)
        tell_done(jr, idx, &out);
    return reply_shadow(e, r, g, &out);
}

static c10ds_outcome op_join_shadow(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__JoinShadow *m = r->pb->join_shadow;
    int idx;
    if (ph == C10DS_FIRST && c10ds_check_member_caller(e, r, m->job, m->generation, m->rank) != 0)
        return C10DS_DONE;
    c10ds_vgroup *g = group_for(e, r, m->job, m->generation, m->group, m->rank, &idx);
    if (!g)
        return C10DS_DONE;
    c10ds_jregion *jr = region_for(e, r, g, m->region, m->throw_on_early_termination,
                                   m->divide_by_initial_world_size);
    if (!jr)
        return C10DS_DONE;
    if (m->next_seq == 0)
        return c10ds_fail(r, C10D_EINVAL, "join_shadow: next_seq counts from 1");
    uint64_t upto = m->next_seq - 1;
    if (ph == C10DS_FIRST && m->has_failed && m->failed != C10D_OK && !g->status) {
        char w[64], report[1200];
        if (m->failed == C10D_ETIMEDOUT && m->inband) /* unless it is over: then it is told */
            return jr->done && m->next_seq > jr->final_seq ? answer_inband(e, r, jr, g, idx)
                                                           : stalled(e, r, jr, g, idx);
        if (m->failed == C10D_EJOINED) /* it saw a call it cannot shadow: its words stand */
            snprintf(report, sizeof report, "%s", m->failure ? m->failure : "");
        else
            snprintf(report, sizeof report, "join in group %s (job %s) at collective #%llu: %s, "
                     "which joined, could not take part in it (%s: %s)", g->name, g->job,
                     (unsigned long long)m->next_seq, c10ds_verify_who(g, idx, w, sizeof w),
                     status_name(m->failed), m->failure ? m->failure : "");
        c10ds_verify_finding(e, g, m->next_seq,
                             m->failed == C10D_EJOINED ? C10D_EJOINED : C10D_EABORTED, report);
    }
    if (ph == C10DS_FIRST) {
        c10ds_jmember *me = &jr->m[idx];
        if (me->order && m->first && me->after != upto)
            return c10ds_fail(r, C10D_EINVAL, "rank %d of group %s joined join region %u after "
                              "collective #%llu already, not #%llu", idx, g->name, jr->region,
                              (unsigned long long)me->after, (unsigned long long)upto);
        if (!me->order) /* the join (or, after a restart, a join not recorded) */
            c10ds_join_joined(e, jr, g, idx, upto);
        /* It shadowed everything before next_seq: after a coordinator
         * restart this is how verification learns it. */
        c10ds_verify_skip_to(e, g, idx, upto);
        if (upto > me->asked)
            me->asked = upto;
        if (jr->restored && upto > jr->released)
            jr->released = upto;
        if (m->inband)
            me->inband = 1;
        c10ds_join_trim(jr);
        c10ds_join_apply_release_rule(e, jr, g);
    }
    if (m->inband)
        return answer_inband(e, r, jr, g, idx);
    return answer(e, r, ph, jr, g, idx);
}

const c10ds_op c10ds_join_ops[] = {
    {C10DPB__REQUEST__OP_JOIN_BEGIN, "join_begin", op_join_begin, 0},
    {C10DPB__REQUEST__OP_JOIN_SHADOW, "join_shadow", op_join_shadow, 0},
    {0, NULL, NULL, 0},
};
