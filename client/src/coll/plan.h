/* One call's way through the front end (plan.c): its plan, and the
 * stages it passes before and after its backend runs it. Below it:
 * liveness (where a call begins and ends), join's region, verification;
 * none of them calls back up. */
#ifndef C10DI_PLAN_H
#define C10DI_PLAN_H

#include "group/group.h"

/* Fills in c's fingerprint and its description ("#5 ALL_REDUCE
 * float32[4] SUM"), once it is numbered; numel is one rank's block. */
void c10di_describe(c10di_coll *c, int64_t numel);
/* Computes c's plan (c->plan): what its stages need to know of the
 * group's verification mode and join region. */
void c10di_plan_call(c10d_pg *pg, c10di_coll *c);
/* A receive from any member (c->root C10DI_ANY_SOURCE), once its message
 * came from group rank `from`: c becomes the receive from `from`, planned
 * and reported to the coordinator as such, which then matches it with
 * that sender's send. What verification said (a coordinator that is down
 * loses the check only). */
c10d_status c10di_report_sender(c10d_pg *pg, c10di_coll *c, int from, c10di_outcome *o);
/* The stages before c runs, for a call that runs later (a posted
 * receive): planned, checked against what is known of the group (unless
 * the coordinator answers that itself, in SYNC), verified, then join's
 * stage; what they found is in o. A call refused here (or by its
 * posting) is ended by the caller (c10di_call_end); one posted ends
 * where its receive does (c10di_work_recv_done). */
c10d_status c10di_call_enter(c10d_pg *pg, c10di_coll *c, c10di_outcome *o);
/* As c10di_call_enter, for a call whose data plane is the program's
 * (checked.c): the heartbeat names c from now until its end. */
c10d_status c10di_call_open(c10d_pg *pg, c10di_coll *c, c10di_outcome *o);
/* While blocked in c on pg (or before it runs): C10D_OK, or
 * C10D_EPEERLOST (a member of pg is gone) / C10D_EJOINED (a joined member
 * that c needs) / C10D_ETIMEDOUT (past c's deadline), with the message
 * set. `waiting_for` (a group rank or -1) is named in a timeout. */
c10d_status c10di_pg_check(c10d_pg *pg, const c10di_coll *c, int waiting_for);
/* Runs c now on this thread: its stages, its backend, its end
 * (c10di_call_end: the group broken on a failure that may have left
 * bytes in flight). */
c10d_status c10di_execute(c10d_pg *pg, c10di_coll *c);

#endif
