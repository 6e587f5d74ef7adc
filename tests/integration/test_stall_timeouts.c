/* The coordinator stalls; no timeout it keeps counts that against a rank.
 * The coordinator process is stopped (SIGSTOP) for longer
 * than a timeout it keeps while its ranks are healthy, and a rank's next
 * message follows an answer of the coordinator's, as it does when a rank
 * was waiting for it (a store get, a SYNC check, the report before):
 *
 * - ASYNC verification: a collective rank 0 entered before the stall and
 *   rank 1 after it was pending for longer than its timeout by the clock.
 *   Before the fix the first sweep after the stall made that a sticky
 *   "stall in group world ... rank 1 completed #1 and has entered nothing
 *   since", failing the job. A collective rank 1 really never enters is
 *   still reported;
 * - a parked request's deadline (here rank 0's rendezvous, waiting for
 *   rank 1): before the fix it expired in the first batch after the stall
 *   ("waiting for rank 1 ... after 3.0 s") and rank 0 gave up. SYNC
 *   checks, join's shadowing and store waits park the same way. */
#include "coord_proc.h"
#include "pair_world.h"
#include "state_wait.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

/* A collective's (and the rendezvous') timeout, and a stall longer than
 * it: the stall alone would time it out. */
#define TIMEOUT_MS 2000
#define STALL_MS 3000

static coord_proc *const coord = &world_coord;

/* The root of a broadcast writes into its peer's ring and is done: rank 0
 * enters #2 (and #4) without waiting for rank 1, as ASYNC ranks run ahead
 * of each other. */
static c10d_status broadcast(c10d_pg *pg, int64_t *v)
{
    c10d_tensor t = c10d_tensor_1d(v, C10D_INT64, 1);
    return c10d_broadcast(pg, &t, 0, NULL, NULL);
}

static int async_body(int rank, int n, void *arg)
{
    (void)arg;
    c10d_pg *pg = world_init_verify(coord->url, sh->job, rank, n, TIMEOUT_MS, C10D_VERIFY_ASYNC);
    if (!pg)
        return 10;
    if (!pair_all_reduce_is(pg, 1, 2)) /* #1: the links are up */
        FAIL(11, "rank %d: #1: %s", rank, c10d_errmsg());
    __sync_fetch_and_add(&sh->ready, 1);
    int64_t v = rank == 0 ? 7 : 0;
    if (rank == 0 && broadcast(pg, &v) != C10D_OK)
        FAIL(12, "rank 0: #2: %s", c10d_errmsg());
    if (!wait_shared(&sh->go, 1, 60000))
        return 13;
    if (rank == 1 && (broadcast(pg, &v) != C10D_OK || v != 7))
        FAIL(14, "rank 1: #2 after the stall (%lld): %s", (long long)v, c10d_errmsg());
    if (!pair_all_reduce_is(pg, 1, 2))
        FAIL(15, "rank %d: #3 after the stall: %s", rank, c10d_errmsg());
    __sync_fetch_and_add(&sh->ready, 1);
    if (rank == 0 && broadcast(pg, &v) != C10D_OK) /* #4, which rank 1 never enters */
        FAIL(16, "rank 0: #4: %s", c10d_errmsg());
    if (!wait_shared(&sh->done, 1, 60000))
        return 17;
    c10d_destroy(pg);
    return 0;
}

START_TEST(a_collective_pending_through_a_stall_is_not_blamed_on_a_rank)
{
    pid_t pids[2];
    pair_world_spawn("async-stall", 2, async_body, pids);
    ck_assert_msg(wait_shared(&sh->ready, 2, 30000), "%d of 2 ranks ready", sh->ready);
    const int rank0[] = {0};
    ck_assert_msg(wait_entered(coord->url, sh->job, "world", rank0, 1, 2, 30000),
                  "rank 0's #2 never reached the coordinator");

    coord_pause(coord, STALL_MS);
    /* Answered after the stall, so after a sweep (overdue) judged #2: only
     * then does rank 1 enter it. */
    ck_assert(wait_member(coord->url, sh->job, 0, "alive", 30000));
    char report[1024];
    ck_assert_msg(!wait_finding(coord->url, sh->job, "world", report, sizeof report, 0),
                  "the coordinator's stall was blamed on a rank: %s", report);
    sh->go = 1;
    ck_assert_msg(wait_shared(&sh->ready, 4, 30000), "the job did not go on after the stall");

    /* a rank that really does not enter is still reported, at the timeout */
    ck_assert_msg(wait_finding(coord->url, sh->job, "world", report, sizeof report, 30000),
                  "rank 1 never entered #4 and nobody said so");
    int named = strstr(report, "stall in group world") && strstr(report, "at collective #4") &&
                strstr(report, "rank 1 completed #3");
    ck_assert_msg(named, "report: %s", report);
    sh->done = 1;
    ck_assert_int_eq(world_wait(2, pids, 30), 0);
}
END_TEST

/* Rank 1 comes to the rendezvous only after the stall. */
static int late_body(int rank, int n, void *arg)
{
    (void)arg;
    if (rank == 1 && !wait_shared(&sh->go, 1, 60000))
        return 12;
    c10d_pg *pg = world_init(coord->url, sh->job, rank, n, TIMEOUT_MS);
    if (!pg)
        return 10;
    if (!pair_all_reduce_is(pg, 1, 2))
        FAIL(11, "rank %d: all_reduce: %s", rank, c10d_errmsg());
    c10d_destroy(pg);
    return 0;
}

START_TEST(a_rendezvous_waits_through_a_stall)
{
    pid_t pids[2];
    pair_world_spawn("rdv-stall", 2, late_body, pids);
    long long parked = 0;
    ck_assert_msg(wait_parked(coord->url, 1, 30000, &parked), "rank 0 never waited (%lld parked)",
                  parked);
    coord_pause(coord, STALL_MS);
    /* answered after the first batch since, which let deadlines expire */
    ck_assert_msg(wait_parked(coord->url, 1, 0, &parked),
                  "rank 0's rendezvous timed out during the coordinator's stall (%lld parked)",
                  parked);
    sh->go = 1;
    ck_assert_int_eq(world_wait(2, pids, 30), 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        a_collective_pending_through_a_stall_is_not_blamed_on_a_rank,
        a_rendezvous_waits_through_a_stall,
        NULL};
    return pair_world_main("stall_timeouts", NULL, tests);
}
