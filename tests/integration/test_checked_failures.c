/* Checked calls over a data plane of the program's own (c10d/checked.h)
 * when the ranks disagree, die or wait too long, end to end on one
 * long-lived coordinator: real rank processes whose "data plane" is
 * shared memory that hangs, as MPI or NCCL would, when the ranks disagree
 * (support/checked_plane.c). A mismatched call is named on every rank
 * within 2 s (SYNC: before the data plane is entered; ASYNC: while the
 * ranks hang in it, through on_alert and c10d_check_state); a rank killed
 * inside a call is named; an ASYNC call's timeout is told to the program.
 * Calls that go as they should: test_checked_calls.c. */
#include "checked_plane.h"
#include "coord_proc.h"
#include "world_proc.h"

#include "check_main.h"

#include <check.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* --- rank 0's barrier against rank 1's all_reduce --- */

static int check_desync_msg(int rank, c10d_status st, const char *msg)
{
    if (st != C10D_EDESYNC) {
        fprintf(stderr, "rank %d: expected EDESYNC, got %s: %s\n", rank, c10d_status_name(st),
                msg);
        return 0;
    }
    return contains(msg, "at collective #4", rank) &&
           contains(msg, "rank 0 called BARRIER", rank) &&
           contains(msg, "rank 1 called ALL_REDUCE float32[4] SUM", rank);
}

static int desync_body(int rank, int n, void *arg)
{
    (void)n;
    const scenario *sc = arg;
    c10d_pg *pg = init_plane(sc->job, rank, sc->mode, NULL);
    if (!pg)
        return 10;
    for (long step = 1; step <= 3; step++) {
        c10d_check_opts o = all_reduce_opts();
        c10d_checked *h;
        float v[4] = {0};
        if (c10d_check_begin(pg, &o, &h) != C10D_OK || plane_call(rank, step, o.kind, v, h) ||
            c10d_check_end(h, C10D_OK, NULL) != C10D_OK)
            return 11;
    }
    c10d_check_opts o = all_reduce_opts();
    if (rank == 0)
        o.kind = C10D_COLL_BARRIER;
    long long t0 = test_now_ms();
    c10d_checked *h = NULL;
    c10d_status st = c10d_check_begin(pg, &o, &h);
    if (sc->mode == C10D_VERIFY_SYNC) {
        /* never entered the data plane */
        long long took = test_now_ms() - t0;
        if (!check_desync_msg(rank, st, c10d_errmsg()))
            return 12;
        if (took > 2000) {
            fprintf(stderr, "rank %d: named after %lld ms\n", rank, took);
            return 13;
        }
        return 0;
    }
    if (st != C10D_OK) {
        fprintf(stderr, "rank %d: ASYNC begin failed: %s\n", rank, c10d_errmsg());
        return 14;
    }
    /* Inside the data plane, which hangs: the coordinator's finding ends it. */
    float v[4] = {0};
    if (plane_call(rank, 4, o.kind, v, NULL) == 0) {
        fprintf(stderr, "rank %d: the mismatched calls completed\n", rank);
        return 15;
    }
    long long took = test_now_ms() - t0;
    if (!check_desync_msg(rank, alert_st, alert_report))
        return 16;
    if (c10d_check_state(h) != C10D_EDESYNC || !check_desync_msg(rank, C10D_EDESYNC,
                                                                 c10d_errmsg()))
        return 17;
    st = c10d_check_end(h, C10D_EBACKEND, "aborted after the coordinator's report");
    if (!check_desync_msg(rank, st, c10d_errmsg()))
        return 18;
    if (took > 2000) {
        fprintf(stderr, "rank %d: named after %lld ms\n", rank, took);
        return 19;
    }
    /* The group is unusable from now on. */
    if (c10d_check_begin(pg, &o, &h) == C10D_OK)
        return 20;
    return 0;
}

static void run_desync(c10d_verify mode)
{
    plane_new();
    scenario sc = {world_job(mode == C10D_VERIFY_SYNC ? "chk-ds-sync" : "chk-ds-async"), mode};
    ck_assert_int_eq(world_run(2, desync_body, &sc, 60, NULL), 0);
}

START_TEST(sync_barrier_against_all_reduce_is_named_before_the_data_plane)
{
    run_desync(C10D_VERIFY_SYNC);
}
END_TEST

START_TEST(async_barrier_against_all_reduce_is_named_inside_the_data_plane)
{
    run_desync(C10D_VERIFY_ASYNC);
}
END_TEST

/* --- a rank killed inside a call --- */

static int killed_rank0(int rank, const scenario *sc);

