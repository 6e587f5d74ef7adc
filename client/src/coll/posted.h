/* Posted receives (posted.c): an async recv into a CPU buffer is not
 * queued on the lane, where it would hold up the sends after it (an isend
 * to the rank it receives from, say) and every later call of its group.
 * It is checked, numbered and reported now, then posted in the backend's
 * receive queue, which matches it to its message from whichever thread
 * makes progress. Its handle is waited for, tested and cancelled as every
 * work handle is, and ends with its work (c10di_work_recv_done, work.c). */
#ifndef C10DI_POSTED_H
#define C10DI_POSTED_H

#include "coll/work.h"

/* Posts w's receive (w->c.posted set), once its stages passed
 * (c10di_call_enter); on a failure the caller ends the call
 * (c10di_call_end). */
c10d_status c10di_post(c10d_pg *pg, c10d_work *w);
/* Ends, as aborted, the receives posted on pg (it is being destroyed). */
void c10di_posted_abort(c10d_pg *pg);
/* Stops w's progress thread (w is being freed). */
void c10di_progress_stop(c10di_world *w);

#endif
