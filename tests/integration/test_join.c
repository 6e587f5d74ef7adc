/* Join for uneven inputs end to end (docs/join.md), the region itself:
 * the six cases of the DDP-join hang report in SYNC, ASYNC and OFF
 * verification (in-band and through the coordinator); throw mode; world 4
 * with ranks joining at different steps; a join region in a subgroup;
 * async collectives in a region; c10d-ctl status showing who joined; a
 * coordinator restart while a rank is joined. The identities a joined rank
 * contributes are test_join_identities.c's, what fails or is refused
 * test_join_failures.c's, the in-band shadowing and the last active rank
 * test_join_inband.c's. Real coordinator, real forked ranks, the host data
 * plane. */
#include "join_world.h"
#include "state_wait.h"

#include "check_main.h"

#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* --- the six cases: world 2, rank 0 has 5 batches, rank 1 has 6 --- */

enum { CASE_JOIN = 1, CASE_NO_JOIN, CASE_BARRIER_NO_JOIN, CASE_JOIN_BARRIER, CASE_ONE_BARRIER,
       CASE_JOIN_THEN_BARRIER };

static int six_cases_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    static const int batches[2] = {5, 6};
    int kase = sc->kase, rc;
    int join = kase == CASE_JOIN || kase == CASE_JOIN_BARRIER || kase == CASE_JOIN_THEN_BARRIER;
    if (sc->opt) /* the coordinator tells the joined rank what to shadow (as for NCCL) */
        setenv("C10D_JOIN_INBAND", "0", 1);
    int barrier_each = kase == CASE_BARRIER_NO_JOIN || kase == CASE_JOIN_BARRIER;
    c10d_pg *pg = init_mode(sc, rank, n, 30000);
    if (!pg)
        return 10;
    if (join && c10d_join_begin(pg, NULL) != C10D_OK)
        FAIL(11, "rank %d: join_begin: %s", rank, c10d_errmsg());
    for (int i = 0; i < batches[rank]; i++) {
        long long t0 = test_now_ms();
        if (!join && i == 5) { /* rank 1's extra step: the others are gone */
            float g[N_ELEMS] = {0};
            c10d_tensor t = c10d_tensor_1d(g, C10D_FLOAT32, N_ELEMS);
            c10d_status st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
            long long took = test_now_ms() - t0;
            if (kase == CASE_ONE_BARRIER) /* rank 0 called a barrier as #6 */
                rc = expect_failure(rank, st, took, C10D_EDESYNC, C10D_EDESYNC,
                                    "at collective #6", "BARRIER");
            else /* rank 0 left */
                rc = expect_failure(rank, st, took, C10D_EPEERLOST, C10D_EPEERLOST,
                                    "rank 0", kase == CASE_NO_JOIN ? "#6" : "#11");
            c10d_destroy(pg);
            return rc;
        }
        if ((rc = step(pg, rank, i, batches, n)) != 0)
            return rc;
        if (barrier_each && c10d_barrier(pg, NULL, NULL) != C10D_OK)
            FAIL(12, "rank %d step %d: barrier: %s", rank, i, c10d_errmsg());
    }
    if (join) {
        int last = -1;
        if (c10d_join_end(pg, &last) != C10D_OK)
            FAIL(13, "rank %d: join_end: %s", rank, c10d_errmsg());
        if (last != 1)
            FAIL(14, "rank %d: last joiner %d, want 1", rank, last);
    }
    if (kase == CASE_ONE_BARRIER || kase == CASE_JOIN_THEN_BARRIER) {
        long long t0 = test_now_ms();
        c10d_status st = c10d_barrier(pg, NULL, NULL);
        if (kase == CASE_ONE_BARRIER) { /* rank 0: rank 1 is in an all_reduce */
            rc = expect_failure(rank, st, test_now_ms() - t0, C10D_EDESYNC, C10D_EDESYNC,
                                "at collective #6", "ALL_REDUCE");
            c10d_destroy(pg);
            return rc;
        }
        if (st != C10D_OK)
            FAIL(15, "rank %d: the barrier after the region: %s", rank, c10d_errmsg());
    }
    if (join) { /* whole again: a broadcast from the last joiner */
        float w = rank == 1 ? 42.0f : 0.0f;
        c10d_tensor t = c10d_tensor_1d(&w, C10D_FLOAT32, 1);
        if (c10d_broadcast(pg, &t, 1, NULL, NULL) != C10D_OK || w != 42.0f)
            FAIL(16, "rank %d: broadcast after the region: %s (%g)", rank, c10d_errmsg(), w);
        if (c10d_active_ranks(pg) != 2)
            FAIL(17, "rank %d: active ranks after the region: %d", rank, c10d_active_ranks(pg));
    }
    c10d_destroy(pg);
    return 0;
}

