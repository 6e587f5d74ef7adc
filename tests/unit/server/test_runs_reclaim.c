/* Runs (server/groups/runs.c) in the engine, on a real SQLite file, without the
 * network: what a run leaves once it is over, and when that goes. Its
 * records go after the retention (counted from the end the database
 * recorded, over a restart too), a bounded number of rows a sweep, with
 * what the engine keeps in memory for it (c10d-ctl shows the same of it
 * from the database meanwhile); its keys past the first RUNS_END_KEYS go
 * in bounded sweeps too; a job's row goes with its last run, and its
 * generations never repeat; runs.c's list names every table of per-run
 * records. How a run starts and ends: test_runs_lifecycle.c. */
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

/* A run over for the retention loses every record, a bounded number of
 * rows a sweep; what the engine held in memory for it goes too; the job's
 * row with its last run; the job comes back, fresh. */
START_TEST(reclaiming_is_bounded_per_sweep_and_leaves_nothing)
{
    uint64_t gen = form("big", 2);
    /* the run ends with a desync: a finding, sticky for its group */
    ck_assert_int_eq(run1(report_req(1, "big", gen, 0, 1, 0))->status, C10D_OK);
    run1(report_req(2, "big", gen, 1, 1, 1));
    ck_assert_int_eq(scalar("SELECT count(*) FROM findings WHERE job = '%s'", "big"), 1);
    ck_assert_ptr_nonnull(fx.eng->verify.groups);
    int ranks[] = {0, 1};
    ck_assert_ptr_nonnull(
        c10ds_join_region(&fx.eng->join, "big", gen, "world", 1, 2, ranks, 1, 0, 0));
    /* a trace of 12,000 rows, as a long run of alternating calls leaves */
    ck_assert_int_eq(sqlite3_exec(fx.db.h,
                                  "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 "
                                  "FROM c WHERE i < 11999) INSERT INTO coll_trace SELECT "
                                  "'big', 1, 'world', i % 2, i, i, 'BARRIER', 'completed', "
                                  "0 FROM c",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    put("jobs/big/1/k");
    ck_assert_int_eq(run1(leave_req(1, "big", gen, 0))->status, C10D_OK);
    ck_assert_int_eq(run1(leave_req(2, "big", gen, 1))->status, C10D_OK);
    ck_assert_int_eq(has("jobs/big/1/k"), 0);
    put("jobs/big/1/late"); /* written after the end: reclaimed too */
    long long before = rows_of("big");
    ck_assert_int_gt(before, 12000);

    /* the retention not yet passed: nothing */
    fx.cfg.retention_s = 3600;
    ck_assert_int_eq(c10ds_runs_reclaim(fx.eng, c10d_steady_wall_ms(), 5000), 0);
    ck_assert_int_eq(rows_of("big"), before);
    fx.cfg.retention_s = 0;
    long long sweeps = 0, got, total = 0;
    while ((got = c10ds_runs_reclaim(fx.eng, c10d_steady_wall_ms(), 5000)) > 0) {
        ck_assert_int_le(got, 5000);
        total += got;
        sweeps++;
        ck_assert_int_le(sweeps, 10);
        /* nothing of the run in memory from its first sweep on */
        ck_assert_ptr_null(fx.eng->verify.groups);
        ck_assert_ptr_null(fx.eng->join.regions);
    }
    ck_assert_int_eq(got, 0);
    ck_assert_int_ge(sweeps, 3);
    ck_assert_int_eq(rows_of("big"), 0);
    ck_assert_int_eq(has("jobs/big/1/late"), 0);
    ck_assert_int_eq(total, before - 2 + 1); /* the runs and jobs rows are not counted; the key is */

    /* back again: generation 2 (never 1 again: generations-never-repeat
     * below), with nothing of the old run's state */
    gen = form("big", 2);
    ck_assert_int_eq(gen, 2);
    /* its group's finding went with the old run: the same collective is
     * fine now (a group's state kept in memory would still fail it) */
    for (int r = 0; r < 2; r++) {
        C10dpb__Reply *rep = run1(report_req((uint64_t)r + 1, "big", gen, r, 1, 0));
        ck_assert_msg(rep->status == C10D_OK, "rank %d: %s", r, rep->detail);
    }
    ck_assert_int_eq(scalar("SELECT count(*) FROM findings WHERE job = '%s'", "big"), 0);
}
END_TEST

/* Many short runs over at once (a sweep of jobs, a retention that just
 * passed): one sweep reclaims as many as its rows allow, not 16 (2,000
 * short jobs were 1,136 still there 30 s after they ended). */
START_TEST(one_sweep_reclaims_as_many_short_runs_as_its_rows_allow)
{
    enum { JOBS = 30 }; /* more than a batch of RUNS_RECLAIM_RUNS; the fixture keeps 64 replies */
    for (int i = 0; i < JOBS; i++) {
        char job[32];
        snprintf(job, sizeof job, "short-%d", i);
        uint64_t gen = form(job, 1);
        ck_assert_int_eq(run1(leave_req(1, job, gen, 0))->status, C10D_OK);
    }
    ck_assert_int_eq(scalar("SELECT count(*) FROM jobs WHERE job LIKE '%s'", "short-%"), JOBS);
    fx.cfg.retention_s = 0;
    int64_t got = c10ds_runs_reclaim(fx.eng, c10d_steady_wall_ms(), RUNS_RECLAIM_ROWS);
    ck_assert_int_gt(got, 0);
    ck_assert_int_le(got, RUNS_RECLAIM_ROWS);
    ck_assert_int_eq(scalar("SELECT count(*) FROM jobs WHERE job LIKE '%s'", "short-%"), 0);
}
END_TEST

/* A run that leaves more keys than RUNS_END_KEYS loses the first of them
 * when it ends and the rest in the sweeps, a bounded number a sweep; its
 * records wait for its keys. Before, every key went in the transaction of
 * the last leave (0.12 s of the engine for 100,000 keys). */
START_TEST(a_big_runs_keys_go_in_bounded_sweeps_after_it_ends)
{
    uint64_t gen = form("big", 2);
    put_many("jobs/big/1/", 12000);
    const char *others[] = {"jobs/big/10/a", "jobs/big/2/a", "jobs/bigger/1/a", "root"};
    for (size_t i = 0; i < 4; i++)
        put(others[i]);
    ck_assert_int_eq(run1(leave_req(1, "big", gen, 0))->status, C10D_OK);
    ck_assert_int_eq(run1(leave_req(2, "big", gen, 1))->status, C10D_OK);
    ck_assert_int_eq(scalar("SELECT count(*) FROM runs WHERE job = '%s' AND ended_ms > 0 AND "
                            "keys_ms IS NULL", "big"), 1);
    ck_assert_int_eq(c10ds_store_count(&fx.eng->store, "jobs/big/1/"), 12000 - RUNS_END_KEYS);
    put("jobs/big/1/late"); /* written after the end: goes with the rest */
    long long records = rows_of("big");
    fx.cfg.retention_s = 0; /* the records are due at once, yet wait for the keys */
    long long left = 12000 - RUNS_END_KEYS + 1, got;
    int sweeps = 0;
    while (left > 0) {
        got = c10ds_runs_reclaim(fx.eng, c10d_steady_wall_ms(), RUNS_RECLAIM_ROWS);
        ck_assert_int_gt(got, 0);
        ck_assert_int_le(got, RUNS_RECLAIM_ROWS);
        left = c10ds_store_count(&fx.eng->store, "jobs/big/1/");
        if (left > 0)
            ck_assert_int_eq(rows_of("big"), records);
        ck_assert_int_le(++sweeps, 3);
    }
    ck_assert_int_eq(sweeps, 3); /* 11,001 keys: 5,000 + 5,000 + 1,001 */
    while (c10ds_runs_reclaim(fx.eng, c10d_steady_wall_ms(), RUNS_RECLAIM_ROWS) > 0)
        ;
    ck_assert_int_eq(rows_of("big"), 0);
    for (size_t i = 0; i < 4; i++)
        ck_assert_msg(has(others[i]) == 1, "%s went with run (big, 1)", others[i]);
    ck_assert_int_eq(c10ds_store_count(&fx.eng->store, NULL), 4);
}
END_TEST

/* Generation numbers never repeat on a coordinator, also once a job's
 * row is reclaimed: a key written into a run's store after its records
 * went (a straggler's c10d_run_store handle outlives its pg) is never in
 * a later run's store. The jobs table keeps no row for the name. */
START_TEST(generations_never_repeat_after_a_job_is_reclaimed)
{
    uint64_t gen = form("j", 2);
    ck_assert_int_eq(gen, 1);
    ck_assert_int_eq(run1(leave_req(1, "j", gen, 0))->status, C10D_OK);
    ck_assert_int_eq(run1(leave_req(2, "j", gen, 1))->status, C10D_OK);
    while (c10ds_runs_reclaim(fx.eng, c10d_steady_wall_ms(), RUNS_RECLAIM_ROWS) > 0)
        ;
    ck_assert_int_eq(rows_of("j"), 0);
    ck_assert_int_eq(scalar("SELECT count(*) FROM jobs%s", ""), 0);
    put("jobs/j/1/late"); /* the straggler */
    reopen();             /* and the floor outlives a restart */
    gen = form("j", 2);
    ck_assert_int_eq(gen, 2);
    ck_assert_int_eq(c10ds_store_count(&fx.eng->store, "jobs/j/2/"), 0);
    /* a new name starts above the floor too */
    ck_assert_uint_eq(form("k", 2), 2);
    /* and a job reclaimed at a higher generation raises it */
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(run1(leave_req((uint64_t)r + 1, "j", 2, r))->status, C10D_OK);
        ck_assert_int_eq(run1(leave_req((uint64_t)r + 1, "k", 2, r))->status, C10D_OK);
    }
    while (c10ds_runs_reclaim(fx.eng, c10d_steady_wall_ms(), RUNS_RECLAIM_ROWS) > 0)
        ;
    ck_assert_int_eq(scalar("SELECT count(*) FROM jobs%s", ""), 0);
    ck_assert_uint_eq(form("other", 2), 3);
}
END_TEST

/* The retention counts from the end recorded in the database: a
 * coordinator restarted within it reclaims the run when it passes, by
 * the clock, not at once and not never. */
START_TEST(the_retention_clock_survives_a_restart)
{
    fx.cfg.retention_s = 3600;
    uint64_t gen = form("r", 2);
    ck_assert_int_eq(run1(leave_req(1, "r", gen, 0))->status, C10D_OK);
    ck_assert_int_eq(run1(leave_req(2, "r", gen, 1))->status, C10D_OK);
    long long ended = scalar("SELECT ended_ms FROM runs WHERE job = '%s'", "r");
    ck_assert_int_gt(ended, 0);
    long long records = rows_of("r");
    reopen();
    ck_assert_int_eq(c10ds_runs_reclaim(fx.eng, c10d_steady_wall_ms(), RUNS_RECLAIM_ROWS), 0);
    ck_assert_int_eq(c10ds_runs_reclaim(fx.eng, ended + 3600 * 1000 - 1, RUNS_RECLAIM_ROWS), 0);
    ck_assert_int_eq(rows_of("r"), records);
    ck_assert_int_gt(c10ds_runs_reclaim(fx.eng, ended + 3600 * 1000, RUNS_RECLAIM_ROWS), 0);
    while (c10ds_runs_reclaim(fx.eng, ended + 3600 * 1000, RUNS_RECLAIM_ROWS) > 0)
        ;
    ck_assert_int_eq(rows_of("r"), 0);
}
END_TEST

/* A job whose own name holds '/' and '%' loses its keys too (its prefix
 * is the escaped name), and only its own. */
START_TEST(a_job_named_with_slash_and_percent_loses_its_keys)
{
    uint64_t gen = form("a/b%c", 2);
    const char *mine[] = {"jobs/a%2Fb%25c/1/x", "jobs/a%2Fb%25c/1/c10d/nccl/world/id"};
    const char *others[] = {"jobs/a/b%c/1/x", "jobs/a%2Fb%25c/10/x", "jobs/a%2Fb%25cd/1/x",
                            "jobs/a%2Fb/1/x"};
    for (size_t i = 0; i < 2; i++)
        put(mine[i]);
    for (size_t i = 0; i < 4; i++)
        put(others[i]);
    ck_assert_int_eq(run1(leave_req(1, "a/b%c", gen, 0))->status, C10D_OK);
    ck_assert_int_eq(run1(leave_req(2, "a/b%c", gen, 1))->status, C10D_OK);
    for (size_t i = 0; i < 2; i++)
        ck_assert_msg(has(mine[i]) == 0, "%s outlived its run", mine[i]);
    for (size_t i = 0; i < 4; i++)
        ck_assert_msg(has(others[i]) == 1, "%s went with job a/b%%c", others[i]);
    put(mine[0]); /* late: goes with the records */
    while (c10ds_runs_reclaim(fx.eng, c10d_steady_wall_ms(), RUNS_RECLAIM_ROWS) > 0)
        ;
    ck_assert_int_eq(has(mine[0]), 0);
    ck_assert_int_eq(rows_of("a/b%c"), 0);
}
END_TEST

/* When a run ends its verification state leaves memory (its groups,
 * their traces: before, kept until the retention, a day of jobs' worth);
 * c10d-ctl desync and trace show the same of it from the database, and a
 * straggler's report does not bring it back. */
START_TEST(a_finished_runs_verification_leaves_memory_for_the_database)
{
    uint64_t gen = form("v", 2);
    for (int r = 0; r < 2; r++) /* #1 alike, then #2 differs: a desync */
        ck_assert_int_eq(run1(report_req((uint64_t)r + 1, "v", gen, r, 1, 0))->status, C10D_OK);
    run1(report_req(1, "v", gen, 0, 2, 0));
    run1(report_req(2, "v", gen, 1, 2, 1));
    int ranks[] = {0, 1};
    ck_assert_ptr_nonnull(
        c10ds_join_region(&fx.eng->join, "v", gen, "world", 1, 2, ranks, 1, 0, 0));
    /* what desync and trace show while the run goes on (from memory) */
    C10dpb__Reply *before = run1(status_req("v"));
    ck_assert_int_eq(before->status, C10D_OK);
    ck_assert_uint_eq(before->coll_status->n_groups, 1);
    C10dpb__Reply *trace_before[2];
    for (int r = 0; r < 2; r++) {
        trace_before[r] = run1(trace_req("v", r));
        ck_assert_msg(trace_before[r]->status == C10D_OK, "%s", trace_before[r]->detail);
    }
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(run1(leave_req((uint64_t)r + 1, "v", gen, r))->status, C10D_OK);
    ck_assert_ptr_null(fx.eng->verify.groups);
    ck_assert_ptr_null(fx.eng->join.regions);
    ck_assert_int_eq(scalar("SELECT count(*) FROM group_progress WHERE job = '%s'", "v"), 2);

    /* the same, from the database */
    C10dpb__Reply *after = run1(status_req("v"));
    ck_assert_int_eq(after->status, C10D_OK);
    ck_assert_uint_eq(after->coll_status->n_groups, 1);
    const C10dpb__GroupHealth *a = before->coll_status->groups[0],
                              *b = after->coll_status->groups[0];
    ck_assert_str_eq(b->job, "v");
    ck_assert_str_eq(b->group, "world");
    ck_assert_int_eq(b->generation, gen);
    ck_assert_int_eq(b->size, 2);
    ck_assert_int_eq(b->status, C10D_EDESYNC);
    ck_assert_str_eq(b->report, a->report);
    ck_assert_uint_eq(b->n_ranks, 2);
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(b->ranks[i]->rank, a->ranks[i]->rank);
        ck_assert_int_eq(b->ranks[i]->global_rank, a->ranks[i]->global_rank);
        ck_assert_uint_eq(b->ranks[i]->entered, 2);
        ck_assert_uint_eq(b->ranks[i]->entered, a->ranks[i]->entered);
        ck_assert_uint_eq(b->ranks[i]->completed, a->ranks[i]->completed);
        ck_assert_int_eq(b->ranks[i]->entered_ms, a->ranks[i]->entered_ms);
        ck_assert_str_eq(b->ranks[i]->last, a->ranks[i]->last);
    }
    for (int r = 0; r < 2; r++) {
        C10dpb__Reply *t = run1(trace_req("v", r));
        ck_assert_msg(t->status == C10D_OK, "%s", t->detail);
        const C10dpb__CollTraceReply *x = trace_before[r]->coll_trace, *y = t->coll_trace;
        ck_assert_str_eq(y->job, "v");
        ck_assert_uint_eq(y->n_rows, x->n_rows);
        for (size_t i = 0; i < x->n_rows; i++) {
            ck_assert_uint_eq(y->rows[i]->first_seq, x->rows[i]->first_seq);
            ck_assert_uint_eq(y->rows[i]->last_seq, x->rows[i]->last_seq);
            ck_assert_str_eq(y->rows[i]->what, x->rows[i]->what);
            ck_assert_str_eq(y->rows[i]->state, x->rows[i]->state);
            ck_assert_int_eq(y->rows[i]->entered_ms, x->rows[i]->entered_ms);
        }
        ck_assert_str_eq(y->rows[y->n_rows - 1]->state, "failed");
    }
    /* a late report of the run's (a rank declared dead that goes on) */
    C10dpb__Reply *rep = run1(report_req(1, "v", gen, 0, 3, 0));
    ck_assert_int_eq(rep->status, C10D_EPEERLOST);
    ck_assert_msg(strstr(rep->detail, "job v generation 1 is over"), "%s", rep->detail);
    ck_assert_ptr_null(fx.eng->verify.groups);
    /* and once reclaimed, nothing is shown */
    while (c10ds_runs_reclaim(fx.eng, c10d_steady_wall_ms(), RUNS_RECLAIM_ROWS) > 0)
        ;
    ck_assert_uint_eq(run1(status_req("v"))->coll_status->n_groups, 0);
    ck_assert_int_eq(run1(trace_req("v", 0))->status, C10D_ENOTFOUND);
}
END_TEST

