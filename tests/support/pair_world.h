/* The world the liveness and run tests share: the case's coordinator
 * (world_coord), a scoreboard in memory shared with the forked ranks, and
 * a job of three ranks whose ranks 0 and 1 share a pair group that rank
 * 2's death (or stop) leaves whole. Each test then says only what it
 * does to that world. */
#ifndef C10D_TEST_PAIR_WORLD_H
#define C10D_TEST_PAIR_WORLD_H

#include "world_proc.h"

#include <check.h>

#include <stdint.h>
#include <stdio.h>

/* Shared between the test and its rank processes (MAP_SHARED). */
typedef struct {
    volatile int ready;          /* ranks ready */
    volatile int go, done;       /* the test's signals to its ranks */
    volatile long long event_ms; /* when the test struck (killed or stopped a rank) */
    volatile int pid[8];         /* each rank's, once ready */
    char job[128];
} pair_shared;

/* The case's scoreboard, zeroed by pair_world_setup. */
extern pair_shared *sh;

/* A Check checked fixture: the case's coordinator and a fresh scoreboard. */
void pair_world_setup(void);
void pair_world_teardown(void);

/* Names the case's job (sh->job, after job_base) and forks its n ranks,
 * each running fn (world_spawn). */
void pair_world_spawn(const char *job_base, int n, rank_fn fn, pid_t *pids);

/* Rank `rank` of n joins sh->job (verification `mode`, `timeout_ms` for
 * its calls) and makes the pair group of ranks 0 and 1 (*pair; NULL on
 * other ranks), then records its pid and counts itself ready. Rank 2
 * then pauses until the test kills it: it never returns. NULL (printed)
 * on failure. */
c10d_pg *pair_world_join(int rank, int n, int timeout_ms, c10d_verify mode, c10d_pg **pair);

/* A test program's main: one Check case named `name` (60 s a test) with
 * the pair world's fixture, setup (NULL: pair_world_setup) first, running
 * tests (NULL-ended). Returns the exit status. */
int pair_world_main(const char *name, void (*setup)(void), const TTest *const *tests);

/* 1 if an all_reduce (SUM) of `mine` over pg gives `want`. */
int pair_all_reduce_is(c10d_pg *pg, int64_t mine, int64_t want);

/* In a rank's body: says why on stderr and returns code, its exit status. */
#define FAIL(code, ...) return fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), (code)

#endif
