/* A group's join region as a call reads it (join_region.c): whether this
 * rank is in one, what it knows of who joined and after which collective,
 * and the checks a call passes because of it. The region is begun and
 * what is heard of it written by join.c; a joined rank's side is
 * join_shadow.c. */
#ifndef C10DI_JOIN_REGION_H
#define C10DI_JOIN_REGION_H

#include "group/group.h"

/* after[i] of a member that has not joined */
#define NOT_JOINED C10DI_NOT_JOINED

/* What c's plan takes from the region (c->plan's region, inband, known,
 * avg_by_active, and whether a send/recv's peer has joined), read once. */
void c10di_join_plan(c10d_pg *pg, const c10di_coll *c, c10di_plan *p);
/* This rank is inside a join region of pg. */
int c10di_join_in_region(c10d_pg *pg);
/* The joins this rank knows of in pg's region (CollEntry.join_known). */
unsigned c10di_join_known(c10d_pg *pg);
/* Whether c is an AVG over the ranks that have not joined (in a region
 * with divide_by_initial_world_size = 0): its divisor is known only once
 * the coordinator answered. */
int c10di_join_avg_by_active(c10d_pg *pg, const c10di_coll *c);
/* How many members are active (had not joined before it) at collective
 * seq; lock-free in a steady shadowed loop. */
int c10di_join_active_at(c10d_pg *pg, uint64_t seq);
/* Join's stage, before c runs (c planned and verified; a SYNC answer means
 * the coordinator told this rank every join that c depends on): a
 * send/recv whose peer had joined when it was planned is refused
 * (C10D_EJOINED, the message set); else sets c->divisor for an AVG that
 * divides by the active ranks and c->alone for the last active rank, and
 * returns C10D_EJOINED (c10di_join_check, its finding in o) if a joined
 * rank cannot take part. A shadow passes. */
c10d_status c10di_join_enter(c10d_pg *pg, c10di_coll *c, c10di_outcome *o);
/* Inside a region whose joined ranks shadow in-band, while c (not a
 * shadow) runs or waits: C10D_EJOINED if a member joined before c and c
 * needs it (c10dc_join_unshadowable), after telling the joined ranks on
 * the data plane, with the group's finding in o (recorded by the caller);
 * a monitored barrier is announced to them. */
c10d_status c10di_join_check(c10d_pg *pg, const c10di_coll *c, c10di_outcome *o);
/* 1 when a joined rank cannot take part in collective seq (fp) called by
 * `caller`, with the report that says why in report (pg->w->mu held). */
int c10di_join_unshadowable_report(c10d_pg *pg, uint64_t seq, const c10dc_fp *fp, int caller,
                                   char *report, size_t cap);
/* After c ran: what c10d_active_ranks says. */
void c10di_join_ran(c10d_pg *pg, const c10di_coll *c);

#endif
