/* Waiting on the coordinator's state instead of sleeping: a test that needs
 * "rank 0 has joined" or "ranks 0 and 1 are inside collective #1" polls
 * for exactly that (c10d-ctl's view: jobs and verification health). */
#ifndef C10D_TEST_STATE_WAIT_H
#define C10D_TEST_STATE_WAIT_H

/* 1 once `rank` of `job` is a member in `state` ("alive", "left", "dead"),
 * 0 if timeout_ms passed first. */
int wait_member(const char *url, const char *job, int rank, const char *state, int timeout_ms);
/* 1 once every one of ranks[0..n) of group `group` of `job` has entered
 * collective #seq (verification's record: SYNC and ASYNC report entries),
 * 0 if timeout_ms passed first. */
int wait_entered(const char *url, const char *job, const char *group, const int *ranks, int n,
                 unsigned long long seq, int timeout_ms);

#endif
