/* Waiting on state instead of sleeping: a test that needs "rank 0 has
 * joined" or "ranks 0 and 1 are inside collective #1" polls for exactly
 * that (c10d-ctl's view: jobs, verification health, parked requests), or
 * for a flag its ranks set in shared memory, each with a deadline so that
 * a state never reached fails the test with a message instead of hanging. */
#ifndef C10D_TEST_STATE_WAIT_H
#define C10D_TEST_STATE_WAIT_H

#include <stddef.h>

/* 1 once `rank` of `job` is a member in `state` ("alive", "left", "dead"),
 * 0 if timeout_ms passed first. */
int wait_member(const char *url, const char *job, int rank, const char *state, int timeout_ms);
/* 1 once every one of ranks[0..n) of group `group` of `job` has entered
 * collective #seq (verification's record: SYNC and ASYNC report entries),
 * 0 if timeout_ms passed first. */
int wait_entered(const char *url, const char *job, const char *group, const int *ranks, int n,
                 unsigned long long seq, int timeout_ms);
/* 1 once group `group` of `job` has a finding (a desync, a lost member,
 * a stall), its report copied to report (cap bytes); 0 if timeout_ms
 * passed first (0: look once). */
int wait_finding(const char *url, const char *job, const char *group, char *report, size_t cap,
                 int timeout_ms);

/* 1 once the coordinator has `want` requests parked (gets and waits on
 * keys that do not exist yet), 0 if timeout_ms passed first; *seen (may be
 * NULL) is the count last read, for the failure message. */
int wait_parked(const char *url, long long want, int timeout_ms, long long *seen);
/* 1 once *v >= want, for a flag or a count in memory shared with forked
 * ranks ("both ranks are ready", "the coordinator was restarted"), 0 if
 * timeout_ms passed first. */
int wait_shared(const volatile int *v, int want, int timeout_ms);

#endif
