/* Join's release rule (join.h) applied to verification's state: which
 * collectives the joined ranks shadow, entered for them so verification
 * moves on, and what a join makes impossible (a collective no joined rank
 * can take part in, a send or recv with a joined peer, any join under
 * throw_on_early_termination), recorded as the group's finding. See
 * docs/join.md. */
#include "join/join_release.h"

#include "engine/engine.h"
#include "join/join.h"
#include "groups/liveness_ops.h"
#include "verify/verify.h"
#include "engine/waiters.h"

#include "fingerprint.h"
#include "join_words.h"
#include "log.h"

#include <c10d/errors.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void c10ds_join_key(char *buf, size_t cap, const char *job, uint64_t gen, const char *name)
{
    snprintf(buf, cap, "\x01join:%s:%llu:%s", job, (unsigned long long)gen, name);
}

void c10ds_join_wake(c10ds_engine *e, const c10ds_jregion *jr)
{
    char key[512];
    c10ds_join_key(key, sizeof key, jr->job, jr->gen, jr->name);
    c10ds_waiters_touch(e->waiters, key);
}

/* The joined ranks that shadow s, in the order they joined, as
 * c10dc_join_list words them. */
static void joined_list(const c10ds_jregion *jr, const c10ds_vgroup *g, uint64_t s, char *buf,
                        size_t cap)
{
    c10dc_join_list l;
    c10dc_join_list_start(&l, buf, cap);
    for (uint32_t o = 1; o <= jr->joins; o++)
        for (int i = 0; i < jr->size; i++) {
            if (jr->m[i].order != o || !c10ds_join_shadows(jr, i, s))
                continue;
            char w[64];
            if (!c10dc_join_list_add(&l, c10ds_verify_who(g, i, w, sizeof w), jr->m[i].after))
                return;
        }
}

/* A collective the joined ranks cannot take part in: every rank gets
 * C10D_EJOINED naming it and who joined, instead of a hang. */
static void cannot_shadow(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g, uint64_t s,
                          const c10ds_vrun *run, const char *why)
{
    char a[64], joined[512], report[1024];
    joined_list(jr, g, s, joined, sizeof joined);
    c10dc_join_unshadowable_report(report, sizeof report, g->name, g->job, s,
                                   c10ds_verify_who(g, run->first, a, sizeof a), &run->fp, why,
                                   joined);
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
void c10ds_join_apply_release_rule(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g)
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
        c10ds_join_wake(e, jr);
}

/* Sends and recvs of active ranks waiting for a joined peer can never be
 * matched: the joined rank issues nothing but shadows. */
void c10ds_join_p2p_with_joined(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g,
                            const c10ds_vp2p *x)
{
    int poster = x->kind == C10DC_SEND ? x->src : x->dst;
    int peer = x->kind == C10DC_SEND ? x->dst : x->src;
    if (g->status || peer < 0 || peer >= jr->size || !jr->m[peer].order ||
        jr->m[poster].order)
        return;
    char a[64], b[64], never[128], report[1024];
    snprintf(
        report, sizeof report,
        "join in group %s (job %s), tag %d: %s %s %s[%lld] %s %s, "
        "which %s",
        g->name, g->job, x->tag, c10ds_verify_who(g, poster, a, sizeof a),
        x->kind == C10DC_SEND ? "sends" : "receives", c10dc_dtype_name(x->fp.dtype),
        (long long)x->fp.count, x->kind == C10DC_SEND ? "to" : "from",
        c10ds_verify_who(g, peer, b, sizeof b),
        c10dc_join_never_matched(never, sizeof never, jr->m[peer].after, x->kind == C10DC_SEND));
    c10ds_verify_finding(e, g, g->min_entered + 1, C10D_EJOINED, report);
}

/* Group rank idx of g is out of inputs after collective `after`. */
void c10ds_join_joined(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g, int idx,
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
        c10ds_join_p2p_with_joined(e, jr, g, x);
    c10ds_groups_bump(e, g->job, g->gen); /* the active ranks hear of it on their watch */
    c10ds_join_wake(e, jr);
}
