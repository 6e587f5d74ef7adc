/* Runs on one long-lived coordinator, end to end (real c10d-coord, real
 * ranks, the real SQLite file): a run's store (c10d_run_store) is its own
 * and goes when the run is over, and not before; a finished job's records
 * go after --retention, also across a coordinator restart, and the job can
 * run again; two jobs nobody named are told how to run side by side. */
#include "coord_proc.h"
#include "state_wait.h"
#include "world_proc.h"

#include "check_main.h"

#include <check.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static coord_proc coord;

/* Shared between the test and its rank processes. */
typedef struct {
    char job[128];
    volatile int gen;      /* the generation the ranks expect */
    volatile int ready[4]; /* a rank is past its part and waits for go */
    volatile int go;
    volatile int desync;   /* the run ends with a desync (SYNC verification) */
} shared_t;

static shared_t *sh;

static void setup(void)
{
    coord_init(&coord);
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset((void *)sh, 0, sizeof *sh);
}

static void teardown(void)
{
    coord_cleanup(&coord);
    munmap((void *)sh, sizeof *sh);
}

/* Starts the case's coordinator with --retention S (NULL: its default). */
static void start(const char *retention)
{
    const char *extra[] = {"--retention", retention, NULL};
    ck_assert_int_eq(coord_start(&coord, coord.url[0] ? coord.url : NULL,
                                 retention ? extra : NULL, NULL), 0);
}

/* What `c10d-ctl ARGS` prints (at most cap - 1 bytes); its exit status.
 * The test process itself stays off NNG: it forks ranks after, and NNG
 * refuses to run in a child forked from a process that used it. */
