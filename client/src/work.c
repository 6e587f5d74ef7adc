/* The lane: each group runs its operations one at a time, in the order
 * they were called. An async operation is queued for the group's lane
 * thread (started on first use) and returns a work handle; a sync one runs
 * on the caller's thread when nothing is queued (no hand-off on the
 * latency path), else queues behind the async ones and waits. */
#include "work.h"

#include "c10d_time.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct c10di_lane {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    c10d_work *head, *tail;
    int inflight; /* queued + running */
    int stop;
    int on;
    pthread_t th;
};

void c10di_pg_completed(c10d_pg *pg, uint64_t seq)
{
    uint64_t cur = atomic_load(&pg->completed);
    while (cur < seq && !atomic_compare_exchange_weak(&pg->completed, &cur, seq))
        ;
}

void c10di_pg_break(c10d_pg *pg, c10d_status st, const char *msg)
{
    int unclaimed = 0;
    if (!atomic_compare_exchange_strong(&pg->broken_claimed, &unclaimed, 1))
        return; /* the first failure stands */
    snprintf(pg->broken_msg, sizeof pg->broken_msg, "%s", msg);
    atomic_store(&pg->broken, st);
}

c10d_status c10di_pg_usable(c10d_pg *pg, const c10di_coll *c)
{
    if (!atomic_load(&pg->broken))
        return C10D_OK;
    return c10di_error(C10D_EABORTED, "%s of group %s: the group is unusable after an earlier "
                       "failure: %s", c->what, pg->name, pg->broken_msg);
}

c10d_status c10di_execute(c10d_pg *pg, c10di_coll *c)
{
    c10d_status ust = c10di_pg_usable(pg, c);
    if (ust != C10D_OK)
        return ust;
    /* A shadow runs inside join_end, which says so itself: a joined rank
     * reacts to its peers' headers, and every step it saves is theirs. */
    if (!c->shadow)
        c10di_activity(pg->w, "collective ", c->what, " of group ", pg->name);
    /* A finding or a lost member, known already, fails the call at once.
     * When the call is reported as in SYNC the coordinator answers that
     * itself (and records it) on the report it makes anyway, so its
     * account, not a race with the watcher, decides what the rank is told.
     * A joined rank's shadow was verified before it was handed out. */
    int sync_verified = !c->shadow && c10di_join_reporting(pg, c) == C10DI_REPORT_SYNC;
    /* A recv from any member is reported once the data plane has its
     * message: the coordinator then matches it with that sender's send. */
    int any_source = c->kind == C10DC_RECV && c->root == C10DI_ANY_SOURCE;
    c10d_status st = sync_verified ? C10D_OK : c10di_pg_check(pg, c, -1);
    if (st == C10D_OK && !c->shadow && !any_source)
        st = c10di_verify_enter(pg, c);
    if (st == C10D_OK)
        st = c10di_join_prepare(pg, c);
    if (st == C10D_OK)
        st = c->be->run(c->be_state, c);
    /* A message of the wrong size is reported too, under its sender: the
     * coordinator then names the mismatched pair, not a later call. */
    if (any_source && c->root != C10DI_ANY_SOURCE && (st == C10D_OK || st == C10D_EINVAL)) {
        c->fp.root = c->root;
        c10d_status vst = c10di_verify_enter(pg, c);
        if (st == C10D_OK)
            st = vst;
    }
    if (st == C10D_OK && c->kind != C10DC_SEND && c->kind != C10DC_RECV && !c->completes_later)
        c10di_pg_completed(pg, c->seq);
    if (st == C10D_OK)
        c10di_join_ran(pg, c);
    if (st != C10D_OK && st != C10D_EINVAL && c->kind != C10DC_MONITORED_BARRIER)
        /* The links may hold half a message: nothing after this is safe.
         * (A monitored barrier met through the store: the links are as
         * they were, and a late rank still meets it under its number.) */
        c10di_pg_break(pg, st, c10d_errmsg());
    if (!c->shadow)
        c10di_activity_done(pg->w);
    return st;
}

void c10di_work_finish(c10d_work *w, c10d_status st, const char *msg)
{
    pthread_mutex_lock(&w->mu);
    w->st = st;
    if (st != C10D_OK)
        snprintf(w->msg, sizeof w->msg, "%s", msg);
    w->done = 1;
    int freed = w->freed;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (freed)
        c10di_work_destroy(w);
}

static void *lane_main(void *arg)
{
    c10d_pg *pg = arg;
    c10di_lane *l = pg->lane;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->head && !l->stop)
            pthread_cond_wait(&l->cv, &l->mu);
        if (!l->head)
            break;
        c10d_work *w = l->head;
        l->head = w->next;
        if (!l->head)
            l->tail = NULL;
        pthread_mutex_unlock(&l->mu);
        c10d_status st = c10di_execute(pg, &w->c);
        pthread_mutex_lock(&l->mu);
        l->inflight--;
        pthread_mutex_unlock(&l->mu);
        c10di_work_finish(w, st, c10d_errmsg());
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

c10d_status c10di_lane_start(c10d_pg *pg)
{
    c10di_lane *l = calloc(1, sizeof *l);
    if (!l)
        return c10di_error(C10D_ENOMEM, "out of memory");
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    pg->lane = l;
    return C10D_OK;
}

