/* Runs (server/groups/runs.c) in the engine, on a real SQLite file, without the
 * network, from their start to their end: a run ends with its last alive
 * member and its store keys go then (only its own); an arrival never
 * joins a run that is over; a rank with no holder in a running generation
 * is refused; a restarted coordinator ends no run before the heartbeat
 * timeout. What a run leaves once it is over, and when that goes:
 * test_runs_reclaim.c. */
#include "runs_engine.h"

#include "engine/engine.h"
#include "engine/events.h"
#include "engine/request.h"
#include "groups/liveness_ops.h"
#include "groups/runs.h"
#include "store/store.h"

#include "c10d_time.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

START_TEST(a_run_ends_with_its_last_alive_member_and_only_its_keys_go)
{
    uint64_t gen = form("j", 2);
    ck_assert_int_eq(gen, 1);
    ck_assert_int_eq(scalar("SELECT count(*) FROM runs WHERE job = '%s' AND ended_ms IS NULL",
                            "j"), 1);
    const char *mine[] = {"jobs/j/1/a", "jobs/j/1/b/c", "jobs/j/1/c10d/host/world/x"};
    const char *others[] = {"jobs/j/1", "jobs/j/10/a", "jobs/j/2/a", "jobs/j%2F1/1/a",
                            "jobs/jk/1/a", "root", "jobs/k/1/a"};
    for (size_t i = 0; i < 3; i++)
        put(mine[i]);
    for (size_t i = 0; i < 7; i++)
        put(others[i]);
    ck_assert_int_eq(run1(leave_req(1, "j", gen, 0))->status, C10D_OK);
    /* rank 1 is alive: the run goes on, with its keys */
    for (size_t i = 0; i < 3; i++)
        ck_assert_msg(has(mine[i]) == 1, "%s went while rank 1 was alive", mine[i]);
    ck_assert_int_eq(scalar("SELECT count(*) FROM runs WHERE job = '%s' AND ended_ms IS NULL",
                            "j"), 1);
    ck_assert_int_eq(run1(leave_req(2, "j", gen, 1))->status, C10D_OK);
    for (size_t i = 0; i < 3; i++)
        ck_assert_msg(has(mine[i]) == 0, "%s is still there after the run ended", mine[i]);
    for (size_t i = 0; i < 7; i++)
        ck_assert_msg(has(others[i]) == 1, "%s went with run (j, 1)", others[i]);
    ck_assert_int_eq(c10ds_store_count(&fx.eng->store, NULL), 7); /* the cached count follows */
    ck_assert_int_eq(scalar("SELECT count(*) FROM runs WHERE job = '%s' AND ended_ms > 0", "j"),
                     1);
}
END_TEST

/* A run that never formed is over when every arrival gave up; the next
 * arrival starts a new generation instead of failing on the old one's
 * lost ranks (before: EPEERLOST naming the rank that gave up). */
START_TEST(a_rendezvous_everyone_gave_up_on_is_over_and_the_next_starts_afresh)
{
    ck_assert_ptr_null(run1(join_req(1, "g", 0, 2))); /* parks: rank 1 is missing */
    C10dpb__Reply *rep = await_reply();
    ck_assert_int_eq(rep->status, C10D_ETIMEDOUT);
    ck_assert_int_eq(scalar("SELECT count(*) FROM runs WHERE job = '%s' AND generation = 1 AND "
                            "ended_ms > 0", "g"), 1);
    ck_assert_ptr_null(run1(join_req(2, "g", 1, 2)));
    rep = run1(join_req(3, "g", 0, 2));
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->status == C10D_OK, "%s", rep->detail);
    ck_assert_int_eq(rep->group_join->generation, 2);
}
END_TEST

START_TEST(a_running_generation_refuses_a_rank_it_lacks_naming_itself)
{
    uint64_t gen = form("default", 2);
    /* a second job nobody named, with a larger world */
    C10dpb__Reply *rep = run1(join_req(9, "default", 3, 4));
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->status, C10D_EINVAL);
    const char *want[] = {"rank 3 of job default (WORLD_SIZE=4) cannot join",
                          "generation 1 of job default formed with world size 2",
                          "2 of its ranks alive", "rank 0 on host node1 pid 1000",
                          "rank 1 on host node1 pid 1001", "C10D_JOB=NAME",
                          "c10d-run --job NAME", "coord://HOST:PORT/NAME", "--rdzv_id"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        ck_assert_msg(strstr(rep->detail, want[i]), "'%s' not in: %s", want[i], rep->detail);
    rep = run1(join_req(10, "default", 0, 4)); /* its rank 0: held */
    ck_assert_int_eq(rep->status, C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(rep->detail, "already held by host node1 pid 1000"));
    ck_assert_ptr_nonnull(strstr(rep->detail, "C10D_JOB=NAME"));
    /* the running job is untouched */
    ck_assert_int_eq(scalar("SELECT generation FROM jobs WHERE job = '%s'", "default"), 1);
    ck_assert_int_eq(scalar("SELECT count(*) FROM members WHERE job = '%s'", "default"), 2);
    /* A rank whose holder left (a restart; a rank that re-initialises
     * while a peer finishes) starts the next generation, once nobody of
     * the running one is alive: it waits for rank 0. */
    ck_assert_int_eq(run1(leave_req(2, "default", gen, 1))->status, C10D_OK);
    ck_assert_ptr_null(run1(join_req(2, "default", 1, 2)));
    ck_assert_int_eq(scalar("SELECT generation FROM jobs WHERE job = '%s'", "default"), 1);
    ck_assert_int_eq(run1(leave_req(1, "default", gen, 0))->status, C10D_OK);
    ck_assert_int_eq(scalar("SELECT generation FROM jobs WHERE job = '%s'", "default"), 2);
}
END_TEST

