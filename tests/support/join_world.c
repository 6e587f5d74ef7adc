/* What the join suites share; see join_world.h. */
#include "join_world.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

coord_proc coord;

void join_setup(void)
{
    coord_init(&coord);
    ck_assert_int_eq(coord_start(&coord, NULL, NULL, NULL), 0);
}

void join_teardown(void)
{
    coord_cleanup(&coord);
}

const c10d_verify modes[3] = {C10D_VERIFY_SYNC, C10D_VERIFY_ASYNC, C10D_VERIFY_OFF};
const char *const mode_names[3] = {"SYNC", "ASYNC", "OFF"};

c10d_pg *init_mode(const scenario *sc, int rank, int n, int timeout_ms)
{
    return world_init_verify(coord.url, sc->job, rank, n, timeout_ms, sc->mode);
}

c10d_pg *region_start(const scenario *sc, int rank, int n, int timeout_ms)
{
    c10d_pg *pg = init_mode(sc, rank, n, timeout_ms);
    if (pg && c10d_join_begin(pg, NULL) != C10D_OK) {
        fprintf(stderr, "rank %d: join_begin: %s\n", rank, c10d_errmsg());
        c10d_destroy(pg);
        return NULL;
    }
    return pg;
}

void dump_log_if(int failed)
{
    if (!failed)
        return;
    char c[700];
    snprintf(c, sizeof c, "tail -n 40 %s >&2", coord.log);
    if (system(c) != 0)
        fprintf(stderr, "(no coordinator log)\n");
}

void run_world(int n, rank_fn fn, scenario *sc, int timeout_s)
{
    int failed = world_run(n, fn, sc, timeout_s, NULL);
    dump_log_if(failed);
    ck_assert_msg(failed == 0, "%d rank(s) failed (%s)", failed,
                  sc->mode == C10D_VERIFY_SYNC    ? "SYNC"
                  : sc->mode == C10D_VERIFY_ASYNC ? "ASYNC"
                                                  : "OFF");
}

int step(c10d_pg *pg, int rank, int i, const int *batches, int n)
{
    float g[N_ELEMS];
    for (int k = 0; k < N_ELEMS; k++)
        g[k] = (float)((rank + 1) * 100 + i * 10 + k);
    c10d_tensor t = c10d_tensor_1d(g, C10D_FLOAT32, N_ELEMS);
    c10d_status st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    if (st != C10D_OK)
        FAIL(20, "rank %d step %d: all_reduce: %s: %s", rank, i, c10d_status_name(st),
             c10d_errmsg());
    int active = 0;
    for (int r = 0; r < n; r++)
        active += batches[r] > i;
    for (int k = 0; k < N_ELEMS; k++) {
        float want = 0;
        for (int r = 0; r < n; r++)
            if (batches[r] > i)
                want += (float)((r + 1) * 100 + i * 10 + k);
        if (g[k] != want)
            FAIL(21, "rank %d step %d: element %d is %g, want %g", rank, i, k, g[k], want);
    }
    if (c10d_active_ranks(pg) != active)
        FAIL(22, "rank %d step %d: c10d_active_ranks is %d, want %d", rank, i,
             c10d_active_ranks(pg), active);
    return 0;
}

int expect_failure(int rank, c10d_status st, long long took, c10d_status want1,
                          c10d_status want2, const char *n1, const char *n2)
{
    const char *msg = c10d_errmsg();
    if (st != want1 && st != want2)
        FAIL(30, "rank %d: expected %s, got %s: %s", rank, c10d_status_name(want1),
             c10d_status_name(st), msg);
    if (n1 && !strstr(msg, n1))
        FAIL(31, "rank %d: the report lacks '%s': %s", rank, n1, msg);
    if (n2 && !strstr(msg, n2))
        FAIL(32, "rank %d: the report lacks '%s': %s", rank, n2, msg);
    if (took > 2000)
        FAIL(33, "rank %d: it took %lld ms to fail", rank, took);
    return 0;
}

TCase *join_tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, join_setup, join_teardown);
    tcase_set_timeout(tc, 120);
    return tc;
}
