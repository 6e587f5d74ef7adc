/* Join: in-band shadowing and the last active rank. A joined rank learns
 * what to shadow from the data plane's transfer headers, not from the
 * coordinator; the last active rank waits for nobody (a joined rank
 * stopped, behind on a full channel, or dead); the call right after a
 * region is not shadowed; a monitored barrier and an empty collective
 * while a rank is joined. */
#include "join_world.h"
#include "state_wait.h"

#include "check_main.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- in-band shadowing: what the joined rank learns from the data plane --- */

static int64_t requests_served(void)
{
    c10d_store *s;
    c10d_coord_info *info = NULL;
    if (c10d_store_connect(&s, coord.url, NULL) != C10D_OK)
        return -1;
    int64_t n = c10d_store_coord_info(s, &info) == C10D_OK ? info->requests : -1;
    c10d_free(info);
    c10d_store_close(s);
    return n;
}

/* Rank 0 joins at once; rank 1 runs 500 steps, each checked, and counts
 * what the coordinator served meanwhile. A joined rank reads what to
 * shadow from rank 1's transfer headers, and rank 1 keeps its mode: under
 * ASYNC and OFF the steps cost the coordinator nothing per step (the
 * coordinator path asked, or had rank 1 report, once a step). */
static int no_round_trip_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    static const int batches[2] = {0, 500};
    c10d_pg *pg = region_start(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int rc, last = -1;
    if (rank == 1) {
        if ((rc = step(pg, rank, 0, batches, n)) != 0) /* rank 0 is known to have joined */
            return rc;
        int64_t before = requests_served();
        for (int i = 1; i < batches[1]; i++)
            if ((rc = step(pg, rank, i, batches, n)) != 0)
                return rc;
        int64_t during = requests_served() - before;
        if (before < 0 || during > 100)
            FAIL(12, "rank 1: the coordinator served %lld requests during 499 shadowed steps",
                 (long long)during);
    }
    if (c10d_join_end(pg, &last) != C10D_OK || last != 1)
        FAIL(13, "rank %d: join_end: %s (last %d)", rank, c10d_errmsg(), last);
    c10d_destroy(pg);
    return 0;
}

START_TEST(a_joined_rank_shadows_without_the_coordinator)
{
    scenario sc = {world_job("inband"), modes[1 + _i], 0, 0};
    run_world(2, no_round_trip_body, &sc, 60);
}
END_TEST

/* Rank 0's pid, through the store, for rank 1 to stop or resume it. */
static int publish_pid(c10d_store *s, const char *job)
{
    char key[160], pid[32];
    snprintf(key, sizeof key, "test/%s/pid0", job);
    int len = snprintf(pid, sizeof pid, "%d", (int)getpid());
    return c10d_store_set(s, key, pid, (size_t)len) == C10D_OK ? 0 : -1;
}

static pid_t rank0_pid(c10d_store *s, const char *job)
{
    char key[160], pid[32];
    void *v;
    size_t len;
    snprintf(key, sizeof key, "test/%s/pid0", job);
    if (c10d_store_get(s, key, &v, &len, 10000) != C10D_OK)
        return -1;
    snprintf(pid, sizeof pid, "%.*s", (int)len, (const char *)v);
    c10d_free(v);
    return (pid_t)atoi(pid);
}

/* World 2, rank 0 joined: rank 1, the last active rank, does not wait for
 * it. Rank 0 is stopped (SIGSTOP) while rank 1 runs 300 more steps, which
 * complete with rank 1's data alone; rank 0 then goes on, takes the headers
 * waiting for it and both leave the region; a broadcast, barrier, reduce
 * and reduce_scatter run alone too. Waiting for a stopped peer
 * would end in the collective timeout (3 s) or its loss. */
