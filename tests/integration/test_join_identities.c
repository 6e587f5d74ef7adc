/* Join: the identities a joined rank contributes, per reduce op and dtype
 * (all_reduce, reduce, reduce_scatter, and the ring path), with AVG
 * divided by the initial world size or by the ranks that contributed; and
 * the last active rank running them by itself. */
#include "join_world.h"

#include "check_main.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* --- identities --- */

static double value_of(int rank, int k)
{
    return (double)(rank + 1) * 2 + k; /* small, even: exact in every dtype, AVG too */
}

static void put(void *buf, c10d_dtype dt, int k, double v)
{
    switch (dt) {
    case C10D_FLOAT32: ((float *)buf)[k] = (float)v; break;
    case C10D_FLOAT64: ((double *)buf)[k] = v; break;
    case C10D_FLOAT16: { /* small integers: exact in half */
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        int e = (int)((u >> 23) & 0xff) - 127 + 15;
        uint16_t h = v == 0 ? 0 : (uint16_t)((u >> 16 & 0x8000) | (e << 10) | ((u >> 13) & 0x3ff));
        ((uint16_t *)buf)[k] = h;
        break;
    }
    case C10D_BFLOAT16: {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t *)buf)[k] = (uint16_t)(u >> 16);
        break;
    }
    case C10D_INT8: ((int8_t *)buf)[k] = (int8_t)v; break;
    case C10D_UINT8: ((uint8_t *)buf)[k] = (uint8_t)v; break;
    case C10D_INT32: ((int32_t *)buf)[k] = (int32_t)v; break;
    case C10D_INT64: ((int64_t *)buf)[k] = (int64_t)v; break;
    }
}

