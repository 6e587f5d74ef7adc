/* The collectives battery (support/coll_battery.c) that test_collectives.c
 * and test_collectives_transports.c run in every world: every collective
 * of the host backend, in every dtype and reduce op, sync and async, sizes
 * from 0 elements to ones that take the ring paths and ones not divisible
 * by the world size, each checked against a reference computed locally
 * (coll_reference.h). One battery on purpose: every check runs in every
 * world, over every transport. */
#ifndef C10D_TEST_COLL_BATTERY_H
#define C10D_TEST_COLL_BATTERY_H

#include <stddef.h>

/* when set, a rank may map at most this much shared memory (bytes) */
extern size_t shm_limit;
/* One rank's side of the battery (a rank_fn; arg: the job), against
 * world_coord: 0, or 1 having said what failed on stderr. */
int battery(int rank, int n, void *arg);
/* The battery on n forked ranks of a new job; the case fails if a rank does. */
void run_battery(int n);

#endif
