/* Join, a joined rank's side (docs/join.md): c10d_join_end runs the
 * others' collectives as shadows until the region ends, learning what to
 * shadow from its peers' transfer headers (in-band, on the host data
 * plane) or from the coordinator (join_shadow, for NCCL groups). The
 * active ranks' side (join_begin, the checks, what the watcher learns) is
 * join.c. */
#include "backend/backends.h"
#include "join/join_internal.h"
#include "join/join_region.h"
#include "coll/lane.h"
#include "group/liveness.h"
#include "coll/monitored_barrier.h"
#include "coll/plan.h"
#include "coll/verify.h"

#include "budgets.h"
#include "c10d_time.h"
#include "join_words.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void leave_region(c10d_pg *pg)
{
    c10di_join *j = &pg->join;
    atomic_store_explicit(&j->in_region, 0, memory_order_release);
    pthread_mutex_lock(&pg->w->mu);
    j->ended = j->region;
    /* The watcher may have applied the next region's joins already (a
     * rank that joined it at once): those stay. */
    if (j->state_region <= j->region) {
        atomic_store(&j->version, 0);
        for (int i = 0; i < pg->size; i++)
            j->after[i] = NOT_JOINED;
        c10di_joins_changed(j);
    }
    atomic_store(&j->heard, 0);
    for (int i = 0; i < pg->size; i++)
        j->told[i] = 0;
    pthread_mutex_unlock(&pg->w->mu);
}

/* "#7 ALL_REDUCE float32[4] SUM (shadowed: this rank joined)". A joined
 * rank reacts to a peer's header and the peer waits meanwhile, so a
 * repeated call reuses the text of its description. */
static void describe_shadow(c10d_pg *pg, c10di_coll *c)
{
    c10di_join *j = &pg->join;
    if (!j->fp_text[0] || memcmp(&j->fp_last, &c->fp, sizeof c->fp) != 0) {
        c10dc_fp_format(&c->fp, j->fp_text, sizeof j->fp_text);
        j->fp_last = c->fp;
    }
    char num[24];
    size_t n = 0;
    uint64_t v = c->seq;
    do
        num[sizeof num - 1 - n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < sizeof num - 1);
    static const char tail[] = " (shadowed: this rank joined)";
    size_t tl = strlen(j->fp_text), at = 0, cap = sizeof c->what;
    c->what[at++] = '#';
    memcpy(c->what + at, num + sizeof num - n, n);
    at += n;
    c->what[at++] = ' ';
    if (at + tl + sizeof tail <= cap) {
        memcpy(c->what + at, j->fp_text, tl);
        memcpy(c->what + at + tl, tail, sizeof tail);
    } else {
        c->what[at] = '\0';
    }
}

/* Collective seq, as the others called it (fp), with this rank's
 * identities; an AVG divides by divisor (0: the group's size). alone_from:
 * the last active rank, which ran it by itself and sent its header alone
 * (-1: the group runs it as usual). */
static c10d_status shadow(c10d_pg *pg, uint64_t seq, const c10dc_fp *fp, int divisor,
                          int alone_from)
{
    c10di_coll c;
    memset(&c, 0, sizeof c);
    c.kind = (c10dc_kind)fp->kind;
    c.dtype = (c10d_dtype)fp->dtype;
    c.op = (c10d_reduce_op)fp->op;
    c.root = fp->root;
    c.seq = seq;
    c.fp = *fp;
    c.fp.spare = 0;
    c.shadow = 1;
    c.divisor = divisor;
    c.alone = alone_from >= 0;
    c.alone_from = alone_from;
    c.timeout_ms = pg->timeout_ms;
    c.deadline_ms = c10d_now_ms() + c.timeout_ms;
    describe_shadow(pg, &c);
    int data = c.kind != C10DC_BARRIER && c.kind != C10DC_MONITORED_BARRIER;
    if (fp->kind >= C10DC_KIND_COUNT || fp->count < 0 ||
        (data && c10d_dtype_size(c.dtype) == 0))
        return c10di_error(C10D_EPROTO, "join_end of group %s: asked to shadow %s, which this "
                           "library does not know", pg->name, c.what);
    c.count = (size_t)fp->count;
    c10d_status st;
    pg->seq = seq; /* the group's numbering goes on as if this rank had called it */
    if (c.kind == C10DC_MONITORED_BARRIER) {
        st = c10di_monitored_barrier_meet(pg, &c, 1);
        if (st == C10D_OK)
            c10di_pg_completed(pg, seq);
    } else {
        st = c10di_route(pg, &c, fp->device == C10DC_DEV_CUDA ? C10DI_ANY_CUDA : C10D_CPU,
                         "join_end");
        if (st == C10D_OK && c.be->prepare)
            st = c.be->prepare(c.be_state, &c);
        if (st == C10D_OK)
            st = c10di_execute(pg, &c);
        if (c.be && c.be->forget)
            c.be->forget(&c);
    }
    return st;
}

