/* Liveness and rendezvous failures end to end: a rank killed in the
 * middle of a collective, a rank that leaves while a peer waits, one whose
 * heartbeats stop, a rendezvous that times out, a rank number taken twice,
 * and a restarted job. Peers must get an error naming the rank, fast.
 *
 * Every scenario is read against the scoreboard its ranks share with the
 * test (pair_world.h: ready counts, pids, when the test struck, go), with
 * the fixture that makes it. */
#include "coord_proc.h"
#include "pair_world.h"
#include "state_wait.h"

#include "check_main.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int expect_lost(int rank, c10d_status st, const char *who, const char *how)
{
    long long waited = test_now_ms() - sh->event_ms;
    const char *msg = c10d_errmsg();
    if (st != C10D_EPEERLOST) {
        fprintf(stderr, "rank %d: expected EPEERLOST, got %s: %s\n", rank, c10d_status_name(st),
                msg);
        return 1;
    }
    if (!strstr(msg, who) || !strstr(msg, how)) {
        fprintf(stderr, "rank %d: message lacks '%s'/'%s': %s\n", rank, who, how, msg);
        return 2;
    }
    if (sh->event_ms && waited > 2000) {
        fprintf(stderr, "rank %d: EPEERLOST came %lld ms after the event\n", rank, waited);
        return 3;
    }
    return 0;
}

/* Rank 2 joins and then never enters the collective; the test kills it. */
static int killed_rank_body(int rank, int n, void *arg)
{
    c10d_pg *pg = world_init(world_coord.url, sh->job, rank, n, 60000);
    if (!pg)
        return 10;
    sh->pid[rank] = (int)getpid();
    __sync_fetch_and_add(&sh->ready, 1);
    if (rank == 2)
        for (;;)
            pause();
    float x[1000] = {0};
    c10d_tensor t = c10d_tensor_1d(x, C10D_FLOAT32, 1000);
    c10d_status st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    char who[64];
    snprintf(who, sizeof who, "rank 2 (host ");
    int rc = expect_lost(rank, st, who, "died");
    if (!rc && !strstr(c10d_errmsg(), "ALL_REDUCE float32[1000] SUM")) {
        fprintf(stderr, "rank %d: message does not name the collective: %s\n", rank,
                c10d_errmsg());
        rc = 4;
    }
    /* The group is unusable now, and says so; a monitored barrier too (it
     * went its own way before, and waited out its timeout). */
    if (!rc && c10d_barrier(pg, NULL, NULL) != C10D_EABORTED)
        rc = 5;
    if (!rc && c10d_monitored_barrier(pg, 20000, 1) != C10D_EABORTED) {
        fprintf(stderr, "rank %d: monitored_barrier on a broken group: %s\n", rank,
                c10d_errmsg());
        rc = 6;
    }
    c10d_destroy(pg);
    return rc;
}

static void sigkill_mid_collective(void);

START_TEST(sigkill_mid_collective_names_the_rank) { sigkill_mid_collective(); }
END_TEST

/* The same with ASYNC verification: the data plane, not the coordinator's
 * rendezvous of the collective, is where the ranks are blocked. */
START_TEST(sigkill_mid_collective_async_verification)
{
    setenv("C10D_VERIFY", "async", 1);
    sigkill_mid_collective();
}
END_TEST

static void sigkill_mid_collective(void)
{
    pid_t pids[3];
    pair_world_spawn("kill", 3, killed_rank_body, pids);
    ck_assert_msg(wait_shared(&sh->ready, 3, 30000), "%d of 3 ranks were ready after 30 s",
                  sh->ready);
    /* ranks 0 and 1 are inside the all_reduce: verification has their
     * entries (SYNC and ASYNC alike) */
    const int waiting[2] = {0, 1};
    ck_assert(wait_entered(world_coord.url, sh->job, "world", waiting, 2, 1, 30000));
    sh->event_ms = test_now_ms();
    kill(pids[2], SIGKILL);
    for (int r = 0; r < 2; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d failed (status %d)", r,
                      st);
    }
    waitpid(pids[2], NULL, 0);
}

