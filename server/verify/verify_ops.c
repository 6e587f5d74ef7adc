/* Verification on the wire: coll_report (a rank entering collectives) and
 * coll_status (what c10d-ctl desync shows), and the hooks liveness and the
 * watch use. Each rank's trace of what it entered is verify_trace.c's.
 *
 * SYNC: the report of one entry is parked on (group, seq) until every
 * member has entered that seq; it is answered OK, or with the reason the
 * collective cannot run: a desync (fingerprints differ), a member dead or
 * gone before that seq, or a stall past the collective's timeout. ASYNC:
 * reports are answered at once; a finding reaches every rank through its
 * parked watch (GroupAlert). Either way a finding is sticky for the group. */
#include "engine/engine.h"
#include "engine/events.h"
#include "groups/groups.h"
#include "groups/liveness_ops.h"
#include "engine/ops.h"
#include "engine/request.h"
#include "groups/runs.h"
#include "verify/verify.h"
#include "verify/verify_history.h"

#include "fingerprint.h"

#include <c10d/errors.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void c10ds_verify_fini(c10ds_verify *v)
{
    for (c10ds_vgroup *g = v->groups, *n; g; g = n) {
        n = g->next;
        c10ds_vgroup_free(g);
    }
    v->groups = NULL;
}

/* The group's state, loaded from the groups table the first time; never
 * for a run that is over (it went when the run ended: on_run_ended). */
c10ds_vgroup *c10ds_verify_group(c10ds_engine *e, const char *job, uint64_t gen, const char *name)
{
    for (c10ds_vgroup *g = e->verify.groups; g; g = g->next)
        if (g->gen == gen && strcmp(g->name, name) == 0 && strcmp(g->job, job) == 0)
            return g;
    if (c10ds_run_over(e, job, gen) != 0)
        return NULL;
    c10ds_group grp = {0};
    c10ds_job jb;
    if (c10ds_groups_group(&e->groups, job, gen, name, &grp) != 1)
        return NULL;
    if (c10ds_groups_job(&e->groups, job, &jb) != 1 || !grp.formed)
        return NULL;
    int32_t *ranks = c10ds_groups_ranks(&e->groups, job, gen, name, grp.size);
    c10ds_vgroup *g = ranks ? c10ds_vgroup_new(job, gen, name, ranks, grp.size, jb.world_size)
                            : NULL;
    free(ranks);
    if (!g)
        return NULL;
    g->next = e->verify.groups;
    e->verify.groups = g;
    return g;
}

/* What the state machine (verify_runs.c) finds, told to the engine: a
 * desync becomes the group's finding; a minimum that moved releases the
 * SYNC reports parked up to it. */
static void sink_desync(void *arg, c10ds_vgroup *g, uint64_t seq, const c10ds_vrun *ref, int idx,
                        const c10dc_fp *fp, const char *field)
{
    c10ds_verify_desync(arg, g, seq, ref, idx, fp, field);
}

static void sink_min_moved(void *arg, const c10ds_vgroup *g)
{
    c10ds_verify_wake(arg, g);
}

static c10ds_vsink sink_of(c10ds_engine *e)
{
    return (c10ds_vsink){sink_desync, sink_min_moved, e, c10ds_engine_heard_ms(e)};
}

void c10ds_verify_skip_to(c10ds_engine *e, c10ds_vgroup *g, int idx, uint64_t seq)
{
    c10ds_vsink k = sink_of(e);
    c10ds_vgroup_skip_to(g, idx, seq, &k);
}

void c10ds_verify_enter(c10ds_engine *e, c10ds_vgroup *g, int idx, uint64_t start, uint64_t end,
                        const c10dc_fp *fp)
{
    if (end > g->entered[idx])
        c10ds_trace_add(&g->traces[idx], start > g->entered[idx] ? start : g->entered[idx] + 1,
                        end, fp);
    c10ds_vsink k = sink_of(e);
    c10ds_vgroup_enter(g, idx, start, end, fp, &k);
}

const c10ds_vrun *c10ds_verify_ref(c10ds_vgroup *g, uint64_t seq)
{
    return c10ds_vgroup_ref(g, seq);
}

/* Send/recv: a send from a to b with tag t is matched with b's first
 * unmatched recv from a with tag t (and the other way round), as the data
 * plane matches them; the two must move the same dtype and count. Checked
 * in the background in every mode: waiting for the peer before sending
 * would deadlock the out-of-order tags torch allows. */
