/* A monitored barrier's meeting (monitored_barrier.c). */
#ifndef C10DI_MONITORED_BARRIER_H
#define C10DI_MONITORED_BARRIER_H

#include "group/group.h"

/* The barrier itself, through the store, once c is numbered and verified
 * (a joined rank's shadow runs it too). */
c10d_status c10di_monitored_barrier_meet(c10d_pg *pg, const c10di_coll *c, int wait_all_ranks);
/* The "backend" a monitored barrier runs on: the coordinator's store (it
 * is numbered, verified, ordered on the lane and checked for a broken
 * group like every collective; only where it meets differs). */
extern const struct c10di_backend_ops c10di_monitored_ops;

#endif
