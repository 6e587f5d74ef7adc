/* Work handles: an async call's (or a sync call's queued behind async
 * ones), run on its group's lane (lane.c), or a posted receive's, in the
 * backend's receive queue (posted.c posts it); waited for, tested and
 * freed through the public API. */
#include "coll/work.h"
#include "coll/lane.h"
#include "group/liveness.h"
#include "coll/plan.h"
#include "coll/posted.h"

#include "c10d_time.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* What c holds of its backend's and its buffers, let go. */
static void coll_release(c10di_coll *c)
{
    if (c->be && c->be->forget)
        c->be->forget(c);
    free(c->outs);
    free(c->ins);
}

void c10di_work_destroy(c10d_work *w)
{
    coll_release(&w->c);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

/* c10d_work_wait of a call on the lane: limit as c10di_timeout gives
 * it, asked the API's timeout as the caller gave it (for the message). */
static c10d_status lane_wait(c10d_work *w, c10d_ms limit, int asked)
{
    struct timespec ts = c10d_deadline_ts(limit != C10D_MS_FOREVER ? limit : 0);
    pthread_mutex_lock(&w->mu);
    int timed_out = 0;
    while (!w->done && !timed_out) {
        if (limit == C10D_MS_NO_WAIT)
            timed_out = 1;
        else if (limit != C10D_MS_FOREVER)
            timed_out = pthread_cond_timedwait(&w->cv, &w->mu, &ts) != 0 && !w->done;
        else
            pthread_cond_wait(&w->cv, &w->mu);
    }
    c10d_status st = w->st;
    char msg[sizeof w->msg];
    memcpy(msg, w->msg, sizeof msg);
    pthread_mutex_unlock(&w->mu);
    if (timed_out && asked == C10D_NO_WAIT)
        return c10di_error(C10D_ETIMEDOUT, "%s of group %s is still running (C10D_NO_WAIT)",
                           w->c.what, w->pg->name);
    if (timed_out)
        return c10di_error(C10D_ETIMEDOUT, "%s of group %s not finished after %d ms", w->c.what,
                           w->pg->name, asked);
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

c10d_status c10di_work_call(c10d_pg *pg, c10di_coll *c, c10d_work **work, int *give_back)
{
    *give_back = 0;
    if (work)
        *work = NULL;
    if (!c->async && !c10di_lane_busy(pg->lane)) {
        c10d_status st = c10di_execute(pg, c);
        if (st == C10D_OK && c->src_out)
            *c->src_out = c->root;
        coll_release(c);
        return st;
    }
    c10d_work *w = c10di_work_new(pg, c);
    if (!w) {
        *give_back = 1;
        coll_release(c);
        return c10di_error(C10D_ENOMEM, "out of memory");
    }
    c->outs = NULL, c->ins = NULL; /* the work owns them now */
    c->ready = NULL;
    c10d_status st;
    /* Posted in the backend (posted.c), where one takes receives so (CUDA
     * buffers are received on the stream, in order: on the lane). */
    if (c->async && c->kind == C10DC_RECV && c->be->recv_post) {
        /* Checked and reported when it is called, as any call; it runs
         * (waits) later, and ends here only if it is refused. */
        c10di_outcome o;
        C10DI_OUTCOME_EMPTY(&o);
        w->c.posted = 1;
        if ((st = c10di_call_enter(pg, &w->c, &o)) == C10D_OK &&
            (st = c10di_post(pg, w)) == C10D_OK) {
            *work = w;
            return C10D_OK;
        }
        c10di_call_end(pg, &w->c, st, &o);
    } else if ((st = c10di_lane_submit(pg->lane, &w->on_lane)) != C10D_OK) {
        *give_back = 1;
    } else if (c->async) {
        *work = w;
        return C10D_OK;
    } else { /* sync, behind async calls: it waits for its turn and its run */
        st = lane_wait(w, C10D_MS_FOREVER, C10D_TIMEOUT_DEFAULT);
        c10d_work_free(w);
        return st;
    }
    c10di_work_destroy(w); /* refused: never ran */
    return st;
}

/* --- on the lane --- */

static c10d_work *of_item(c10di_lane_item *it)
{
    return (c10d_work *)(void *)((char *)it - offsetof(c10d_work, on_lane));
}

c10d_status c10di_work_run(c10di_lane_item *it)
{
    c10d_work *w = of_item(it);
    return c10di_execute(w->pg, &w->c);
}

void c10di_work_ended(c10di_lane_item *it, c10d_status st)
{
    c10di_work_finish(of_item(it), st, c10d_errmsg());
}

/* --- a posted receive's handle --- */

void c10di_work_recv_done(c10d_pg *pg, c10di_recv *r)
{
    c10d_work *w = (c10d_work *)(void *)((char *)r - offsetof(c10d_work, r));
    /* A wrong size took its message whole: the links are as they were. */
    if (r->st != C10D_OK && r->st != C10D_EINVAL && r->st != C10D_EABORTED)
        c10di_pg_break(pg, r->st, r->msg);
    atomic_fetch_sub(&pg->w->posted, 1);
    c10di_work_finish(w, r->st, r->msg); /* the last touch: its owner may free it now */
}

/* c10d_work_wait of a posted receive: limit_ms as c10di_timeout gives it
 * (C10D_MS_FOREVER: until it ends, C10D_MS_NO_WAIT: no wait). C10D_ETIMEDOUT (message set) if
 * it had not ended by then; else C10D_OK, w->st says how it ended. Its
 * timeout runs from the first wait, as gloo's does. */
static c10d_status posted_wait(c10d_work *w, c10d_ms limit_ms)
{
    c10d_pg *pg = w->pg;
    const c10di_coll *c = &w->c;
    pthread_mutex_lock(&w->mu);
    int done = w->done;
    if (!w->deadline_ms)
        w->deadline_ms = c10d_now_ms() + c->timeout_ms;
    int64_t deadline = w->deadline_ms;
    pthread_mutex_unlock(&w->mu);
    if (!done && limit_ms == C10D_MS_NO_WAIT) {
        (void)c->be->recv_progress(c->be_state);
    } else if (!done) {
        /* The wait's own limit returns with the receive still posted; its
         * deadline (in the probe) ends it, with the group. */
        c10di_coll probe = *c;
        probe.deadline_ms = deadline;
        int64_t until = limit_ms == C10D_MS_FOREVER ? INT64_MAX : c10d_now_ms() + limit_ms;
        c10di_activity(pg->w, "collective ", c->what, " of group ", pg->name);
        (void)c->be->recv_wait(c->be_state, &w->r, &probe, until);
        c10di_activity_done(pg->w);
    }
    pthread_mutex_lock(&w->mu);
    done = w->done;
    c10d_status st = w->st;
    char msg[sizeof w->msg];
    memcpy(msg, w->msg, sizeof msg);
    /* Only once it ended: until then the backend may be matching it,
     * writing r under its own lock, not ours. */
    int from = done ? w->r.from : -1;
    pthread_mutex_unlock(&w->mu);
    if (!done && limit_ms == C10D_MS_NO_WAIT)
        return c10di_error(C10D_ETIMEDOUT, "%s of group %s is still running (C10D_NO_WAIT)",
                           c->what, pg->name);
    if (!done)
        return c10di_error(C10D_ETIMEDOUT, "%s of group %s not finished after %d ms", c->what,
                           pg->name, limit_ms);
    /* Ended (from its sender): reported, if it was from any member, once. */
    if (w->c.root == C10DI_ANY_SOURCE && from >= 0 && (st == C10D_OK || st == C10D_EINVAL)) {
        pthread_mutex_lock(&w->mu);
        int first = !w->reported;
        w->reported = 1;
        pthread_mutex_unlock(&w->mu);
        if (first) {
            /* A coordinator that is down loses the check only; a send/recv
             * is never checked in SYNC, so nothing is found against the
             * group (o stays empty). */
            c10di_coll rc = w->c;
            c10di_outcome o;
            C10DI_OUTCOME_EMPTY(&o);
            (void)c10di_report_sender(pg, &rc, from, &o);
        }
    }
    if (st != C10D_OK)
        return c10di_error(st, "%s", msg);
    if (c->src_out) /* c10d_recv_any: the caller's, written on the caller's thread */
        *c->src_out = from;
    return C10D_OK;
}

/* 1 if w ended, after moving what has arrived (no wait). */
static int posted_test(c10d_work *w)
{
    pthread_mutex_lock(&w->mu);
    int done = w->done;
    pthread_mutex_unlock(&w->mu);
    if (done)
        return 1;
    (void)w->c.be->recv_progress(w->c.be_state);
    pthread_mutex_lock(&w->mu);
    done = w->done;
    pthread_mutex_unlock(&w->mu);
    return done;
}

/* c10d_work_free of a posted receive: it takes no message from now on. */
static void posted_cancel(c10d_work *w)
{
    pthread_mutex_lock(&w->mu);
    int done = w->done;
    pthread_mutex_unlock(&w->mu);
    /* Ended (its group destroyed, perhaps): the backend is done with it.
     * Else the backend forgets it, or it ends meanwhile (recv_done ran
     * under the lock recv_cancel then took). */
    if (!done && w->c.be->recv_cancel(w->c.be_state, &w->r))
        atomic_fetch_sub(&w->pg->w->posted, 1);
}

/* --- the public API --- */

c10d_status c10d_work_wait(c10d_work *w, int timeout_ms)
{
    if (!w)
        return c10di_error(C10D_EINVAL, "NULL work handle");
    /* C10D_TIMEOUT_DEFAULT: until it ends (its own deadline ends it);
     * C10D_NO_WAIT: how it stands now. */
    int limit = 0;
    c10d_status vst =
        c10di_timeout("c10d_work_wait", "timeout_ms", timeout_ms, C10D_MS_FOREVER, 1, &limit);
    if (vst != C10D_OK)
        return vst;
    return w->c.posted ? posted_wait(w, limit) : lane_wait(w, limit, timeout_ms);
}

int c10d_work_is_completed(const c10d_work *w)
{
    if (!w)
        return 1;
    c10d_work *mw = (c10d_work *)w;
    if (mw->c.posted)
        return posted_test(mw);
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
        posted_cancel(w);
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