START_TEST(six_cases_through_the_coordinator)
{
    scenario sc = {world_job("case-coord"), modes[_i % 3], 1 + _i / 3, 1};
    fprintf(stderr, "case %d under %s, through the coordinator\n", sc.kase, mode_names[_i % 3]);
    run_world(2, six_cases_body, &sc, 60);
}
END_TEST

START_TEST(six_cases)
{
    scenario sc = {world_job("case"), modes[_i % 3], 1 + _i / 3, 0};
    fprintf(stderr, "case %d under %s\n", sc.kase, mode_names[_i % 3]);
    run_world(2, six_cases_body, &sc, 60);
}
END_TEST

/* --- throw mode --- */

typedef struct {
    scenario sc;
    volatile long long joined_at; /* monotonic, when rank 0 called join_end */
} throw_shared;

/* World 3; rank 0 has 3 batches, the others go on: within 1 s of rank 0's
 * join_end every rank's pending or next collective fails with EJOINED
 * naming rank 0 and collective #3, its own join_end too. */
static int throw_body(int rank, int n, void *arg)
{
    throw_shared *sh = arg;
    c10d_pg *pg = init_mode(&sh->sc, rank, n, 30000);
    if (!pg)
        return 10;
    c10d_join_opts jo = C10D_JOIN_OPTS_INIT;
    jo.throw_on_early_termination = 1;
    if (c10d_join_begin(pg, &jo) != C10D_OK)
        FAIL(11, "rank %d: join_begin: %s", rank, c10d_errmsg());
    static const int batches[3] = {3, 100000, 100000};
    c10d_status st = C10D_OK;
    int i;
    for (i = 0; i < batches[rank] && st == C10D_OK; i++) {
        float g = 1;
        c10d_tensor t = c10d_tensor_1d(&g, C10D_FLOAT32, 1);
        st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
        if (st == C10D_OK && i < 3 && g != 3)
            FAIL(12, "rank %d step %d: %g, want 3", rank, i, g);
    }
    if (rank == 0) {
        if (st != C10D_OK)
            FAIL(13, "rank 0 step %d: %s", i, c10d_errmsg());
        int last;
        sh->joined_at = test_now_ms();
        st = c10d_join_end(pg, &last);
    } else if (st == C10D_OK) {
        FAIL(14, "rank %d: every step ran past rank 0's early end", rank);
    }
    long long took = sh->joined_at ? test_now_ms() - sh->joined_at : 0;
    int rc = expect_failure(rank, st, 0, C10D_EJOINED, C10D_EJOINED, "rank 0 ran out of inputs",
                            "after collective #3");
    if (!rc && took > 1000)
        FAIL(15, "rank %d failed %lld ms after rank 0 joined (want within 1 s)", rank, took);
    c10d_destroy(pg);
    return rc;
}

START_TEST(throw_on_early_termination)
{
    throw_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    sh->sc = (scenario){world_job("throw"), modes[_i], 0, 0};
    sh->joined_at = 0;
    int failed = world_run(3, throw_body, sh, 60, NULL);
    dump_log_if(failed);
    ck_assert_int_eq(failed, 0);
    munmap(sh, sizeof *sh);
}
END_TEST