/* This rank could not shadow collective seq: the coordinator makes it the
 * group's finding, so the others fail at once instead of waiting for it.
 * Best effort: the original error stands either way. */
static void report_failure(c10d_pg *pg, uint64_t seq, c10d_status st)
{
    c10di_world *w = pg->w;
    char why[1024];
    snprintf(why, sizeof why, "%s", c10d_errmsg());
    C10dpb__JoinShadow m = C10DPB__JOIN_SHADOW__INIT;
    m.job = w->job;
    m.generation = w->generation;
    m.group = pg->name;
    m.rank = w->rank;
    m.region = pg->join.region;
    m.next_seq = seq;
    m.has_failed = 1;
    m.failed = st;
    m.failure = why;
    m.has_timeout_ms = 1;
    m.timeout_ms = 1; /* not to wait for anything */
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_JOIN_SHADOW;
    req.join_shadow = &m;
    (void)c10di_call_drop(w->conn, &req, 1, C10DI_FAREWELL_BUDGET_MS);
    c10di_error(st, "%s", why);
}

static void shadow_request(c10d_pg *pg, C10dpb__JoinShadow *m, uint64_t next, int first)
{
    c10di_join *j = &pg->join;
    c10dpb__join_shadow__init(m);
    m->job = pg->w->job;
    m->generation = pg->w->generation;
    m->group = pg->name;
    m->rank = pg->w->rank;
    m->region = j->region;
    m->next_seq = next;
    m->has_first = m->has_timeout_ms = 1;
    m->first = first;
    m->timeout_ms = pg->timeout_ms;
    m->has_throw_on_early_termination = m->has_divide_by_initial_world_size = 1;
    m->throw_on_early_termination = j->opts.throw_on_early_termination != 0;
    m->divide_by_initial_world_size = j->opts.divide_by_initial_world_size != 0;
}

/* The coordinator tells this rank, one reply at a time, what the others
 * called (join_shadow, parked until something is released). */
