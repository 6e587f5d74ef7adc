/* One call's way through the front end (plan.c): the backend that serves
 * it, the stages it passes before and after its backend runs it, and
 * what its end does to its group. */
#ifndef C10DI_PLAN_H
#define C10DI_PLAN_H

#include "group.h"

/* Which backend serves a call on `device` (C10D_CPU, a CUDA device,
 * C10DI_GROUP_DEVICE or C10DI_ANY_CUDA); fills c->device, c->be. */
c10d_status c10di_route(c10d_pg *pg, c10di_coll *c, int device, const char *fn);
/* Runs c now on this thread; marks the group broken on a failure that may
 * have left bytes in flight. */
c10d_status c10di_execute(c10d_pg *pg, c10di_coll *c);
/* C10D_EABORTED, with the message set, if pg is broken. */
c10d_status c10di_pg_usable(c10d_pg *pg, const c10di_coll *c);
/* Collective seq of pg completed (the highest so far stands). */
void c10di_pg_completed(c10d_pg *pg, uint64_t seq);
/* The group is unusable from now on, for st and msg (the first failure
 * stands); safe from any thread, with any lock held. */
void c10di_pg_break(c10d_pg *pg, c10d_status st, const char *msg);

#endif
