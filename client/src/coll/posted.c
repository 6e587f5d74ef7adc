/* Posted receives: an async recv into a CPU buffer (torch's irecv, each
 * half of batch_isend_irecv).
 *
 * Queued on the group's lane, a receive would hold up everything called
 * after it on its group until its message came: `irecv from 1; send to
 * 1` on both ranks of a ring, or `irecv; all_reduce; send`, would wait on
 * each other until the timeout, where gloo runs them. So the receive is
 * checked, numbered and reported to the coordinator when it is called,
 * like any call (work.c, through c10di_call_enter), and then posted here
 * in the backend's receive queue instead (backend.h, recv_post). From there the backend matches it to its message
 * as MPI does, from whichever thread makes progress on the group: the
 * thread that waits for it, the group's own sends and sync receives, or,
 * while nobody does, this file's progress thread, so that a peer whose
 * large send waits for this rank to read it is never held up by a rank
 * busy elsewhere (in a collective of another group, in a SYNC check).
 *
 * Its handle is waited for, tested and cancelled as every work handle is
 * (work.c); its timeout runs from the first wait, as gloo's does. A
 * receive from any member is reported once its sender is known, by the
 * thread that waits for it (docs/host-backend.md, "Ordering and async"). */
#include "coll/posted.h"

#include "c10d_time.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static c10di_be_slot *cpu_slot(c10d_pg *pg)
{
    return &pg->be[C10DI_DEV_CPU];
}

/* --- the progress thread --- */

/* Moves what has arrived for every group's posted receives (w->mu held:
 * a group leaves w->groups before its backend closes). */
static int progress_all(c10di_world *w)
{
    int moved = 0;
    for (c10d_pg *g = w->groups; g; g = g->next_in_world) {
        c10di_be_slot *s = cpu_slot(g);
        if (atomic_load(&g->data_ready) && s->ops && s->ops->recv_progress)
            moved |= s->ops->recv_progress(s->state);
    }
    return moved;
}

/* The thread ticks every millisecond while receives are posted (and for
 * a while after, so that a loop of irecv, send, wait never has to wake
 * it), moving their bytes; then it sleeps until the next is posted. It
 * must cost the latency path nothing: the thread that waits for a receive
 * moves its bytes itself, and a wake-up per receive (a futex call, a
 * thread competing for the core) cost a 4-byte irecv-send-wait exchange
 * several times its time on a 2-core machine. */
#define TICK_NS 1000000L
#define LINGER_MS 200

static void *progress_main(void *arg)
{
    c10di_world *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->progress_stop) {
        if (!atomic_load(&w->posted) &&
            c10d_now_ms() - atomic_load(&w->progress_last_post) > LINGER_MS) {
            atomic_store(&w->progress_asleep, 1);
            if (!atomic_load(&w->posted)) /* a post between the test and the flag wakes us */
                pthread_cond_wait(&w->progress_cv, &w->mu);
            atomic_store(&w->progress_asleep, 0);
            continue;
        }
        int moved = atomic_load(&w->posted) ? progress_all(w) : 0;
        pthread_mutex_unlock(&w->mu);
        if (!moved) { /* while bytes flow, straight on */
            struct timespec ts = {0, TICK_NS};
            nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* A receive was posted (w->posted counts it already). */
static void progress_kick(c10di_world *w)
{
    atomic_store(&w->progress_last_post, c10d_now_ms());
    if (atomic_load(&w->progress_on) && !atomic_load(&w->progress_asleep))
        return; /* ticking: it sees the receive within a tick */
    pthread_mutex_lock(&w->mu);
    /* Without the thread (none could be made) receives still move when
     * they are waited for. */
    if (!atomic_load(&w->progress_on) && !w->progress_stop &&
        pthread_create(&w->progress, NULL, progress_main, w) == 0)
        atomic_store(&w->progress_on, 1);
    pthread_cond_signal(&w->progress_cv);
    pthread_mutex_unlock(&w->mu);
}

void c10di_progress_stop(c10di_world *w)
{
    pthread_mutex_lock(&w->mu);
    w->progress_stop = 1;
    int on = atomic_exchange(&w->progress_on, 0);
    pthread_cond_broadcast(&w->progress_cv);
    pthread_mutex_unlock(&w->mu);
    if (on)
        pthread_join(w->progress, NULL);
}

/* --- a receive's life --- */

c10d_status c10di_post(c10d_pg *pg, c10d_work *w)
{
    c10di_coll *c = &w->c;
    w->r.c = c;
    atomic_fetch_add(&pg->w->posted, 1); /* before: it may end inside recv_post */
    c10d_status st = c->be->recv_post(c->be_state, &w->r);
    if (st == C10D_OK) {
        progress_kick(pg->w);
        return C10D_OK;
    }
    atomic_fetch_sub(&pg->w->posted, 1);
    return st;
}

void c10di_posted_abort(c10d_pg *pg)
{
    c10di_be_slot *s = cpu_slot(pg);
    if (!s->state || !s->ops->recv_abort)
        return;
    char msg[256];
    snprintf(msg, sizeof msg, "a recv posted on group %s never completed: the group was destroyed "
             "first", pg->name);
    s->ops->recv_abort(s->state, C10D_EABORTED, msg);
}