static c10d_status shadow_by_coordinator(c10d_pg *pg, int *last_joiner)
{
    c10di_world *w = pg->w;
    c10di_join *j = &pg->join;
    c10d_status st = C10D_OK;
    uint64_t next = pg->seq + 1;
    for (int first = 1;; first = 0) {
        C10dpb__JoinShadow m;
        shadow_request(pg, &m, next, first);
        C10dpb__Request req = C10DPB__REQUEST__INIT;
        req.op_case = C10DPB__REQUEST__OP_JOIN_SHADOW;
        req.join_shadow = &m;
        C10dpb__Reply *rep = NULL;
        if ((st = c10di_call(w->conn, &req, pg->timeout_ms + C10DI_COORD_ANSWERS_FIRST_MS,
                              C10DI_CONTROL_CALL_BUDGET_MS, &rep)) != C10D_OK) {
            char report[1024];
            snprintf(report, sizeof report, "%s", c10d_errmsg());
            if (st == C10D_EJOINED || st == C10D_EDESYNC || st == C10D_EPEERLOST ||
                st == C10D_ETIMEDOUT || st == C10D_EABORTED)
                c10di_record_alert(w, pg->name, st, report);
            st = c10di_error(st, "join_end of group %s (rank %d, joined after #%llu): %s",
                             pg->name, pg->rank, (unsigned long long)(next - 1), report);
            break;
        }
        const C10dpb__JoinShadowReply *r =
            rep->result_case == C10DPB__REPLY__RESULT_JOIN_SHADOW ? rep->join_shadow : NULL;
        if (!r)
            st = c10di_error(C10D_EPROTO, "join_end of group %s: the coordinator answered "
                             "with something else", pg->name);
        for (size_t i = 0; r && st == C10D_OK && i < r->n_runs; i++) {
            const C10dpb__ShadowRun *x = r->runs[i];
            if (x->first_seq != next || x->last_seq < x->first_seq)
                st = c10di_error(C10D_EPROTO, "join_end of group %s: asked for #%llu, told to "
                                 "shadow #%llu..#%llu", pg->name, (unsigned long long)next,
                                 (unsigned long long)x->first_seq,
                                 (unsigned long long)x->last_seq);
            const C10dpb__CollEntry *call = x->call;
            c10dc_fp fp = {call->kind, call->dtype, call->count, call->root, call->op,
                           call->device, 0};
            int divisor = j->opts.divide_by_initial_world_size ? 0 : x->active;
            for (uint64_t s = next; st == C10D_OK && s <= x->last_seq; s++, next++)
                st = shadow(pg, s, &fp, divisor, -1);
            j->active_last = x->active;
        }
        int done = st == C10D_OK && r && r->done;
        if (done && last_joiner)
            *last_joiner = r->last_joiner;
        c10dpb__reply__free_unpacked(rep, NULL);
        if (st != C10D_OK)
            report_failure(pg, next, st);
        if (done || st != C10D_OK)
            break;
    }
    return st;
}

/* In-band: tells the coordinator that this rank shadows from next on
 * (first: it joined), or that it failed to (failed, failure); the answer
 * comes at once: *done and *last once the region is over and this rank
 * has shadowed all of it. */
static c10d_status ask_inband(c10d_pg *pg, uint64_t next, int first, c10d_status failed,
                              const char *failure, int *done, int *last)
{
    c10di_world *w = pg->w;
    C10dpb__JoinShadow m;
    shadow_request(pg, &m, next, first);
    m.has_inband = m.inband = 1;
    if (failed != C10D_OK) {
        m.has_failed = 1;
        m.failed = failed;
        m.failure = (char *)failure;
    }
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_JOIN_SHADOW;
    req.join_shadow = &m;
    C10dpb__Reply *rep = NULL;
    c10d_status st = c10di_call(w->conn, &req, 0, C10DI_CONTROL_CALL_BUDGET_MS, &rep);
    if (st != C10D_OK) {
        char report[1024];
        snprintf(report, sizeof report, "%s", c10d_errmsg());
        if (st == C10D_EJOINED || st == C10D_EDESYNC || st == C10D_EPEERLOST ||
            st == C10D_ETIMEDOUT || st == C10D_EABORTED)
            c10di_record_alert(w, pg->name, st, report);
        return c10di_error(st, "join_end of group %s (rank %d, joined after #%llu): %s",
                           pg->name, pg->rank, (unsigned long long)(pg->join.shadow_after1 - 1),
                           report);
    }
    const C10dpb__JoinShadowReply *r =
        rep->result_case == C10DPB__REPLY__RESULT_JOIN_SHADOW ? rep->join_shadow : NULL;
    if (!r)
        st = c10di_error(C10D_EPROTO, "join_end of group %s: the coordinator answered with "
                         "something else", pg->name);
    else if (r->done) {
        *done = 1;
        *last = r->last_joiner;
    }
    c10dpb__reply__free_unpacked(rep, NULL);
    return st;
}