static int stopped_joiner_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    static const int batches[2] = {1, 301};
    c10d_pg *pg = init_mode(sc, rank, n, 3000);
    c10d_store *s = NULL;
    if (!pg || c10d_store_connect(&s, coord.url, NULL) != C10D_OK)
        return 10;
    if (c10d_join_begin(pg, NULL) != C10D_OK)
        FAIL(11, "rank %d: join_begin: %s", rank, c10d_errmsg());
    int rc, last = -1;
    if ((rc = step(pg, rank, 0, batches, n)) != 0)
        return rc;
    if (rank == 0) {
        if (publish_pid(s, sc->job) != 0)
            FAIL(12, "rank 0: store: %s", c10d_errmsg());
    } else {
        if ((rc = step(pg, rank, 1, batches, n)) != 0) /* rank 0 is heard to have joined */
            return rc;
        pid_t p0 = rank0_pid(s, sc->job);
        if (p0 <= 0)
            FAIL(13, "rank 1: store: %s", c10d_errmsg());
        if (kill(p0, SIGSTOP) != 0)
            FAIL(14, "rank 1: SIGSTOP");
        long long t0 = test_now_ms();
        for (int i = 2; i < batches[1] && rc == 0; i++)
            rc = step(pg, rank, i, batches, n);
        /* The other calls a joined rank takes part in, run alone too. */
        float b[4] = {1, 2, 3, 4}, rs[2];
        c10d_tensor tb = c10d_tensor_1d(b, C10D_FLOAT32, 4), trs = c10d_tensor_1d(rs, C10D_FLOAT32, 2);
        if (rc == 0 && (c10d_broadcast(pg, &tb, 1, NULL, NULL) != C10D_OK ||
                        c10d_barrier(pg, NULL, NULL) != C10D_OK ||
                        c10d_reduce(pg, &tb, 1, C10D_MAX, NULL, NULL) != C10D_OK ||
                        c10d_reduce_scatter_tensor(pg, &trs, &tb, C10D_AVG, NULL, NULL) != C10D_OK))
            rc = 17;
        if (rc == 17)
            fprintf(stderr, "rank 1: with rank 0 stopped: %s\n", c10d_errmsg());
        else if (rc == 0 && (b[0] != 1 || b[3] != 4 || rs[0] != 1.5f || rs[1] != 2.0f))
            FAIL(18, "rank 1: broadcast/reduce/reduce_scatter alone: %g %g, %g %g", b[0], b[3],
                 rs[0], rs[1]);
        long long took = test_now_ms() - t0;
        kill(p0, SIGCONT);
        if (rc != 0)
            return rc;
        if (took > 2000)
            FAIL(15, "rank 1: 303 calls with rank 0 stopped took %lld ms", took);
    }
    if (c10d_join_end(pg, &last) != C10D_OK || last != 1)
        FAIL(16, "rank %d: join_end: %s (last %d)", rank, c10d_errmsg(), last);
    c10d_store_close(s);
    c10d_destroy(pg);
    return 0;
}

START_TEST(the_last_active_rank_does_not_wait_for_a_joined_one)
{
    scenario sc = {world_job("stopped"), modes[_i], 0, 0};
    run_world(2, stopped_joiner_body, &sc, 60);
}
END_TEST

/* World 2, rank 0 joined, rank 1 the last active rank, which waits for
 * nobody. kase 0: rank 0 dies in its join_end; rank 1's next calls fail
 * with EPEERLOST naming it within 2 s (nothing in a call run alone waits,
 * so it must ask). kase 1 and 2: rank 0 is stopped while rank 1 fills the
 * channel to it with the headers of calls run alone (1 MiB of 56-byte
 * headers), then resumed after 0.5 s; the header rank 1 then sends it for
 * a monitored barrier (kase 1) or a refused all_gather (kase 2) waits for
 * room instead of being dropped, so the barrier meets and rank 0 hears of
 * the all_gather (EJOINED on both) instead of waiting for its timeout. */
static void *die_on_cue(void *arg)
{
    const scenario *sc = arg;
    c10d_store *s;
    void *v;
    size_t len;
    char key[160];
    snprintf(key, sizeof key, "test/%s/die", sc->job);
    if (c10d_store_connect(&s, coord.url, NULL) == C10D_OK &&
        c10d_store_get(s, key, &v, &len, 30000) == C10D_OK)
        _exit(0); /* died: its connections drop */
    _exit(40);
}