/* --- world 4, joining at different steps, with a barrier every other step --- */

static int staggered_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    static const int batches[4] = {3, 5, 7, 9};
    c10d_pg *pg = region_start(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int rc;
    for (int i = 0; i < batches[rank]; i++) {
        if ((rc = step(pg, rank, i, batches, n)) != 0)
            return rc;
        if (i % 2 && c10d_barrier(pg, NULL, NULL) != C10D_OK)
            FAIL(12, "rank %d step %d: barrier: %s", rank, i, c10d_errmsg());
    }
    int last = -1;
    if (c10d_join_end(pg, &last) != C10D_OK)
        FAIL(13, "rank %d: join_end: %s", rank, c10d_errmsg());
    if (last != 3)
        FAIL(14, "rank %d: last joiner %d, want 3", rank, last);
    /* a second region on the same group, rank 2 short this time */
    static const int again[4] = {4, 4, 2, 4};
    if (c10d_join_begin(pg, NULL) != C10D_OK)
        FAIL(15, "rank %d: second join_begin: %s", rank, c10d_errmsg());
    for (int i = 0; i < again[rank]; i++)
        if ((rc = step(pg, rank, i, again, n)) != 0)
            return rc;
    if (c10d_join_end(pg, &last) != C10D_OK || last != 3)
        FAIL(16, "rank %d: second join_end: %s (last %d)", rank, c10d_errmsg(), last);
    if (c10d_barrier(pg, NULL, NULL) != C10D_OK)
        FAIL(17, "rank %d: barrier after: %s", rank, c10d_errmsg());
    c10d_destroy(pg);
    return 0;
}

START_TEST(world4_joining_at_different_steps)
{
    scenario sc = {world_job("staggered"), modes[_i], 0, 0};
    run_world(4, staggered_body, &sc, 90);
}
END_TEST

/* --- a join region in a subgroup --- */

/* World 4; subgroup {1, 3} (group ranks 0, 1) runs a region with uneven
 * inputs while ranks 0 and 2 do nothing; then the world meets. */
static int subgroup_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    c10d_pg *pg = init_mode(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int members[2] = {1, 3}, rc;
    c10d_pg *sub = NULL;
    if (c10d_new_group(&sub, pg, members, 2) != C10D_OK)
        FAIL(11, "rank %d: new_group: %s", rank, c10d_errmsg());
    if (sub) {
        static const int batches[2] = {4, 2};
        int me = c10d_rank(sub), last = -1;
        if (c10d_join_begin(sub, NULL) != C10D_OK)
            FAIL(12, "rank %d: join_begin: %s", rank, c10d_errmsg());
        for (int i = 0; i < batches[me]; i++)
            if ((rc = step(sub, me, i, batches, 2)) != 0)
                return rc;
        if (c10d_join_end(sub, &last) != C10D_OK || last != 0)
            FAIL(13, "rank %d: join_end: %s (last %d)", rank, c10d_errmsg(), last);
    }
    if (c10d_barrier(pg, NULL, NULL) != C10D_OK)
        FAIL(14, "rank %d: world barrier: %s", rank, c10d_errmsg());
    c10d_destroy(sub);
    c10d_destroy(pg);
    return 0;
}

START_TEST(join_region_in_a_subgroup)
{
    scenario sc = {world_job("subgroup"), modes[_i], 0, 0};
    run_world(4, subgroup_body, &sc, 60);
}
END_TEST

/* --- async collectives inside a region --- */

/* Rank 0 queues two async all_reduces and joins without waiting for them
 * (join_end finishes them first); rank 1 issues its 6 steps async, then
 * waits them all, out of order. */