void c10di_lane_stop(c10d_pg *pg)
{
    c10di_lane *l = pg->lane;
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (l->on)
        pthread_join(l->th, NULL); /* runs what was queued first */
    c10di_posted_abort(pg);
    pg->lane = NULL;
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

void c10di_lane_drain(c10d_pg *pg)
{
    c10di_lane *l = pg->lane;
    pthread_mutex_lock(&l->mu);
    while (l->inflight > 0) {
        pthread_mutex_unlock(&l->mu);
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
}

c10d_work *c10di_work_new(c10d_pg *pg, const c10di_coll *c)
{
    c10d_work *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->pg = pg;
    w->c = *c;
    pthread_mutex_init(&w->mu, NULL);
    c10d_cond_init_monotonic(&w->cv); /* waits survive wall-clock steps */
    return w;
}

void c10di_work_destroy(c10d_work *w)
{
    if (w->c.be && w->c.be->forget)
        w->c.be->forget(&w->c);
    free(w->c.outs);
    free(w->c.ins);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

int c10di_lane_busy(c10d_pg *pg)
{
    c10di_lane *l = pg->lane;
    pthread_mutex_lock(&l->mu);
    int busy = l->inflight > 0;
    pthread_mutex_unlock(&l->mu);
    return busy;
}

static c10d_status submit_locked(c10d_pg *pg, c10di_lane *l, c10d_work *w)
{
    if (!l->on) {
        if (pthread_create(&l->th, NULL, lane_main, pg) != 0)
            return c10di_error(C10D_ENOMEM, "cannot start the group's worker thread");
        l->on = 1;
    }
    w->next = NULL;
    if (l->tail)
        l->tail->next = w;
    else
        l->head = w;
    l->tail = w;
    l->inflight++;
    pthread_cond_signal(&l->cv);
    return C10D_OK;
}

c10d_status c10di_lane_submit(c10d_pg *pg, c10d_work *w)
{
    c10di_lane *l = pg->lane;
    pthread_mutex_lock(&l->mu);
    c10d_status st = submit_locked(pg, l, w);
    pthread_mutex_unlock(&l->mu);
    return st;
}

c10d_status c10d_work_wait(c10d_work *w, int timeout_ms)
{
    if (!w)
        return c10di_error(C10D_EINVAL, "NULL work handle");
    /* C10D_TIMEOUT_DEFAULT: until it ends (its own deadline ends it);
     * C10D_NO_WAIT: how it stands now. */
    int limit = 0;
    c10d_status vst =
        c10di_timeout("c10d_work_wait", "timeout_ms", timeout_ms, INT_MAX, 1, &limit);
    if (vst != C10D_OK)
        return vst;
    if (w->c.posted)
        return c10di_posted_wait(w, limit);
    struct timespec ts = c10d_deadline_ts(limit != INT_MAX ? limit : 0);
    pthread_mutex_lock(&w->mu);
    int timed_out = 0;
    while (!w->done && !timed_out) {
        if (limit == 0)
            timed_out = 1;
        else if (limit != INT_MAX)
            timed_out = pthread_cond_timedwait(&w->cv, &w->mu, &ts) != 0 && !w->done;
        else
            pthread_cond_wait(&w->cv, &w->mu);
    }
    c10d_status st = w->st;
    char msg[sizeof w->msg];
    memcpy(msg, w->msg, sizeof msg);
    pthread_mutex_unlock(&w->mu);
    if (timed_out && timeout_ms == C10D_NO_WAIT)
        return c10di_error(C10D_ETIMEDOUT, "%s of group %s is still running (C10D_NO_WAIT)",
                           w->c.what, w->pg->name);
    if (timed_out)
        return c10di_error(C10D_ETIMEDOUT, "%s of group %s not finished after %d ms", w->c.what,
                           w->pg->name, timeout_ms);
    if (st != C10D_OK)
        return c10di_error(st, "%s", msg);
    if (w->c.src_out) /* c10d_recv_any: the caller's, written on the caller's thread */
        *w->c.src_out = w->c.root;
    /* Enqueued on a CUDA stream: order the caller's stream after it (as
     * torch's wait does), without blocking this thread. */
    if (w->c.pending && w->c.be->wait)
        return w->c.be->wait(w->c.pending, w->c.stream);
    return C10D_OK;
}

int c10d_work_is_completed(const c10d_work *w)
{
    if (!w)
        return 1;
    c10d_work *mw = (c10d_work *)w;
    if (mw->c.posted)
        return c10di_posted_test(mw);
    pthread_mutex_lock(&mw->mu);
    int done = mw->done;
    pthread_mutex_unlock(&mw->mu);
    if (done && mw->c.pending && mw->c.be->is_done)
        return mw->c.be->is_done(mw->c.pending);
    return done;
}

void c10d_work_free(c10d_work *w)
{
    if (!w)
        return;
    if (w->c.posted) { /* never on the lane: once the backend forgot it, it is ours */
        c10di_posted_cancel(w);
        c10di_work_destroy(w);
        return;
    }
    pthread_mutex_lock(&w->mu);
    int done = w->done;
    w->freed = 1;
    pthread_mutex_unlock(&w->mu);
    if (done)
        c10di_work_destroy(w); /* else the lane frees it when it finishes */
}
