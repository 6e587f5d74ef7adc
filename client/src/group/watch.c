/* Liveness, seen from a rank: a watcher thread keeps one watch request
 * parked on the coordinator. It doubles as the heartbeat (the coordinator
 * declares a rank dead when its watches stop) and carries what this rank
 * is doing, so that a peer's report can say which collective a dead rank
 * was last in. When a member dies or leaves, the coordinator answers every
 * parked watch at once; the watcher records why in world->lost, and every
 * rank blocked on that member (c10di_pg_check, called from the data
 * plane's wait loops) fails with C10D_EPEERLOST. */
#include "group/watch.h"
#include "join/join_internal.h"
#include "group/liveness.h"
#include "coll/program_plane.h"
#include "coll/verify.h"

#include "budgets.h"
#include "c10d_time.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The heartbeat: every second when idle, four times a second while the
 * rank is running collectives, so that a death report says where it was. */
#define WATCH_WAIT_MS 1000
#define WATCH_BUSY_MS 250

static void record_lost(c10di_world *w, const C10dpb__MemberInfo *m)
{
    if (m->rank < 0 || m->rank >= w->size)
        return;
    pthread_mutex_lock(&w->mu);
    if (!w->lost[m->rank]) {
        char buf[1024];
        const char *what = m->activity && *m->activity ? m->activity : "no collective yet";
        if (m->rank == w->rank)
            snprintf(buf, sizeof buf, "the coordinator declared this rank (%d) %s: %s", m->rank,
                     m->has_state ? c10d_member_state_name((c10d_member_state)m->state) : "dead",
                     m->reason ? m->reason : "");
        else if (m->state == C10DPB__MEMBER_STATE__MEMBER_LEFT)
            snprintf(buf, sizeof buf, "rank %d (host %s, pid %d) left the job: %s; it was last "
                     "%s", m->rank, m->host ? m->host : "?", m->pid, m->reason ? m->reason : "",
                     what);
        else /* its last heartbeat carried what it was doing, that long before */
            snprintf(buf, sizeof buf, "rank %d (host %s, pid %d) died: %s; its last heartbeat, "
                     "%lld ms before, said it was %s", m->rank, m->host ? m->host : "?", m->pid,
                     m->reason ? m->reason : "", (long long)(m->changed_ms - m->last_seen_ms),
                     what);
        w->lost[m->rank] = strdup(buf);
        w->lost_order[m->rank] = ++w->lost_count;
        (void)c10di_seqs_from_pb(&w->lost_finals[m->rank], m->finals, m->n_finals);
        atomic_fetch_add(&w->lost_version, 1);
    }
    pthread_mutex_unlock(&w->mu);
}

/* Ranks that died alike, sent as one run (a mass failure: the coordinator
 * names the first few in full, the rest so). After the members named in
 * full: those are the ones that went first. */
static void record_lost_run(c10di_world *w, const C10dpb__LostRange *x)
{
    int first = x->first < 0 ? 0 : x->first, last = x->last < w->size ? x->last : w->size - 1;
    pthread_mutex_lock(&w->mu);
    for (int r = first; r <= last; r++) {
        if (w->lost[r])
            continue;
        char buf[1024];
        if (r == w->rank)
            snprintf(buf, sizeof buf, "the coordinator declared this rank (%d) %s: %s", r,
                     x->has_state ? c10d_member_state_name((c10d_member_state)x->state) : "dead",
                     x->reason ? x->reason : "");
        else
            snprintf(buf, sizeof buf, "rank %d died: %s (one of ranks %d-%d, lost together; "
                     "c10d-ctl status names their hosts)", r, x->reason ? x->reason : "",
                     x->first, x->last);
        w->lost[r] = strdup(buf);
        w->lost_order[r] = ++w->lost_count;
    }
    atomic_fetch_add(&w->lost_version, 1);
    pthread_mutex_unlock(&w->mu);
}

/* One reply may carry several lost members (a rank died and another left
 * because of it, within one watch): they are recorded in the order they
 * went, so a report names the one that went first, not the lowest rank. */
static void record_lost_in_order(c10di_world *w, C10dpb__MemberInfo **lost, size_t n)
{
    C10dpb__MemberInfo *small[16], **m = n <= 16 ? small : malloc(n * sizeof *m);
    if (!m) { /* out of memory: in the reply's order */
        for (size_t i = 0; i < n; i++)
            record_lost(w, lost[i]);
        return;
    }
    for (size_t i = 0; i < n; i++) { /* insertion sort by changed_ms, stable */
        size_t j = i;
        for (; j > 0 && m[j - 1]->changed_ms > lost[i]->changed_ms; j--)
            m[j] = m[j - 1];
        m[j] = lost[i];
    }
    for (size_t i = 0; i < n; i++)
        record_lost(w, m[i]);
    if (m != small)
        free(m);
}


