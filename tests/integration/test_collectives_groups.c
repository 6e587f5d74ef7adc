/* The collective front end beyond the data: subgroups translate ranks and
 * run independently; a monitored barrier names the rank that never
 * arrived; a call refused after it was numbered gives its number back;
 * a work handle looked at without waiting.
 * Forked ranks, a real c10d-coord, the host data plane. */
#define _GNU_SOURCE /* pthread_setattr_default_np */
#include "coord_proc.h"
#include "state_wait.h"
#include "world_proc.h"

#include "check_main.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Subgroups: ranks translate, and groups run independently. */
static int subgroups(int rank, int n, void *arg)
{
    c10d_pg *pg = world_init(world_coord.url, arg, rank, n, 60000);
    if (!pg)
        return 10;
    int evens[] = {0, 2}, odds[] = {3, 1};
    c10d_pg *ge = NULL, *go = NULL;
    if (c10d_new_group(&ge, pg, evens, 2) != C10D_OK ||
        c10d_new_group(&go, pg, odds, 2) != C10D_OK) {
        fprintf(stderr, "rank %d new_group: %s\n", rank, c10d_errmsg());
        return 11;
    }
    c10d_pg *mine = rank % 2 ? go : ge;
    if ((rank % 2 ? ge : go) != NULL || !mine)
        return 12;
    int want_rank = rank == 0 ? 0 : rank == 2 ? 1 : rank == 3 ? 0 : 1;
    if (c10d_rank(mine) != want_rank || c10d_size(mine) != 2 ||
        c10d_global_rank(mine, 0) != (rank % 2 ? 3 : 0))
        return 13;
    int64_t v = rank;
    c10d_tensor t = c10d_tensor_1d(&v, C10D_INT64, 1);
    if (c10d_all_reduce(mine, &t, C10D_SUM, NULL, NULL) != C10D_OK || v != (rank % 2 ? 4 : 2))
        return 14;
    v = 1;
    if (c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK || v != n)
        return 15;
    c10d_destroy(mine);
    c10d_destroy(pg);
    return 0;
}

/* How many of ranks 0 and 1 returned from the monitored barrier (shared
 * with the forked ranks). */
static volatile int *mon_returned;

/* Rank 2 arrives at a 1 s monitored barrier once the others gave up on it:
 * rank 0 names it, and so does rank 1. (Rank 2 must still call the
 * monitored barrier, late: calling anything else there is a desync, which
 * verification reports instead.) */
static int monitored(int rank, int n, void *arg)
{
    c10d_pg *pg = world_init(world_coord.url, arg, rank, n, 60000);
    if (!pg)
        return 10;
    int rc = 0;
    if (rank == 2 && !wait_shared(mon_returned, 2, 30000)) {
        fprintf(stderr, "rank 2: ranks 0 and 1 never returned from the monitored barrier\n");
        rc = 2;
    }
    c10d_status st = c10d_monitored_barrier(pg, 1000, 1);
    if (rank != 2)
        __sync_fetch_and_add(mon_returned, 1);
    if (st != C10D_ETIMEDOUT ||
        (rank != 2 && !strstr(c10d_errmsg(), "rank 2 (global 2) did not arrive"))) {
        fprintf(stderr, "rank %d: %s: %s\n", rank, c10d_status_name(st), c10d_errmsg());
        rc = 1;
    }
    c10d_barrier(pg, NULL, NULL); /* everyone, so nobody leaves early */
    c10d_destroy(pg);
    return rc;
}

