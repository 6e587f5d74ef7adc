/* Join on the wire: join_begin, join_shadow (a joined rank asking what to
 * shadow), and what join hears from the rest of the coordinator (events.h):
 * collectives entered (verification), acknowledgements on heartbeats,
 * members lost, findings. See join.h for the rule and docs/join.md for the
 * semantics.
 *
 * A joined rank's join_shadow is parked on the group's join key until the
 * collectives it asks for are released, the region is over, or the group
 * fails (a finding: a desync between the active ranks, a collective no
 * joined rank can take part in, a member lost, a stall). */
#include "engine.h"
#include "events.h"
#include "join.h"
#include "verify.h"

#include "c10d_time.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS_PER_REPLY 256

static void join_key(char *buf, size_t cap, const char *job, uint64_t gen, const char *name)
{
    snprintf(buf, cap, "\x01join:%s:%llu:%s", job, (unsigned long long)gen, name);
}

static void wake(c10ds_engine *e, const c10ds_jregion *jr)
{
    char key[512];
    join_key(key, sizeof key, jr->job, jr->gen, jr->name);
    c10ds_waiters_touch(e->waiters, key);
}

static int same_group(const c10ds_jregion *jr, const c10ds_vgroup *g)
{
    return jr->gen == g->gen && !strcmp(jr->name, g->name) && !strcmp(jr->job, g->job);
}

/* "rank 0 joined after #5, rank 2 after #7" (at most 8 named). */
static void joined_list(const c10ds_jregion *jr, const c10ds_vgroup *g, uint64_t s, char *buf,
                        size_t cap)
{
    size_t off = 0;
    int named = 0;
    buf[0] = '\0';
    for (uint32_t o = 1; o <= jr->joins && off + 64 < cap; o++)
        for (int i = 0; i < jr->size; i++) {
            if (jr->m[i].order != o || !c10ds_join_shadows(jr, i, s))
                continue;
            char w[64];
            if (named++ == 8) {
                snprintf(buf + off, cap - off, " and others");
                return;
            }
            off += (size_t)snprintf(buf + off, cap - off, "%s%s joined after %s#%llu",
                                    named > 1 ? ", " : "", c10ds_verify_who(g, i, w, sizeof w),
                                    named > 1 ? "" : "collective ",
                                    (unsigned long long)jr->m[i].after);
        }
}

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

/* A collective the joined ranks cannot take part in: every rank gets
 * C10D_EJOINED naming it and who joined, instead of a hang. */
static void cannot_shadow(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g, uint64_t s,
                          const c10ds_vrun *run, const char *why)
{
    char a[64], f[160], joined[512], report[1024];
    joined_list(jr, g, s, joined, sizeof joined);
    snprintf(report, sizeof report, "join in group %s (job %s) at collective #%llu: %s called %s, "
             "which %s; %s (out of inputs). Only all_reduce, reduce, reduce_scatter, barrier and "
             "broadcast from an active rank can run while a member has joined",
             g->name, g->job, (unsigned long long)s,
             c10ds_verify_who(g, run->first, a, sizeof a), c10dc_fp_format(&run->fp, f, sizeof f),
             why, joined);
    c10ds_verify_finding(e, g, s, C10D_EJOINED, report);
}

/* Every joined rank of the region learns what to shadow in-band. */
static int inband_only(const c10ds_jregion *jr)
{
    for (int i = 0; i < jr->size; i++)
        if (jr->m[i].order && !jr->m[i].inband)
            return 0;
    return 1;
}

/* Releases to the joined ranks every collective the active ranks allow
 * (join.h): enters it for them, so verification moves on, and logs it
 * for their join_shadow. */
