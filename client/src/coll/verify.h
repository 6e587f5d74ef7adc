/* Collective-sequence verification, the rank's side (verify.c). */
#ifndef C10DI_VERIFY_H
#define C10DI_VERIFY_H

#include "group/group.h"

/* The mode asked for, else C10D_VERIFY's (sync, async, off; SYNC when
 * unset); an unknown C10D_VERIFY is C10D_EINVAL. */
c10d_status c10di_verify_mode(c10d_verify asked, c10d_verify *out);
c10d_status c10di_verify_start(c10di_world *w);
void c10di_verify_stop(c10di_world *w);
/* Before c runs, as its plan says (c->plan.reporting): SYNC asks the
 * coordinator and waits for every member; QUEUE queues a report (sent at
 * once for a send/recv whose peer joined); NONE does nothing. The
 * coordinator's verdict against the group (a desync, a lost member, a
 * stall) is returned, and put in o->found and o->report for the call's
 * end to record. */
c10d_status c10di_verify_enter(c10d_pg *pg, const c10di_coll *c, c10di_outcome *o);
/* Sends the queued entries now (the reporter's batch; OFF's held ones). */
void c10di_verify_flush(c10di_world *w);

#endif