static void enter_p2p(c10ds_engine *e, c10ds_vgroup *g, int idx, const C10dpb__CollEntry *en)
{
    c10dc_fp fp = {en->kind, en->dtype, en->count, en->root, en->op, en->device, 0};
    int peer = en->root;
    if (peer < 0 || peer >= g->size || g->status)
        return;
    int src = en->kind == C10DC_SEND ? idx : peer, dst = en->kind == C10DC_SEND ? peer : idx;
    /* The unmatched entries of one (src, dst, tag) are all sends or all
     * recvs (a send and a recv of it would have been matched): the first
     * one of this triple says. So a stream of sends ahead of their recvs
     * costs one look each, not a walk past all the sends before it (which
     * took a quarter of the coordinator's CPU in bench_coll's send/recv
     * under SYNC). */
    for (c10ds_vp2p **pp = &g->p2p, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
        c10ds_vp2p *x = *pp;
        if (x->src != src || x->dst != dst || x->tag != en->tag)
            continue;
        if (x->kind == en->kind)
            break; /* no recv (send) waits for this one: it queues */
        if (x->fp.dtype != fp.dtype || x->fp.count != fp.count || x->fp.device != fp.device) {
            const c10ds_vp2p *s = x->kind == C10DC_SEND ? x : NULL;
            char a[64], b[64], fs[64], fr[64], report[1024];
            c10dc_fp sfp = s ? x->fp : fp, rfp = s ? fp : x->fp;
            snprintf(fs, sizeof fs, "%s[%lld]%s", c10dc_dtype_name(sfp.dtype),
                     (long long)sfp.count, sfp.device == C10DC_DEV_CUDA ? " on cuda" : "");
            snprintf(fr, sizeof fr, "%s[%lld]%s", c10dc_dtype_name(rfp.dtype),
                     (long long)rfp.count, rfp.device == C10DC_DEV_CUDA ? " on cuda" : "");
            snprintf(report, sizeof report, "send/recv mismatch in group %s (job %s), tag %d: %s "
                     "sent %s, %s receives %s (different %s)", g->name, g->job, en->tag,
                     c10ds_verify_who(g, src, a, sizeof a), fs, c10ds_verify_who(g, dst, b, sizeof b), fr,
                     sfp.dtype != rfp.dtype   ? "dtype"
                     : sfp.count != rfp.count ? "shape"
                                              : "device");
            c10ds_verify_finding(e, g, g->min_entered + 1, C10D_EDESYNC, report);
        }
        *pp = x->next;
        if (g->p2p_tail == x)
            g->p2p_tail = prev;
        free(x);
        return;
    }
    c10ds_vp2p *x = calloc(1, sizeof *x);
    if (!x)
        return;
    *x = (c10ds_vp2p){NULL, src, dst, en->tag, en->kind, fp, en->seq};
    if (g->p2p_tail)
        g->p2p_tail->next = x;
    else
        g->p2p = x;
    g->p2p_tail = x;
    c10ds_emit_p2p_unmatched(e, g, x); /* a peer that joined will never match it */
}

static void enter_entry(c10ds_engine *e, c10ds_vgroup *g, int idx, const C10dpb__CollEntry *en)
{
    if (en->kind == C10DC_SEND || en->kind == C10DC_RECV) {
        enter_p2p(e, g, idx, en);
        return;
    }
    c10dc_fp fp = {en->kind, en->dtype, en->count, en->root, en->op, en->device, 0};
    if (en->completed > g->completed[idx])
        g->completed[idx] = en->completed;
    c10d_ms timeout = c10ds_wire_ms(en->has_timeout_ms, en->timeout_ms, C10D_COLL_TIMEOUT_DEFAULT_MS);
    if (timeout > g->timeout_ms)
        g->timeout_ms = timeout;
    c10ds_verify_enter(e, g, idx, en->seq, en->seq + en->repeat, &fp);
}

/* Fails r: the group has no verification state, and why. */
static c10ds_outcome no_group(c10ds_engine *e, c10ds_request *r, const char *job, uint64_t gen,
                              const char *name)
{
    if (c10ds_run_over(e, job, gen) == 1)
        return c10ds_fail(r, C10D_EPEERLOST, "job %s generation %llu is over (none of its members "
                          "is alive): group %s verifies nothing more", job,
                          (unsigned long long)gen, name);
    return c10ds_fail(r, C10D_ENOTFOUND, "no formed group %s in job %s generation %llu", name,
                      job, (unsigned long long)gen);
}

/* Applies a report's entries, oldest first. After each group's entries
 * the group's listeners hear of them (join may release shadowed
 * collectives). Returns -1 after failing r. */