static void release(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g)
{
    int moved = 0;
    uint64_t *unknown = jr->joins ? malloc((jr->joins + 1) * sizeof *unknown) : NULL;
    if (unknown)
        c10ds_join_unknown_after(jr, unknown);
    while (!g->status && unknown) {
        uint64_t s = jr->released + 1, end = UINT64_MAX;
        if (jr->done && s > jr->final_seq)
            break;
        int active = 0;
        for (int i = 0; i < jr->size; i++) {
            if (c10ds_join_shadows(jr, i, s))
                continue;
            active++;
            uint64_t lim = c10ds_join_member_limit(jr, i, s, g->entered[i], unknown);
            if (lim < end)
                end = lim;
        }
        if (!active || end < s)
            break;
        const c10ds_vrun *run = c10ds_verify_ref(g, s);
        if (!run && inband_only(jr)) {
            /* Ranks that shadow in-band need nothing from here, and their
             * watches say what they completed: verification may have
             * passed s already. The bookkeeping just follows. */
            jr->released = end;
            for (int i = 0; i < jr->size; i++)
                if (c10ds_join_shadows(jr, i, s))
                    c10ds_verify_skip_to(e, g, i, end);
            continue;
        }
        if (!run) {
            char report[512];
            snprintf(report, sizeof report, "join in group %s (job %s): the coordinator does not "
                     "know what collective #%llu was (its reports were lost, perhaps in a "
                     "coordinator restart), so the joined ranks cannot shadow it", g->name,
                     g->job, (unsigned long long)s);
            c10ds_verify_finding(e, g, s, C10D_EABORTED, report);
            break;
        }
        if (run->end < end)
            end = run->end;
        int culprit;
        const char *why = c10ds_join_unshadowable(jr, &run->fp, s, &culprit);
        if (why) {
            cannot_shadow(e, jr, g, s, run, why);
            break;
        }
        c10dc_fp fp = run->fp; /* entering may drop the run */
        if (c10ds_join_log(jr, s, end, &fp, active) != 0) {
            c10ds_error("out of memory releasing collectives of group %s", g->name);
            break;
        }
        jr->released = end;
        jr->last_fp = fp;
        c10ds_join_trim(jr); /* in-band joined ranks never ask for the runs */
        for (int i = 0; i < jr->size; i++)
            if (c10ds_join_shadows(jr, i, s))
                c10ds_verify_enter(e, g, i, s, end, &fp);
        moved = 1;
    }
    free(unknown);
    if (moved)
        wake(e, jr);
}

/* Sends and recvs of active ranks waiting for a joined peer can never be
 * matched: the joined rank issues nothing but shadows. */
static void p2p_with_joined(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g,
                            const c10ds_vp2p *x)
{
    int poster = x->kind == C10DC_SEND ? x->src : x->dst;
    int peer = x->kind == C10DC_SEND ? x->dst : x->src;
    if (g->status || peer < 0 || peer >= jr->size || !jr->m[peer].order ||
        jr->m[poster].order)
        return;
    char a[64], b[64], report[1024];
    snprintf(report, sizeof report, "join in group %s (job %s), tag %d: %s %s %s[%lld] %s %s, "
             "which joined after collective #%llu (out of inputs) and will never %s it",
             g->name, g->job, x->tag, c10ds_verify_who(g, poster, a, sizeof a),
             x->kind == C10DC_SEND ? "sends" : "receives", c10dc_dtype_name(x->fp.dtype),
             (long long)x->fp.count, x->kind == C10DC_SEND ? "to" : "from",
             c10ds_verify_who(g, peer, b, sizeof b), (unsigned long long)jr->m[peer].after,
             x->kind == C10DC_SEND ? "receive" : "send");
    c10ds_verify_finding(e, g, g->min_entered + 1, C10D_EJOINED, report);
}

/* Group rank idx of g is out of inputs after collective `after`. */
static void record_join(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g, int idx,
                        uint64_t after)
{
    /* What it issued without reporting (OFF) counts as entered. */
    c10ds_verify_skip_to(e, g, idx, after);
    c10ds_join_record(&e->join, jr, idx, after);
    char w[64];
    c10ds_info("job %s generation %llu: %s of group %s joined after collective #%llu (join "
               "region %u, %u of %d joined)", g->job, (unsigned long long)g->gen,
               c10ds_verify_who(g, idx, w, sizeof w), g->name, (unsigned long long)after,
               jr->region, jr->joins, jr->size);
    if (jr->throw_early && !g->status) {
        char report[512];
        snprintf(report, sizeof report, "%s ran out of inputs after collective #%llu of group %s "
                 "(job %s), and the join region was begun with throw_on_early_termination",
                 w, (unsigned long long)after, g->name, g->job);
        c10ds_verify_finding(e, g, after + 1, C10D_EJOINED, report);
    }
    for (const c10ds_vp2p *x = g->p2p; x && !g->status; x = x->next)
        p2p_with_joined(e, jr, g, x);
    c10ds_groups_bump(e, g->job, g->gen); /* the active ranks hear of it on their watch */
    wake(e, jr);
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
                     m->timeout_ms, where);
            c10ds_verify_finding(e, g, next, C10D_ETIMEDOUT, report);
            return c10ds_fail(r, C10D_ETIMEDOUT, "%s", report);
        }
        char key[512];
        join_key(key, sizeof key, g->job, g->gen, g->name);
        return c10ds_park(e, r, ph, key, m->has_timeout_ms && m->timeout_ms > 0 ? m->timeout_ms
                                                                              : 600000);
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
             (unsigned long long)jr->m[idx].after, m->timeout_ms,
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
            record_join(e, jr, g, idx, upto);
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
        release(e, jr, g);
    }
    if (m->inband)
        return answer_inband(e, r, jr, g, idx);
    return answer(e, r, ph, jr, g, idx);
}

