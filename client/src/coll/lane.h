/* The lane (lane.c): each group runs its operations one at a time, in the
 * order they were called, on the caller's thread or the lane's. */
#ifndef C10DI_LANE_H
#define C10DI_LANE_H

#include "internal.h"

#include <pthread.h>

typedef struct c10di_lane c10di_lane;

/* What is queued: embedded in the caller's own record. */
typedef struct c10di_lane_item {
    struct c10di_lane_item *next;
} c10di_lane_item;

/* What the lane is handed: run_item runs an item on the lane's thread; ended
 * follows once the lane no longer counts it as in flight, on that thread
 * too (the item may be freed from then on). */
typedef c10d_status (*c10di_lane_run_fn)(c10di_lane_item *it);
typedef void (*c10di_lane_ended_fn)(c10di_lane_item *it, c10d_status st);

c10d_status c10di_lane_start(c10di_lane **out, c10di_lane_run_fn run_item,
                             c10di_lane_ended_fn ended);
/* Runs what was queued, then frees the lane. */
void c10di_lane_stop(c10di_lane *l);
/* Waits until everything queued on the lane has run (been enqueued). */
void c10di_lane_drain(c10di_lane *l);
/* Something is queued or running. */
int c10di_lane_busy(c10di_lane *l);
c10d_status c10di_lane_submit(c10di_lane *l, c10di_lane_item *it);

#endif
