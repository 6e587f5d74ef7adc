/* What the two halves of join share inside the library: join.c (the
 * active ranks' side: join_begin, the checks, what the watcher learns)
 * and join_shadow.c (a joined rank's side: join_end and its shadows). */
#ifndef C10DI_JOIN_INTERNAL_H
#define C10DI_JOIN_INTERNAL_H

#include "pg_internal.h"

/* after[i] of a member that has not joined */
#define NOT_JOINED UINT64_MAX

/* This rank is inside a join region of pg. */
int c10di_join_in_region(c10d_pg *pg);
/* How many members are active (had not joined before it) at collective
 * seq; lock-free in a steady shadowed loop. */
int c10di_join_active_at(c10d_pg *pg, uint64_t seq);
/* Tells waiters that the joins of the group changed (j->epoch). */
void c10di_joins_changed(c10di_join *j);
/* Group rank idx joined this region after collective `after`, as this rank
 * saw for itself (pg->w->mu held). */
void c10di_join_note(c10d_pg *pg, int idx, uint64_t after);
/* 1 when a joined rank cannot take part in collective seq (fp) called by
 * `caller`, with the report that says why in report. */
int c10di_join_unshadowable_report(c10d_pg *pg, uint64_t seq, const c10dc_fp *fp, int caller,
                                   char *report, size_t cap);

#endif
