/* The lane: each group runs its operations one at a time, in the order
 * they were called. An async operation is queued for the group's lane
 * thread (started on first use) and returns a work handle; a sync one runs
 * on the caller's thread when nothing is queued (no hand-off on the
 * latency path), else queues behind the async ones and waits. */
#include "lane.h"
#include "plan.h"
#include "posted.h"
#include "work.h"

#include <stdlib.h>
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
