/* Liveness on the wire: a member leaving (group_leave), the watch that
 * doubles as its heartbeat, and what makes a member dead: the connection
 * it arrived on closing (the listener reports it, c10ds_groups_pipe_closed)
 * or no watch for --heartbeat-timeout (c10ds_groups_sweep). Either way the
 * job's version is bumped and the watch key touched, so every other rank's
 * parked watch answers at once with who was lost (docs/liveness.md). */
#include "groups/liveness_ops.h"

#include "config.h"
#include "engine/engine.h"
#include "engine/events.h"
#include "groups/groups.h"
#include "engine/ops.h"
#include "engine/request.h"
#include "engine/stalls.h"
#include "engine/waiters.h"

#include "log.h"

#include <c10d/errors.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A member changed state: wake watchers and every group still forming in
 * that generation (its parked joins must learn a member is gone). */
void c10ds_groups_bump(c10ds_engine *e, const char *job, uint64_t gen)
{
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_JOB_BUMP);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    sqlite3_step(s);
    sqlite3_reset(s);
    char key[512];
    c10ds_watch_key(key, sizeof key, job, gen);
    c10ds_waiters_touch(e->waiters, key);
}

static void membership_changed(c10ds_engine *e, const char *job, uint64_t gen)
{
    char key[512];
    c10ds_watch_key(key, sizeof key, job, gen);
    c10ds_waiters_touch(e->waiters, key);
    c10ds_emit_membership_changed(e, job, gen);
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_GROUPS_OF_GEN);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (sqlite3_column_int(s, 3))
            continue; /* formed: nobody parked */
        c10ds_group_key(key, sizeof key, job, gen, (const char *)sqlite3_column_text(s, 0));
        c10ds_waiters_touch(e->waiters, key);
    }
    sqlite3_reset(s);
}

void c10ds_member_mark(c10ds_engine *e, const char *job, uint64_t gen, int rank,
                       C10dpb__MemberState state, const char *reason,
                       C10dpb__GroupSeq *const *finals, size_t n_finals)
{
    if (!c10ds_groups_set_state(&e->groups, job, gen, rank, state, reason, finals, n_finals))
        return;
    c10ds_info("job %s generation %llu: rank %d %s (%s)", job, (unsigned long long)gen, rank,
               c10ds_state_word(state), reason);
    membership_changed(e, job, gen);
}

C10dpb__MemberInfo **c10ds_groups_lost(c10ds_engine *e, const char *job, uint64_t gen, size_t *n)
{
    return c10ds_members_load(&e->groups, job, gen, 1, n);
}

int c10ds_check_member_caller(c10ds_engine *e, c10ds_request *r, const char *job, uint64_t gen,
                              int rank)
{
    c10ds_member mem;
    uint64_t client = r->pb->who ? r->pb->who->client_id : 0;
    if (c10ds_groups_member(&e->groups, job, gen, rank, &mem) != 1 || mem.client_id == client)
        return 0;
    c10ds_warn("refused a request for rank %d of job %s from client #%08x: the rank was "
               "joined by client #%08x (host %s pid %d)", rank, job, c10ds_client_tag(client),
               c10ds_client_tag(mem.client_id), mem.host, mem.pid);
    c10ds_fail(r, C10D_EAUTH, "rank %d of job %s generation %llu was joined by another client "
               "(host %s pid %d); only that client may speak for it", rank, job,
               (unsigned long long)gen, mem.host, mem.pid);
    return -1;
}

/* --- leave, watch --- */

static c10ds_outcome op_group_leave(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__GroupLeave *m = r->pb->group_leave;
    if (c10ds_check_member_caller(e, r, m->job, m->generation, m->rank) != 0)
        return C10DS_DONE;
    if (m->activity)
        c10ds_groups_seen(&e->groups, m->job, m->generation, m->rank, r->pipe, m->activity);
    if (m->n_completed) {
        /* Its last completions, as a last heartbeat would have said them,
         * before the leave can end the run (and its progress is written
         * for c10d-ctl desync: verify_history.h). */
        C10dpb__Watch w = C10DPB__WATCH__INIT;
        w.job = m->job;
        w.generation = m->generation;
        w.rank = m->rank;
        w.n_completed = m->n_completed;
        w.completed = m->completed;
        c10ds_emit_watch_request(e, &w);
    }
    c10ds_member_mark(e, m->job, m->generation, m->rank, C10DPB__MEMBER_STATE__MEMBER_LEFT,
                      "called c10d_destroy", m->finals, m->n_finals);
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    return c10ds_reply(r, &rep);
}

static int died_before(const C10dpb__MemberInfo *a, const C10dpb__MemberInfo *b)
{
    return a->changed_ms < b->changed_ms || (a->changed_ms == b->changed_ms && a->rank < b->rank);
}

