/* Work handles (work.c): a call the caller waits for, run on its group's
 * lane or posted in the backend's receive queue (posted.c). */
#ifndef C10DI_WORK_H
#define C10DI_WORK_H

#include "group/group.h"

struct c10d_work {
    c10d_pg *pg;
    c10di_coll c; /* owns c.outs and c.ins */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, freed; /* mu */
    c10d_status st;
    char msg[1024];
    c10di_lane_item on_lane;
    /* c.posted (posted.c): the receive in the backend's queue; its
     * deadline, set at the first wait (mu); whether a receive from any
     * member was reported to the coordinator (mu) */
    c10di_recv r;
    int64_t deadline_ms;
    int reported;
};

/* Runs c, numbered: now on this thread (c10di_execute) when it is sync
 * and nothing is queued on its group, else as a work handle: posted (an
 * async receive the backend takes so, posted.c) or queued on the group's
 * lane, then handed back in *work (async) or waited for. Takes c->outs
 * and c->ins. *give_back: the call was refused before it reached the lane
 * or the backend (no memory for its handle, no worker thread), so its
 * number is to be given back. */
c10d_status c10di_work_call(c10d_pg *pg, c10di_coll *c, c10d_work **work, int *give_back);
c10d_work *c10di_work_new(c10d_pg *pg, const c10di_coll *c);
void c10di_work_destroy(c10d_work *w);
/* Ends w with st (msg: why, if st is not C10D_OK) and wakes its waiters. */
void c10di_work_finish(c10d_work *w, c10d_status st, const char *msg);
/* What a group's lane is handed (c10di_lane_start): runs a work's call
 * (c10di_execute), then ends the work with how it went. */
c10d_status c10di_work_run(c10di_lane_item *it);
void c10di_work_ended(c10di_lane_item *it, c10d_status st);
/* The backend's recv_done hook: a posted receive ended (r is its work's
 * w->r); its work ends with it. */
void c10di_work_recv_done(c10d_pg *pg, c10di_recv *r);

#endif