START_TEST(monitored_barrier_names_the_missing_rank)
{
    mon_returned = mmap(NULL, sizeof *mon_returned, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne((void *)mon_returned, MAP_FAILED);
    *mon_returned = 0;
    ck_assert_int_eq(world_run(3, monitored, (void *)world_job("mon"), 60, NULL), 0);
    munmap((void *)mon_returned, sizeof *mon_returned);
}
END_TEST

START_TEST(subgroups_translate_ranks)
{
    ck_assert_int_eq(world_run(4, subgroups, (void *)world_job("sub"), 60, NULL), 0);
}
END_TEST

/* Rank 0's first call, queued, is refused after it was numbered: the
 * group's worker thread cannot start (every new thread's stack is made 1 TiB, more than
 * the kernel grants). Its number is given back, so its next call meets
 * rank 1's first; kept, rank 0 would be one collective ahead for good. */
static int refused_after_numbering(int rank, int n, void *arg)
{
    c10d_pg *pg = world_init(world_coord.url, arg, rank, n, 10000);
    if (!pg)
        return 10;
    int64_t v = 1;
    c10d_tensor t = c10d_tensor_1d(&v, C10D_INT64, 1);
    int rc = 0;
    if (rank == 0) {
        pthread_attr_t old, huge;
        pthread_getattr_default_np(&old);
        pthread_getattr_default_np(&huge);
        pthread_attr_setstacksize(&huge, (size_t)1 << 40);
        pthread_setattr_default_np(&huge);
        c10d_coll_opts o = C10D_COLL_OPTS_INIT;
        o.async_op = 1; /* queued on the group's worker thread, started now */
        c10d_work *w = NULL;
        c10d_status st = c10d_all_reduce(pg, &t, C10D_SUM, &o, &w);
        pthread_setattr_default_np(&old);
        if (st != C10D_ENOMEM || !strstr(c10d_errmsg(), "worker thread")) {
            fprintf(stderr, "rank 0: the refused call said %s: %s\n", c10d_status_name(st),
                    c10d_errmsg());
            rc = 1;
        }
    }
    c10d_status st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    if (!rc && (st != C10D_OK || v != n)) {
        fprintf(stderr, "rank %d: the next all_reduce: %s %s (v %lld)\n", rank,
                c10d_status_name(st), c10d_errmsg(), (long long)v);
        rc = 2;
    }
    c10d_destroy(pg);
    return rc;
}

START_TEST(a_call_refused_after_numbering_gives_its_number_back)
{
    ck_assert_int_eq(world_run(2, refused_after_numbering, (void *)world_job("unnum"), 60, NULL),
                     0);
}
END_TEST

/* One timeout convention: C10D_NO_WAIT on a work handle says
 * how it stands now. Rank 0's async all_reduce cannot finish before rank 1
 * calls it, and rank 1 calls it only once rank 0 has looked (a shared
 * flag): the look must say "still running"; then it completes. A
 * collective's own timeout cannot be C10D_NO_WAIT. */
static volatile int *looked;

static int no_wait(int rank, int n, void *arg)
{
    c10d_pg *pg = world_init(world_coord.url, arg, rank, n, 60000);
    if (!pg)
        return 10;
    int64_t v = 1;
    c10d_tensor t = c10d_tensor_1d(&v, C10D_INT64, 1);
    c10d_coll_opts o = C10D_COLL_OPTS_INIT;
    o.timeout_ms = C10D_NO_WAIT;
    int rc = 0;
    /* rank 0 only: a refused call must not use up a collective number, or
     * its next call would meet rank 1's next but one */
    if (rank == 0 && (c10d_all_reduce(pg, &t, C10D_SUM, &o, NULL) != C10D_EINVAL ||
                      !strstr(c10d_errmsg(), "opts.timeout_ms is C10D_NO_WAIT"))) {
        fprintf(stderr, "rank %d: NO_WAIT collective: %s\n", rank, c10d_errmsg());
        rc = 1;
    }
    o = (c10d_coll_opts)C10D_COLL_OPTS_INIT;
    o.async_op = 1;
    c10d_work *w = NULL;
    if (rank == 1 && !wait_shared(looked, 1, 30000)) {
        fprintf(stderr, "rank 1: rank 0 never looked at its work\n");
        rc = 2;
    }
    c10d_status st = c10d_all_reduce(pg, &t, C10D_SUM, &o, &w);
    if (st == C10D_OK && rank == 0) {
        st = c10d_work_wait(w, C10D_NO_WAIT);
        if (st != C10D_ETIMEDOUT || !strstr(c10d_errmsg(), "is still running (C10D_NO_WAIT)")) {
            fprintf(stderr, "rank 0: NO_WAIT said %s: %s\n", c10d_status_name(st),
                    c10d_errmsg());
            rc = 3;
        }
        *looked = 1;
        st = C10D_OK;
    }
    if (st == C10D_OK)
        st = c10d_work_wait(w, C10D_TIMEOUT_DEFAULT);
    if (st != C10D_OK || v != n) {
        fprintf(stderr, "rank %d: %s %s (v %lld)\n", rank, c10d_status_name(st), c10d_errmsg(),
                (long long)v);
        rc = 4;
    }
    c10d_work_free(w);
    c10d_destroy(pg);
    return rc;
}

START_TEST(no_wait_on_a_work_says_how_it_stands)
{
    looked = mmap(NULL, sizeof *looked, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                  0);
    ck_assert_ptr_ne((void *)looked, MAP_FAILED);
    *looked = 0;
    ck_assert_int_eq(world_run(2, no_wait, (void *)world_job("nowait"), 60, NULL), 0);
    munmap((void *)looked, sizeof *looked);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("collectives_groups");
    TCase *tc = tcase_create("groups");
    tcase_add_checked_fixture(tc, world_coord_start, world_coord_stop);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, subgroups_translate_ranks);
    tcase_add_test(tc, monitored_barrier_names_the_missing_rank);
    tcase_add_test(tc, a_call_refused_after_numbering_gives_its_number_back);
    tcase_add_test(tc, no_wait_on_a_work_says_how_it_stands);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
