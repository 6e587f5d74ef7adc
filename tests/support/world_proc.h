/* Multi-process jobs for tests: fork N ranks that each run a function,
 * then collect their exit codes; the coordinator they meet at. */
#ifndef C10D_TEST_WORLD_PROC_H
#define C10D_TEST_WORLD_PROC_H

#include "coord_proc.h"

#include <c10d/c10d.h>
#include <sys/types.h>

/* A rank's body: returns 0 on success (its exit code otherwise). */
typedef int (*rank_fn)(int rank, int n, void *arg);

/* Forks n ranks running fn; waits up to timeout_s for all (killing the
 * rest after). pids (n entries) may be NULL. Returns how many failed;
 * the first failure's rank and exit status go to *first_rank /
 * *first_status when given. */
int world_run(int n, rank_fn fn, void *arg, int timeout_s, pid_t *pids);
/* Forks without waiting; world_wait collects. */
void world_spawn(int n, rank_fn fn, void *arg, pid_t *pids);
int world_wait(int n, pid_t *pids, int timeout_s);

/* c10d_init with the given coordinator, job and rank; prints and returns
 * NULL on failure. */
c10d_pg *world_init(const char *url, const char *job, int rank, int n, int timeout_ms);
/* The same, in a verification mode. */
c10d_pg *world_init_verify(const char *url, const char *job, int rank, int n, int timeout_ms,
                           c10d_verify mode);

/* Runs checked all_reduces on pg (4 floats, values that change with the
 * step) until *stop_at, counting the completed ones in *progress: a job
 * that tests time through a coordinator's restart or failover. Returns 0,
 * 11 when one failed, 12 when one's result was wrong (said on stderr). */
int world_allreduce_until(c10d_pg *pg, int rank, int n, volatile long long *progress,
                          volatile long long *stop_at);

/* A coordinator of its own for every test case: world_coord_start and
 * world_coord_stop are a Check checked fixture's setup and teardown (a
 * start that fails fails the case); the ranks, forked after, find it at
 * world_coord.url. */
extern coord_proc world_coord;
void world_coord_start(void);
void world_coord_stop(void);

/* A job name unique to this test run. */
const char *world_job(const char *base);

#endif