static void *resume_later(void *arg)
{
    /* not synchronisation: rank 0 stays stopped while rank 1's next header
     * waits for room in the full channel (a blocked send shows no state) */
    usleep(500000);
    kill(*(pid_t *)arg, SIGCONT);
    return NULL;
}

static int behind_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    static const int batches[2] = {1, 3};
    c10d_pg *pg = init_mode(sc, rank, n, 8000);
    c10d_store *s = NULL;
    if (!pg || c10d_store_connect(&s, coord.url, NULL) != C10D_OK)
        return 10;
    if (c10d_join_begin(pg, NULL) != C10D_OK)
        FAIL(11, "rank %d: join_begin: %s", rank, c10d_errmsg());
    int rc, last = -1;
    if ((rc = step(pg, rank, 0, batches, n)) != 0)
        return rc;
    if (rank == 0) {
        pthread_t th;
        if (publish_pid(s, sc->job) != 0 ||
            (sc->kase == 0 && pthread_create(&th, NULL, die_on_cue, (void *)sc) != 0))
            FAIL(12, "rank 0: %s", c10d_errmsg());
        c10d_status st = c10d_join_end(pg, &last);
        if (sc->kase == 2) {
            rc = expect_failure(0, st, 0, C10D_EJOINED, C10D_EJOINED, "ALL_GATHER", NULL);
            c10d_destroy(pg);
            return rc;
        }
        if (st != C10D_OK || last != 1)
            FAIL(13, "rank 0: join_end: %s (last %d)", c10d_errmsg(), last);
        c10d_destroy(pg);
        return 0;
    }
    if ((rc = step(pg, rank, 1, batches, n)) != 0) /* rank 0 is heard to have joined */
        return rc;
    pid_t p0 = rank0_pid(s, sc->job);
    if (p0 <= 0)
        FAIL(14, "rank 1: store: %s", c10d_errmsg());
    float g = 1;
    c10d_tensor t = c10d_tensor_1d(&g, C10D_FLOAT32, 1);
    c10d_status st = C10D_OK;
    if (sc->kase == 0) {
        char key[160];
        snprintf(key, sizeof key, "test/%s/die", sc->job);
        if (c10d_store_set(s, key, "1", 1) != C10D_OK)
            FAIL(15, "rank 1: store: %s", c10d_errmsg());
        long long t0 = test_now_ms();
        while (st == C10D_OK && test_now_ms() - t0 < 3000)
            st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
        rc = expect_failure(1, st, test_now_ms() - t0, C10D_EPEERLOST, C10D_EPEERLOST, "rank 0",
                            "died");
        c10d_destroy(pg);
        return rc;
    }
    if (kill(p0, SIGSTOP) != 0)
        FAIL(16, "rank 1: SIGSTOP");
    for (int i = 0; i < (1 << 20) / 56 && st == C10D_OK; i++)
        st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    pthread_t th;
    pthread_create(&th, NULL, resume_later, &p0);
    if (st != C10D_OK) {
        pthread_join(th, NULL);
        FAIL(17, "rank 1: a step with rank 0 stopped: %s", c10d_errmsg());
    }
    long long t0 = test_now_ms();
    if (sc->kase == 1) {
        st = c10d_monitored_barrier(pg, 5000, 1);
        pthread_join(th, NULL);
        if (st != C10D_OK)
            FAIL(18, "rank 1: monitored_barrier: %s (%lld ms)", c10d_errmsg(),
                 test_now_ms() - t0);
        if (c10d_join_end(pg, &last) != C10D_OK || last != 1)
            FAIL(19, "rank 1: join_end: %s (last %d)", c10d_errmsg(), last);
        c10d_destroy(pg);
        return 0;
    }
    float out[2];
    c10d_tensor to = c10d_tensor_1d(out, C10D_FLOAT32, 2);
    st = c10d_all_gather_into_tensor(pg, &to, &t, NULL, NULL);
    pthread_join(th, NULL);
    rc = expect_failure(1, st, test_now_ms() - t0, C10D_EJOINED, C10D_EJOINED, "ALL_GATHER",
                        NULL);
    c10d_destroy(pg);
    return rc;
}

