/* Runs (server/groups/runs.c) in the engine, on a real SQLite file, without the
 * network: a run ends with its last alive member and its store keys go
 * then (only its own); an arrival never joins a run that is over; its
 * records go after the retention, a bounded number of rows a sweep, with
 * what the engine keeps in memory for it; a job's row goes with its last
 * run; a rank with no holder in a running generation is refused. */
#include "engine/engine.h"
#include "engine_fixture.h"
#include "engine_request.h"
#include "engine/events.h"
#include "groups/liveness_ops.h"
#include "engine/request.h"
#include "groups/runs.h"
#include "store/store.h"

#include "c10d_time.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static engine_fixture fx;

static void setup(void)
{
    engine_fixture_init(&fx, "runs");
    fx.cfg.retention_s = 0; /* a run's records are due when it ends; cases raise it */
    /* The cases reclaim by hand (c10ds_runs_reclaim), each step checked:
     * no sweep of the engine's own does it behind their back. */
    fx.manual_sweeps = 1;
    ck_assert_msg(engine_fixture_start(&fx, NULL, NULL) == 0, "%s", fx.err);
}

static void teardown(void)
{
    engine_fixture_stop(&fx);
}

/* The coordinator restarted on the same database file: a new engine
 * (nothing in memory), the members' connections those of the old one. */
static void reopen(void)
{
    ck_assert_msg(engine_fixture_restart(&fx) == 0, "%s", fx.err);
}

/* Runs one request; returns its reply (NULL if it parked). */
static C10dpb__Reply *run1(c10ds_request *r)
{
    int before = fx.nreplies;
    r->next = NULL;
    c10ds_engine_run_batch(fx.eng, r);
    return fx.nreplies > before ? fx.replies[fx.nreplies - 1] : NULL;
}

/* Runs batches until a parked request's deadline answers it. */
static C10dpb__Reply *await_reply(void)
{
    int before = fx.nreplies;
    long long until = c10d_now_ms() + 5000;
    while (fx.nreplies == before && c10d_now_ms() < until) {
        usleep(5000);
        c10ds_engine_run_batch(fx.eng, NULL);
    }
    ck_assert_msg(fx.nreplies > before, "no parked request was answered in 5 s");
    return fx.replies[fx.nreplies - 1];
}

static c10ds_request *join_req(uint64_t client, const char *job, int rank, int world)
{
    C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
    m.job = (char *)job;
    m.name = "world";
    m.rank = rank;
    m.world_size = world;
    m.has_timeout_ms = 1;
    m.timeout_ms = 50;
    m.host = "node1";
    m.has_pid = 1;
    m.pid = 1000 + rank;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
    pb.group_join = &m;
    c10ds_request *r = engine_request(&pb, client, client * 1000 + (uint64_t)fx.nreplies);
    r->pipe = (uint32_t)client; /* each client its own connection */
    return r;
}

/* Client's connection closed (the listener's event). */
static c10ds_request *closed_req(uint64_t client)
{
    c10ds_request *r = c10ds_request_new(NULL, NULL);
    r->event = C10DS_EV_PIPE_CLOSED;
    r->pipe = (uint32_t)client;
    return r;
}

static c10ds_request *leave_req(uint64_t client, const char *job, uint64_t gen, int rank)
{
    return engine_request_leave(client, client * 1000 + 500 + (uint64_t)fx.nreplies, job, gen,
                                rank);
}

/* Rank `rank` entered collective #seq of kind `kind` (ASYNC: answered at once). */
static c10ds_request *report_req(uint64_t client, const char *job, uint64_t gen, int rank,
                                 uint64_t seq, uint32_t kind)
{
    return engine_request_report(client, client * 1000 + 800 + (uint64_t)fx.nreplies, job, gen,
                                 rank, seq, kind);
}

/* What c10d-ctl desync asks (coll_status) of job. */
static c10ds_request *status_req(const char *job)
{
    C10dpb__CollStatus m = C10DPB__COLL_STATUS__INIT;
    m.job = (char *)job;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_COLL_STATUS;
    pb.coll_status = &m;
    return engine_request(&pb, 99, 99000 + (uint64_t)fx.nreplies);
}