static int async_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    c10d_pg *pg = region_start(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int steps = rank == 0 ? 2 : 6;
    float g[6][N_ELEMS];
    c10d_tensor t[6];
    c10d_work *w[6] = {0};
    c10d_coll_opts o = C10D_COLL_OPTS_INIT;
    o.async_op = 1;
    for (int i = 0; i < steps; i++) {
        for (int k = 0; k < N_ELEMS; k++)
            g[i][k] = (float)(rank + 1) * (float)(i + 1);
        t[i] = c10d_tensor_1d(g[i], C10D_FLOAT32, N_ELEMS);
        if (c10d_all_reduce(pg, &t[i], C10D_SUM, &o, &w[i]) != C10D_OK)
            FAIL(12, "rank %d: async all_reduce %d: %s", rank, i, c10d_errmsg());
    }
    int last = -1;
    if (rank == 0 && c10d_join_end(pg, &last) != C10D_OK)
        FAIL(13, "rank 0: join_end: %s", c10d_errmsg());
    for (int i = steps - 1; i >= 0; i--) {
        if (c10d_work_wait(w[i], 10000) != C10D_OK)
            FAIL(14, "rank %d: wait %d: %s", rank, i, c10d_errmsg());
        float want = i < 2 ? 3.0f * (float)(i + 1) : 2.0f * (float)(i + 1);
        if (g[i][0] != want)
            FAIL(15, "rank %d step %d: %g, want %g", rank, i, g[i][0], want);
        c10d_work_free(w[i]);
    }
    if (rank == 1 && c10d_join_end(pg, &last) != C10D_OK)
        FAIL(16, "rank 1: join_end: %s", c10d_errmsg());
    if (last != 1)
        FAIL(17, "rank %d: last joiner %d", rank, last);
    c10d_destroy(pg);
    return 0;
}

START_TEST(async_collectives_in_a_region)
{
    scenario sc = {world_job("async"), modes[_i], 0, 0};
    run_world(2, async_body, &sc, 60);
}
END_TEST

/* --- c10d-ctl status shows who joined and what is shadowed --- */

/* Rank 0 joins after one step; rank 1 runs 3 more, then waits for the
 * test to look (key "go") before joining. */
static int status_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    static const int batches[2] = {1, 4};
    c10d_pg *pg = region_start(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int rc, last;
    for (int i = 0; i < batches[rank]; i++)
        if ((rc = step(pg, rank, i, batches, n)) != 0)
            return rc;
    if (rank == 1) {
        c10d_store *s;
        void *v;
        size_t len;
        if (c10d_store_connect(&s, coord.url, NULL) != C10D_OK ||
            c10d_store_set(s, "test/shadowed", "1", 1) != C10D_OK ||
            c10d_store_get(s, "test/go", &v, &len, 30000) != C10D_OK)
            FAIL(12, "rank 1: store: %s", c10d_errmsg());
        c10d_free(v);
        c10d_store_close(s);
    }
    if (c10d_join_end(pg, &last) != C10D_OK || last != 1)
        FAIL(13, "rank %d: join_end: %s", rank, c10d_errmsg());
    c10d_destroy(pg);
    return 0;
}

static void ctl(const char *args, char *out, size_t cap, int *status)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --coord %s %s", C10D_CTL_BIN, coord.url, args);
    FILE *p = popen(cmd, "r");
    size_t got = fread(out, 1, cap - 1, p);
    out[got] = '\0';
    *status = pclose(p);
}

