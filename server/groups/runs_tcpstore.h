/* What TCPStore clients' runs leave in the store, and when it goes.
 *
 * The TCPStore port (net/tcpstore.c) keeps each run's keys under its own
 * prefix, tcpstore/<run>/ (net/tcpstore_runs.h says what a run is there).
 * A run's number is C10DS_TS_RUN_DIGITS hex digits: the coordinator's
 * start in the high bits, a count in the low ones, so every run of this
 * process sorts above every run of an earlier one. When a run is over the
 * port hands its prefix here (c10ds_ts_keys_drop): up to RUNS_END_KEYS of
 * its keys go at once, the rest in the sweeps. A restart ends every run at
 * once (no TCPStore client redials), so the sweeps also delete everything
 * under tcpstore/ below this process's first run: an earlier coordinator's
 * runs, and keys of the layout before runs. Runs on the engine thread,
 * inside its transaction. */
#ifndef C10DS_RUNS_TCPSTORE_H
#define C10DS_RUNS_TCPSTORE_H

#include <stddef.h>
#include <stdint.h>

#define C10DS_TS_RUN_DIGITS 16
/* "tcpstore/" + the run's digits + "/" */
#define C10DS_TS_RUN_PREFIX_BYTES (sizeof "tcpstore/" - 1 + C10DS_TS_RUN_DIGITS + 1)

typedef struct c10ds_engine c10ds_engine;

typedef struct c10ds_ts_keys {
    uint64_t base;     /* this process's first run number */
    char **due;        /* prefixes of runs over whose keys are not all gone */
    size_t n_due, cap_due;
    int earlier_done;  /* nothing is left below base */
} c10ds_ts_keys;

void c10ds_ts_keys_init(c10ds_ts_keys *k);
void c10ds_ts_keys_fini(c10ds_ts_keys *k);

/* The prefix of run number run into out (C10DS_TS_RUN_PREFIX_BYTES + 1). */
void c10ds_ts_run_prefix(char out[C10DS_TS_RUN_PREFIX_BYTES + 1], uint64_t run);

/* A TCPStore run is over: its keys under prefix go (engine thread). */
void c10ds_ts_keys_drop(c10ds_engine *e, const char *prefix);

/* Deletes up to budget keys of the runs over; the rows deleted. The
 * sweep's work, exposed for the tests. */
int64_t c10ds_ts_keys_sweep(c10ds_engine *e, int64_t budget);

#endif
