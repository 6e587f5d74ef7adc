/* Checked calls over a data plane of the program's own (c10d/checked.h)
 * that go as they should, end to end on one long-lived coordinator: real
 * rank processes whose "data plane" is shared memory
 * (support/checked_plane.c). A correct run gets its data plane's results;
 * the library's own collectives are refused on such a group; calls may
 * end on another thread; a joined rank's part is handed to the program's
 * shadow callback; subgroups get their parent's data plane; bad arguments
 * are refused before a call is numbered. Ranks that disagree, die or time
 * out: test_checked_failures.c. (The same with Open MPI: test_checked_mpi.) */
#include "checked_plane.h"
#include "coord_proc.h"
#include "world_proc.h"

#include "check_main.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- a correct run --- */

static int correct_body(int rank, int n, void *arg)
{
    (void)n;
    const scenario *sc = arg;
    c10d_pg *pg = init_plane(sc->job, rank, sc->mode, NULL);
    if (!pg)
        return 10;
    for (long step = 1; step <= 40; step++) {
        c10d_check_opts o = all_reduce_opts();
        int barrier = step % 10 == 0;
        if (barrier)
            o.kind = C10D_COLL_BARRIER;
        c10d_checked *h;
        if (c10d_check_begin(pg, &o, &h) != C10D_OK) {
            fprintf(stderr, "rank %d: begin %ld: %s\n", rank, step, c10d_errmsg());
            return 11;
        }
        if (c10d_check_seq(h) != (uint64_t)step) {
            fprintf(stderr, "rank %d: call %ld numbered #%llu\n", rank, step,
                    (unsigned long long)c10d_check_seq(h));
            return 12;
        }
        float v[4] = {(float)rank, (float)step, 1, 2};
        if (plane_call(rank, step, o.kind, barrier ? NULL : v, h) != 0 ||
            c10d_check_end(h, C10D_OK, NULL) != C10D_OK) {
            fprintf(stderr, "rank %d: call %ld: %s\n", rank, step, c10d_errmsg());
            return 13;
        }
        /* the data plane's own result, untouched */
        if (!barrier && (v[0] != 1 || v[1] != 2 * step || v[2] != 2 || v[3] != 4)) {
            fprintf(stderr, "rank %d: call %ld gave %g %g %g %g\n", rank, step, v[0], v[1], v[2],
                    v[3]);
            return 14;
        }
    }
    /* The library's own collective on these buffers: refused before it is
     * numbered, saying why; the group goes on. */
    float x[4] = {0};
    c10d_tensor t = c10d_tensor_1d(x, C10D_FLOAT32, 4);
    c10d_status st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    if (st != C10D_EINVAL || !contains(c10d_errmsg(), "moved by the program's own data plane", rank))
        return 15;
    c10d_check_opts o = all_reduce_opts();
    c10d_checked *h;
    if (c10d_check_begin(pg, &o, &h) != C10D_OK || c10d_check_seq(h) != 41) {
        fprintf(stderr, "rank %d: after the refusal: %s\n", rank, c10d_errmsg());
        return 16;
    }
    float v[4] = {0};
    if (plane_call(rank, 41, o.kind, v, h) != 0 || c10d_check_end(h, C10D_OK, NULL) != C10D_OK)
        return 17;
    /* A call the data plane refused before it started (its arguments):
     * the group goes on, and the next call is #43 on both ranks. */
    if (c10d_check_begin(pg, &o, &h) != C10D_OK ||
        c10d_check_end(h, C10D_EINVAL, "MPI_ERR_COUNT") != C10D_EINVAL ||
        !contains(c10d_errmsg(), "MPI_ERR_COUNT", rank))
        return 19;
    if (c10d_check_begin(pg, &o, &h) != C10D_OK || c10d_check_seq(h) != 43 ||
        plane_call(rank, 43, o.kind, v, h) != 0 || c10d_check_end(h, C10D_OK, NULL) != C10D_OK) {
        fprintf(stderr, "rank %d: after a refusal: %s\n", rank, c10d_errmsg());
        return 20;
    }
    if (atomic_load(&alerted))
        return 18;
    c10d_destroy(pg);
    return 0;
}

static void run_correct(c10d_verify mode)
{
    plane_new();
    scenario sc = {world_job(mode == C10D_VERIFY_SYNC ? "chk-ok-sync" : "chk-ok-async"), mode};
    ck_assert_int_eq(world_run(2, correct_body, &sc, 120, NULL), 0);
}

START_TEST(sync_correct_run_gets_the_data_planes_results)
{
    run_correct(C10D_VERIFY_SYNC);
}
END_TEST

START_TEST(async_correct_run_gets_the_data_planes_results)
{
    run_correct(C10D_VERIFY_ASYNC);
}
END_TEST

/* --- calls ended on another thread, as torch's backends end them --- */

typedef struct {
    int rank;
    long step;
    c10d_checked *h;
    int rc;
} ender;

