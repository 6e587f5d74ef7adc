/* No generation starts under alive ranks, end to end: a
 * real coordinator, real ranks. A rank whose holder in the running
 * generation died or left comes back (a restart, an intruder that took its
 * number, a process that initialises again after c10d_destroy) while other
 * ranks there are alive: it waits for them instead of starting the next
 * generation under them (which left their requests waiting on a generation
 * no longer the job's), and gives up naming them. Once they are gone, the
 * restart forms the next generation. */
#include "coord_proc.h"
#include "pair_world.h"
#include "state_wait.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Rank 2 is killed; ranks 0 and 1 go on in their pair group. */
static int survivor_body(int rank, int n, void *arg)
{
    (void)arg;
    c10d_pg *pair, *pg = pair_world_join(rank, n, 20000, C10D_VERIFY_SYNC, &pair);
    if (!pg)
        return 10;
    if (!wait_shared(&sh->go, 1, 60000))
        return 12;
    if (!pair_all_reduce_is(pair, 1, 2))
        FAIL(13, "rank %d: the running job broke: %s", rank, c10d_errmsg());
    if (c10d_pg_generation(pg) != 1)
        FAIL(14, "rank %d: generation %llu", rank, (unsigned long long)c10d_pg_generation(pg));
    c10d_destroy(pair);
    c10d_destroy(pg);
    return 0;
}

START_TEST(a_rank_back_under_alive_ranks_waits_names_them_and_the_job_goes_on)
{
    pid_t pids[3];
    pair_world_spawn("back", 3, survivor_body, pids);
    ck_assert_msg(wait_shared(&sh->ready, 3, 30000), "%d of 3 ranks ready", sh->ready);
    kill(pids[2], SIGKILL);
    waitpid(pids[2], NULL, 0);
    ck_assert(wait_member(world_coord.url, sh->job, 2, "dead", 20000));

    /* rank 2 again (a restart, or anyone with its number): it waits, and
     * gives up after its timeout */
    ck_assert_ptr_null(world_init(world_coord.url, sh->job, 2, 3, 1500));
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", c10d_errmsg());
    char want[4][160];
    snprintf(want[0], sizeof want[0], "rank 2 of job %s waited", sh->job);
    snprintf(want[1], sizeof want[1], "for generation 1 to end before starting the next, and 2 "
             "of its ranks are still alive");
    snprintf(want[2], sizeof want[2], "pid %d", sh->pid[0]);
    snprintf(want[3], sizeof want[3], "pid %d", sh->pid[1]);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(strstr(msg, want[i]), "'%s' not in: %s", want[i], msg);
    ck_assert_msg(strstr(msg, "C10D_JOB=NAME"), "no hint in: %s", msg);

    /* the running job goes on, in its generation */
    sh->go = 1;
    ck_assert_int_eq(world_wait(2, pids, 30), 0);
    char gen2[192];
    snprintf(gen2, sizeof gen2, "job %s: generation 2", sh->job);
    ck_assert_msg(!coord_log_contains(&world_coord, gen2), "a generation started under alive ranks");
}
END_TEST

/* Rank 1 leaves and initialises again at once (a loop of runs in one
 * process) while rank 0 still finishes: rank 1 waits for it, then the
 * two form generation 2. */
static int again_body(int rank, int n, void *arg)
{
    (void)arg;
    c10d_pg *pg = world_init_verify(world_coord.url, sh->job, rank, n, 20000, C10D_VERIFY_SYNC);
    if (!pg)
        return 10;
    if (!pair_all_reduce_is(pg, 1, 2))
        FAIL(11, "rank %d: first run: %s", rank, c10d_errmsg());
    if (rank == 0 && !wait_shared(&sh->go, 1, 60000))
        return 12;
    c10d_destroy(pg);
    if (!(pg = world_init_verify(world_coord.url, sh->job, rank, n, 20000, C10D_VERIFY_SYNC)))
        return 13;
    if (c10d_pg_generation(pg) != 2 || !pair_all_reduce_is(pg, 1, 2))
        FAIL(14, "rank %d: second run (generation %llu): %s", rank,
             (unsigned long long)c10d_pg_generation(pg), c10d_errmsg());
    c10d_destroy(pg);
    return 0;
}

START_TEST(a_rank_that_initialises_again_starts_the_next_run_once_the_last_is_over)
{
    pid_t pids[2];
    pair_world_spawn("again", 2, again_body, pids);
    char waits[192];
    snprintf(waits, sizeof waits, "job %s: rank 1 waits for generation 1 to end", sh->job);
    long long until = test_now_ms() + 30000;
    while (!coord_log_contains(&world_coord, waits) && test_now_ms() < until)
        usleep(5000);
    ck_assert_msg(coord_log_contains(&world_coord, waits), "rank 1 never waited for rank 0");
    ck_assert(wait_member(world_coord.url, sh->job, 0, "alive", 0));
    sh->go = 1; /* rank 0 leaves too, and comes back */
    ck_assert_int_eq(world_wait(2, pids, 30), 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        a_rank_back_under_alive_ranks_waits_names_them_and_the_job_goes_on,
        a_rank_that_initialises_again_starts_the_next_run_once_the_last_is_over,
        NULL};
    return pair_world_main("runs_live", NULL, tests);
}