/* _i: SYNC, ASYNC and OFF for kase 0; then ASYNC and OFF for kases 1 and
 * 2 (SYNC's round trip per step would keep rank 0 stopped for seconds). */
START_TEST(a_joined_rank_behind_or_dead)
{
    static const int kases[] = {0, 0, 0, 1, 1, 2, 2};
    static const int mode_of[] = {0, 1, 2, 1, 2, 1, 2};
    scenario sc = {world_job("behind"), modes[mode_of[_i]], kases[_i], 0};
    run_world(2, behind_body, &sc, 60);
}
END_TEST

/* Region after region, the rank that joins first alternating, and right
 * after each region a collective both ranks take part in with their data.
 * The last joiner returns at once and issues it while the first joiner
 * may still wait to hear that the region is over: it must not shadow it
 * (the transfer header names the sender's region). */
static int back_to_back_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    c10d_pg *pg = init_mode(sc, rank, n, 30000);
    if (!pg)
        return 10;
    for (int r = 0; r < 20; r++) {
        int first = r % 2, last = -1;
        if (c10d_join_begin(pg, NULL) != C10D_OK)
            FAIL(11, "rank %d region %d: join_begin: %s", rank, r, c10d_errmsg());
        if (rank != first) { /* one step the other shadows */
            float g = 1.0f;
            c10d_tensor t = c10d_tensor_1d(&g, C10D_FLOAT32, 1);
            if (c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK || g != 1.0f)
                FAIL(12, "rank %d region %d: step: %s (%g)", rank, r, c10d_errmsg(), g);
        }
        if (c10d_join_end(pg, &last) != C10D_OK || last != 1 - first)
            FAIL(13, "rank %d region %d: join_end: %s (last %d)", rank, r, c10d_errmsg(), last);
        float v = (float)(rank + 1);
        c10d_tensor t = c10d_tensor_1d(&v, C10D_FLOAT32, 1);
        if (c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK || v != 3.0f)
            FAIL(14, "rank %d after region %d: all_reduce: %s (%g, want 3)", rank, r,
                 c10d_errmsg(), v);
    }
    c10d_destroy(pg);
    return 0;
}

START_TEST(the_call_after_a_region_is_not_shadowed)
{
    scenario sc = {world_job("back2back"), modes[_i], 0, 0};
    run_world(2, back_to_back_body, &sc, 60);
}
END_TEST

/* 1 once rank 1 has arrived at the group's first monitored barrier: its
 * key is in the store (monitored_barrier.c's layout, in the run's store:
 * jobs/<job>/<generation>/c10d/monitored_barrier/<group>/<n>/arrived/<rank>). */
static int rank1_waits_in_monitored_barrier(const char *job, int timeout_ms)
{
    c10d_store *s;
    if (c10d_store_connect(&s, coord.url, NULL) != C10D_OK)
        return 0;
    char prefix[200];
    snprintf(prefix, sizeof prefix, "jobs/%s/", job); /* job: no '/' or '%' to escape */
    long long until = test_now_ms() + timeout_ms;
    int found = 0;
    do {
        c10d_key_info *keys = NULL;
        size_t nk = 0;
        if (c10d_store_list(s, prefix, 100, &keys, &nk, NULL) == C10D_OK)
            for (size_t k = 0; k < nk && !found; k++) {
                static const char tail[] = "/c10d/monitored_barrier/world/1/arrived/1";
                size_t l = strlen(keys[k].key), tl = sizeof tail - 1;
                found = l > tl && !strcmp(keys[k].key + l - tl, tail);
            }
        c10d_free(keys);
    } while (!found && test_now_ms() < until && usleep(1000) == 0);
    c10d_store_close(s);
    return found;
}

/* A monitored barrier meets through the store, not the data plane: the
 * active rank tells the joined one on the data plane to meet it. Rank 1
 * is waiting in the first when rank 0 joins: it tells rank 0 once it
 * hears of the join, while it waits, instead of waiting for it until the
 * timeout. */