static int apply_entries(c10ds_engine *e, c10ds_request *r)
{
    C10dpb__CollReport *m = r->pb->coll_report;
    c10ds_vgroup *g = NULL;
    int idx = -1;
    uint32_t known = 0;
    for (size_t i = 0; i <= m->n_entries; i++) {
        C10dpb__CollEntry *en = i < m->n_entries ? m->entries[i] : NULL;
        if (g && (!en || strcmp(g->name, en->group) != 0)) {
            c10ds_emit_entered(e, g, idx, known);
            g = NULL;
        }
        if (!en)
            break;
        if (!g) {
            if (!(g = c10ds_verify_group(e, m->job, m->generation, en->group))) {
                no_group(e, r, m->job, m->generation, en->group);
                return -1;
            }
            if ((idx = m->rank >= 0 && m->rank < g->world ? g->index_of[m->rank] : -1) < 0) {
                c10ds_fail(r, C10D_EINVAL, "rank %d is not a member of group %s", m->rank,
                           en->group);
                return -1;
            }
            known = 0;
        }
        if (en->join_known > known)
            known = en->join_known;
        enter_entry(e, g, idx, en);
    }
    return 0;
}

/* A report's entries are applied at once. A sync report is answered when
 * every member has entered its last entry's seq alike (earlier entries are
 * this rank's queued ASYNC ones, sent first so the order holds). */
static c10ds_outcome op_coll_report(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__CollReport *m = r->pb->coll_report;
    if (m->n_entries == 0) {
        C10dpb__Reply rep = C10DPB__REPLY__INIT;
        return c10ds_reply(r, &rep);
    }
    C10dpb__CollEntry *last = m->entries[m->n_entries - 1];
    if (ph == C10DS_FIRST) {
        if (c10ds_check_member_caller(e, r, m->job, m->generation, m->rank) != 0 ||
            apply_entries(e, r) != 0)
            return C10DS_DONE;
        if (!m->sync) {
            C10dpb__Reply rep = C10DPB__REPLY__INIT;
            return c10ds_reply(r, &rep);
        }
    }
    c10ds_vgroup *g = c10ds_verify_group(e, m->job, m->generation, last->group);
    if (!g)
        return no_group(e, r, m->job, m->generation, last->group);
    int idx = g->index_of[m->rank];
    if (!g->status && g->min_entered >= last->seq) { /* every member entered it, alike */
        C10dpb__Reply rep = C10DPB__REPLY__INIT;
        return c10ds_reply(r, &rep);
    }
    if (!g->status)
        c10ds_verify_waiter_lost(e, g, last->seq, idx);
    if (!g->status && ph == C10DS_EXPIRED)
        c10ds_verify_stall(e, g, last->seq);
    if (g->status)
        return c10ds_fail(r, (c10d_status)g->status, "%s", g->report);
    char key[512];
    c10ds_verify_coll_key(key, sizeof key, g);
    return c10ds_park(e, r, ph, key,
                      c10ds_wire_ms(last->has_timeout_ms, last->timeout_ms,
                                    C10D_COLL_TIMEOUT_DEFAULT_MS));
}

/* --- what verification hears (events.h) --- */

static void on_membership_changed(c10ds_engine *e, const char *job, uint64_t gen)
{
    for (c10ds_vgroup *g = e->verify.groups; g; g = g->next)
        if (g->gen == gen && strcmp(g->job, job) == 0)
            c10ds_verify_wake(e, g);
}

/* Findings reach ASYNC ranks as alerts on their watch. */
static void on_watch_reply(c10ds_engine *e, const char *job, uint64_t gen, C10dpb__WatchReply *w)
{
    size_t cap = 0;
    for (c10ds_vgroup *g = e->verify.groups; g; g = g->next) {
        if (!g->status || g->gen != gen || strcmp(g->job, job) != 0)
            continue;
        if (w->n_alerts == cap) {
            cap = cap ? cap * 2 : 4;
            C10dpb__GroupAlert **nv = realloc(w->alerts, cap * sizeof *nv);
            if (!nv)
                return;
            w->alerts = nv;
        }
        C10dpb__GroupAlert *a = calloc(1, sizeof *a);
        if (!a)
            return;
        c10dpb__group_alert__init(a);
        a->group = g->name;
        a->status = g->status;
        a->report = g->report;
        w->alerts[w->n_alerts++] = a;
    }
}

static void on_watch_done(C10dpb__WatchReply *w)
{
    for (size_t i = 0; i < w->n_alerts; i++)
        free(w->alerts[i]);
    free(w->alerts);
    w->alerts = NULL;
    w->n_alerts = 0;
}

/* A watch says what its rank completed, and which checks it was told had
 * passed. The second matters after a restart: this coordinator starts
 * with no verification state, and a rank its predecessor let into #N is
 * in the data plane, never to report #N again, while the others send
 * their #N check here. Having passed, #N was entered alike by every
 * member: everyone is moved on to it, releasing their checks. */
