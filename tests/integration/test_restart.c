/* A coordinator killed with SIGKILL and restarted on the same address,
 * ten times, while a job runs all_reduces, in each verification mode. The
 * job must carry on within 2 s of each restart, with correct results.
 *
 * In SYNC the hard case is a collective the old coordinator verified for
 * some ranks only: they are in the data plane, the others resend their
 * check to the new coordinator, which must learn from the first ranks
 * (their watch says what they were told) that the collective was verified,
 * or everyone waits for the collective timeout. */
#include "coord_proc.h"
#include "state_wait.h"
#include "world_proc.h"

#include "check_main.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORLD 3
#define RESTARTS 10
#define MAX_STALL_MS 2000

typedef struct {
    char job[128];
    c10d_verify mode;
    volatile long long progress[WORLD]; /* all_reduces completed per rank */
    volatile long long stop_at; /* every rank runs exactly this many */
} shared;

static int rank_body(int rank, int n, void *arg)
{
    shared *sh = arg;
    /* A long collective timeout: a hang shows as a stall the test times,
     * not as an error that would end it sooner. */
    c10d_pg *pg = world_init_verify(world_coord.url, sh->job, rank, n, 60000, sh->mode);
    if (!pg)
        return 10;
    int rc = world_allreduce_until(pg, rank, n, &sh->progress[rank], &sh->stop_at);
    if (rc == 0)
        c10d_destroy(pg);
    return rc;
}

static long long slowest(const shared *sh)
{
    long long m = sh->progress[0];
    for (int r = 1; r < WORLD; r++)
        if (sh->progress[r] < m)
            m = sh->progress[r];
    return m;
}

/* Waits until every rank completed at least `target`; returns how long it
 * took in ms, or -1 after timeout_ms. */
static long long wait_progress(const shared *sh, long long target, long long timeout_ms)
{
    long long t0 = test_now_ms();
    while (slowest(sh) < target) {
        if (test_now_ms() - t0 > timeout_ms)
            return -1;
        usleep(1000);
    }
    return test_now_ms() - t0;
}

START_TEST(the_job_rides_through_restarts)
{
    static const c10d_verify modes[] = {C10D_VERIFY_SYNC, C10D_VERIFY_ASYNC, C10D_VERIFY_OFF};
    static const char *names[] = {"sync", "async", "off"};
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset((void *)sh, 0, sizeof *sh);
    snprintf(sh->job, sizeof sh->job, "%s", world_job(names[_i]));
    sh->mode = modes[_i];
    sh->stop_at = 1LL << 60;
    char url[256];
    snprintf(url, sizeof url, "%s", world_coord.url);
    pid_t pids[WORLD];
    world_spawn(WORLD, rank_body, sh, pids);
    long long worst = 0;
    char failure[512] = "";
    for (int k = 0; k < RESTARTS && !*failure; k++) {
        /* some collectives on this coordinator first */
        long long base = slowest(sh);
        if (wait_progress(sh, base + 20, 20000) < 0) {
            snprintf(failure, sizeof failure, "no progress before restart %d (at %lld)", k,
                     slowest(sh));
            break;
        }
        coord_stop(&world_coord, SIGKILL);
        int st = 0;
        if (coord_start(&world_coord, url, NULL, &st) != 0) {
            snprintf(failure, sizeof failure, "%s: restart %d: the coordinator did not come back "
                     "on %s (wait status %d; its log follows)", names[_i], k, url, st);
            break;
        }
        /* every rank moves on, well past anything in flight at the kill */
        long long at = 0;
        for (int r = 0; r < WORLD; r++)
            if (sh->progress[r] > at)
                at = sh->progress[r];
        long long took = wait_progress(sh, at + 5, 20000);
        if (took < 0 || took > MAX_STALL_MS)
            snprintf(failure, sizeof failure, "%s: restart %d: the job stalled %s%lld ms "
                     "(ranks at %lld, %lld, %lld)", names[_i], k, took < 0 ? "over " : "",
                     took < 0 ? 20000 : took, sh->progress[0], sh->progress[1], sh->progress[2]);
        if (took > worst)
            worst = took;
    }
    /* Well past where any rank is (they are at most one collective
     * apart), so all stop after the same all_reduce. */
    long long most = 0;
    for (int r = 0; r < WORLD; r++)
        if (sh->progress[r] > most)
            most = sh->progress[r];
    sh->stop_at = most + 10;
    int failed = world_wait(WORLD, pids, 60);
    fprintf(stderr, "%s: %d restarts, the longest stall %lld ms, %lld all_reduces\n", names[_i],
            RESTARTS, worst, slowest(sh));
    if (*failure || failed) {
        FILE *f = fopen(world_coord.log, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f))
            fputs(line, stderr);
        if (f)
            fclose(f);
    }
    ck_assert_msg(!*failure, "%s", failure);
    ck_assert_int_eq(failed, 0);
    munmap((void *)sh, sizeof *sh);
}
END_TEST

/* --- what is reported after a restart --- */

#define BEFORE 30 /* all_reduces on the first coordinator */

typedef struct {
    char job[128];
    volatile int ready[2], restarted;
} after_shared;

static int run_before(c10d_pg *pg, after_shared *sh, int rank)
{
    for (int i = 0; i < BEFORE; i++) {
        float x = 1;
        c10d_tensor t = c10d_tensor_1d(&x, C10D_FLOAT32, 1);
        if (c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK) {
            fprintf(stderr, "rank %d, all_reduce %d: %s\n", rank, i, c10d_errmsg());
            return -1;
        }
    }
    sh->ready[rank] = 1;
    if (!wait_shared(&sh->restarted, 1, 60000)) {
        fprintf(stderr, "rank %d: the test never restarted the coordinator\n", rank);
        return -1;
    }
    return 0;
}

