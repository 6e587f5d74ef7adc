/* What the runs suites share (unit/server/test_runs_lifecycle.c,
 * unit/server/test_runs_reclaim.c): an engine of its own for every case,
 * on a real SQLite file, without the network (engine_fixture.h); the
 * requests a run's members send it; and what its database and its store
 * hold. */
#ifndef C10D_TEST_RUNS_ENGINE_H
#define C10D_TEST_RUNS_ENGINE_H

#include "engine/request.h"
#include "engine_fixture.h"
#include "groups/runs.h"

#include <check.h>
#include <stdint.h>

/* the running case's engine (the fixture of runs_tcase starts it) */
extern engine_fixture fx;
/* A test case whose every case starts an engine of its own, with a
 * retention of 0 (a run's records are due when it ends; cases raise it)
 * and no sweep of the engine's own: the cases reclaim by hand
 * (c10ds_runs_reclaim), each step checked. */
TCase *runs_tcase(const char *name);

/* The coordinator restarted on the same database file: a new engine
 * (nothing in memory), the members' connections those of the old one. */
void reopen(void);
/* Runs one request; returns its reply (NULL if it parked). */
C10dpb__Reply *run1(c10ds_request *r);
/* Runs batches until a parked request's deadline answers it. */
C10dpb__Reply *await_reply(void);

/* Client `client` (on a connection of its own) joins job's "world" as
 * rank `rank` of `world`, from host node1, pid 1000 + rank, giving up
 * after 50 ms. */
c10ds_request *join_req(uint64_t client, const char *job, int rank, int world);
/* Client's connection closed (the listener's event). */
c10ds_request *closed_req(uint64_t client);
/* Rank `rank` of job's generation gen leaves (group_leave). */
c10ds_request *leave_req(uint64_t client, const char *job, uint64_t gen, int rank);
/* Rank `rank` entered collective #seq of kind `kind` (ASYNC: answered at once). */
c10ds_request *report_req(uint64_t client, const char *job, uint64_t gen, int rank, uint64_t seq,
                          uint32_t kind);
/* What c10d-ctl desync asks (coll_status) of job. */
c10ds_request *status_req(const char *job);
/* What c10d-ctl trace asks (coll_trace) of global rank `rank` of job. */
c10ds_request *trace_req(const char *job, int rank);

/* The first column of the first row of the query fmt, arg in its %s; -1
 * when there is no row. */
long long scalar(const char *fmt, const char *arg);
/* n keys "<prefix>k<i>" (the store's cached count follows). */
void put_many(const char *prefix, int n);
/* key set in the store (value "v"); whether key is there */
void put(const char *key);
int has(const char *key);
/* A world of n ranks of job formed (clients 1..n); its generation. */
uint64_t form(const char *job, int n);

/* runs.c's list of the tables of per-run records, and runs itself. */
#define RUNS_TABLE_ONE(t, k) 1 +
extern const char *const per_run_tables[C10DS_PER_RUN_TABLES(RUNS_TABLE_ONE) 1];
#undef RUNS_TABLE_ONE
/* Rows of job in every table of per-run records, and its jobs row. */
long long rows_of(const char *job);

#endif