/* Collective seq, as peer `from` began it: shadowed, unless a joined rank
 * cannot take part in it; then every rank must fail rather than wait. */
static c10d_status shadow_peeked(c10d_pg *pg, uint64_t seq, const c10di_peeked *pk)
{
    const c10dc_fp *fp = &pk->fp;
    int from = pk->from, alone_from = pk->alone ? pk->from : -1;
    if (!c10dc_join_unshadowable(fp, 1)) /* an all_reduce, a barrier: whoever joined */
        return shadow(pg, seq, fp, pk->divisor, alone_from);
    char report[1024];
    pthread_mutex_lock(&pg->w->mu);
    int bad = c10di_join_unshadowable_report(pg, seq, fp, from, report, sizeof report);
    pthread_mutex_unlock(&pg->w->mu);
    if (!bad)
        return shadow(pg, seq, fp, pk->divisor, alone_from);
    int done = 0, last;
    /* The coordinator makes it the group's finding: the others hear of it
     * on their watch, whatever they are waiting in. */
    ask_inband(pg, seq, 0, C10D_EJOINED, report, &done, &last);
    c10di_record_alert(pg->w, pg->name, C10D_EJOINED, report);
    return c10di_error(C10D_EJOINED, "join_end of group %s (rank %d): %s", pg->name, pg->rank,
                       report);
}

/* A failure while waiting to shadow next: the last joiner may be gone
 * already, the region over before this rank's watch said so. The
 * coordinator knows; the failure's message stands otherwise. */
static int over_after_all(c10d_pg *pg, uint64_t next, int *done, int *last)
{
    char why[1024];
    snprintf(why, sizeof why, "%s", c10d_errmsg());
    if (ask_inband(pg, next, 0, C10D_OK, NULL, done, last) == C10D_OK && *done)
        return 1;
    c10di_error(C10D_ERROR, "%s", why); /* the message of the failure, kept */
    return 0;
}

/* In-band (docs/join.md): the next collective to shadow is read from the
 * header a peer's transfer of it starts with, on the data plane itself, so
 * a shadowed step costs what a normal one does and the others keep their
 * verification mode. The coordinator records the join, and its watch says
 * when the region is over. Waiting spins, yields, then sleeps, as the
 * data plane does, and looks for a finding or a lost member meanwhile. */