static int leaver_body(int rank, int n, void *arg)
{
    c10d_pg *pg = world_init(world_coord.url, sh->job, rank, n, 60000);
    if (!pg)
        return 10;
    if (c10d_barrier(pg, NULL, NULL) != C10D_OK)
        return 11;
    if (rank == 1) {
        c10d_destroy(pg);
        return 0;
    }
    sh->event_ms = test_now_ms();
    int64_t v = 1;
    c10d_tensor t = c10d_tensor_1d(&v, C10D_INT64, 1);
    c10d_status st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    /* SYNC (the default) says "left after collective #1"; without
     * verification the data plane says "left the job". */
    int rc = expect_lost(rank, st, "rank 1 (host", "left");
    c10d_destroy(pg);
    return rc;
}

START_TEST(rank_that_destroys_fails_its_waiting_peer)
{
    snprintf(sh->job, sizeof sh->job, "%s", world_job("leave"));
    ck_assert_int_eq(world_run(2, leaver_body, NULL, 60, NULL), 0);
}
END_TEST

/* A stopped process keeps its connections open: only the heartbeat shows
 * it is gone. */
static int stopped_body(int rank, int n, void *arg)
{
    c10d_pg *pg = world_init(world_coord.url, sh->job, rank, n, 60000);
    if (!pg)
        return 10;
    __sync_fetch_and_add(&sh->ready, 1);
    if (rank == 1)
        for (;;)
            pause();
    int64_t v = 1;
    c10d_tensor t = c10d_tensor_1d(&v, C10D_INT64, 1);
    c10d_status st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    long long waited = test_now_ms() - sh->event_ms;
    sh->event_ms = 0; /* the heartbeat timeout decides, not the 2 s bound */
    int rc = expect_lost(rank, st, "rank 1 (host", "no heartbeat");
    if (!rc && waited > 1500 + 3000) {
        fprintf(stderr, "rank 0: took %lld ms with a 1500 ms heartbeat timeout\n", waited);
        rc = 6;
    }
    c10d_destroy(pg);
    return rc;
}