static double get(const void *buf, c10d_dtype dt, int k)
{
    switch (dt) {
    case C10D_FLOAT32: return ((const float *)buf)[k];
    case C10D_FLOAT64: return ((const double *)buf)[k];
    case C10D_FLOAT16: {
        uint16_t h = ((const uint16_t *)buf)[k];
        if (!(h & 0x7fff))
            return 0;
        uint32_t u = (uint32_t)(h & 0x8000) << 16 | (uint32_t)(((h >> 10) & 0x1f) - 15 + 127) << 23 |
                     (uint32_t)(h & 0x3ff) << 13;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case C10D_BFLOAT16: {
        uint32_t u = (uint32_t)((const uint16_t *)buf)[k] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case C10D_INT8: return ((const int8_t *)buf)[k];
    case C10D_UINT8: return ((const uint8_t *)buf)[k];
    case C10D_INT32: return ((const int32_t *)buf)[k];
    case C10D_INT64: return (double)((const int64_t *)buf)[k];
    }
    return NAN;
}

/* op over element k of ranks 1..n-1 (rank 0 joined); AVG divides by div. */
static double expected(c10d_reduce_op op, int n, int k, int div)
{
    double acc = value_of(1, k);
    for (int r = 2; r < n; r++) {
        double b = value_of(r, k);
        switch (op) {
        case C10D_PROD: acc *= b; break;
        case C10D_MIN: acc = acc < b ? acc : b; break;
        case C10D_MAX: acc = acc > b ? acc : b; break;
        default: acc += b; break;
        }
    }
    return op == C10D_AVG ? acc / div : acc;
}

/* Rank 0 joins at once; ranks 1..n-1 run every reduce op on every dtype
 * (all_reduce, reduce to rank 1, reduce_scatter); the results are theirs
 * alone. AVG divides by n (the initial size) or, with opt, by n-1 (the
 * ranks that contributed). World 3: rank 0 shadows with identities. World
 * 2: rank 1 is the last active rank and runs them by itself. */
static int identities_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    int by_active = sc->opt;
    c10d_pg *pg = init_mode(sc, rank, n, 30000);
    if (!pg)
        return 10;
    c10d_join_opts jo = C10D_JOIN_OPTS_INIT;
    jo.divide_by_initial_world_size = !by_active;
    if (c10d_join_begin(pg, &jo) != C10D_OK)
        FAIL(11, "rank %d: join_begin: %s", rank, c10d_errmsg());
    if (rank == 0) {
        int last;
        if (c10d_join_end(pg, &last) != C10D_OK)
            FAIL(12, "rank 0: join_end: %s", c10d_errmsg());
        if (last != n - 1)
            FAIL(13, "rank 0: last joiner %d, want %d", last, n - 1);
        c10d_destroy(pg);
        return 0;
    }
    static const c10d_dtype dts[] = {C10D_FLOAT32, C10D_FLOAT64, C10D_FLOAT16, C10D_BFLOAT16,
                                     C10D_INT8,    C10D_UINT8,   C10D_INT32,   C10D_INT64};
    static const c10d_reduce_op ops[] = {C10D_SUM, C10D_PROD, C10D_MIN, C10D_MAX, C10D_AVG};
    int div = by_active ? n - 1 : n;
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            c10d_dtype dt = dts[d];
            c10d_reduce_op op = ops[o];
            uint64_t buf[6], in[2 * 3], out[6];
            for (int kind = 0; kind < 3; kind++) {
                for (int k = 0; k < 6; k++) {
                    put(buf, dt, k, value_of(rank, k));
                    if (k < 2 * n)
                        put(in, dt, k, value_of(rank, k)); /* reduce_scatter: n blocks of 2 */
                }
                c10d_tensor t = c10d_tensor_1d(buf, dt, 6);
                c10d_status st;
                int count = 6;
                const void *res = buf;
                if (kind == 0) {
                    st = c10d_all_reduce(pg, &t, op, NULL, NULL);
                } else if (kind == 1) {
                    st = c10d_reduce(pg, &t, 1, op, NULL, NULL);
                } else {
                    c10d_tensor ti = c10d_tensor_1d(in, dt, 2 * n);
                    c10d_tensor to = c10d_tensor_1d(out, dt, 2);
                    st = c10d_reduce_scatter_tensor(pg, &to, &ti, op, NULL, NULL);
                    count = 2;
                    res = out;
                }
                if (st != C10D_OK)
                    FAIL(14, "rank %d: %s %s kind %d: %s", rank, c10d_dtype_name(dt),
                         c10d_reduce_op_name(op), kind, c10d_errmsg());
                if (kind == 1 && rank != 1)
                    continue; /* only the root's tensor holds the result */
                for (int k = 0; k < count; k++) {
                    int src = kind == 2 ? rank * 2 + k : k; /* this rank's block */
                    double want = expected(op, n, src, div);
                    if (op == C10D_AVG && dt >= C10D_INT8)
                        want = (double)(long long)want; /* integers truncate */
                    double got = get(res, dt, k);
                    if (fabs(got - want) > 0.02 * fabs(want) + 1e-9)
                        FAIL(15, "rank %d: %s %s kind %d element %d: %g, want %g", rank,
                             c10d_dtype_name(dt), c10d_reduce_op_name(op), kind, k, got, want);
                }
                if (c10d_active_ranks(pg) != n - 1)
                    FAIL(16, "rank %d: active ranks %d, want %d", rank, c10d_active_ranks(pg),
                         n - 1);
            }
        }
    /* Large enough for the ring algorithm, in which the joined rank
     * reduces (and divides) a block of everyone's result itself. */
    enum { BIG = 20000 };
    float *big = malloc(BIG * sizeof *big);
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        for (int k = 0; k < BIG; k++)
            big[k] = (float)value_of(rank, k % 6);
        c10d_tensor t = c10d_tensor_1d(big, C10D_FLOAT32, BIG);
        if (c10d_all_reduce(pg, &t, ops[o], NULL, NULL) != C10D_OK)
            FAIL(18, "rank %d: ring %s: %s", rank, c10d_reduce_op_name(ops[o]), c10d_errmsg());
        for (int k = 0; k < BIG; k++) {
            double want = expected(ops[o], n, k % 6, div);
            if (fabs(big[k] - want) > 1e-4 * fabs(want))
                FAIL(19, "rank %d: ring %s element %d: %g, want %g", rank,
                     c10d_reduce_op_name(ops[o]), k, big[k], want);
        }
    }
    free(big);
    int last;
    if (c10d_join_end(pg, &last) != C10D_OK || last != n - 1)
        FAIL(17, "rank %d: join_end: %s (last %d)", rank, c10d_errmsg(), last);
    c10d_destroy(pg);
    return 0;
}

START_TEST(identities_avg_by_initial_size)
{
    scenario sc = {world_job("ident"), modes[_i], 0, 0};
    run_world(3, identities_body, &sc, 60);
}
END_TEST

START_TEST(identities_avg_by_active_ranks)
{
    scenario sc = {world_job("ident-active"), modes[_i], 0, 1};
    run_world(3, identities_body, &sc, 60);
}
END_TEST

/* _i: mode * 2 + AVG by the active ranks */
START_TEST(the_last_active_rank_runs_alone)
{
    scenario sc = {world_job("alone"), modes[_i / 2], 0, _i % 2};
    run_world(2, identities_body, &sc, 60);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("join_identities");
    TCase *tc = join_tcase("join_identities");
    tcase_add_loop_test(tc, identities_avg_by_initial_size, 0, 3);
    tcase_add_loop_test(tc, the_last_active_rank_runs_alone, 0, 6);
    tcase_add_loop_test(tc, identities_avg_by_active_ranks, 0, 3);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
