/* c10d-run's questions to the coordinator about a failed attempt. */
#ifndef C10D_RUN_FINDINGS_H
#define C10D_RUN_FINDINGS_H

#include <stddef.h>
#include <stdint.h>

/* Of the global ranks in failed[] (n_failed of them), the one the
 * coordinator at coord saw go first in job (dead or left, earliest), with
 * why ("dead: its connection closed ..."), or -1 when it cannot say. */
int run_first_to_go(const char *coord, const char *job, const int *failed, int n_failed,
                    char *why, size_t cap);

/* The job's verification finding of a generation after `after` (a desync
 * before a lost member or a stall), as "(EDESYNC): desync in group ...":
 * 1 with *gen and out set, 0 when there is none or the coordinator did not
 * answer. */
int run_coord_finding(const char *coord, const char *job, uint64_t after, uint64_t *gen,
                      char *out, size_t cap);

#endif