START_TEST(rank_whose_heartbeats_stop_is_declared_dead)
{
    coord_stop(&world_coord, SIGTERM);
    const char *extra[] = {"--heartbeat-timeout", "1500", NULL};
    ck_assert_int_eq(coord_start(&world_coord, NULL, extra, NULL), 0);
    pid_t pids[2];
    pair_world_spawn("hb", 2, stopped_body, pids);
    ck_assert_msg(wait_shared(&sh->ready, 2, 30000), "%d of 2 ranks were ready after 30 s",
                  sh->ready);
    sh->event_ms = test_now_ms();
    kill(pids[1], SIGSTOP);
    int st;
    waitpid(pids[0], &st, 0);
    kill(pids[1], SIGKILL);
    kill(pids[1], SIGCONT);
    waitpid(pids[1], NULL, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 0 failed (status %d)", st);
}
END_TEST

static int early_body(int rank, int n, void *arg)
{
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.coord_url = world_coord.url;
    o.job = sh->job;
    o.rank = rank;
    o.world_size = 3;
    o.timeout_ms = 1500;
    c10d_pg *pg = NULL;
    c10d_status st = c10d_init(&pg, &o);
    /* The first to time out reports the missing rank; the other may learn
     * it from the first giving up, with the same cause. */
    if (st != C10D_ETIMEDOUT && st != C10D_EPEERLOST) {
        fprintf(stderr, "rank %d: expected ETIMEDOUT, got %s\n", rank, c10d_status_name(st));
        return 1;
    }
    if (!strstr(c10d_errmsg(), "waiting for rank 2 of 3 (2 arrived)")) {
        fprintf(stderr, "rank %d: %s\n", rank, c10d_errmsg());
        return 2;
    }
    return 0;
}

START_TEST(rendezvous_timeout_names_missing_ranks)
{
    snprintf(sh->job, sizeof sh->job, "%s", world_job("rdv"));
    ck_assert_int_eq(world_run(2, early_body, NULL, 30, NULL), 0);
}
END_TEST

static int holder_body(int rank, int n, void *arg)
{
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.coord_url = world_coord.url;
    o.job = sh->job;
    o.rank = 0;
    o.world_size = 2;
    o.timeout_ms = 3000;
    c10d_pg *pg = NULL;
    if (rank == 0) {
        sh->pid[0] = (int)getpid();
        c10d_init(&pg, &o); /* waits for a rank 1 that never comes */
        return 0;
    }
    if (!wait_shared(&sh->pid[0], 1, 60000)) {
        fprintf(stderr, "rank %d: the rank holding rank 0 never started\n", rank);
        return 3;
    }
    if (!wait_member(world_coord.url, sh->job, 0, "alive", 30000)) /* the first holds rank 0 */
        return 2;
    c10d_status st = c10d_init(&pg, &o);
    char want[64];
    snprintf(want, sizeof want, "pid %d", sh->pid[0]);
    if (st != C10D_EINVAL || !strstr(c10d_errmsg(), "already held by host") ||
        !strstr(c10d_errmsg(), want)) {
        fprintf(stderr, "second rank 0: %s: %s\n", c10d_status_name(st), c10d_errmsg());
        return 1;
    }
    return 0;
}

START_TEST(rank_taken_twice_is_refused_naming_the_holder)
{
    snprintf(sh->job, sizeof sh->job, "%s", world_job("dup"));
    ck_assert_int_eq(world_run(2, holder_body, NULL, 30, NULL), 0);
}
END_TEST

static int short_job(int rank, int n, void *arg)
{
    c10d_pg *pg = world_init(world_coord.url, sh->job, rank, n, 20000);
    if (!pg)
        return 10;
    int64_t v = rank;
    c10d_tensor t = c10d_tensor_1d(&v, C10D_INT64, 1);
    int rc = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK || v != 1;
    c10d_destroy(pg);
    return rc;
}

START_TEST(restarted_job_starts_a_new_generation)
{
    snprintf(sh->job, sizeof sh->job, "%s", world_job("restart"));
    ck_assert_int_eq(world_run(2, short_job, NULL, 30, NULL), 0);
    ck_assert_int_eq(world_run(2, short_job, NULL, 30, NULL), 0);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --json --coord %s status", C10D_CTL_BIN, world_coord.url);
    FILE *p = popen(cmd, "r");
    char out[16384] = "";
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = '\0';
    pclose(p);
    char want[256];
    snprintf(want, sizeof want, "\"job\":\"%s\",\"generation\":2", sh->job);
    ck_assert_msg(strstr(out, want), "c10d-ctl status lacks %s: %s", want, out);
    ck_assert_msg(strstr(out, "\"state\":\"left\""), "no member shown as left: %s", out);
}
END_TEST

/* The final collective of each destroyed group went
 * into a 2,048-byte string, cut short at ~140 groups: peers of the groups
 * left out failed with a false EPEERLOST when the rank left. 250 groups:
 * every one is in what the coordinator stored (a GroupSeq each in the
 * leave, a member_finals row each). */
#define MANY_GROUPS 250
static int many_groups_body(int rank, int n, void *arg)
{
    c10d_pg *pg = world_init(world_coord.url, sh->job, rank, n, 60000);
    if (!pg)
        return 10;
    static c10d_pg *g[MANY_GROUPS];
    int both[] = {0, 1};
    for (int i = 0; i < MANY_GROUPS; i++)
        if (c10d_new_group(&g[i], pg, both, 2) != C10D_OK) {
            fprintf(stderr, "rank %d new_group %d: %s\n", rank, i, c10d_errmsg());
            return 11;
        }
    for (int i = 0; i < MANY_GROUPS; i++)
        c10d_destroy(g[i]);
    c10d_destroy(pg);
    return 0;
}

START_TEST(every_destroyed_group_is_named_when_a_rank_leaves)
{
    snprintf(sh->job, sizeof sh->job, "%s", world_job("groups"));
    ck_assert_int_eq(world_run(2, many_groups_body, NULL, 120, NULL), 0);
    char cmd[1024], out[16384] = "";
    snprintf(cmd, sizeof cmd, "sqlite3 '%s' \"SELECT count(*), sum(grp = 'world'), "
             "sum(grp = 'world.1'), sum(grp = 'world.%d') FROM member_finals WHERE job = '%s' "
             "AND rank = 0\"", world_coord.db, MANY_GROUPS, sh->job);
    FILE *p = popen(cmd, "r");
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = '\0';
    pclose(p);
    char want[64];
    snprintf(want, sizeof want, "%d|1|1|1\n", MANY_GROUPS + 1);
    ck_assert_msg(strcmp(out, want) == 0, "rank 0's final collectives (groups, world, world.1, "
                  "world.%d): %s, not %s", MANY_GROUPS, out, want);
}
END_TEST

#define BIG_SEND (64u << 20)

/* Rank 1 exits once it has joined, its links closed cleanly; rank 0 then
 * broadcasts 64 MiB to it over TCP (sh->go: rank 1 is gone). */
static int sigpipe_body(int rank, int n, void *arg)
{
    (void)arg;
    c10d_pg *pg = world_init(world_coord.url, sh->job, rank, n, 60000);
    if (!pg)
        return 10;
    __sync_fetch_and_add(&sh->ready, 1);
    if (rank == 1)
        _exit(0);
    char *buf = calloc(1, BIG_SEND);
    if (!buf)
        return 11;
    if (!wait_shared(&sh->go, 1, 60000)) {
        fprintf(stderr, "rank %d: the test never said go\n", rank);
        return 3;
    }
    c10d_tensor t = c10d_tensor_1d(buf, C10D_UINT8, BIG_SEND);
    c10d_status st = c10d_broadcast(pg, &t, 0, NULL, NULL);
    free(buf);
    int rc = 0;
    if (st == C10D_OK) {
        fprintf(stderr, "rank 0: the broadcast to a dead rank succeeded\n");
        rc = 1;
    } else if (!strstr(c10d_errmsg(), "rank 1")) {
        fprintf(stderr, "rank 0: the error does not name rank 1: %s\n", c10d_errmsg());
        rc = 2;
    }
    sh->done = 1;
    c10d_destroy(pg);
    return rc;
}

/* A write to a link whose peer has gone: the first one is answered with a
 * reset, the next fails with EPIPE, and without MSG_NOSIGNAL raises
 * SIGPIPE, whose default action ends the user's process. The coordinator
 * is stopped meanwhile, so that only the data plane can notice. */
START_TEST(write_to_a_peer_that_exited_fails_the_call_not_the_process)
{
    setenv("C10D_HOST_TRANSPORT", "tcp", 1); /* shared memory writes no socket */
    setenv("C10D_VERIFY", "off", 1);         /* the data plane alone */
    pid_t pids[2];
    pair_world_spawn("sigpipe", 2, sigpipe_body, pids);
    ck_assert_msg(wait_shared(&sh->ready, 2, 30000), "%d of 2 ranks were ready after 30 s",
                  sh->ready);
    kill(world_coord.pid, SIGSTOP);
    int st;
    waitpid(pids[1], &st, 0);
    ck_assert_msg(WIFEXITED(st), "rank 1 ended with status %d", st);
    sh->go = 1;
    /* rank 0 returns from its broadcast (or dies of SIGPIPE) */
    while (!sh->done && waitpid(pids[0], &st, WNOHANG) == 0)
        usleep(1000);
    kill(world_coord.pid, SIGCONT);
    if (sh->done)
        waitpid(pids[0], &st, 0);
    ck_assert_msg(!WIFSIGNALED(st), "rank 0 was killed by signal %d", WTERMSIG(st));
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 0 failed (status %d)", st);
}
END_TEST

#define MASS 20

/* Rank 0 makes a pair group with each other rank, then (once the test has
 * killed ranks 1-19 at once) a barrier in each must fail naming its peer.
 * The coordinator names the first 16 to die in full and the rest as runs
 * of ranks: the library must take both. */
static int mass_body(int rank, int n, void *arg)
{
    (void)arg;
    c10d_pg *pg = world_init(world_coord.url, sh->job, rank, n, 60000);
    if (!pg)
        return 10;
    c10d_pg *pair[MASS] = {0};
    for (int k = 1; k < n; k++) {
        int rr[2] = {0, k};
        if (c10d_new_group(&pair[k], pg, rr, 2) != C10D_OK) {
            fprintf(stderr, "rank %d: new_group: %s\n", rank, c10d_errmsg());
            return 11;
        }
    }
    __sync_fetch_and_add(&sh->ready, 1);
    if (rank != 0)
        for (;;)
            pause();
    if (!wait_shared(&sh->go, 1, 60000)) {
        fprintf(stderr, "rank %d: the test never said go\n", rank);
        return 3;
    }
    int in_full = 0, in_runs = 0, rc = 0;
    for (int k = 1; k < n && !rc; k++) {
        c10d_status st = c10d_barrier(pair[k], NULL, NULL);
        char full[32], run[32];
        snprintf(full, sizeof full, "rank %d (host", k);
        snprintf(run, sizeof run, "rank %d died", k);
        const char *msg = c10d_errmsg();
        if (st != C10D_EPEERLOST || (!strstr(msg, full) && !strstr(msg, run))) {
            fprintf(stderr, "rank 0: the barrier with rank %d: %s: %s\n", k,
                    c10d_status_name(st), msg);
            rc = 1;
        }
        if (strstr(msg, "lost together"))
            in_runs++;
        else
            in_full++;
    }
    if (!rc && (in_full != 16 || in_runs != n - 1 - 16)) {
        fprintf(stderr, "rank 0: %d peers named in full, %d in runs\n", in_full, in_runs);
        rc = 2;
    }
    for (int k = 1; k < n; k++)
        c10d_destroy(pair[k]);
    c10d_destroy(pg);
    return rc;
}

START_TEST(ranks_lost_together_are_all_named)
{
    setenv("C10D_VERIFY", "off", 1); /* the library's own record names the peer */
    snprintf(sh->job, sizeof sh->job, "%s", world_job("mass"));
    pid_t pids[MASS];
    world_spawn(MASS, mass_body, NULL, pids);
    ck_assert_msg(wait_shared(&sh->ready, MASS, 30000), "%d of %d ranks were ready after 30 s",
                  sh->ready, MASS);
    for (int r = 1; r < MASS; r++)
        kill(pids[r], SIGKILL);
    for (int r = 1; r < MASS; r++)
        waitpid(pids[r], NULL, 0);
    sh->go = 1;
    int st;
    waitpid(pids[0], &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 0 failed (status %d)", st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("liveness");
    TCase *tc = tcase_create("liveness");
    tcase_add_checked_fixture(tc, pair_world_setup, pair_world_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sigkill_mid_collective_names_the_rank);
    tcase_add_test(tc, sigkill_mid_collective_async_verification);
    tcase_add_test(tc, rank_that_destroys_fails_its_waiting_peer);
    tcase_add_test(tc, rank_whose_heartbeats_stop_is_declared_dead);
    tcase_add_test(tc, rendezvous_timeout_names_missing_ranks);
    tcase_add_test(tc, rank_taken_twice_is_refused_naming_the_holder);
    tcase_add_test(tc, restarted_job_starts_a_new_generation);
    tcase_add_test(tc, every_destroyed_group_is_named_when_a_rank_leaves);
    tcase_add_test(tc, write_to_a_peer_that_exited_fails_the_call_not_the_process);
    tcase_add_test(tc, ranks_lost_together_are_all_named);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
