/* The pair world (pair_world.h). */
#include "pair_world.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

pair_shared *sh;

void pair_world_setup(void)
{
    world_coord_start();
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset((void *)sh, 0, sizeof *sh);
}

void pair_world_teardown(void)
{
    world_coord_stop();
    munmap((void *)sh, sizeof *sh);
}

void pair_world_spawn(const char *job_base, int n, rank_fn fn, pid_t *pids)
{
    snprintf(sh->job, sizeof sh->job, "%s", world_job(job_base));
    world_spawn(n, fn, NULL, pids);
}

int pair_all_reduce_is(c10d_pg *pg, int64_t mine, int64_t want)
{
    c10d_tensor t = c10d_tensor_1d(&mine, C10D_INT64, 1);
    return c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) == C10D_OK && mine == want;
}

c10d_pg *pair_world_join(int rank, int n, int timeout_ms, c10d_verify mode, c10d_pg **pair)
{
    *pair = NULL;
    c10d_pg *pg = world_init_verify(world_coord.url, sh->job, rank, n, timeout_ms, mode);
    if (!pg)
        return NULL;
    const int pair_ranks[2] = {0, 1};
    if (c10d_new_group(pair, pg, pair_ranks, 2) != C10D_OK) {
        fprintf(stderr, "rank %d: new_group: %s\n", rank, c10d_errmsg());
        c10d_destroy(pg);
        return NULL;
    }
    sh->pid[rank] = (int)getpid();
    __sync_fetch_and_add(&sh->ready, 1);
    if (rank == 2)
        for (;;)
            pause();
    return pg;
}

int pair_world_main(const char *name, void (*setup)(void), const TTest *const *tests)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup ? setup : pair_world_setup, pair_world_teardown);
    for (; *tests; tests++)
        tcase_add_test(tc, *tests);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
