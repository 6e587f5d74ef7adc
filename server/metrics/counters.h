/* What the coordinator counts for its Prometheus endpoint (metrics.h):
 * the engine writes these, the HTTP thread reads them, so every field is
 * an atomic; nothing here locks, and a read sees each number whole (the
 * numbers together are not one snapshot, which Prometheus does not ask).
 *
 * Beneath the engine (it holds a c10ds_counters by value): this file
 * knows the database, never the engine or the network. */
#ifndef C10DS_COUNTERS_H
#define C10DS_COUNTERS_H

#include "db/db.h"

#include <stdatomic.h>
#include <stdint.h>

/* Operations counted by op_case (as c10ds_engine.ops); 0 holds the
 * requests of an operation this coordinator does not know. */
#define C10DS_COUNTED_OPS 64
/* The latency histogram's upper bounds, in seconds, then +Inf. */
#define C10DS_LATENCY_BUCKETS 12
extern const double c10ds_latency_bounds_s[C10DS_LATENCY_BUCKETS];

/* Findings by kind: the statuses the findings table records. */
enum { C10DS_FINDING_DESYNC, C10DS_FINDING_LOST_RANK, C10DS_FINDING_STALL, C10DS_FINDING_KINDS };
extern const char *const c10ds_finding_kinds[C10DS_FINDING_KINDS];

typedef struct c10ds_counters {
    atomic_llong served[C10DS_COUNTED_OPS];         /* requests answered, by op_case */
    atomic_llong latency[C10DS_LATENCY_BUCKETS + 1]; /* per bucket (not cumulative); last: +Inf */
    atomic_llong latency_sum_us;
    /* Gauges read from the database: only while wanted (an endpoint is
     * on), by the engine thread at its sweeps (c10ds_counters_refresh). */
    atomic_int wanted;
    atomic_int refreshed; /* the gauges below hold a reading */
    atomic_llong jobs_live;   /* runs with a member alive */
    atomic_llong ranks_alive; /* members alive, all runs */
    atomic_llong findings[C10DS_FINDING_KINDS]; /* kept (until --retention reclaims them) */
    int64_t next_refresh_ms; /* the engine's own: when the gauges are read next */
    sqlite3_stmt *q_jobs, *q_ranks, *q_findings;
} c10ds_counters;

/* A request answered after latency_us (from its arrival to its reply,
 * the commit and any time parked waiting for a key included). */
void c10ds_counters_served(c10ds_counters *c, int op_case, int64_t latency_us);
/* On the engine thread, inside its transaction: reads the gauges again
 * if wanted and at most once a second. */
void c10ds_counters_refresh(c10ds_counters *c, c10ds_db *db);
/* Finalizes the statements (the engine's fini, before the database closes). */
void c10ds_counters_fini(c10ds_counters *c);

#endif