static int ctl(char *out, size_t cap, const char *fmt, const char *arg)
{
    char args[512], cmd[1024];
    snprintf(args, sizeof args, fmt, arg);
    snprintf(cmd, sizeof cmd, "%s --coord %s %s", C10D_CTL_BIN, coord.url, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t got = fread(out, 1, cap - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Keys under prefix (at most 1000). */
static long keys_under(const char *prefix)
{
    static char out[1 << 18];
    ck_assert_int_eq(ctl(out, sizeof out, "--json keys %s", prefix), 0);
    long n = 0;
    for (const char *p = out; (p = strstr(p, "{\"key\":")); p++)
        n++;
    return n;
}

/* 1 once the keys under prefix number `want`, 0 after timeout_ms. */
static int wait_keys(const char *prefix, long want, int timeout_ms)
{
    long long until = test_now_ms() + timeout_ms;
    while (keys_under(prefix) != want)
        if (test_now_ms() > until || usleep(5000) != 0)
            return 0;
    return 1;
}

/* Whether c10d-ctl status lists job (it exits 3 for a job it does not
 * know). */
static int listed(const char *job)
{
    static char out[1 << 16];
    char want[192];
    int rc = ctl(out, sizeof out, "--json status --job %s", job);
    ck_assert_msg(rc == 0 || rc == 3, "c10d-ctl status --job %s exited %d: %s", job, rc, out);
    snprintf(want, sizeof want, "\"job\":\"%s\"", job);
    return rc == 0 && strstr(out, want) != NULL;
}

/* One number from the coordinator's database, read as an operator would
 * (read-only, beside the running coordinator): query q. */
static long long db_query(const char *q)
{
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(coord.db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_busy_timeout(h, 5000);
    sqlite3_stmt *s;
    ck_assert_msg(sqlite3_prepare_v2(h, q, -1, &s, NULL) == SQLITE_OK, "%s: %s", q,
                  sqlite3_errmsg(h));
    long long v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    sqlite3_close(h);
    return v;
}

/* The same with the job's name in fmt's one %s. */
static long long db_count(const char *fmt, const char *job)
{
    char q[512];
    snprintf(q, sizeof q, fmt, job);
    return db_query(q);
}

static const char *const tables[] = {"jobs", "runs", "members", "member_finals", "groups",
                                     "group_ranks", "group_members", "findings", "coll_trace",
                                     "join_regions", "join_members"};

/* The job's rows in every table (its keys included). */
static long long rows_of(const char *job)
{
    long long n = 0;
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
        char q[128];
        snprintf(q, sizeof q, "SELECT count(*) FROM %s WHERE job = '%%s'", tables[i]);
        n += db_count(q, job);
    }
    char q[512];
    snprintf(q, sizeof q, "SELECT count(*) FROM kv WHERE key >= 'jobs/%s/' AND key < 'jobs/%s0'",
             job, job);
    return n + db_query(q);
}

#define FAIL(code, ...) return fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), (code)

/* A run of the job: its keys in the run's store (none of an earlier run's
 * there), a counter both add to, a collective, and leaving. */
static int run_body(int rank, int n, void *arg)
{
    (void)arg;
    c10d_pg *pg = world_init_verify(coord.url, sh->job, rank, n, 20000, C10D_VERIFY_SYNC);
    if (!pg)
        return 10;
    if ((int)c10d_pg_generation(pg) != sh->gen)
        FAIL(11, "rank %d: generation %llu, not %d", rank,
             (unsigned long long)c10d_pg_generation(pg), sh->gen);
    c10d_store *rs;
    if (c10d_run_store(&rs, pg) != C10D_OK)
        FAIL(12, "rank %d: c10d_run_store: %s", rank, c10d_errmsg());
    char mine[16], peer[16], want[16], *v = NULL;
    size_t len = 0;
    snprintf(mine, sizeof mine, "k%d", rank);
    snprintf(peer, sizeof peer, "k%d", 1 - rank);
    snprintf(want, sizeof want, "gen%d", sh->gen);
    c10d_status st = c10d_store_get(rs, mine, (void **)&v, &len, C10D_NO_WAIT);
    if (st != C10D_ENOTFOUND)
        FAIL(13, "rank %d: an earlier run's %s is in this run's store (%s)", rank, mine,
             c10d_status_name(st));
    int64_t count = 0;
    if (c10d_store_set(rs, mine, want, strlen(want)) != C10D_OK ||
        c10d_store_add(rs, "count", 1, &count) != C10D_OK || c10d_barrier(pg, NULL, NULL))
        FAIL(14, "rank %d: %s", rank, c10d_errmsg());
    if (c10d_store_get(rs, peer, (void **)&v, &len, C10D_NO_WAIT) != C10D_OK ||
        len != strlen(want) || memcmp(v, want, len))
        FAIL(15, "rank %d: the peer's %s is '%.*s', not %s", rank, peer, (int)len, v ? v : "",
             want);
    c10d_free(v);
    if (c10d_store_get(rs, "count", (void **)&v, &len, C10D_NO_WAIT) != C10D_OK || len != 1 ||
        *v != '2')
        FAIL(16, "rank %d: the run's counter is '%.*s', not 2", rank, (int)len, v ? v : "");
    c10d_free(v);
    float x = 1;
    c10d_tensor t = c10d_tensor_1d(&x, C10D_FLOAT32, 1);
    st = sh->desync && rank == 0 ? c10d_barrier(pg, NULL, NULL)
                                 : c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    if (st != (sh->desync ? C10D_EDESYNC : C10D_OK))
        FAIL(17, "rank %d: the last collective: %s: %s", rank, c10d_status_name(st),
             c10d_errmsg());
    c10d_destroy(pg);
    c10d_store_close(rs); /* it may outlive pg */
    return 0;
}

static void run_job(int gen)
{
    sh->gen = gen;
    ck_assert_int_eq(world_run(2, run_body, NULL, 60, NULL), 0);
}

/* One rank of another job, alive until go: its run's key must stay. */
static int other_body(int rank, int n, void *arg)
{
    (void)arg;
    c10d_pg *pg = world_init(coord.url, "other", rank, n, 20000);
    c10d_store *rs;
    if (!pg || c10d_run_store(&rs, pg) != C10D_OK || c10d_store_set(rs, "mine", "x", 1))
        return 10;
    sh->ready[3] = 1;
    if (!wait_shared(&sh->go, 1, 60000))
        return 11;
    c10d_destroy(pg);
    c10d_store_close(rs);
    return 0;
}

START_TEST(two_runs_of_a_job_in_a_row_each_see_only_their_own_store)
{
    start(NULL); /* the default retention: a day */
    snprintf(sh->job, sizeof sh->job, "%s", world_job("twice"));
    char run1[192], run2[192], all[192];
    snprintf(run1, sizeof run1, "jobs/%s/1/", sh->job);
    snprintf(run2, sizeof run2, "jobs/%s/2/", sh->job);
    snprintf(all, sizeof all, "jobs/%s/", sh->job);
    char out[256];
    ck_assert_int_eq(ctl(out, sizeof out, "set --write %s x", "outside-any-run"), 0);
    pid_t other;
    world_spawn(1, other_body, NULL, &other);
    ck_assert_msg(wait_shared(&sh->ready[3], 1, 20000), "the other job never wrote its key");

    run_job(1);
    ck_assert_msg(wait_keys(all, 0, 10000), "run 1 is over, yet %ld of its keys are left",
                  keys_under(run1));
    char line[512]; /* the keys: k0, k1 and the counter */
    snprintf(line, sizeof line, "job %s generation 1: run over (no member alive); 3 store keys "
             "under %s deleted", sh->job, run1);
    ck_assert_msg(coord_log_contains(&coord, line), "no '%s' in the log", line);
    run_job(2); /* its ranks check that none of run 1's keys are in their store */
    ck_assert_msg(wait_keys(all, 0, 10000), "run 2 is over, yet %ld of its keys are left",
                  keys_under(run2));

    /* what is not a finished run's is untouched */
    ck_assert_int_eq(ctl(out, sizeof out, "get %s", "outside-any-run"), 0);
    ck_assert_int_eq(keys_under("jobs/other/1/"), 1);
    sh->go = 1;
    ck_assert_int_eq(world_wait(1, &other, 30), 0);
    ck_assert_msg(wait_keys("jobs/other/1/", 0, 10000), "the other job's key outlived it");
    /* the records stay for the retention: c10d-ctl status shows the run */
    ck_assert(listed(sh->job));
}
END_TEST

/* Rank 0 leaves; rank 1 writes and stays until the test kills it. */
static int leave_or_stay(int rank, int n, void *arg)
{
    (void)arg;
    c10d_pg *pg = world_init(coord.url, sh->job, rank, n, 20000);
    c10d_store *rs;
    char k[8];
    snprintf(k, sizeof k, "k%d", rank);
    if (!pg || c10d_run_store(&rs, pg) != C10D_OK || c10d_store_set(rs, k, "x", 1) ||
        c10d_barrier(pg, NULL, NULL))
        return 10;
    if (rank == 0) {
        c10d_destroy(pg);
        return 0;
    }
    sh->ready[1] = 1;
    wait_shared(&sh->go, 1, 60000); /* killed before */
    return 11;
}

START_TEST(a_run_keeps_its_keys_while_a_rank_lives_and_loses_them_with_the_last)
{
    start(NULL);
    snprintf(sh->job, sizeof sh->job, "%s", world_job("alive"));
    char prefix[192], out[4096], want[256];
    snprintf(prefix, sizeof prefix, "jobs/%s/1/", sh->job);
    ck_assert_int_eq(ctl(out, sizeof out, "set --write %s x", "outside-any-run"), 0);
    pid_t pids[2];
    world_spawn(2, leave_or_stay, NULL, pids);
    ck_assert(wait_shared(&sh->ready[1], 1, 20000));
    ck_assert(wait_member(coord.url, sh->job, 0, "left", 20000));
    /* rank 0's leave is committed: a run ended by it would have no keys */
    ck_assert_int_eq(keys_under(prefix), 2);
    ck_assert_int_eq(db_count("SELECT count(*) FROM runs WHERE job = '%s' AND ended_ms IS NULL",
                              sh->job), 1);
    /* an operator lists the run's keys by its job's name */
    ck_assert_int_eq(ctl(out, sizeof out, "keys --job %s", sh->job), 0);
    snprintf(want, sizeof want, "%sk1 ", prefix);
    ck_assert_msg(strstr(out, want) && !strstr(out, "outside"), "c10d-ctl keys --job: %s", out);
    ck_assert_int_eq(ctl(out, sizeof out, "keys --job %s", "no-such-job"), 3);
    kill(pids[1], SIGKILL);
    ck_assert(wait_member(coord.url, sh->job, 1, "dead", 20000));
    ck_assert_msg(wait_keys(prefix, 0, 10000), "the last rank was killed, yet %ld keys are "
                  "left", keys_under(prefix));
    ck_assert_int_eq(db_count("SELECT count(*) FROM runs WHERE job = '%s' AND ended_ms > 0",
                              sh->job), 1);
    world_wait(2, pids, 30);
}
END_TEST

/* 1 once job is no longer listed and has no row anywhere. */
static int wait_reclaimed(const char *job, int timeout_ms)
{
    long long until = test_now_ms() + timeout_ms;
    while (listed(job) || rows_of(job) > 0)
        if (test_now_ms() > until || usleep(20000) != 0)
            return 0;
    return 1;
}

START_TEST(a_finished_job_is_reclaimed_after_its_retention_and_runs_again)
{
    start("1");
    snprintf(sh->job, sizeof sh->job, "%s", world_job("reclaimed"));
    sh->desync = 1; /* a finding of the run's, which the next run must not inherit */
    run_job(1);
    ck_assert_msg(wait_reclaimed(sh->job, 20000), "job %s: listed %d, %lld rows left after 20 s",
                  sh->job, listed(sh->job), rows_of(sh->job));
    ck_assert(coord_log_contains(&coord, "nothing of the job is left"));
    static char out[1 << 16];
    ck_assert_int_eq(ctl(out, sizeof out, "%s", "status"), 0);
    ck_assert_msg(!strstr(out, sh->job), "c10d-ctl status still shows %s:\n%s", sh->job, out);
    /* the same name again: a clean store, no old finding, and a new
     * generation number (never 1 again: a straggler's late write to the
     * old run's store must not be in this one) */
    sh->desync = 0;
    run_job(2);
}
END_TEST

START_TEST(a_restart_before_the_retention_expires_still_reclaims)
{
    start("3600");
    snprintf(sh->job, sizeof sh->job, "%s", world_job("restart"));
    run_job(1);
    /* over: keys gone, records kept (the verification trace is written
     * every 2 s: wait for it too) */
    char prefix[192];
    snprintf(prefix, sizeof prefix, "jobs/%s/", sh->job);
    ck_assert(wait_keys(prefix, 0, 10000));
    long long until = test_now_ms() + 10000;
    while (db_count("SELECT count(*) FROM coll_trace WHERE job = '%s'", sh->job) == 0 &&
           test_now_ms() < until)
        usleep(20000);
    ck_assert_int_gt(db_count("SELECT count(*) FROM coll_trace WHERE job = '%s'", sh->job), 0);
    coord_stop(&coord, SIGKILL);
    ck_assert_int_eq(db_count("SELECT count(*) FROM runs WHERE job = '%s' AND ended_ms > 0",
                              sh->job), 1);
    ck_assert_int_eq(db_count("SELECT count(*) FROM members WHERE job = '%s'", sh->job), 2);
    start("0"); /* the same database; the end it recorded is past any retention now */
    ck_assert_msg(wait_reclaimed(sh->job, 20000), "job %s: listed %d, %lld rows left after 20 s",
                  sh->job, listed(sh->job), rows_of(sh->job));
}
END_TEST

/* A finished run's post-mortem: c10d-ctl desync, trace and status show
 * its finding, its ranks' traces and its members from the database (the
 * coordinator let go of the run's verification state when it ended),
 * also after a restart, until the retention reclaims them. */
static void expect_post_mortem(const char *job)
{
    static char out[1 << 16];
    char want[256];
    ck_assert_int_eq(ctl(out, sizeof out, "desync --job %s", job), 7); /* unhealthy */
    snprintf(want, sizeof want, "job %s generation 1, group world (2 ranks): EDESYNC", job);
    ck_assert_msg(strstr(out, want), "no '%s' in c10d-ctl desync:\n%s", want, out);
    ck_assert_msg(strstr(out, "desync in group world"), "c10d-ctl desync:\n%s", out);
    ck_assert_msg(strstr(out, "rank 0    entered #") && strstr(out, "rank 1    entered #"),
                  "c10d-ctl desync:\n%s", out);
    for (int r = 0; r < 2; r++) {
        char args[256];
        snprintf(args, sizeof args, "trace --rank %d --job %%s", r);
        ck_assert_int_eq(ctl(out, sizeof out, args, job), 0);
        ck_assert_msg(strstr(out, "failed") && strstr(out, r ? "ALL_REDUCE" : "BARRIER"),
                      "c10d-ctl trace --rank %d:\n%s", r, out);
    }
    ck_assert_int_eq(ctl(out, sizeof out, "status --job %s", job), 0);
    ck_assert_msg(strstr(out, "rank 0") && strstr(out, "rank 1") && strstr(out, "left"),
                  "c10d-ctl status:\n%s", out);
}

START_TEST(a_finished_runs_post_mortem_is_shown_from_the_database)
{
    start(NULL); /* the default retention: a day */
    snprintf(sh->job, sizeof sh->job, "%s", world_job("post-mortem"));
    sh->desync = 1;
    run_job(1);
    char prefix[192];
    snprintf(prefix, sizeof prefix, "jobs/%s/", sh->job);
    ck_assert(wait_keys(prefix, 0, 10000)); /* over */
    ck_assert_int_eq(db_count("SELECT count(*) FROM group_progress WHERE job = '%s'", sh->job), 2);
    expect_post_mortem(sh->job);
    coord_stop(&coord, SIGKILL);
    start(NULL);
    expect_post_mortem(sh->job);
}
END_TEST

/* --- two jobs nobody named ("default" both) --- */

static int holder(int rank, int n, void *arg)
{
    (void)arg;
    c10d_pg *pg = world_init(coord.url, "default", rank, n, 20000);
    if (!pg)
        return 10;
    sh->ready[rank] = 1;
    if (!wait_shared(&sh->go, 1, 60000))
        return 11;
    int64_t v = rank + 1;
    c10d_tensor t = c10d_tensor_1d(&v, C10D_INT64, 1);
    if (c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK || v != 3)
        FAIL(12, "rank %d: the running job broke: %s", rank, c10d_errmsg());
    c10d_destroy(pg);
    return 0;
}

/* c10d_init of rank/world of job "default" from the test; its status,
 * the message in msg. */
static c10d_status arrive(int rank, int world, char *msg, size_t cap)
{
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.coord_url = coord.url;
    o.job = "default";
    o.rank = rank;
    o.world_size = world;
    o.timeout_ms = 5000;
    c10d_pg *pg = NULL;
    c10d_status st = c10d_init(&pg, &o);
    snprintf(msg, cap, "%s", c10d_errmsg());
    c10d_destroy(pg);
    return st;
}

static void expect_hint(const char *msg)
{
    static const char *const hint[] = {"C10D_JOB=NAME", "c10d-run --job NAME",
                                       "coord://HOST:PORT/NAME", "--rdzv_id"};
    for (size_t i = 0; i < sizeof hint / sizeof *hint; i++)
        ck_assert_msg(strstr(msg, hint[i]), "'%s' missing from: %s", hint[i], msg);
}

START_TEST(two_unnamed_jobs_are_told_how_to_run_side_by_side)
{
    start(NULL);
    pid_t pids[2];
    world_spawn(2, holder, NULL, pids);
    ck_assert(wait_shared(&sh->ready[0], 1, 20000) && wait_shared(&sh->ready[1], 1, 20000));
    char msg[2048], want[128];
    /* a second job with a larger world: its rank 3 has no holder */
    ck_assert_int_eq(arrive(3, 4, msg, sizeof msg), C10D_EINVAL);
    ck_assert_msg(strstr(msg, "generation 1 of job default formed with world size 2 and is "
                              "running (2 of its ranks alive"), "%s", msg);
    snprintf(want, sizeof want, "pid %d", (int)pids[1]);
    ck_assert_msg(strstr(msg, want), "%s not in: %s", want, msg);
    expect_hint(msg);
    /* and its rank 0 is held */
    ck_assert_int_eq(arrive(0, 4, msg, sizeof msg), C10D_EINVAL);
    ck_assert_msg(strstr(msg, "already held by host"), "%s", msg);
    expect_hint(msg);
    /* the running job goes on, in its generation */
    sh->go = 1;
    ck_assert_int_eq(world_wait(2, pids, 30), 0);
    ck_assert(!coord_log_contains(&coord, "job default: generation 2"));
}
END_TEST

static int forming_rank0(int rank, int n, void *arg)
{
    (void)rank, (void)arg;
    (void)n; /* one process: rank 0 of a world of 2 */
    c10d_pg *pg = world_init(coord.url, "default", 0, 2, 20000);
    if (!pg)
        return 10;
    c10d_destroy(pg);
    return 0;
}

START_TEST(ranks_disagreeing_on_the_world_size_are_told_how_to_run_side_by_side)
{
    start(NULL);
    pid_t pid;
    world_spawn(1, forming_rank0, NULL, &pid); /* rank 0 of 2, waiting for rank 1 */
    ck_assert(wait_member(coord.url, "default", 0, "alive", 20000));
    char msg[2048];
    c10d_status st = arrive(1, 4, msg, sizeof msg);
    ck_assert_msg(st == C10D_EINVAL, "%s: %s", c10d_status_name(st), msg);
    ck_assert_msg(strstr(msg, "says WORLD_SIZE=4, but generation 1 is forming with world size "
                              "2"), "%s", msg);
    expect_hint(msg);
    ck_assert_int_eq(arrive(1, 2, msg, sizeof msg), C10D_OK); /* the right one forms it */
    ck_assert_int_eq(world_wait(1, &pid, 30), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runs");
    TCase *tc = tcase_create("runs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, two_runs_of_a_job_in_a_row_each_see_only_their_own_store);
    tcase_add_test(tc, a_run_keeps_its_keys_while_a_rank_lives_and_loses_them_with_the_last);
    tcase_add_test(tc, a_finished_job_is_reclaimed_after_its_retention_and_runs_again);
    tcase_add_test(tc, a_restart_before_the_retention_expires_still_reclaims);
    tcase_add_test(tc, a_finished_runs_post_mortem_is_shown_from_the_database);
    tcase_add_test(tc, two_unnamed_jobs_are_told_how_to_run_side_by_side);
    tcase_add_test(tc, ranks_disagreeing_on_the_world_size_are_told_how_to_run_side_by_side);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
