/* Posted receives (posted.c): an async recv into a CPU buffer is not
 * queued on the lane, where it would hold up the sends after it (an isend
 * to the rank it receives from, say) and every later call of its group.
 * It is checked, numbered and reported now, then posted in the backend's
 * receive queue, which matches it to its message from whichever thread
 * makes progress. */
#ifndef C10DI_POSTED_H
#define C10DI_POSTED_H

#include "work.h"

c10d_status c10di_post(c10d_pg *pg, c10d_work *w);
/* c10d_work_wait of a posted receive: limit_ms as c10di_timeout gives it
 * (INT_MAX: until it ends, 0: no wait). C10D_ETIMEDOUT (message set) if
 * it had not ended by then; else C10D_OK, w->st says how it ended. */
c10d_status c10di_posted_wait(c10d_work *w, int limit_ms);
/* 1 if w ended, after moving what has arrived (no wait). */
int c10di_posted_test(c10d_work *w);
/* c10d_work_free of a posted receive: it takes no message from now on. */
void c10di_posted_cancel(c10d_work *w);
/* Ends, as aborted, the receives posted on pg (it is being destroyed). */
void c10di_posted_abort(c10d_pg *pg);
/* The backend's recv_done hook: a posted receive ended. */
void c10di_posted_done(c10d_pg *pg, c10di_recv *r);
/* Stops w's progress thread (w is being freed). */
void c10di_progress_stop(c10di_world *w);

#endif