static void *end_on_thread(void *arg)
{
    ender *e = arg;
    float v[4] = {1, 1, 1, 1};
    e->rc = plane_call(e->rank, e->step, C10D_COLL_ALL_REDUCE, v, e->h) != 0 ||
            c10d_check_end(e->h, C10D_OK, NULL) != C10D_OK || v[0] != 2;
    return NULL;
}

static int threads_body(int rank, int n, void *arg)
{
    (void)n;
    const scenario *sc = arg;
    c10d_pg *pg = init_plane(sc->job, rank, sc->mode, NULL);
    if (!pg)
        return 10;
    c10d_check_opts o = all_reduce_opts();
    ender prev = {rank, 0, NULL, 0};
    pthread_t t;
    int running = 0;
    for (long step = 1; step <= 30; step++) {
        c10d_checked *h;
        /* the next call begins while another thread ends the last */
        if (c10d_check_begin(pg, &o, &h) != C10D_OK) {
            fprintf(stderr, "rank %d: begin %ld: %s\n", rank, step, c10d_errmsg());
            return 11;
        }
        if (running && (pthread_join(t, NULL) != 0 || prev.rc))
            return 12;
        prev = (ender){rank, step, h, 0};
        if (pthread_create(&t, NULL, end_on_thread, &prev) != 0)
            return 13;
        running = 1;
    }
    if (pthread_join(t, NULL) != 0 || prev.rc)
        return 14;
    c10d_destroy(pg);
    return 0;
}

START_TEST(calls_may_end_on_another_thread)
{
    plane_new();
    scenario sc = {world_job("chk-threads"), (c10d_verify)_i};
    ck_assert_int_eq(world_run(2, threads_body, &sc, 120, NULL), 0);
}
END_TEST

/* --- join: the joined rank's part, on the program's data plane --- */

static int shadow(void *arg, c10d_pg *pg, const c10d_check_opts *call)
{
    (void)arg, (void)pg;
    if (call->kind != C10D_COLL_ALL_REDUCE || call->dtype != C10D_FLOAT32 || call->count != 4 ||
        call->op != C10D_SUM || call->device != C10D_CPU) {
        fprintf(stderr, "rank 1: asked to shadow kind %d dtype %d count %lld op %d\n",
                (int)call->kind, (int)call->dtype, (long long)call->count, (int)call->op);
        return C10D_EINVAL;
    }
    float zeros[4];
    if (c10d_identity_fill(zeros, 4, call->dtype, call->op) != C10D_OK)
        return C10D_EINVAL;
    long step = atomic_load(&plane->step[1]) + 1;
    if (plane_call(1, step, call->kind, zeros, NULL) != 0)
        return C10D_EBACKEND;
    atomic_fetch_add(&plane->shadows, 1);
    return C10D_OK;
}

static int join_body(int rank, int n, void *arg)
{
    (void)n;
    const scenario *sc = arg;
    c10d_pg *pg = init_plane(sc->job, rank, sc->mode, (c10d_shadow_fn)shadow);
    if (!pg)
        return 10;
    if (c10d_join_begin(pg, NULL) != C10D_OK) {
        fprintf(stderr, "rank %d: join_begin: %s\n", rank, c10d_errmsg());
        return 11;
    }
    int mine = rank == 0 ? 5 : 2; /* uneven inputs */
    for (long step = 1; step <= mine; step++) {
        c10d_check_opts o = all_reduce_opts();
        c10d_checked *h;
        float v[4] = {1, 1, 1, (float)step};
        if (c10d_check_begin(pg, &o, &h) != C10D_OK) {
            fprintf(stderr, "rank %d: begin %ld: %s\n", rank, step, c10d_errmsg());
            return 12;
        }
        if (plane_call(rank, step, o.kind, v, h) || c10d_check_end(h, C10D_OK, NULL) != C10D_OK)
            return 13;
        /* the sum of both ranks' data, then of rank 0's and rank 1's identities */
        float want = step <= 2 ? 2 : 1;
        if (v[0] != want) {
            fprintf(stderr, "rank %d: step %ld gave %g, want %g\n", rank, step, v[0], want);
            return 14;
        }
    }
    int last = -1;
    if (c10d_join_end(pg, &last) != C10D_OK) {
        fprintf(stderr, "rank %d: join_end: %s\n", rank, c10d_errmsg());
        return 15;
    }
    if (last != 0)
        return 16;
    if (rank == 1 && atomic_load(&plane->shadows) != 3) {
        fprintf(stderr, "rank 1: shadowed %d calls, want 3\n", atomic_load(&plane->shadows));
        return 17;
    }
    c10d_destroy(pg);
    return 0;
}

START_TEST(a_joined_ranks_part_goes_to_the_programs_data_plane)
{
    plane_new();
    scenario sc = {world_job("chk-join"), (c10d_verify)_i};
    ck_assert_int_eq(world_run(2, join_body, &sc, 120, NULL), 0);
}
END_TEST

/* --- subgroups, arguments --- */

