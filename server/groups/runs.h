/* Runs: a run is one generation of a job, from its first rank's arrival
 * until none of its members is alive, and what is reclaimed after it.
 *
 * A coordinator is long-lived (DESIGN.md, "Many jobs, one coordinator"):
 * it serves job after job and jobs side by side, so what a run leaves
 * must go, or a coordinator that runs for months grows without bound.
 *
 * - A run starts with its generation (rendezvous_ops.c announces it): a
 *   row in `runs` (schema/010_runs.sql).
 * - It is over when its last alive member leaves or is declared dead (or,
 *   never formed, its last arrival gives up or dies): the transaction that
 *   marks that member records the end, tells the other modules
 *   (run_ended, events.h: what they keep in memory for the run goes, its
 *   post-mortem written to the database first) and deletes up to
 *   RUNS_END_KEYS of the run's store keys, everything under
 *   jobs/<job>/<generation>/ (common/run_scope.h); the sweep deletes the
 *   rest, in bounded batches (runs.keys_ms, schema/011_run_keys.sql).
 * - Its records (members, their finals, groups, their ranks and endpoints,
 *   findings, traces, join regions; what c10d-ctl status, desync and trace
 *   show for a post-mortem) stay for --retention, then the sweep deletes
 *   them, at most RUNS_RECLAIM_ROWS rows a sweep (with its keys), and the
 *   job's row once nothing of the job is left.
 * - Generation numbers never repeat on a coordinator: a job whose row was
 *   reclaimed starts above the highest generation of any job reclaimed
 *   (the floor, in `meta`), so a key written late into an old run's store
 *   (a straggler's c10d_run_store handle) is never in a later run's.
 *
 * All of it is this module's listener (c10ds_runs_listener, events.h):
 * the modules that change membership only announce it. */
#ifndef C10DS_RUNS_H
#define C10DS_RUNS_H

#include "db/db.h"

#include <c10d/pg.h>
#include <stdint.h>

/* The most rows one sweep deletes, store keys and records together (at
 * most 8.4 ms here, ~1.5 us a row in bounded statements; sweeps come every
 * 500 ms): a run that left 100,000 keys, a backlog after a restart, or a
 * run of 10,000 ranks with their traces, never holds the engine for long. */
#define RUNS_RECLAIM_ROWS 5000
/* The most store keys deleted in the transaction that ends a run (about
 * 0.6 ms here): a run that wrote no more is gone at once, when its last
 * rank's c10d_destroy returns; a bigger one's rest goes in the sweeps. */
#define RUNS_END_KEYS 1000
/* Runs are read RUNS_RECLAIM_RUNS at a time, up to RUNS_RECLAIM_BATCHES
 * times a sweep while its rows last (a run over with no rows left still
 * costs its few statements: the batches bound those). */
#define RUNS_RECLAIM_RUNS 16
#define RUNS_RECLAIM_BATCHES 64

/* The tables that hold a run's records, keyed (job, generation, key...),
 * with the rest of their primary key: X(table, key). Reclaiming deletes
 * them in this order. groups first: verification makes a group's state
 * again from its row (c10ds_verify_group), so once it is gone nothing of
 * the run comes back into memory while the rest is deleted over several
 * sweeps. A new table of per-run records goes here (test_runs_reclaim
 * checks the schema against this list); `runs` itself is deleted last, on
 * its own. */
#define C10DS_PER_RUN_TABLES(X)                                                                    \
    X(groups, "name")                                                                              \
    X(group_ranks, "name, idx")                                                                    \
    X(group_members, "name, idx")                                                                  \
    X(findings, "name")                                                                            \
    X(group_progress, "name, idx")                                                                 \
    X(coll_trace, "name, rank, first_seq")                                                         \
    X(join_members, "name, region, rank")                                                          \
    X(join_regions, "name, region")                                                                \
    X(member_finals, "rank, grp")                                                                  \
    X(members, "rank")

#define C10DS_RUNS_COUNT_ONE_(table, key) +1
/* How many tables C10DS_PER_RUN_TABLES lists. */
#define C10DS_PER_RUN_TABLE_COUNT (0 C10DS_PER_RUN_TABLES(C10DS_RUNS_COUNT_ONE_))

enum {
    RS_START,
    RS_END,
    RS_OVER,
    RS_KEYS_DUE,
    RS_KEYS_DONE,
    RS_DUE,
    RS_FORGET,
    RS_FLOOR_RAISE,
    RS_FLOOR_GET,
    RS_JOB_GONE,
    RS_TABLES, /* then one bounded delete per table of per-run records */
    RS_COUNT = RS_TABLES + C10DS_PER_RUN_TABLE_COUNT
};

typedef struct c10ds_runs {
    sqlite3_stmt *st[RS_COUNT];
    /* The run being reclaimed (it may take several sweeps) and the rows
     * it has lost so far, for its log line. */
    char job[C10D_MAX_JOB_BYTES + 1];
    uint64_t gen;
    int64_t rows;
    /* The same for the run whose store keys the sweep deletes. */
    char keys_job[C10D_MAX_JOB_BYTES + 1];
    uint64_t keys_gen;
    int64_t keys;
} c10ds_runs;

int c10ds_runs_init(c10ds_runs *r, c10ds_db *db);
void c10ds_runs_fini(c10ds_runs *r);

typedef struct c10ds_engine c10ds_engine;

/* Deletes what runs over left, at most budget rows (store keys and
 * records together): first the store keys their ends left, then the
 * records of the runs over for longer than the retention at now_ms
 * (c10d_steady_wall_ms) whose keys are gone, the longest over first.
 * Returns the rows deleted, or -1 on a database error. The sweep's work
 * (with RUNS_RECLAIM_ROWS), exposed for the tests. */
int64_t c10ds_runs_reclaim(c10ds_engine *e, int64_t now_ms, int64_t budget);

/* 1 if run (job, gen) is over, 0 if not (or it has no row), -1 on a
 * database error. What a module keeps in memory for a run is not made
 * again for a run that is over (its post-mortem is in the database). */
int c10ds_run_over(c10ds_engine *e, const char *job, uint64_t gen);

/* The generation a job with no row starts at: above every generation of
 * the jobs reclaimed so far (the floor; 1 on a new coordinator), so that
 * no run's prefix is ever used twice. 0 on a database error. */
uint64_t c10ds_runs_first_generation(c10ds_engine *e);

#endif