static int killed_body(int rank, int n, void *arg)
{
    (void)n;
    int rc = killed_rank0(rank, arg);
    if (rank == 0)
        atomic_store(&plane->rank0_rc, rc);
    return rc;
}

static int killed_rank0(int rank, const scenario *sc)
{
    c10d_pg *pg = init_plane(sc->job, rank, sc->mode, NULL);
    if (!pg)
        return 10;
    c10d_check_opts o = all_reduce_opts();
    c10d_checked *h;
    /* Both entered (SYNC: the check passed), then rank 1 dies inside. */
    if (c10d_check_begin(pg, &o, &h) != C10D_OK)
        return 11;
    if (rank == 1)
        raise(SIGKILL);
    long long t0 = test_now_ms();
    float v[4] = {0};
    if (plane_call(rank, 1, o.kind, v, NULL) == 0)
        return 12;
    long long took = test_now_ms() - t0;
    if (alert_st != C10D_EPEERLOST || !contains(alert_report, "rank 1", rank) ||
        !contains(alert_report, "#1 ALL_REDUCE", rank)) {
        fprintf(stderr, "rank 0: alert %s: %s\n", c10d_status_name(alert_st), alert_report);
        return 13;
    }
    c10d_status st = c10d_check_end(h, C10D_EBACKEND, "aborted");
    if (st != C10D_EPEERLOST || !contains(c10d_errmsg(), "rank 1", rank))
        return 14;
    if (took > 5000) {
        fprintf(stderr, "rank 0: told after %lld ms\n", took);
        return 15;
    }
    return 0;
}

START_TEST(a_rank_killed_inside_a_call_is_named)
{
    plane_new();
    scenario sc = {world_job("chk-kill"), (c10d_verify)_i};
    pid_t pids[2];
    world_spawn(2, killed_body, &sc, pids);
    world_wait(2, pids, 60); /* rank 1 is killed, by design */
    ck_assert_int_eq(atomic_load(&plane->rank0_rc), 0);
}
END_TEST

/* --- a call's timeout --- */

static int timeout_body(int rank, int n, void *arg)
{
    (void)n;
    const scenario *sc = arg;
    c10d_pg *pg = init_plane(sc->job, rank, sc->mode, NULL);
    if (!pg)
        return 10;
    if (rank == 1) { /* never calls: rank 0's call can only time out */
        sleep(6);
        return 0;
    }
    c10d_check_opts o = all_reduce_opts();
    o.timeout_ms = 500;
    c10d_checked *h;
    if (c10d_check_begin(pg, &o, &h) != C10D_OK)
        return 11;
    float v[4] = {0};
    if (plane_call(rank, 1, o.kind, v, NULL) == 0)
        return 12;
    /* The coordinator's stall report (it knows the call's timeout), or,
     * without one, the call's own deadline: either way, named. */
    if (alert_st != C10D_ETIMEDOUT || !contains(alert_report, "#1 ALL_REDUCE", rank) ||
        !(strstr(alert_report, "rank 1 has entered no collective") ||
          strstr(alert_report, "timed out after 500 ms"))) {
        fprintf(stderr, "rank 0: alert %s: %s\n", c10d_status_name(alert_st), alert_report);
        return 13;
    }
    /* Ended: the coordinator's finding stands over the data plane's
     * failure; with none, the failure and its words. */
    c10d_status st = c10d_check_end(h, C10D_EBACKEND, "gave up");
    if (!(st == C10D_ETIMEDOUT && strstr(c10d_errmsg(), "stall")) &&
        !(st == C10D_EBACKEND && strstr(c10d_errmsg(), "gave up"))) {
        fprintf(stderr, "rank 0: end %s: %s\n", c10d_status_name(st), c10d_errmsg());
        return 14;
    }
    return 0;
}

START_TEST(an_async_calls_timeout_is_told_to_the_program)
{
    plane_new();
    scenario sc = {world_job("chk-timeout"), C10D_VERIFY_ASYNC};
    ck_assert_int_eq(world_run(2, timeout_body, &sc, 60, NULL), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checked_failures");
    TCase *tc = tcase_create("checked");
    /* one coordinator for every case, as users run it: each case a job */
    tcase_add_unchecked_fixture(tc, world_coord_start, world_coord_stop);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, sync_barrier_against_all_reduce_is_named_before_the_data_plane);
    tcase_add_test(tc, async_barrier_against_all_reduce_is_named_inside_the_data_plane);
    tcase_add_loop_test(tc, a_rank_killed_inside_a_call_is_named, C10D_VERIFY_ASYNC,
                        C10D_VERIFY_SYNC + 1);
    tcase_add_test(tc, an_async_calls_timeout_is_told_to_the_program);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
