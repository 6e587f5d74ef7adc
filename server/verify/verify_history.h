/* What verification leaves in the database for a run that ended, and the
 * views of it. When a run is over its groups' state (their traces: up to
 * C10DS_TRACE_SEQS collectives per rank and group) leaves memory
 * (verify_ops.c, run_ended): a coordinator serving a day of jobs must not
 * hold each one's until --retention reclaims its records. Before it goes,
 * where each member stood is written (group_progress, schema 12) and the
 * traces flushed (coll_trace); c10d-ctl desync (coll_status) and trace
 * (coll_trace) read them from there when memory has nothing of a group.
 * Findings were written when made. */
#ifndef C10DS_VERIFY_HISTORY_H
#define C10DS_VERIFY_HISTORY_H

#include "verify/verify.h"

#include "c10d.pb-c.h"

#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_engine c10ds_engine;

/* Writes where each member of g stands. g's traces are verify_trace.c's
 * to write (c10ds_traces_flush_group, verify.h), and the caller's to
 * flush first: verify_trace.c reads this file's rows for coll_trace, so
 * were this file to call it back, the two would call each other. */
void c10ds_verify_history_write(c10ds_engine *e, c10ds_vgroup *g);

/* Group g's health as coll_status shows it (every string its own). */
C10dpb__GroupHealth *c10ds_health_of(const c10ds_vgroup *g);
/* Group `name` of (job, gen), size members, from the database: its
 * finding and where its members stood when the run ended. NULL when the
 * database holds neither (or out of memory). */
C10dpb__GroupHealth *c10ds_verify_history_health(c10ds_engine *e, const char *job, uint64_t gen,
                                                 const char *name, int size);
void c10ds_health_free(C10dpb__GroupHealth *h);

/* Global rank `rank`'s trace in group `name` of (job, gen) from the
 * database: the rows holding its newest `limit` collectives, oldest first,
 * each's state as at the run's end. *rows NULL and *n 0 when there are
 * none. -1 out of memory or on a database error. */
int c10ds_verify_history_trace(c10ds_engine *e, const char *job, uint64_t gen, const char *name,
                               int rank, size_t limit, C10dpb__TraceRow ***rows, size_t *n);
void c10ds_trace_rows_free(C10dpb__TraceRow **rows, size_t n);

#endif