static int same_str(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* The cache's compact form, made once per version: every member that
 * left (a peer needs its final collectives), the first C10DS_LOST_DETAIL
 * that died in full, and the others that died as runs of consecutive
 * ranks with one state and reason. 0, or -1 out of memory. */
static void compact_clear(c10ds_lost_cache *lc)
{
    free(lc->detail);
    for (size_t i = 0; i < lc->n_ranges; i++) {
        free(lc->ranges[i]->reason);
        free(lc->ranges[i]);
    }
    free(lc->ranges);
    lc->detail = NULL, lc->ranges = NULL;
    lc->n_detail = lc->n_ranges = 0;
}

static int lost_compact(c10ds_lost_cache *lc)
{
    if (lc->compact)
        return 0;
    compact_clear(lc); /* what a failed attempt left */
    size_t n = lc->n;
    lc->detail = calloc(n ? n : 1, sizeof *lc->detail);
    lc->ranges = calloc(n ? n : 1, sizeof *lc->ranges);
    char *in_detail = calloc(n ? n : 1, 1);
    if (!lc->detail || !lc->ranges || !in_detail) {
        free(in_detail);
        compact_clear(lc);
        return -1;
    }
    /* The earliest deaths, by an insertion into a short sorted list. */
    size_t first[C10DS_LOST_DETAIL], nf = 0;
    for (size_t i = 0; i < n; i++) {
        if (lc->v[i]->state != C10DPB__MEMBER_STATE__MEMBER_DEAD)
            continue;
        size_t j = nf < C10DS_LOST_DETAIL ? nf++ : C10DS_LOST_DETAIL;
        if (j == C10DS_LOST_DETAIL && !died_before(lc->v[i], lc->v[first[j - 1]]))
            continue;
        if (j == C10DS_LOST_DETAIL)
            j--;
        for (; j > 0 && died_before(lc->v[i], lc->v[first[j - 1]]); j--)
            first[j] = first[j - 1];
        first[j] = i;
    }
    for (size_t k = 0; k < nf; k++)
        in_detail[first[k]] = 1;
    for (size_t i = 0; i < n; i++) { /* v is in rank order */
        C10dpb__MemberInfo *m = lc->v[i];
        if (m->state != C10DPB__MEMBER_STATE__MEMBER_DEAD || in_detail[i]) {
            lc->detail[lc->n_detail++] = m;
            continue;
        }
        C10dpb__LostRange *last = lc->n_ranges ? lc->ranges[lc->n_ranges - 1] : NULL;
        if (last && last->last + 1 == m->rank && last->state == m->state &&
            same_str(last->reason, m->reason)) {
            last->last = m->rank;
            continue;
        }
        C10dpb__LostRange *x = malloc(sizeof *x);
        if (!x) {
            free(in_detail);
            compact_clear(lc);
            return -1;
        }
        c10dpb__lost_range__init(x);
        x->first = x->last = m->rank;
        x->has_state = 1;
        x->state = m->state;
        x->reason = strdup(m->reason ? m->reason : "");
        x->has_changed_ms = 1;
        x->changed_ms = m->changed_ms;
        lc->ranges[lc->n_ranges++] = x;
        if (!x->reason) {
            free(in_detail);
            compact_clear(lc);
            return -1;
        }
    }
    free(in_detail);
    lc->compact = 1;
    return 0;
}

static c10ds_outcome reply_watch(c10ds_engine *e, c10ds_request *r, uint64_t version)
{
    C10dpb__Watch *m = r->pb->watch;
    C10dpb__WatchReply w = C10DPB__WATCH_REPLY__INIT;
    w.has_version = 1;
    w.version = version;
    /* Every watcher woken by one change gets the same list: read it once
     * per membership version, not once per watcher (a host's death wakes
     * N watches). */
    c10ds_lost_cache *lc = &e->lost_cache;
    char key[512];
    c10ds_watch_key(key, sizeof key, m->job, m->generation);
    if (!lc->valid || lc->version != version || strcmp(lc->key, key) != 0) {
        c10ds_lost_cache_clear(lc);
        lc->v = c10ds_members_load(&e->groups, m->job, m->generation, 1, &lc->n);
        lc->version = version;
        lc->valid = 1;
        snprintf(lc->key, sizeof lc->key, "%s", key);
    }
    if (m->has_lost_ranges_ok && m->lost_ranges_ok && lost_compact(lc) == 0) {
        w.lost = lc->detail;
        w.n_lost = lc->n_detail;
        w.lost_ranges = lc->ranges;
        w.n_lost_ranges = lc->n_ranges;
    } else {
        w.lost = lc->v;
        w.n_lost = lc->n;
    }
    c10ds_emit_watch_reply(e, m->job, m->generation, &w); /* findings, joins */
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_WATCH;
    rep.watch = &w;
    c10ds_outcome o = c10ds_reply(r, &rep);
    c10ds_emit_watch_done(e, &w);
    return o;
}

static c10ds_outcome op_watch(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__Watch *m = r->pb->watch;
    c10ds_job job;
    if (c10ds_groups_job(&e->groups, m->job, &job) != 1)
        return c10ds_fail(r, C10D_ENOTFOUND, "no job %s on this coordinator", m->job);
    if (ph == C10DS_FIRST) {
        c10ds_member mem;
        if (c10ds_groups_member(&e->groups, m->job, m->generation, m->rank, &mem) != 1)
            return c10ds_fail(r, C10D_ENOTFOUND, "rank %d is not a member of job %s generation "
                              "%llu", m->rank, m->job, (unsigned long long)m->generation);
        if (c10ds_check_member_caller(e, r, m->job, m->generation, m->rank) != 0)
            return C10DS_DONE;
        c10ds_groups_seen(&e->groups, m->job, m->generation, m->rank, r->pipe, m->activity);
        c10ds_emit_watch_request(e, m); /* progress, join acknowledgements */
        c10d_ms wait = c10ds_wire_ms(m->has_wait_ms, m->wait_ms, C10D_MS_NO_WAIT);
        if (job.version <= m->known_version && wait != C10D_MS_NO_WAIT) {
            char key[512];
            c10ds_watch_key(key, sizeof key, m->job, m->generation);
            return c10ds_park(e, r, ph, key,
                              wait < C10DS_WATCH_PARK_MAX_MS ? wait : C10DS_WATCH_PARK_MAX_MS);
        }
    }
    return reply_watch(e, r, job.version);
}

/* --- liveness events --- */

typedef struct {
    char job[256];
    uint64_t gen;
    int rank;
    int64_t seen;
} member_ref;

/* Collects (job, generation, rank[, last_seen]) rows first: marking a
 * member writes to the table the statement is reading. */
static member_ref *collect(sqlite3_stmt *s, size_t *n)
{
    member_ref *v = NULL;
    size_t cap = 0;
    *n = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 4;
            member_ref *nv = realloc(v, cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
        }
        member_ref *m = &v[(*n)++];
        snprintf(m->job, sizeof m->job, "%s", (const char *)sqlite3_column_text(s, 0));
        m->gen = (uint64_t)sqlite3_column_int64(s, 1);
        m->rank = sqlite3_column_int(s, 2);
        m->seen = sqlite3_column_count(s) > 3 ? sqlite3_column_int64(s, 3) : 0;
    }
    sqlite3_reset(s);
    return v;
}

