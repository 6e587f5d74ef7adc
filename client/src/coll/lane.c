/* The lane: each group runs its operations one at a time, in the order
 * they were called. An async operation is queued for the group's lane
 * thread (started on first use) and returns a work handle; a sync one runs
 * on the caller's thread when nothing is queued (no hand-off on the
 * latency path), else queues behind the async ones and waits.
 *
 * The lane knows nothing of what it runs: it is handed the functions that
 * run an item and end it (work.c's), and calls nothing else. */
#include "coll/lane.h"

#include <stdlib.h>
#include <time.h>

struct c10di_lane {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    c10di_lane_item *head, *tail;
    int inflight; /* queued + running */
    int stop;
    int on;
    pthread_t th;
    c10di_lane_run_fn run_item;
    c10di_lane_ended_fn ended;
};

static void *lane_main(void *arg)
{
    c10di_lane *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->head && !l->stop)
            pthread_cond_wait(&l->cv, &l->mu);
        if (!l->head)
            break;
        c10di_lane_item *it = l->head;
        l->head = it->next;
        if (!l->head)
            l->tail = NULL;
        pthread_mutex_unlock(&l->mu);
        c10d_status st = l->run_item(it);
        pthread_mutex_lock(&l->mu);
        l->inflight--;
        pthread_mutex_unlock(&l->mu);
        l->ended(it, st);
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

c10d_status c10di_lane_start(c10di_lane **out, c10di_lane_run_fn run_item,
                             c10di_lane_ended_fn ended)
{
    c10di_lane *l = calloc(1, sizeof *l);
    if (!l)
        return c10di_error(C10D_ENOMEM, "out of memory");
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->run_item = run_item;
    l->ended = ended;
    *out = l;
    return C10D_OK;
}

void c10di_lane_stop(c10di_lane *l)
{
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (l->on)
        pthread_join(l->th, NULL); /* runs what was queued first */
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

void c10di_lane_drain(c10di_lane *l)
{
    pthread_mutex_lock(&l->mu);
    while (l->inflight > 0) {
        pthread_mutex_unlock(&l->mu);
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
}

int c10di_lane_busy(c10di_lane *l)
{
    pthread_mutex_lock(&l->mu);
    int busy = l->inflight > 0;
    pthread_mutex_unlock(&l->mu);
    return busy;
}

static c10d_status submit_locked(c10di_lane *l, c10di_lane_item *it)
{
    if (!l->on) {
        if (pthread_create(&l->th, NULL, lane_main, l) != 0)
            return c10di_error(C10D_ENOMEM, "cannot start the group's worker thread");
        l->on = 1;
    }
    it->next = NULL;
    if (l->tail)
        l->tail->next = it;
    else
        l->head = it;
    l->tail = it;
    l->inflight++;
    pthread_cond_signal(&l->cv);
    return C10D_OK;
}

c10d_status c10di_lane_submit(c10di_lane *l, c10di_lane_item *it)
{
    pthread_mutex_lock(&l->mu);
    c10d_status st = submit_locked(l, it);
    pthread_mutex_unlock(&l->mu);
    return st;
}