START_TEST(a_forming_generation_refuses_another_world_size_with_the_hint)
{
    ck_assert_ptr_null(run1(join_req(1, "default", 0, 2)));
    C10dpb__Reply *rep = run1(join_req(2, "default", 1, 4));
    ck_assert_int_eq(rep->status, C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(rep->detail, "says WORLD_SIZE=4, but generation 1 is forming "
                                              "with world size 2"));
    ck_assert_ptr_nonnull(strstr(rep->detail, "C10D_JOB=NAME"));
}
END_TEST

/* A restarted rank (its holder left) waits for the run's survivor and
 * gives up naming it: no generation starts under an alive rank. Once the
 * survivor leaves, the run is over and everything of it goes. */
START_TEST(a_restart_waits_for_the_old_runs_survivors_and_names_them)
{
    uint64_t g1 = form("old", 2);
    ck_assert_int_eq(run1(leave_req(2, "old", g1, 1))->status, C10D_OK);
    ck_assert_ptr_null(run1(join_req(3, "old", 1, 2))); /* restarted rank 1: waits */
    C10dpb__Reply *rep = await_reply();
    ck_assert_int_eq(rep->status, C10D_ETIMEDOUT);
    const char *want[] = {"rank 1 of job old waited", "for generation 1 to end",
                          "1 of its ranks are still alive (rank 0 on host node1 pid 1000)",
                          "C10D_JOB=NAME"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        ck_assert_msg(strstr(rep->detail, want[i]), "'%s' not in: %s", want[i], rep->detail);
    ck_assert_int_eq(scalar("SELECT generation FROM jobs WHERE job = '%s'", "old"), 1);
    ck_assert_int_eq(scalar("SELECT count(*) FROM runs WHERE job = '%s' AND ended_ms IS NULL",
                            "old"), 1);
    ck_assert_int_eq(run1(leave_req(1, "old", g1, 0))->status, C10D_OK); /* the survivor */
    while (c10ds_runs_reclaim(fx.eng, c10d_steady_wall_ms(), 5000) > 0)
        ;
    ck_assert_int_eq(rows_of("old"), 0);
}
END_TEST

/* A database error reading the rank's holder fails the arrival: before,
 * it fell through into the member's INSERT OR REPLACE and took an alive
 * holder's row (its client, host, pid) in the running generation. */
START_TEST(a_database_error_reading_the_holder_fails_the_arrival)
{
    uint64_t gen = form("j", 2);
    /* the member lookup fails when it runs (abs() of the smallest integer
     * is an "integer overflow" error), with the same parameters */
    sqlite3_stmt *broken, *kept = fx.eng->groups.st[GS_MEMBER_GET];
    ck_assert_int_eq(sqlite3_prepare_v2(fx.db.h,
                                        "SELECT host, pid, client_id, state, '', '', 0, 0 "
                                        "FROM members WHERE job = ?1 AND generation = ?2 "
                                        "AND rank = ?3 AND abs(-9223372036854775807 - 1)",
                                        -1, &broken, NULL),
                     SQLITE_OK);
    fx.eng->groups.st[GS_MEMBER_GET] = broken;
    C10dpb__Reply *rep = run1(join_req(9, "j", 0, 2));
    fx.eng->groups.st[GS_MEMBER_GET] = kept;
    sqlite3_finalize(broken);
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->status, C10D_ERROR);
    ck_assert_msg(strstr(rep->detail, "database error reading rank 0 of job j generation 1"),
                  "%s", rep->detail);
    /* rank 0's holder is untouched, and alive */
    ck_assert_int_eq(scalar("SELECT client_id FROM members WHERE job = '%s' AND rank = 0", "j"), 1);
    ck_assert_int_eq(scalar("SELECT count(*) FROM members WHERE job = '%s' AND state = 'alive'",
                            "j"), 2);
    ck_assert_int_eq(scalar("SELECT generation FROM jobs WHERE job = '%s'", "j"), (long long)gen);
}
END_TEST