static void on_watch_request(c10ds_engine *e, const C10dpb__Watch *m)
{
    for (size_t i = 0; i < m->n_completed; i++) {
        const char *name = m->completed[i]->group;
        uint64_t seq = m->completed[i]->seq;
        if (!seq || !name)
            continue;
        /* made here too, so a restarted coordinator knows where a rank is
         * before it reports anything */
        c10ds_vgroup *g = c10ds_verify_group(e, m->job, m->generation, name);
        if (g && m->rank >= 0 && m->rank < g->world && g->index_of[m->rank] >= 0 &&
            seq > g->completed[g->index_of[m->rank]])
            g->completed[g->index_of[m->rank]] = seq;
    }
    for (size_t k = 0; k < m->n_verified; k++) {
        const char *name = m->verified[k]->group;
        uint64_t seq = m->verified[k]->seq;
        if (!name)
            continue;
        c10ds_vgroup *g = c10ds_verify_group(e, m->job, m->generation, name);
        if (!g || g->status || seq <= g->min_entered || m->rank < 0 || m->rank >= g->world ||
            g->index_of[m->rank] < 0)
            continue;
        for (int i = 0; i < g->size; i++)
            c10ds_verify_skip_to(e, g, i, seq);
    }
}

/* ASYNC has nobody parked to time out: look for seqs pending too long,
 * on the heard clock (sink_of): the coordinator's own stalls count against
 * no rank (whose report may have waited for one of its replies). */
static void on_sweep(c10ds_engine *e)
{
    c10ds_traces_flush(e);
    int64_t now = c10ds_engine_heard_ms(e);
    for (c10ds_vgroup *g = e->verify.groups; g; g = g->next) {
        if (g->status || !g->timeout_ms) /* no collective entered yet */
            continue;
        /* the oldest collective not every member has entered, pending
         * since it was first reported or since the slowest rank last moved */
        if (!g->run_count)
            continue;
        int64_t since = g->runs[g->run_head].first_ms;
        if (g->min_since_ms > since)
            since = g->min_since_ms;
        if (now - since > g->timeout_ms)
            c10ds_verify_stall(e, g, g->min_entered + 1);
    }
}

/* The job restarted: its older generations' groups are never verified
 * again (their members are gone), and each holds its ranks' traces. */
static void on_generation_started(c10ds_engine *e, const char *job, uint64_t gen)
{
    for (c10ds_vgroup **pp = &e->verify.groups; *pp;) {
        c10ds_vgroup *g = *pp;
        if (g->gen < gen && strcmp(g->job, job) == 0) {
            *pp = g->next;
            c10ds_traces_flush_group(e, g); /* c10d-ctl trace still shows its last collectives */
            c10ds_vgroup_free(g);
        } else {
            pp = &g->next;
        }
    }
}

/* The run is over: its groups' state goes, after what c10d-ctl desync
 * and trace show of it is in the database (verify_history.h). Parked SYNC
 * reports of its groups (a rank declared dead while its connection
 * stays) are woken, to fail: nothing will make their collective. */
static void on_run_ended(c10ds_engine *e, const char *job, uint64_t gen)
{
    for (c10ds_vgroup **pp = &e->verify.groups; *pp;) {
        c10ds_vgroup *g = *pp;
        if (g->gen == gen && strcmp(g->job, job) == 0) {
            *pp = g->next;
            c10ds_verify_wake(e, g);
            c10ds_traces_flush_group(e, g);
            c10ds_verify_history_write(e, g);
            c10ds_vgroup_free(g);
        } else {
            pp = &g->next;
        }
    }
}

/* The run's records are being deleted: its groups' state goes unwritten
 * (a trace flushed now would put rows back), so that the job, should it
 * come back as generation 1, starts with nothing of this run's. */
static void on_run_reclaimed(c10ds_engine *e, const char *job, uint64_t gen)
{
    for (c10ds_vgroup **pp = &e->verify.groups; *pp;) {
        c10ds_vgroup *g = *pp;
        if (g->gen == gen && strcmp(g->job, job) == 0) {
            *pp = g->next;
            c10ds_vgroup_free(g);
        } else {
            pp = &g->next;
        }
    }
}

const c10ds_event_listener c10ds_verify_listener = {
    .name = "verify",
    .generation_started = on_generation_started,
    .run_ended = on_run_ended,
    .run_reclaimed = on_run_reclaimed,
    .membership_changed = on_membership_changed,
    .watch_request = on_watch_request,
    .watch_reply = on_watch_reply,
    .watch_done = on_watch_done,
    .sweep = on_sweep,
};

const c10ds_op c10ds_verify_ops[] = {
    {C10DPB__REQUEST__OP_COLL_REPORT, "coll_report", op_coll_report, 0},
    {0, NULL, NULL, 0},
};
