/* One call's way through the front end (plan.c): its plan, the stages it passes before and after its backend runs
 * it, and what its end does to its group. Below it: verification, join's
 * region, liveness, the backend table; none of them calls back up. */
#ifndef C10DI_PLAN_H
#define C10DI_PLAN_H

#include "group.h"

/* Computes c's plan (c->plan): what its stages need to know of the
 * group's verification mode and join region. */
void c10di_plan_call(c10d_pg *pg, c10di_coll *c);
/* A receive from any member (c->root C10DI_ANY_SOURCE), once its message
 * came from group rank `from`: c becomes the receive from `from`, planned
 * and reported to the coordinator as such, which then matches it with
 * that sender's send. What verification said (a coordinator that is down
 * loses the check only). */
c10d_status c10di_report_sender(c10d_pg *pg, c10di_coll *c, int from);
/* The stages before c runs, on the thread that runs it: planned, checked
 * against what is known of the group (unless the coordinator answers that
 * itself, in SYNC), verified, then join's stage. */
c10d_status c10di_call_enter(c10d_pg *pg, c10di_coll *c);
/* While blocked in c on pg (or before it runs): C10D_OK, or
 * C10D_EPEERLOST (a member of pg is gone) / C10D_EJOINED (a joined member
 * that c needs) / C10D_ETIMEDOUT (past c's deadline), with the message
 * set. `waiting_for` (a group rank or -1) is named in a timeout. */
c10d_status c10di_pg_check(c10d_pg *pg, const c10di_coll *c, int waiting_for);
/* Runs c now on this thread (c10di_call_enter, then its backend); marks
 * the group broken on a failure that may have left bytes in flight. */
c10d_status c10di_execute(c10d_pg *pg, c10di_coll *c);
/* C10D_EABORTED, with the message set, if pg is broken. */
c10d_status c10di_pg_usable(c10d_pg *pg, const c10di_coll *c);
/* Collective seq of pg completed (the highest so far stands). */
void c10di_pg_completed(c10d_pg *pg, uint64_t seq);
/* The group is unusable from now on, for st and msg (the first failure
 * stands); safe from any thread, with any lock held. */
void c10di_pg_break(c10d_pg *pg, c10d_status st, const char *msg);

#endif
