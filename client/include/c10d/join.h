/* c10d/join.h — uneven inputs: ranks that run out of data early keep the
 * others going (torch's DDP Join, without its extra collectives).
 *
 *   c10d_join_opts jo = C10D_JOIN_OPTS_INIT;
 *   c10d_join_begin(pg, &jo);              every rank, before the loop
 *   while (next_batch(&b))                 each rank has its own number of
 *       train_step(pg, &b);                batches; collectives as usual
 *   int last;
 *   c10d_join_end(pg, &last);              out of inputs
 *   c10d_broadcast(pg, &weights, last, NULL, NULL);   the group is whole again
 *
 * A rank that calls c10d_join_end has *joined*: until every member has
 * joined, it takes part in every collective the others still issue,
 * contributing the operation's identity (0 for SUM and AVG, 1 for PROD,
 * the dtype's largest/lowest value for MIN/MAX), and discards the results;
 * it takes part in barriers and receives broadcasts. The coordinator tells
 * it, one by one and in order, what the others called (checked first, as
 * verification does), so nobody issues an extra collective per step; while
 * nobody has joined a join region costs nothing beyond the group's
 * verification mode. A collective that needs data a joined rank does not
 * have — all_gather, gather, scatter, all_to_all, anything rooted at a
 * joined rank, a send or recv with one — fails with C10D_EJOINED on every
 * rank, naming it and who joined, instead of hanging. See docs/join.md. */
#ifndef C10D_JOIN_H
#define C10D_JOIN_H

#include "common.h"
#include "errors.h"
#include "pg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define C10D_JOIN_OPTS_VERSION 1

/* Start with C10D_JOIN_OPTS_INIT (its version first: see c10d/coll.h). */
typedef struct c10d_join_opts {
    unsigned int version; /* C10D_JOIN_OPTS_VERSION */
    /* 1: the first rank to join makes every rank's pending and next
     * collective fail with C10D_EJOINED ("rank 0 ran out of inputs after
     * collective #10"), its own c10d_join_end too: for jobs that must not
     * train on uneven data. */
    int throw_on_early_termination;
    /* AVG divides by the group's size (1), as if the joined ranks had
     * contributed zeros; 0: by the ranks that contributed data. */
    int divide_by_initial_world_size;
} c10d_join_opts;

#define C10D_JOIN_OPTS_INIT {C10D_JOIN_OPTS_VERSION, 0, 1}

/* This rank enters a join region of pg (o NULL: defaults). Every member
 * calls it, with the same options; it is no collective (one round trip to
 * the coordinator, which learns the options). Errors: C10D_EINVAL (already
 * in a region, or options that differ from another member's). */
C10D_API c10d_status c10d_join_begin(c10d_pg *pg, const c10d_join_opts *o);

/* This rank is out of inputs. Its own queued collectives finish first;
 * then it shadows the others' collectives until every member has called
 * c10d_join_end, and returns with *last_joiner (a rank of pg, the same on
 * every rank) = the rank that joined last (after the most collectives;
 * ties: the highest rank). The region is then over and pg is whole again.
 * Errors: C10D_EINVAL (no c10d_join_begin), C10D_EJOINED (throw mode, or a
 * collective a joined rank cannot take part in), C10D_EDESYNC (the others
 * disagree about a collective), C10D_EPEERLOST (a member died or left
 * instead of joining), C10D_ETIMEDOUT (nobody issued a collective or
 * joined within the group's timeout). After an error pg is unusable. */
C10D_API c10d_status c10d_join_end(c10d_pg *pg, int *last_joiner);

/* How many ranks contributed data to this rank's last collective on pg:
 * its size, less the ranks that had joined (for scaling by hand, as with
 * divide_by_initial_world_size = 0). -1 for NULL. */
C10D_API int c10d_active_ranks(const c10d_pg *pg);

#ifdef __cplusplus
}
#endif
#endif
