/* Where a run's store lives. A run is one generation of a job (one
 * incarnation: a job restarted by its launcher is a new run). The store a
 * run's ranks share (what the PyTorch backend hands torch, c10d_run_store)
 * is the coordinator's store under the key prefix
 *
 *     jobs/<job>/<generation>/
 *
 * so nothing a finished run wrote is seen by the next, nor one job's keys
 * by another, and the coordinator removes the run's keys by that prefix
 * when the run is over. In the job's name '%' and '/' are written %25 and
 * %2F, so one job's prefix is never inside another's ("a" and "a/1"). */
#ifndef C10D_RUN_SCOPE_H
#define C10D_RUN_SCOPE_H

#include <stddef.h>
#include <stdint.h>

#define C10D_RUN_SCOPE_ROOT "jobs/"

/* Room for the prefix of any job name of up to name_bytes bytes. */
#define C10D_RUN_SCOPE_BYTES(name_bytes) (sizeof C10D_RUN_SCOPE_ROOT + 3 * (name_bytes) + 24)

/* Writes the run's prefix (NUL-terminated) into buf; returns its length,
 * or 0 when it does not fit in len bytes. */
size_t c10d_run_scope(char *buf, size_t len, const char *job, uint64_t generation);

/* The run a key belongs to: 1 when key lies under some run's prefix
 * (jobs/<job>/<generation>/...), with the job's name unescaped into job
 * (room for cap bytes) and the generation in *generation; 0 for any other
 * key (the root of the store, jobs/<job> without a generation). A name
 * longer than cap - 1 bytes is cut (the caller's limit on names is
 * smaller): the key is still a run's. The coordinator's writes rule
 * (only a run's ranks write its store) reads keys through this. */
int c10d_run_scope_parse(const char *key, char *job, size_t cap, uint64_t *generation);

#endif