START_TEST(ctl_status_shows_the_join)
{
    scenario sc = {world_job("status"), C10D_VERIFY_SYNC, 0, 0};
    pid_t pids[2];
    world_spawn(2, status_body, &sc, pids);
    char out[16384], args[256];
    int st;
    snprintf(args, sizeof args, "--wait 30000 get test/shadowed");
    ctl(args, out, sizeof out, &st);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "get: %s", out);
    /* rank 1 entered #4 before it set the key: #2..#4 were shadowed */
    snprintf(args, sizeof args, "--json status --job %s", sc.job);
    ctl(args, out, sizeof out, &st);
    ck_assert_msg(strstr(out, "\"join\":{\"region\":1"), "status --json: %s", out);
    ck_assert_msg(strstr(out, "\"joined\":[{\"rank\":0,\"global_rank\":0,\"after_seq\":1"),
                  "status --json: %s", out);
    ck_assert_msg(strstr(out, "\"released\":4"), "status --json: %s", out);
    ck_assert_msg(strstr(out, "#4 ALL_REDUCE float32[4] SUM"), "status --json: %s", out);
    snprintf(args, sizeof args, "status --job %s", sc.job);
    ctl(args, out, sizeof out, &st);
    ck_assert_msg(strstr(out, "join region 1") && strstr(out, "rank 0 after #1"),
                  "status: %s", out);
    ck_assert_msg(strstr(out, "1 of 2 joined"), "status: %s", out);
    ctl("set --write test/go 1", out, sizeof out, &st);
    int failed = world_wait(2, pids, 60);
    dump_log_if(failed);
    ck_assert_int_eq(failed, 0);
    snprintf(args, sizeof args, "--json status --job %s", sc.job);
    ctl(args, out, sizeof out, &st);
    ck_assert_msg(strstr(out, "\"done\":true,\"last_joiner\":1"), "status --json after: %s",
                  out);
}
END_TEST

/* --- a coordinator restart while a rank is joined --- */

typedef struct {
    scenario sc;
    volatile int restarted;
} restart_shared;

static int restart_body(int rank, int n, void *arg)
{
    restart_shared *sh = arg;
    static const int batches[2] = {1, 40};
    c10d_pg *pg = init_mode(&sh->sc, rank, n, 60000);
    if (!pg)
        return 10;
    if (c10d_join_begin(pg, NULL) != C10D_OK)
        FAIL(11, "rank %d: join_begin: %s", rank, c10d_errmsg());
    int rc, last;
    for (int i = 0; i < batches[rank]; i++) {
        if (rank == 1 && i == 20 && !wait_shared(&sh->restarted, 1, 60000))
            FAIL(14, "rank 1: the test never restarted the coordinator");
        if ((rc = step(pg, rank, i, batches, n)) != 0)
            return rc;
    }
    if (c10d_join_end(pg, &last) != C10D_OK || last != 1)
        FAIL(13, "rank %d: join_end: %s", rank, c10d_errmsg());
    c10d_destroy(pg);
    return 0;
}

START_TEST(coordinator_restart_while_joined)
{
    restart_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    sh->sc = (scenario){world_job("restart"), C10D_VERIFY_SYNC, 0, 0};
    sh->restarted = 0;
    char listen[600];
    snprintf(listen, sizeof listen, "%s", coord.url); /* the same address again */
    pid_t pids[2];
    world_spawn(2, restart_body, sh, pids);
    /* wait until rank 0 joined and rank 1 shadows, then restart */
    char out[16384], args[256];
    int st;
    for (int i = 0; i < 500; i++) {
        snprintf(args, sizeof args, "--json status --job %s", sh->sc.job);
        ctl(args, out, sizeof out, &st);
        if (strstr(out, "\"released\":2"))
            break;
        usleep(10000);
    }
    ck_assert_msg(strstr(out, "\"after_seq\":1"), "rank 0 never joined: %s", out);
    coord_stop(&coord, SIGKILL);
    ck_assert_int_eq(coord_start(&coord, listen, NULL, NULL), 0);
    sh->restarted = 1;
    int failed = world_wait(2, pids, 90);
    dump_log_if(failed);
    ck_assert_int_eq(failed, 0);
    munmap(sh, sizeof *sh);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("join");
    TCase *tc = join_tcase("join");
    tcase_add_loop_test(tc, six_cases, 0, 18);
    tcase_add_loop_test(tc, throw_on_early_termination, 0, 3);
    tcase_add_loop_test(tc, world4_joining_at_different_steps, 0, 3);
    tcase_add_loop_test(tc, join_region_in_a_subgroup, 0, 3);
    tcase_add_loop_test(tc, async_collectives_in_a_region, 0, 3);
    tcase_add_test(tc, ctl_status_shows_the_join);
    tcase_add_test(tc, coordinator_restart_while_joined);
    tcase_add_loop_test(tc, six_cases_through_the_coordinator, 0, 18);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
