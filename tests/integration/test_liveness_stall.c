/* The coordinator stalls; its ranks are not to blame.
 *
 * A real stall: the coordinator process is stopped (SIGSTOP, as a paused
 * VM, a swapping host or a debugger stops it) for twice
 * --heartbeat-timeout while its ranks are healthy; one rank really stops
 * meanwhile. Afterwards the stopped rank must be declared dead, by its own
 * silence, and the two healthy ranks must be alive and go on with their
 * SYNC collectives. Before the fix the first sweep after the stall judged
 * everyone by the clock alone and declared all three dead ("no heartbeat
 * for 4012 ms"): their parked watches could not be answered, so their
 * next heartbeats were never sent. */
#include "coord_proc.h"
#include "pair_world.h"
#include "state_wait.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HEARTBEAT_TIMEOUT_MS 2000
/* Twice the heartbeat timeout, under the 6 s a rank waits for the answer
 * to its heartbeat before it sends another. */
#define STALL_MS 4000

static coord_proc *const coord = &world_coord;

/* The case's coordinator, with a heartbeat timeout a test can outlast. */
static void setup(void)
{
    pair_world_setup();
    coord_stop(coord, SIGTERM);
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", HEARTBEAT_TIMEOUT_MS);
    const char *extra[] = {"--heartbeat-timeout", timeout, NULL};
    ck_assert_int_eq(coord_start(coord, NULL, extra, NULL), 0);
}

/* After the stall ranks 0 and 1 all-reduce in their pair group (SYNC: the
 * coordinator checks both entered) and must get 2. Rank 2 is stopped by
 * the test. */
static int stall_body(int rank, int n, void *arg)
{
    (void)arg;
    c10d_pg *pair, *pg = pair_world_join(rank, n, 60000, C10D_VERIFY_SYNC, &pair);
    if (!pg)
        return 10;
    if (!wait_shared(&sh->go, 1, 60000))
        return 12;
    int64_t v = 1;
    c10d_tensor t = c10d_tensor_1d(&v, C10D_INT64, 1);
    c10d_status st = c10d_all_reduce(pair, &t, C10D_SUM, NULL, NULL);
    if (st != C10D_OK || v != 2) {
        fprintf(stderr, "rank %d: all_reduce after the stall: %s (%lld): %s\n", rank,
                c10d_status_name(st), (long long)v, c10d_errmsg());
        return 13;
    }
    c10d_destroy(pair);
    c10d_destroy(pg);
    return 0;
}

START_TEST(a_stalled_coordinator_blames_only_the_rank_that_stopped)
{
    pid_t pids[3];
    pair_world_spawn("stall", 3, stall_body, pids);
    ck_assert_msg(wait_shared(&sh->ready, 3, 30000), "%d of 3 ranks were ready after 30 s",
                  sh->ready);
    kill(pids[2], SIGSTOP);
    coord_pause(coord, STALL_MS);

    ck_assert_msg(wait_member(coord->url, sh->job, 2, "dead", 30000),
                  "the stopped rank 2 was not declared dead");
    ck_assert_msg(coord_log_contains(coord, "rank 2 dead (no heartbeat for"),
                  "rank 2 was not declared dead for its silence");
    for (int r = 0; r < 2; r++)
        ck_assert_msg(wait_member(coord->url, sh->job, r, "alive", 0),
                      "healthy rank %d was declared dead for the coordinator's stall", r);
    /* and the coordinator saw its stall as one */
    ck_assert_msg(coord_log_contains(coord, "the engine ran"),
                  "the coordinator did not notice that it stalled");
    sh->go = 1;
    for (int r = 0; r < 2; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d failed (status %d)", r, st);
    }
    kill(pids[2], SIGKILL);
    kill(pids[2], SIGCONT);
    waitpid(pids[2], NULL, 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        a_stalled_coordinator_blames_only_the_rank_that_stopped,
        NULL};
    return pair_world_main("liveness_stall", setup, tests);
}