/* --- what join hears --- */

static void each_region(c10ds_engine *e, const c10ds_vgroup *g,
                        void (*fn)(c10ds_engine *, c10ds_jregion *, c10ds_vgroup *))
{
    for (c10ds_jregion *jr = e->join.regions, *n; jr; jr = n) {
        n = jr->next;
        if (same_group(jr, g))
            fn(e, jr, (c10ds_vgroup *)g);
    }
}

static void on_entered(c10ds_engine *e, c10ds_vgroup *g, int idx, uint32_t join_known)
{
    for (c10ds_jregion *jr = e->join.regions; jr; jr = jr->next) {
        if (!same_group(jr, g))
            continue;
        if (join_known > jr->m[idx].known)
            jr->m[idx].known = join_known;
        if (jr->joins && !jr->done)
            release(e, jr, g);
    }
}

/* A heartbeat acknowledges the join states the rank applied. */
static void on_watch_request(c10ds_engine *e, const C10dpb__Watch *m)
{
    for (size_t k = 0; k < m->n_join_known; k++) {
        const C10dpb__JoinKnown *x = m->join_known[k];
        for (c10ds_jregion *jr = e->join.regions; jr; jr = jr->next) {
            if (jr->region != x->region || jr->gen != m->generation || strcmp(jr->name, x->group) ||
                strcmp(jr->job, m->job))
                continue;
            c10ds_vgroup *g = c10ds_verify_group(e, jr->job, jr->gen, jr->name);
            int idx = g && m->rank >= 0 && m->rank < g->world ? g->index_of[m->rank] : -1;
            if (idx < 0 || x->version <= jr->m[idx].known)
                continue;
            jr->m[idx].known = x->version;
            release(e, jr, g);
        }
    }
}

static void on_p2p_unmatched(c10ds_engine *e, c10ds_vgroup *g, const c10ds_vp2p *x)
{
    for (c10ds_jregion *jr = e->join.regions; jr; jr = jr->next)
        if (same_group(jr, g) && jr->joins && !jr->done)
            p2p_with_joined(e, jr, g, x);
}

static void wake_cb(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g)
{
    (void)g;
    wake(e, jr);
}

static void on_finding(c10ds_engine *e, c10ds_vgroup *g)
{
    each_region(e, g, wake_cb);
}

static void on_membership_changed(c10ds_engine *e, const char *job, uint64_t gen)
{
    for (c10ds_jregion *jr = e->join.regions; jr; jr = jr->next)
        if (jr->gen == gen && !strcmp(jr->job, job))
            wake(e, jr);
}

/* A region as a JoinState message, owning all it points to (the region
 * may be gone before the reply is packed); free with state_free. */