/* What c10d-ctl trace asks (coll_trace) of global rank `rank` of job. */
static c10ds_request *trace_req(const char *job, int rank)
{
    C10dpb__CollTrace m = C10DPB__COLL_TRACE__INIT;
    m.job = (char *)job;
    m.rank = rank;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_COLL_TRACE;
    pb.coll_trace = &m;
    return engine_request(&pb, 99, 99500 + (uint64_t)fx.nreplies);
}

static long long scalar(const char *fmt, const char *arg)
{
    char q[512];
    snprintf(q, sizeof q, fmt, arg);
    sqlite3_stmt *s;
    ck_assert_msg(sqlite3_prepare_v2(fx.db.h, q, -1, &s, NULL) == SQLITE_OK, "%s: %s", q,
                  sqlite3_errmsg(fx.db.h));
    long long v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    return v;
}

/* n keys "<prefix>k<i>" (the store's cached count follows). */
static void put_many(const char *prefix, int n)
{
    char q[512];
    snprintf(q, sizeof q, "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE "
             "i < %d) INSERT INTO kv(key, value, updated_ms) SELECT '%s' || 'k' || i, x'00', 0 "
             "FROM c", n - 1, prefix);
    ck_assert_int_eq(sqlite3_exec(fx.db.h, q, NULL, NULL, NULL), SQLITE_OK);
    c10ds_store_recount(&fx.eng->store);
}

static void put(const char *key)
{
    ck_assert_int_eq(c10ds_store_set(&fx.eng->store, key, "v", 1), C10D_OK);
}

static int has(const char *key)
{
    return c10ds_store_exists(&fx.eng->store, key);
}

/* A world of n ranks of job formed (clients 1..n); its generation. */
static uint64_t form(const char *job, int n)
{
    C10dpb__Reply *rep = NULL;
    for (int r = 0; r < n; r++)
        rep = run1(join_req((uint64_t)r + 1, job, r, n));
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->status == C10D_OK, "%s", rep->detail);
    return rep->group_join->generation;
}

/* runs.c's list of the tables of per-run records, and runs itself. */
#define TABLE_NAME(t, k) #t,
static const char *const per_run_tables[] = {C10DS_PER_RUN_TABLES(TABLE_NAME) "runs"};
#undef TABLE_NAME

/* Rows of job in every table of per-run records, and its jobs row. */
static long long rows_of(const char *job)
{
    long long n = scalar("SELECT count(*) FROM jobs WHERE job = '%s'", job);
    for (size_t i = 0; i < sizeof per_run_tables / sizeof *per_run_tables; i++) {
        char q[256];
        snprintf(q, sizeof q, "SELECT count(*) FROM %s WHERE job = '%%s'", per_run_tables[i]);
        n += scalar(q, job);
    }
    return n;
}

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
    Suite *s = suite_create("runs");
    TCase *tc = tcase_create("engine");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_run_ends_with_its_last_alive_member_and_only_its_keys_go);
    tcase_add_test(tc, a_rendezvous_everyone_gave_up_on_is_over_and_the_next_starts_afresh);
    tcase_add_test(tc, a_running_generation_refuses_a_rank_it_lacks_naming_itself);
    tcase_add_test(tc, a_forming_generation_refuses_another_world_size_with_the_hint);
    tcase_add_test(tc, reclaiming_is_bounded_per_sweep_and_leaves_nothing);
    tcase_add_test(tc, a_restart_waits_for_the_old_runs_survivors_and_names_them);
    tcase_add_test(tc, every_table_keyed_by_job_and_generation_is_reclaimed);
    tcase_add_test(tc, a_finished_runs_verification_leaves_memory_for_the_database);
    tcase_add_test(tc, a_database_error_reading_the_holder_fails_the_arrival);
    tcase_add_test(tc, a_big_runs_keys_go_in_bounded_sweeps_after_it_ends);
    tcase_add_test(tc, generations_never_repeat_after_a_job_is_reclaimed);
    tcase_add_test(tc, the_retention_clock_survives_a_restart);
    tcase_add_test(tc, a_job_named_with_slash_and_percent_loses_its_keys);
    tcase_add_test(tc, an_arrival_beside_the_last_death_never_ends_a_run_with_a_member_alive);
    tcase_add_test(tc, a_restart_ends_no_run_before_the_heartbeat_timeout);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
