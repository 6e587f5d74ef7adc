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
};

/* Runs c now on this thread; marks the group broken on a failure that may
 * have left bytes in flight. */
c10d_status c10di_execute(c10d_pg *pg, c10di_coll *c);
c10d_work *c10di_work_new(c10d_pg *pg, const c10di_coll *c);
void c10di_work_destroy(c10d_work *w);
int c10di_lane_busy(c10d_pg *pg);
c10d_status c10di_lane_submit(c10d_pg *pg, c10d_work *w);

#endif