void c10ds_groups_pipe_closed(c10ds_engine *e, uint32_t pipe)
{
    size_t n;
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_MEMBERS_BY_PIPE);
    sqlite3_bind_int64(s, 1, pipe);
    member_ref *v = collect(s, &n);
    for (size_t i = 0; i < n; i++)
        c10ds_member_mark(
            e, v[i].job, v[i].gen, v[i].rank, C10DPB__MEMBER_STATE__MEMBER_DEAD,
            "its connection to the coordinator closed: the process exited or was killed", NULL, 0);
    free(v);
}

void c10ds_groups_sweep(c10ds_engine *e, int64_t now_ms)
{
    int timeout = e->cfg->heartbeat_timeout_ms;
    size_t n;
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_MEMBERS_STALE);
    sqlite3_bind_int64(s, 1, now_ms - timeout);
    member_ref *v = collect(s, &n);
    for (size_t i = 0; i < n; i++) {
        /* Silent only while the engine could have heard it: a stall of
         * the coordinator's own (stalls.h) counts against nobody. */
        int64_t stalled = c10ds_stalls_within(&e->stalls, v[i].seen, now_ms);
        int64_t silent = now_ms - v[i].seen - stalled;
        if (silent <= timeout)
            continue;
        char why[192];
        int k = snprintf(why, sizeof why, "no heartbeat for %lld ms (--heartbeat-timeout %d ms)",
                         (long long)silent, timeout);
        if (stalled && k > 0 && (size_t)k < sizeof why)
            snprintf(why + k, sizeof why - (size_t)k, ", not counting %lld ms in which the "
                     "coordinator itself was stalled", (long long)stalled);
        c10ds_member_mark(e, v[i].job, v[i].gen, v[i].rank, C10DPB__MEMBER_STATE__MEMBER_DEAD, why,
                          NULL, 0);
    }
    free(v);
}

const c10ds_op c10ds_liveness_ops[] = {
    {C10DPB__REQUEST__OP_GROUP_LEAVE, "group_leave", op_group_leave, 0},
    {C10DPB__REQUEST__OP_WATCH, "watch", op_watch, C10DS_OP_PERIOD},
    {0, NULL, NULL, 0},
};
