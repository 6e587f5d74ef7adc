/* Work handles: an async call's (or a sync call's queued behind async
 * ones) on its group's lane (lane.c), or a posted receive's (posted.c);
 * waited for, tested and freed through the public API. */
#include "work.h"
#include "posted.h"

#include "c10d_time.h"

#include <limits.h>
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
