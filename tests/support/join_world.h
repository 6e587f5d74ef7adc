/* What the join suites share (test_join.c, test_join_identities.c,
 * test_join_failures.c, test_join_inband.c): the coordinator each case
 * starts, the scenario its forked ranks run, DDP's step with uneven
 * inputs, and how a rank checks the failure it expects. */
#ifndef C10D_TEST_JOIN_WORLD_H
#define C10D_TEST_JOIN_WORLD_H

#include "coord_proc.h"
#include "world_proc.h"

#include <c10d/c10d.h>
#include <check.h>
#include <stdio.h>

/* the coordinator of the running case (join_setup starts it) */
extern coord_proc coord;
void join_setup(void);
void join_teardown(void);

/* every verification mode, for loop tests (_i) */
extern const c10d_verify modes[3];
extern const char *const mode_names[3];

typedef struct {
    const char *job;
    c10d_verify mode;
    int kase;
    int opt; /* test-specific */
} scenario;

c10d_pg *init_mode(const scenario *sc, int rank, int n, int timeout_ms);
/* A world in sc's mode whose ranks have all begun a join region (default
 * options); NULL, having said why, if either failed. */
c10d_pg *region_start(const scenario *sc, int rank, int n, int timeout_ms);
/* The coordinator's log's tail on stderr when ranks failed. */
void dump_log_if(int failed);
/* Runs fn on n forked ranks; the case fails if any of them does. */
void run_world(int n, rank_fn fn, scenario *sc, int timeout_s);

/* In a rank: says why on stderr and returns code (the rank's exit status). */
#define FAIL(code, ...)                                                                            \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        return code;                                                                               \
    } while (0)

#define N_ELEMS 4

/* One step: DDP's gradient all_reduce (one bucket), checked against the
 * sum over the ranks that still had a batch at that step (batches[r]: how
 * many rank r has). 0, or the rank's exit code after saying why. */
int step(c10d_pg *pg, int rank, int i, const int *batches, int n);
/* 0 if st is want1 or want2, its message names n1 and n2 (either may be
 * NULL), and it came within 2 s (took); else says why and returns 30-33. */
int expect_failure(int rank, c10d_status st, long long took, c10d_status want1,
                   c10d_status want2, const char *n1, const char *n2);

/* A test case with the coordinator fixture and the suites' timeout. */
TCase *join_tcase(const char *name);

#endif
