/* The lane (lane.c): each group runs its operations one at a time, in the
 * order they were called. */
#ifndef C10DI_LANE_H
#define C10DI_LANE_H

#include "group.h"

c10d_status c10di_lane_start(c10d_pg *pg);
void c10di_lane_stop(c10d_pg *pg);
/* Waits until everything queued on pg's lane has run (been enqueued). */
void c10di_lane_drain(c10d_pg *pg);
int c10di_lane_busy(c10d_pg *pg);
c10d_status c10di_lane_submit(c10d_pg *pg, c10d_work *w);

#endif