static c10d_status shadow_inband(c10d_pg *pg, int *last_joiner)
{
    c10di_join *j = &pg->join;
    uint64_t next = pg->seq + 1;
    int done = 0, last = -1;
    c10d_status st = ask_inband(pg, next, 1, C10D_OK, NULL, &done, &last);
    c10di_coll probe;
    memset(&probe, 0, sizeof probe);
    probe.deadline_ms = INT64_MAX;
    int64_t since = c10d_now_ms(), asked_done = 0;
    unsigned idle = 0;
    int over = 0;
    uint64_t asked_epoch = c10di_conn_epoch(pg->w->conn);
    while (st == C10D_OK && !done) {
        if (atomic_load_explicit(&j->done_region, memory_order_acquire) == j->region &&
            next > j->done_final && c10d_now_ms() - asked_done > 100) {
            asked_done = c10d_now_ms(); /* over, and all of it shadowed */
            st = ask_inband(pg, next, 0, C10D_OK, NULL, &done, &last);
            continue;
        }
        int found = 0;
        c10di_peeked pk;
        const c10di_be_slot *cpu = &pg->be[C10DI_DEV_CPU]; /* in-band: the host links */
        if (!over && (st = cpu->ops->peek(cpu->state, next, &found, &pk)) != C10D_OK) {
            /* A peer gone: perhaps the last joiner, the region over. */
            if (st == C10D_EPEERLOST && over_after_all(pg, next, &done, &last))
                st = C10D_OK;
            break;
        }
        /* A peer out of this region (the last joiner, already on to what
         * follows it): the region is over, its end on the way. */
        if (found && pk.region != j->region)
            over = 1;
        else if (found) {
            if ((st = shadow_peeked(pg, next, &pk)) != C10D_OK)
                break;
            next++;
            idle = 0;
            continue;
        }
        if (!idle)
            since = c10d_now_ms(); /* not on every step: the peer waits for this one */
        if (!c10di_idle_wait(idle++))
            continue;
        probe.seq = next;
        snprintf(probe.what, sizeof probe.what, "join_end (waiting to shadow #%llu)",
                 (unsigned long long)next);
        if ((st = c10di_pg_check(pg, &probe, -1)) != C10D_OK) {
            if (over_after_all(pg, next, &done, &last))
                st = C10D_OK;
            break;
        }
        uint64_t epoch = c10di_conn_epoch(pg->w->conn);
        if (epoch != asked_epoch) {
            /* A new connection, perhaps a restarted coordinator: it learns
             * of this join again (from its database) and that this rank
             * shadows in-band. */
            asked_epoch = epoch;
            if ((st = ask_inband(pg, next, 0, C10D_OK, NULL, &done, &last)) != C10D_OK)
                break;
        }
        if (c10d_now_ms() - since > pg->timeout_ms) {
            char why[256];
            snprintf(why, sizeof why, "waited %d ms to shadow #%llu", pg->timeout_ms,
                     (unsigned long long)next);
            st = ask_inband(pg, next, 0, C10D_ETIMEDOUT, why, &done, &last);
            if (st == C10D_OK) /* the coordinator is out of reach: say it here */
                st = c10di_error(C10D_ETIMEDOUT, "join_end of group %s (rank %d): %s, and no "
                                 "other rank began it", pg->name, pg->rank, why);
        }
    }
    if (st != C10D_OK && st != C10D_EJOINED && st != C10D_ETIMEDOUT && st != C10D_EPEERLOST) {
        /* The others may wait for this rank's part: the coordinator tells
         * them (a lost member it tells them of itself, as that). */
        char why[1024];
        snprintf(why, sizeof why, "%s", c10d_errmsg());
        int d = 0, l;
        ask_inband(pg, next, 0, st, why, &d, &l);
        c10di_error(st, "%s", why);
    }
    if (st == C10D_OK && last_joiner)
        *last_joiner = last;
    j->active_last = c10di_join_active_at(pg, next - 1);
    return st;
}

c10d_status c10d_join_end(c10d_pg *pg, int *last_joiner)
{
    if (!pg)
        return c10di_error(C10D_EINVAL, "join_end: NULL process group");
    c10di_join *j = &pg->join;
    if (!c10di_join_in_region(pg))
        return c10di_error(C10D_EINVAL, "join_end: group %s is not in a join region (call "
                           "c10d_join_begin on every rank first)", pg->name);
    c10di_world *w = pg->w;
    /* This rank's own collectives run first, and the coordinator hears of
     * every one it queued: it joins after the last of them. */
    c10di_lane_drain(pg->lane);
    c10di_verify_flush(w);
    c10d_status st = C10D_OK;
    if (pg->broken) {
        st = c10di_error(C10D_EABORTED, "join_end of group %s: the group is unusable after an "
                         "earlier failure: %s", pg->name, pg->broken_msg);
        goto out;
    }
    char after[32];
    snprintf(after, sizeof after, " after #%llu", (unsigned long long)pg->seq);
    c10di_activity(w, "join_end of group ", pg->name, after, " (shadowing)");
    pthread_mutex_lock(&w->mu);
    c10di_join_note(pg, pg->rank, pg->seq);
    pthread_mutex_unlock(&w->mu);
    /* What this rank sends from now on says it joined. */
    j->shadow_after1 = pg->seq + 1;
    st = j->inband ? shadow_inband(pg, last_joiner) : shadow_by_coordinator(pg, last_joiner);
    j->shadow_after1 = 0;
out:
    c10di_activity_done(w);
    leave_region(pg);
    return st;
}
