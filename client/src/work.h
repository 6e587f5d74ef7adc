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
    int posted;      /* an async recv not started yet (the lane's mu; see c10di_lane_post) */
    c10d_status st;
    char msg[1024];
    c10d_work *next;
};

/* Runs c now on this thread; marks the group broken on a failure that may
 * have left bytes in flight. */
c10d_status c10di_execute(c10d_pg *pg, c10di_coll *c);
c10d_work *c10di_work_new(c10d_pg *pg, const c10di_coll *c);
void c10di_work_destroy(c10d_work *w);
int c10di_lane_busy(c10d_pg *pg);
c10d_status c10di_lane_submit(c10d_pg *pg, c10d_work *w);
/* An async recv is posted, not queued: it starts (is queued on the lane,
 * in call order among the group's receives) when it is waited for, when a
 * later sync recv is called, or before any collective (on any group), so
 * the sends after it (an isend to the rank it receives from, say) are not
 * held up behind a receive that waits for them. */
void c10di_lane_post(c10d_pg *pg, c10d_work *w);
/* Starts the posted receives up to and including upto (NULL: all). */
c10d_status c10di_lane_start_posted(c10d_pg *pg, c10d_work *upto);

#endif
