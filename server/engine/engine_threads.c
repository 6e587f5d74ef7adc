/* Who runs a batch (engine.h): the network thread that submits a request
 * to an idle engine runs it there, at once, with whatever arrives
 * meanwhile (a few rounds at most); otherwise the engine thread, which
 * also keeps the timers (parked requests' deadlines, the sweeps). Then the
 * stop that drains the queue and joins the thread. A batch itself is
 * engine.c's (c10ds_engine_run_batch). */
#include "engine/engine.h"

#include "config.h"
#include "engine/drain.h"
#include "engine/request.h"
#include "engine/waiters.h"

#include "c10d_time.h"
#include "log.h"

#include <pthread.h>
#include <stdint.h>

/* Runs queued work as long as there is some, then marks the engine idle
 * (mu held on entry and return; busy set by the caller). Bounded when
 * called from a submitter: a network thread should not become the engine
 * for good while its other connections wait. */
static void drain(c10ds_engine *e, c10ds_request *batch, int rounds)
{
    for (;;) {
        pthread_mutex_unlock(&e->mu);
        c10ds_engine_run_batch(e, batch);
        pthread_mutex_lock(&e->mu);
        batch = e->q_head;
        if (!batch || e->stopping || --rounds == 0)
            break;
        e->q_head = e->q_tail = NULL;
    }
    e->busy = 0;
    /* The engine thread takes what is left, and its timers, from here: it
     * must wake earlier than it planned if this batch parked a request
     * with a nearer deadline. */
    if (e->thread_waits || e->q_head || c10ds_waiters_next_deadline(e->waiters) < e->thread_due ||
        e->next_sweep_ms < e->thread_due)
        pthread_cond_signal(&e->cv);
}

static void *engine_main(void *arg)
{
    c10ds_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        for (;;) {
            if (e->busy || (e->gatherers && !e->stopping)) {
                /* a submitter runs a batch, or a round is being gathered */
                e->thread_waits = 1;
                pthread_cond_wait(&e->cv, &e->mu);
                e->thread_waits = 0;
                continue;
            }
            if (e->q_head || e->stopping)
                break;
            int64_t due = c10ds_waiters_next_deadline(e->waiters);
            if (e->next_sweep_ms < due)
                due = e->next_sweep_ms;
            e->thread_due = due;
            if (due == INT64_MAX) {
                pthread_cond_wait(&e->cv, &e->mu);
                continue;
            }
            int64_t wait_ms = due - c10d_now_ms();
            if (wait_ms <= 0)
                break;
            /* cv uses CLOCK_MONOTONIC (set in engine_start). */
            struct timespec ts = c10d_deadline_ts(wait_ms);
            pthread_cond_timedwait(&e->cv, &e->mu, &ts);
        }
        c10ds_request *batch = e->q_head;
        e->q_head = e->q_tail = NULL;
        int stopping = e->stopping;
        e->busy = 1;
        drain(e, batch, 1 << 30);
        if (stopping && !e->q_head)
            break;
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

int c10ds_engine_start(c10ds_engine *e)
{
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0)
        return -1;
    /* under mu: the listener may already submit (and run inline) */
    pthread_mutex_lock(&e->mu);
    e->started = 1;
    pthread_mutex_unlock(&e->mu);
    return 0;
}

/* The engine whose requests this thread gathers (c10ds_engine_gather_begin). */
static __thread c10ds_engine *gathering;

static int submit(c10ds_engine *e, c10ds_request *r, int inline_ok)
{
    r->next = NULL;
    pthread_mutex_lock(&e->mu);
    if (e->stopping) {
        pthread_mutex_unlock(&e->mu);
        if (r->pb)
            c10ds_drain_count(&e->drain, r->pb->op_case);
        return -1;
    }
    if (inline_ok && !e->busy && !e->q_head && e->started && gathering != e) {
        /* Idle: run it here. Handing it to the engine thread would cost a
         * thread wake-up on the path of every reply (about a raw TCP round
         * trip on a loaded 2-core machine). */
        e->busy = 1;
        drain(e, r, 8);
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    if (e->q_tail)
        e->q_tail->next = r;
    else
        e->q_head = r;
    e->q_tail = r;
    /* Wake the engine only on the first request of a batch: while it is
     * busy, requests pile up and ride the next commit together. A thread
     * gathering runs them itself at the end. */
    int wake = e->q_head == r && !e->busy && gathering != e;
    pthread_mutex_unlock(&e->mu);
    if (wake)
        pthread_cond_signal(&e->cv);
    return 0;
}

int c10ds_engine_submit(c10ds_engine *e, c10ds_request *r)
{
    return submit(e, r, 1);
}

void c10ds_engine_gather_begin(c10ds_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->gatherers++;
    pthread_mutex_unlock(&e->mu);
    gathering = e;
}

void c10ds_engine_gather_end(c10ds_engine *e)
{
    gathering = NULL;
    pthread_mutex_lock(&e->mu);
    e->gatherers--;
    if (!e->stopping && e->q_head && !e->busy && e->started) {
        c10ds_request *batch = e->q_head;
        e->q_head = e->q_tail = NULL;
        e->busy = 1;
        drain(e, batch, 8); /* leaves the engine idle, and its thread woken if needed */
    } else if (e->thread_waits || (e->q_head && !e->busy)) {
        /* the engine thread waited for this round, or runs what is queued
         * (not started yet; stopping: it drains, and stop frees the rest) */
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
}

int c10ds_engine_post(c10ds_engine *e, c10ds_request *r)
{
    return submit(e, r, 0);
}

void c10ds_engine_stop(c10ds_engine *e)
{
    if (!e || !e->started)
        return;
    c10ds_drain_begin(&e->drain, e->cfg->drain_timeout_ms);
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    pthread_mutex_unlock(&e->mu);
    pthread_cond_signal(&e->cv);
    pthread_join(e->thread, NULL);
    e->started = 0;
    size_t parked = c10ds_waiters_count(e->waiters);
    if (parked)
        c10ds_info("dropping %zu parked request(s); their clients will resend them", parked);
    /* Let go of them now: they hold their connections open. */
    c10ds_waiters_free(e->waiters, c10ds_request_free);
    e->waiters = NULL;
    /* under mu: the readiness loop may still look at the queue */
    pthread_mutex_lock(&e->mu);
    c10ds_request *left = e->q_head;
    e->q_head = e->q_tail = NULL;
    pthread_mutex_unlock(&e->mu);
    for (c10ds_request *r = left, *n; r; r = n) {
        n = r->next;
        c10ds_request_free(r);
    }
}