static void *watch_main(void *arg)
{
    c10di_world *w = arg;
    uint64_t known = 0;
    char last[sizeof w->act_text + 16] = "";
    while (!atomic_load(&w->stopping)) {
        char activity[sizeof w->act_text + 16];
        c10di_seqs completed = {0}, verified = {0};
        c10di_activity_read(w, activity, sizeof activity);
        pthread_mutex_lock(&w->mu);
        /* what each live group completed: a stall report can then say a
         * rank finished #5 rather than that it is still in it; and which
         * checks passed: a restarted coordinator must not wait for this
         * rank to enter a collective it is already running (out of
         * memory, a heartbeat says less, never something wrong) */
        for (c10d_pg *g = w->groups; g; g = g->next_in_world) {
            (void)c10di_seqs_put(&completed, g->name, atomic_load(&g->completed));
            if (atomic_load(&g->verified))
                (void)c10di_seqs_put(&verified, g->name, atomic_load(&g->verified));
        }
        pthread_mutex_unlock(&w->mu);
        int busy = strcmp(activity, last) != 0;
        memcpy(last, activity, sizeof last);
        C10dpb__Watch m = C10DPB__WATCH__INIT;
        m.job = w->job;
        m.generation = w->generation;
        m.rank = w->rank;
        m.has_known_version = m.has_wait_ms = 1;
        m.known_version = known;
        m.wait_ms = busy ? WATCH_BUSY_MS : WATCH_WAIT_MS;
        m.activity = activity;
        c10di_seqs_pb_mem cmem, vmem;
        m.completed = c10di_seqs_pb(&completed, &cmem);
        m.n_completed = m.completed ? completed.n : 0;
        m.verified = c10di_seqs_pb(&verified, &vmem);
        m.n_verified = m.verified ? verified.n : 0;
        m.has_lost_ranges_ok = m.lost_ranges_ok = 1;
        /* the join states applied so far: the coordinator hands a joined
         * rank nothing this rank might count or divide wrongly */
        m.n_join_known = c10di_join_acks(w, &m.join_known);
        C10dpb__Request req = C10DPB__REQUEST__INIT;
        req.op_case = C10DPB__REQUEST__OP_WATCH;
        req.watch = &m;
        C10dpb__Reply *rep = NULL;
        /* Not resent after a reconnect: the next one, packed afresh, tells
         * a restarted coordinator where this rank is now. */
        c10d_status st = c10di_call_once(w->conn, &req, m.wait_ms, C10DI_WATCH_BUDGET_MS, &rep);
        c10di_join_acks_free(m.join_known, m.n_join_known);
        c10di_seqs_pb_free(&cmem);
        c10di_seqs_pb_free(&vmem);
        c10di_seqs_clear(&completed);
        c10di_seqs_clear(&verified);
        if (st != C10D_OK) {
            /* The coordinator is unreachable or restarting: that is not a
             * peer's death. Try again shortly. */
            struct timespec ts = {0, 100 * 1000000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (rep->result_case == C10DPB__REPLY__RESULT_WATCH) {
            known = rep->watch->version;
            /* Findings before the members lost in the same answer: a rank
             * that got a finding leaves because of it, and a call checking
             * between the two (c10di_pg_lost: findings first) must not
             * report the leave, the effect, as its failure (CI saw rank 1
             * told EPEERLOST where the join finding was EJOINED). */
            for (size_t i = 0; i < rep->watch->n_alerts; i++)
                c10di_record_alert(w, rep->watch->alerts[i]->group,
                                   (c10d_status)rep->watch->alerts[i]->status,
                                   rep->watch->alerts[i]->report);
            record_lost_in_order(w, rep->watch->lost, rep->watch->n_lost);
            for (size_t i = 0; i < rep->watch->n_lost_ranges; i++)
                record_lost_run(w, rep->watch->lost_ranges[i]);
            int joins = 0;
            for (size_t i = 0; i < rep->watch->n_joins; i++)
                joins |= c10di_join_apply(w, rep->watch->joins[i]);
            /* A rank joined: what this rank queued without sending (OFF),
             * or not yet sent (ASYNC), is what it will shadow. */
            if (joins)
                c10di_verify_flush(w);
        }
        c10dpb__reply__free_unpacked(rep, NULL);
        /* A program's data plane blocked in a call that can never
         * complete hears of it now (and of its timeout). */
        c10di_program_scan(w);
    }
    return NULL;
}

c10d_status c10di_watch_start(c10di_world *w)
{
    if (pthread_create(&w->watcher, NULL, watch_main, w) != 0)
        return c10di_error(C10D_ENOMEM, "cannot start the liveness watcher thread");
    w->watcher_on = 1;
    return C10D_OK;
}

void c10di_watch_stop(c10di_world *w)
{
    if (!w->watcher_on)
        return;
    atomic_store(&w->stopping, 1);
    pthread_join(w->watcher, NULL);
    w->watcher_on = 0;
}