static int subgroup_body(int rank, int n, void *arg)
{
    (void)n;
    const scenario *sc = arg;
    c10d_pg *pg = init_plane(sc->job, rank, sc->mode, NULL);
    if (!pg)
        return 10;
    int both[2] = {1, 0}; /* reversed: group rank 0 is world rank 1 */
    c10d_pg *sub = NULL;
    if (c10d_new_group(&sub, pg, both, 2) != C10D_OK || !sub)
        return 11;
    int me = c10d_rank(sub);
    c10d_check_opts o = all_reduce_opts();
    o.count = me == 0 ? 4 : 8;
    c10d_checked *h;
    c10d_status st = c10d_check_begin(sub, &o, &h);
    if (st != C10D_EDESYNC || !contains(c10d_errmsg(), "group world.1", rank) ||
        !contains(c10d_errmsg(), "float32[8]", rank))
        return 12;
    /* the world is untouched by its subgroup's desync */
    o = all_reduce_opts();
    float v[4] = {0};
    if (c10d_check_begin(pg, &o, &h) != C10D_OK || plane_call(rank, 1, o.kind, v, h) ||
        c10d_check_end(h, C10D_OK, NULL) != C10D_OK)
        return 13;
    return 0;
}

START_TEST(subgroups_get_their_parents_data_plane)
{
    plane_new();
    scenario sc = {world_job("chk-sub"), C10D_VERIFY_SYNC};
    ck_assert_int_eq(world_run(2, subgroup_body, &sc, 60, NULL), 0);
}
END_TEST

static int args_body(int rank, int n, void *arg)
{
    (void)n;
    const scenario *sc = arg;
    c10d_pg *pg = world_init_verify(world_coord.url, sc->job, rank, 2, 30000, sc->mode);
    if (!pg)
        return 10;
    c10d_check_opts o = all_reduce_opts();
    c10d_checked *h;
    /* no data plane set yet */
    if (c10d_check_begin(pg, &o, &h) != C10D_EINVAL ||
        !contains(c10d_errmsg(), "c10d_data_plane_set", rank))
        return 11;
    c10d_data_plane dp = C10D_DATA_PLANE_INIT;
    dp.devices = 0;
    if (c10d_data_plane_set(pg, &dp) != C10D_EINVAL)
        return 12;
    dp.devices = C10D_DATA_PLANE_CPU;
    if (c10d_data_plane_set(pg, &dp) != C10D_OK || c10d_data_plane_set(pg, &dp) != C10D_EINVAL)
        return 13;
    c10d_check_opts bad = o;
    bad.kind = (c10d_coll_kind)42;
    if (c10d_check_begin(pg, &bad, &h) != C10D_EINVAL)
        return 14;
    bad = o;
    bad.kind = C10D_COLL_BROADCAST;
    bad.root = 2;
    if (c10d_check_begin(pg, &bad, &h) != C10D_EINVAL || !contains(c10d_errmsg(), "root 2", rank))
        return 15;
    bad = o;
    bad.device = 0; /* CUDA: not the program's here */
    if (c10d_check_begin(pg, &bad, &h) != C10D_EINVAL || !contains(c10d_errmsg(), "CUDA", rank))
        return 16;
    bad = o;
    bad.version = 0;
    if (c10d_check_begin(pg, &bad, &h) != C10D_EINVAL)
        return 17;
    /* Refusals leave the count alone: both ranks' first call is #1. */
    if (c10d_check_begin(pg, &o, &h) != C10D_OK || c10d_check_seq(h) != 1)
        return 18;
    float v[4] = {0};
    if (plane_call(rank, 1, o.kind, v, h) || c10d_check_end(h, C10D_OK, NULL) != C10D_OK)
        return 19;
    /* identities */
    float f[3];
    int32_t i[2];
    if (c10d_identity_fill(f, 3, C10D_FLOAT32, C10D_PROD) != C10D_OK || f[2] != 1.0f ||
        c10d_identity_fill(i, 2, C10D_INT32, C10D_MIN) != C10D_OK || i[1] != INT32_MAX ||
        c10d_identity_fill(f, 3, (c10d_dtype)99, C10D_SUM) != C10D_EINVAL)
        return 20;
    return 0;
}

START_TEST(bad_arguments_are_refused_before_numbering)
{
    plane_new();
    scenario sc = {world_job("chk-args"), C10D_VERIFY_SYNC};
    ck_assert_int_eq(world_run(2, args_body, &sc, 60, NULL), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checked_calls");
    TCase *tc = tcase_create("checked");
    /* one coordinator for every case, as users run it: each case a job */
    tcase_add_unchecked_fixture(tc, world_coord_start, world_coord_stop);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, sync_correct_run_gets_the_data_planes_results);
    tcase_add_test(tc, async_correct_run_gets_the_data_planes_results);
    tcase_add_loop_test(tc, calls_may_end_on_another_thread, C10D_VERIFY_ASYNC,
                        C10D_VERIFY_SYNC + 1);
    tcase_add_loop_test(tc, a_joined_ranks_part_goes_to_the_programs_data_plane,
                        C10D_VERIFY_ASYNC, C10D_VERIFY_SYNC + 1);
    tcase_add_test(tc, subgroups_get_their_parents_data_plane);
    tcase_add_test(tc, bad_arguments_are_refused_before_numbering);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