/* No run is over while one of its members is alive. */
static void no_run_over_with_a_member_alive(void)
{
    ck_assert_int_eq(scalar("SELECT count(*) FROM runs r WHERE ended_ms IS NOT NULL AND EXISTS "
                            "(SELECT 1 FROM members m WHERE m.job = r.job AND m.generation = "
                            "r.generation AND m.state = 'alive')%s", ""), 0);
}

/* A rank arriving for a forming generation in the same batch as the last
 * other member's death: either it joins first (the run goes on: it is
 * alive; its rendezvous fails, naming the dead rank) or the death comes
 * first (the run is over, and the rank starts the next generation). */
START_TEST(an_arrival_beside_the_last_death_never_ends_a_run_with_a_member_alive)
{
    for (int order = 0; order < 2; order++) {
        const char *job = order ? "death-first" : "arrival-first";
        ck_assert_ptr_null(run1(join_req(1, job, 0, 3))); /* rank 0 waits for ranks 1, 2 */
        c10ds_request *arrive = join_req(2, job, 1, 3), *die = closed_req(1);
        c10ds_request *first = order ? die : arrive, *second = order ? arrive : die;
        first->next = second;
        int before = fx.nreplies;
        c10ds_engine_run_batch(fx.eng, first);
        no_run_over_with_a_member_alive();
        if (!order) {
            ck_assert_int_eq(scalar("SELECT count(*) FROM runs WHERE job = '%s' AND ended_ms IS "
                                    "NULL", job), 1);
            ck_assert_int_eq(fx.nreplies, before + 1); /* rank 1's join fails: rank 0 died */
            ck_assert_int_eq(fx.replies[fx.nreplies - 1]->status, C10D_EPEERLOST);
            ck_assert_ptr_nonnull(strstr(fx.replies[fx.nreplies - 1]->detail, "rank 0"));
        } else {
            ck_assert_int_eq(scalar("SELECT generation FROM jobs WHERE job = '%s'", job), 2);
            ck_assert_int_eq(scalar("SELECT count(*) FROM runs WHERE job = '%s' AND generation "
                                    "= 1 AND ended_ms > 0", job), 1);
        }
        run1(closed_req(2)); /* rank 1 goes too: every run is over */
        no_run_over_with_a_member_alive();
        ck_assert_int_eq(scalar("SELECT count(*) FROM runs WHERE job = '%s' AND ended_ms IS NULL",
                                job), 0);
    }
}
END_TEST

/* After a restart the members in the database are alive but not
 * reconnected: their runs go on until the heartbeat timeout, counted
 * from the restart, and end then if nobody came back. */
START_TEST(a_restart_ends_no_run_before_the_heartbeat_timeout)
{
    uint64_t gen = form("live", 2);
    put("jobs/live/1/k");
    reopen();
    int64_t t0 = c10d_steady_wall_ms();
    fx.eng->next_sweep_ms = 0;
    c10ds_engine_run_batch(fx.eng, NULL); /* the engine's own sweep, at once */
    fx.eng->next_sweep_ms = INT64_MAX;
    c10ds_groups_sweep(fx.eng, t0 + fx.cfg.heartbeat_timeout_ms - 1000);
    ck_assert_int_eq(scalar("SELECT count(*) FROM members WHERE job = '%s' AND state = 'alive'",
                            "live"), 2);
    ck_assert_int_eq(scalar("SELECT count(*) FROM runs WHERE job = '%s' AND ended_ms IS NULL",
                            "live"), 1);
    ck_assert_int_eq(has("jobs/live/1/k"), 1);
    c10ds_groups_sweep(fx.eng, t0 + fx.cfg.heartbeat_timeout_ms + 1000);
    ck_assert_int_eq(scalar("SELECT count(*) FROM members WHERE job = '%s' AND state = 'dead'",
                            "live"), 2);
    ck_assert_int_eq(scalar("SELECT count(*) FROM runs WHERE job = '%s' AND ended_ms > 0",
                            "live"), 1);
    ck_assert_int_eq(has("jobs/live/1/k"), 0);
    (void)gen;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runs_lifecycle");
    TCase *tc = runs_tcase("engine");
    tcase_add_test(tc, a_run_ends_with_its_last_alive_member_and_only_its_keys_go);
    tcase_add_test(tc, a_rendezvous_everyone_gave_up_on_is_over_and_the_next_starts_afresh);
    tcase_add_test(tc, a_running_generation_refuses_a_rank_it_lacks_naming_itself);
    tcase_add_test(tc, a_forming_generation_refuses_another_world_size_with_the_hint);
    tcase_add_test(tc, a_restart_waits_for_the_old_runs_survivors_and_names_them);
    tcase_add_test(tc, a_database_error_reading_the_holder_fails_the_arrival);
    tcase_add_test(tc, an_arrival_beside_the_last_death_never_ends_a_run_with_a_member_alive);
    tcase_add_test(tc, a_restart_ends_no_run_before_the_heartbeat_timeout);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