static int desync_body(int rank, int n, void *arg)
{
    after_shared *sh = arg;
    c10d_pg *pg = world_init_verify(world_coord.url, sh->job, rank, n, 30000, C10D_VERIFY_SYNC);
    if (!pg || run_before(pg, sh, rank) != 0)
        return 10;
    float x = 1;
    c10d_tensor t = c10d_tensor_1d(&x, C10D_FLOAT32, 1);
    c10d_status st = rank == 0 ? c10d_barrier(pg, NULL, NULL)
                               : c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    const char *msg = c10d_errmsg();
    if (st != C10D_EDESYNC || !strstr(msg, "#31") || !strstr(msg, "rank 0 called BARRIER") ||
        !strstr(msg, "rank 1 called ALL_REDUCE")) {
        fprintf(stderr, "rank %d: %s: %s\n", rank, c10d_status_name(st), msg);
        return 11;
    }
    c10d_destroy(pg);
    return 0;
}

static void restart_when_ready(after_shared *sh)
{
    char url[256];
    snprintf(url, sizeof url, "%s", world_coord.url);
    long long t0 = test_now_ms();
    while (!(sh->ready[0] && sh->ready[1]) && test_now_ms() - t0 < 30000)
        usleep(1000);
    ck_assert_msg(sh->ready[0] && sh->ready[1], "the ranks never finished their all_reduces");
    coord_stop(&world_coord, SIGKILL);
    ck_assert_int_eq(coord_start(&world_coord, url, NULL, NULL), 0);
}

/* Shared state for two ranks running body; restarts the coordinator once
 * both finished their BEFORE all_reduces on the first one. */
static after_shared *start_then_restart(const char *base, rank_fn body, pid_t *pids)
{
    after_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset((void *)sh, 0, sizeof *sh);
    snprintf(sh->job, sizeof sh->job, "%s", world_job(base));
    world_spawn(2, body, sh, pids);
    restart_when_ready(sh);
    return sh;
}

START_TEST(a_desync_after_a_restart_names_the_collective)
{
    pid_t pids[2];
    after_shared *sh = start_then_restart("desync", desync_body, pids);
    sh->restarted = 1;
    ck_assert_int_eq(world_wait(2, pids, 60), 0);
    munmap((void *)sh, sizeof *sh);
}
END_TEST

static int lost_body(int rank, int n, void *arg)
{
    after_shared *sh = arg;
    c10d_pg *pg = world_init_verify(world_coord.url, sh->job, rank, n, 30000, C10D_VERIFY_SYNC);
    if (!pg || run_before(pg, sh, rank) != 0)
        return 10;
    if (rank == 1)
        for (;;)
            pause(); /* the test kills it */
    float x = 1;
    c10d_tensor t = c10d_tensor_1d(&x, C10D_FLOAT32, 1);
    c10d_status st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    const char *msg = c10d_errmsg();
    /* where rank 1's watch told the new coordinator it was ("died after
     * collective #30"), not "before its first collective" */
    if (st != C10D_EPEERLOST || !strstr(msg, "#31") ||
        !strstr(msg, "rank 1") || !strstr(msg, "died after") || !strstr(msg, "#30 of group")) {
        fprintf(stderr, "rank %d: %s: %s\n", rank, c10d_status_name(st), msg);
        return 11;
    }
    return 0;
}

/* 1 once the coordinator knows rank 1 completed #BEFORE (its watch). */
static int knows_rank1_completed(const char *job)
{
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    if (c10d_store_connect(&s, world_coord.url, &o) != C10D_OK)
        return 0;
    c10d_group_health *g = NULL;
    size_t n = 0;
    int known = 0;
    if (c10d_store_health(s, job, "world", &g, &n) == C10D_OK) {
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < g[i].n_ranks; k++)
                if (g[i].ranks[k].rank == 1 && g[i].ranks[k].completed == BEFORE)
                    known = 1;
        c10d_free(g);
    }
    c10d_store_close(s);
    return known;
}

START_TEST(a_rank_lost_after_a_restart_is_named_with_its_last_collective)
{
    pid_t pids[2];
    after_shared *sh = start_then_restart("lost", lost_body, pids);
    long long t0 = test_now_ms();
    while (!knows_rank1_completed(sh->job) && test_now_ms() - t0 < 10000)
        usleep(10000);
    ck_assert_msg(knows_rank1_completed(sh->job), "rank 1's watch never reached the new "
                  "coordinator");
    sh->restarted = 1;
    /* rank 0 waits inside #31 for rank 1 when rank 1 dies */
    const int rank0[1] = {0};
    ck_assert_msg(wait_entered(world_coord.url, sh->job, "world", rank0, 1, BEFORE + 1, 10000),
                  "rank 0 never entered collective #%d on the new coordinator", BEFORE + 1);
    kill(pids[1], SIGKILL);
    int st;
    waitpid(pids[1], &st, 0);
    pids[1] = -1;
    ck_assert_int_eq(world_wait(1, pids, 60), 0);
    munmap((void *)sh, sizeof *sh);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("restart");
    TCase *tc = tcase_create("restart");
    tcase_add_checked_fixture(tc, world_coord_start, world_coord_stop);
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, the_job_rides_through_restarts, 0, 3);
    tcase_add_test(tc, a_desync_after_a_restart_names_the_collective);
    tcase_add_test(tc, a_rank_lost_after_a_restart_is_named_with_its_last_collective);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