static C10dpb__JoinState *state_of(const c10ds_jregion *jr)
{
    C10dpb__JoinState *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    c10dpb__join_state__init(s);
    if (!(s->group = strdup(jr->name))) {
        free(s);
        return NULL;
    }
    s->region = jr->region;
    s->has_version = s->has_throw_on_early_termination = s->has_divide_by_initial_world_size = 1;
    s->has_begun = s->has_released = s->has_done = 1;
    s->version = jr->joins;
    s->throw_on_early_termination = jr->throw_early;
    s->divide_by_initial_world_size = jr->divide_initial;
    s->released = jr->released;
    s->done = jr->done;
    if (jr->done) {
        s->has_last_joiner = s->has_final_seq = 1;
        s->last_joiner = jr->last_joiner;
        s->final_seq = jr->final_seq;
    }
    for (int i = 0; i < jr->size; i++)
        s->begun += jr->m[i].begun;
    if (jr->joins && (s->joined = calloc(jr->joins, sizeof *s->joined))) {
        for (uint32_t o = 1; o <= jr->joins; o++)
            for (int i = 0; i < jr->size; i++) {
                if (jr->m[i].order != o)
                    continue;
                C10dpb__JoinedRank *x = calloc(1, sizeof *x);
                if (!x)
                    break;
                c10dpb__joined_rank__init(x);
                x->rank = i;
                x->has_global_rank = x->has_joined_ms = 1;
                x->global_rank = jr->ranks[i];
                x->after_seq = jr->m[i].after;
                x->joined_ms = jr->m[i].joined_ms;
                s->joined[s->n_joined++] = x;
            }
    }
    s->has_caught_up = 1;
    s->caught_up = jr->run_count == 0;
    if (jr->last_fp.kind < C10DC_KIND_COUNT) {
        char f[160], buf[256];
        snprintf(buf, sizeof buf, "#%llu %s", (unsigned long long)jr->released,
                 c10dc_fp_format(&jr->last_fp, f, sizeof f));
        s->shadowing = strdup(buf);
    }
    return s;
}

static void state_free(C10dpb__JoinState *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_joined; i++)
        free(s->joined[i]);
    free(s->joined);
    free(s->shadowing);
    free(s->group);
    free(s);
}

/* The active ranks learn of joins on their watch (and acknowledge them on
 * the next one); ranks that shadow in-band learn there that the region is
 * over (kept until every member was told). */
static int announced(const c10ds_jregion *jr, const char *job, uint64_t gen)
{
    /* Not a region that was over before a restart: its members returned
     * already and will never say they heard it. */
    return jr->gen == gen && jr->joins && !(jr->done && jr->restored) && !strcmp(jr->job, job);
}

static void on_watch_reply(c10ds_engine *e, const char *job, uint64_t gen, C10dpb__WatchReply *w)
{
    size_t n = 0;
    for (c10ds_jregion *jr = e->join.regions; jr; jr = jr->next)
        n += announced(jr, job, gen);
    if (!n || !(w->joins = calloc(n, sizeof *w->joins)))
        return;
    for (c10ds_jregion *jr = e->join.regions; jr; jr = jr->next)
        if (announced(jr, job, gen) && (w->joins[w->n_joins] = state_of(jr)))
            w->n_joins++;
}

static void on_watch_done(C10dpb__WatchReply *w)
{
    for (size_t i = 0; i < w->n_joins; i++)
        state_free(w->joins[i]);
    free(w->joins);
    w->joins = NULL;
    w->n_joins = 0;
}

static void on_group_info(c10ds_engine *e, const char *job, uint64_t gen, C10dpb__GroupInfo *gi)
{
    if (!gi->n_ranks)
        return;
    int loaned;
    c10ds_jregion *jr = c10ds_join_latest(&e->join, job, gen, gi->name, (int)gi->n_ranks,
                                          gi->ranks, &loaned);
    if (jr)
        gi->join = state_of(jr);
    if (loaned)
        c10ds_join_region_free(jr);
}

static void on_group_info_done(C10dpb__GroupInfo *gi)
{
    state_free(gi->join);
    gi->join = NULL;
}

static void on_generation_started(c10ds_engine *e, const char *job, uint64_t gen)
{
    c10ds_join_prune(&e->join, job, gen);
}

const c10ds_listener c10ds_join_listener = {
    .name = "join",
    .generation_started = on_generation_started,
    .membership_changed = on_membership_changed,
    .watch_request = on_watch_request,
    .watch_reply = on_watch_reply,
    .watch_done = on_watch_done,
    .group_info = on_group_info,
    .group_info_done = on_group_info_done,
    .entered = on_entered,
    .p2p_unmatched = on_p2p_unmatched,
    .finding = on_finding,
};

const c10ds_op c10ds_join_ops[] = {
    {C10DPB__REQUEST__OP_JOIN_BEGIN, "join_begin", op_join_begin, 0},
    {C10DPB__REQUEST__OP_JOIN_SHADOW, "join_shadow", op_join_shadow, 0},
    {0, NULL, NULL, 0},
};