static int monitored_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    static const int batches[2] = {0, 3};
    c10d_pg *pg = region_start(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int rc, last = -1;
    if (rank == 0 && !rank1_waits_in_monitored_barrier(sc->job, 10000))
        FAIL(15, "rank 0: rank 1 never arrived at its monitored barrier (no key "
             "jobs/%s/.../c10d/monitored_barrier/world/1/arrived/1 in 10 s)", sc->job);
    for (int i = rank == 0 ? 0 : -1; i < batches[rank]; i++) {
        if (i >= 0 && (rc = step(pg, rank, i, batches, n)) != 0)
            return rc;
        long long t0 = test_now_ms();
        c10d_status st = c10d_monitored_barrier(pg, 5000, 1);
        if (st != C10D_OK || test_now_ms() - t0 > 2000)
            FAIL(12, "rank %d step %d: monitored_barrier: %s (%lld ms)", rank, i,
                 st ? c10d_errmsg() : "ok", test_now_ms() - t0);
    }
    if (c10d_join_end(pg, &last) != C10D_OK || last != 1)
        FAIL(13, "rank %d: join_end: %s (last %d)", rank, c10d_errmsg(), last);
    c10d_destroy(pg);
    return 0;
}

START_TEST(a_monitored_barrier_while_a_rank_is_joined)
{
    scenario sc = {world_job("monitored"), modes[_i], 0, 0};
    run_world(2, monitored_body, &sc, 60);
}
END_TEST

/* A collective of no elements sends no data; a joined rank, which learns
 * what to shadow from transfer headers, must still see it (it meets its
 * peers with a header), or the next step waits for it until the timeout. */
static int empty_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    static const int batches[2] = {0, 2};
    c10d_pg *pg = region_start(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int rc, last = -1;
    for (int i = 0; i < batches[rank]; i++) {
        float none = 0;
        c10d_tensor t = c10d_tensor_1d(&none, C10D_FLOAT32, 0);
        long long t0 = test_now_ms();
        if (c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK)
            FAIL(12, "rank %d: empty all_reduce: %s", rank, c10d_errmsg());
        if ((rc = step(pg, rank, i, batches, n)) != 0)
            return rc;
        if (test_now_ms() - t0 > 2000)
            FAIL(13, "rank %d step %d took %lld ms", rank, i, test_now_ms() - t0);
    }
    if (c10d_join_end(pg, &last) != C10D_OK || last != 1)
        FAIL(14, "rank %d: join_end: %s (last %d)", rank, c10d_errmsg(), last);
    c10d_destroy(pg);
    return 0;
}

START_TEST(an_empty_collective_while_a_rank_is_joined)
{
    scenario sc = {world_job("empty"), modes[_i], 0, 0};
    run_world(2, empty_body, &sc, 60);
}
END_TEST

/* Rank 0 is stopped (SIGSTOP) to be behind for as long as this machine
 * takes to fill its channel: thousands of steps, seconds on a loaded
 * machine, where the default heartbeat timeout (10 s) declared it dead
 * and the case saw EPEERLOST. Deaths here close connections, which
 * the coordinator hears at once whatever this timeout. */
static void patient_setup(void)
{
    static const char *const args[] = {"--heartbeat-timeout", "60000", NULL};
    coord_init(&coord);
    ck_assert_int_eq(coord_start(&coord, NULL, args, NULL), 0);
}

int main(void)
{
    Suite *s = suite_create("join_inband");
    TCase *tc = tcase_create("join_inband");
    tcase_add_checked_fixture(tc, patient_setup, join_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, the_last_active_rank_does_not_wait_for_a_joined_one, 0, 3);
    tcase_add_loop_test(tc, a_joined_rank_behind_or_dead, 0, 7);
    tcase_add_loop_test(tc, a_joined_rank_shadows_without_the_coordinator, 0, 2);
    tcase_add_loop_test(tc, the_call_after_a_region_is_not_shadowed, 0, 3);
    tcase_add_loop_test(tc, a_monitored_barrier_while_a_rank_is_joined, 0, 3);
    tcase_add_loop_test(tc, an_empty_collective_while_a_rank_is_joined, 0, 3);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
