/* What join.c offers the rest of the front end: what this rank hears of
 * the joins in its groups' regions (from the coordinator's watch, from a
 * peer's transfer header, from itself in join_end). c10d_join_begin is
 * join.c's too; reading the region is join_region.h's. */
#ifndef C10DI_JOIN_INTERNAL_H
#define C10DI_JOIN_INTERNAL_H

#include "group/group.h"

/* Tells waiters that the joins of the group changed (j->epoch). */
void c10di_joins_changed(c10di_join *j);
/* Group rank idx joined this region after collective `after`, as this rank
 * saw for itself (pg->w->mu held). */
void c10di_join_note(c10d_pg *pg, int idx, uint64_t after);
/* A peer's transfer header said it joined after collective `after`. */
void c10di_join_heard(c10d_pg *pg, int peer, uint64_t after);
/* The watcher: applies a JoinState from the coordinator (1 if it told
 * something new), and lists what to acknowledge on the next watch (free
 * *acks and its entries with c10di_join_acks_free). */
int c10di_join_apply(c10di_world *w, const C10dpb__JoinState *js);
size_t c10di_join_acks(c10di_world *w, C10dpb__JoinKnown ***acks);
void c10di_join_acks_free(C10dpb__JoinKnown **acks, size_t n);

#endif
