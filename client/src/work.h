/* Work handles and the per-group lane (work.c). */
#ifndef C10DI_WORK_H
#define C10DI_WORK_H

#include "pg_internal.h"

struct c10d_work {
    c10d_pg *pg;
    c10di_coll c; /* owns c.outs and c.ins */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, freed; /* mu */
    c10d_status st;
    char msg[1024];
    c10d_work *next;
    /* c.posted (posted.c): the receive in the backend's queue; its
     * deadline, set at the first wait (mu); whether a receive from any
     * member was reported to the coordinator (mu) */
    c10di_recv r;
    int64_t deadline_ms;
    int reported;
};

/* Runs c now on this thread; marks the group broken on a failure that may
 * have left bytes in flight. */
c10d_status c10di_execute(c10d_pg *pg, c10di_coll *c);
/* C10D_EABORTED, with the message set, if pg is broken. */
c10d_status c10di_pg_usable(c10d_pg *pg, const c10di_coll *c);
c10d_work *c10di_work_new(c10d_pg *pg, const c10di_coll *c);
void c10di_work_destroy(c10d_work *w);
int c10di_lane_busy(c10d_pg *pg);
c10d_status c10di_lane_submit(c10d_pg *pg, c10d_work *w);
/* Ends w with st (msg: why, if st is not C10D_OK) and wakes its waiters. */
void c10di_work_finish(c10d_work *w, c10d_status st, const char *msg);

/* posted.c: an async recv into a CPU buffer is not queued on the lane, where
 * it would hold up the sends after it (an isend to the rank it receives
 * from, say) and every later call of its group. It is checked, numbered
 * and reported now, then posted in the backend's receive queue, which
 * matches it to its message from whichever thread makes progress. */
c10d_status c10di_post(c10d_pg *pg, c10d_work *w);
/* c10d_work_wait of a posted receive: limit_ms as c10di_timeout gives it
 * (INT_MAX: until it ends, 0: no wait). C10D_ETIMEDOUT (message set) if
 * it had not ended by then; else C10D_OK, w->st says how it ended. */
c10d_status c10di_posted_wait(c10d_work *w, int limit_ms);
/* 1 if w ended, after moving what has arrived (no wait). */
int c10di_posted_test(c10d_work *w);
/* c10d_work_free of a posted receive: it takes no message from now on. */
void c10di_posted_cancel(c10d_work *w);

#endif
