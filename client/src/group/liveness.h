/* A group's health as its calls see it (liveness.c): usable or broken,
 * completed up to where, the members lost and the findings recorded (by
 * the watcher, watch.c, and by the calls' ends); a call's beginning and
 * end; and what this rank is doing, for its heartbeat. */
#ifndef C10DI_LIVENESS_H
#define C10DI_LIVENESS_H

#include "group/group.h"

/* "in <a><b><c><d>" until c10di_activity_done makes it "idle after ...". */
void c10di_activity(c10di_world *w, const char *a, const char *b, const char *c, const char *d);
void c10di_activity_done(c10di_world *w);
void c10di_activity_read(c10di_world *w, char *out, size_t cap);
/* C10D_OK, or why pg cannot go on with c (NULL: a setup step): a finding
 * on the group, or a member lost that matters at c (C10D_EPEERLOST), with
 * the message set. */
c10d_status c10di_pg_lost(c10d_pg *pg, const c10di_coll *c);
/* A call starts on this thread: C10D_EABORTED if pg is broken
 * (c10di_pg_break); then, with `announce`, what the rank does is now c
 * (c10di_activity, for the heartbeat; o->announced set); then, with
 * `check`, why pg cannot go on with it (c10di_pg_lost). The first stage
 * of a call, so that the heartbeat names c before the check can fail it. */
c10d_status c10di_call_begin(c10d_pg *pg, const c10di_coll *c, int announce, int check,
                             c10di_outcome *o);
/* c ended with st: records what its stages found (o->found) as the
 * group's finding, marks c completed, or the group broken after a failure
 * that may have left bytes in flight (anything but C10D_EINVAL; not a
 * monitored barrier, met through the store), and ends the activity it
 * announced. */
void c10di_call_end(c10d_pg *pg, const c10di_coll *c, c10d_status st, const c10di_outcome *o);
/* Collective seq of pg completed (the highest so far stands). */
void c10di_pg_completed(c10d_pg *pg, uint64_t seq);
/* The group is unusable from now on, for st and msg (the first failure
 * stands); safe from any thread, with any lock held. */
void c10di_pg_break(c10d_pg *pg, c10d_status st, const char *msg);
/* Without side effects, from any thread: why collective seq of pg cannot
 * complete (a finding on the group, or a member lost that had not
 * finished seq), as C10D_EDESYNC / C10D_EPEERLOST / C10D_ETIMEDOUT with the
 * report in msg; C10D_OK if nothing is known against it. */
c10d_status c10di_pg_failure(c10d_pg *pg, uint64_t seq, char *msg, size_t cap);
/* A finding on group: every later call on it reports it (the first one
 * stands). */
void c10di_record_alert(c10di_world *w, const char *group, c10d_status st, const char *report);
void c10di_alerts_free(c10di_world *w);

#endif