/* Every table of the schema keyed by (job, generation) holds a run's
 * records, and runs.c must delete them: a table added without joining its
 * list (C10DS_PER_RUN_TABLES) would grow with every run, forever. jobs is
 * the one exception: a row per job (its current generation), deleted with
 * the job's last run. */
START_TEST(every_table_keyed_by_job_and_generation_is_reclaimed)
{
    sqlite3_stmt *s;
    ck_assert_int_eq(sqlite3_prepare_v2(fx.db.h,
                                        "SELECT name FROM sqlite_master m WHERE type = "
                                        "'table' AND EXISTS (SELECT 1 FROM pragma_table_info"
                                        "(m.name) WHERE name = 'job') AND EXISTS (SELECT 1 "
                                        "FROM pragma_table_info(m.name) WHERE name = "
                                        "'generation') ORDER BY name",
                                        -1, &s, NULL),
                     SQLITE_OK);
    size_t n = 0, listed = sizeof per_run_tables / sizeof *per_run_tables;
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(s, 0);
        if (!strcmp(t, "jobs"))
            continue;
        int found = 0;
        for (size_t i = 0; i < listed; i++)
            found |= !strcmp(per_run_tables[i], t);
        ck_assert_msg(found, "table %s is keyed by (job, generation) but runs.c never deletes its "
                      "rows: add it to C10DS_PER_RUN_TABLES (server/groups/runs.h)", t);
        n++;
    }
    sqlite3_finalize(s);
    ck_assert_int_eq(n, listed); /* and the list names no table the schema lacks */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runs_reclaim");
    TCase *tc = runs_tcase("engine");
    tcase_add_test(tc, reclaiming_is_bounded_per_sweep_and_leaves_nothing);
    tcase_add_test(tc, one_sweep_reclaims_as_many_short_runs_as_its_rows_allow);
    tcase_add_test(tc, every_table_keyed_by_job_and_generation_is_reclaimed);
    tcase_add_test(tc, a_finished_runs_verification_leaves_memory_for_the_database);
    tcase_add_test(tc, a_big_runs_keys_go_in_bounded_sweeps_after_it_ends);
    tcase_add_test(tc, generations_never_repeat_after_a_job_is_reclaimed);
    tcase_add_test(tc, the_retention_clock_survives_a_restart);
    tcase_add_test(tc, a_job_named_with_slash_and_percent_loses_its_keys);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
