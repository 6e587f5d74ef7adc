/* Join for uneven inputs end to end (docs/join.md): the six cases of the
 * DDP-join hang report in SYNC, ASYNC and OFF verification; identities per
 * reduce op and dtype; AVG both ways; what a joined rank cannot take part
 * in (a broadcast from it, an all_gather, a send to it); throw mode; world
 * 4 with ranks joining at different steps; a join region in a subgroup;
 * a rank dying or leaving while another is joined; async collectives in a
 * region; c10d-ctl status showing who joined; a coordinator restart.
 * Real coordinator, real forked ranks, the host data plane. */
#include "coord_proc.h"
#include "state_wait.h"
#include "world_proc.h"

#include "check_main.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static coord_proc coord;

static void setup(void)
{
    coord_init(&coord);
    ck_assert_int_eq(coord_start(&coord, NULL, NULL, NULL), 0);
}

static void teardown(void)
{
    coord_cleanup(&coord);
}

static const c10d_verify modes[] = {C10D_VERIFY_SYNC, C10D_VERIFY_ASYNC, C10D_VERIFY_OFF};
static const char *const mode_names[] = {"SYNC", "ASYNC", "OFF"};

typedef struct {
    const char *job;
    c10d_verify mode;
    int kase;
    int opt; /* test-specific */
} scenario;

static c10d_pg *init_mode(const scenario *sc, int rank, int n, int timeout_ms)
{
    return world_init_verify(coord.url, sc->job, rank, n, timeout_ms, sc->mode);
}

/* A world in sc's mode whose ranks have all begun a join region (default
 * options); NULL, having said why, if either failed. */
static c10d_pg *region_start(const scenario *sc, int rank, int n, int timeout_ms)
{
    c10d_pg *pg = init_mode(sc, rank, n, timeout_ms);
    if (pg && c10d_join_begin(pg, NULL) != C10D_OK) {
        fprintf(stderr, "rank %d: join_begin: %s\n", rank, c10d_errmsg());
        c10d_destroy(pg);
        return NULL;
    }
    return pg;
}

static void dump_log_if(int failed)
{
    if (!failed)
        return;
    char c[700];
    snprintf(c, sizeof c, "tail -n 40 %s >&2", coord.log);
    if (system(c) != 0)
        fprintf(stderr, "(no coordinator log)\n");
}

static void run_world(int n, rank_fn fn, scenario *sc, int timeout_s)
{
    int failed = world_run(n, fn, sc, timeout_s, NULL);
    dump_log_if(failed);
    ck_assert_msg(failed == 0, "%d rank(s) failed (%s)", failed,
                  sc->mode == C10D_VERIFY_SYNC    ? "SYNC"
                  : sc->mode == C10D_VERIFY_ASYNC ? "ASYNC"
                                                  : "OFF");
}

#define FAIL(code, ...)                                                                            \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        return code;                                                                               \
    } while (0)

/* --- the six cases: world 2, rank 0 has 5 batches, rank 1 has 6 --- */

#define N_ELEMS 4

/* One step: DDP's gradient all_reduce (one bucket), checked against the
 * sum over the ranks that still had a batch at that step. */
static int step(c10d_pg *pg, int rank, int i, const int *batches, int n)
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

static int expect_failure(int rank, c10d_status st, long long took, c10d_status want1,
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

/* --- what a joined rank cannot take part in --- */

enum { BAD_BCAST_FROM_JOINED, BAD_ALL_GATHER, BAD_SEND_TO_JOINED, BAD_REDUCE_TO_JOINED };

/* Rank 0 joins after two steps; rank 1 then calls something that needs
 * rank 0's data: both fail with EJOINED naming the call and rank 0. */
static int cannot_shadow_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    static const int batches[2] = {2, 3};
    c10d_pg *pg = region_start(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int rc;
    for (int i = 0; i < 2; i++)
        if ((rc = step(pg, rank, i, batches, n)) != 0)
            return rc;
    long long t0 = test_now_ms();
    c10d_status st;
    const char *what = NULL;
    if (rank == 0) {
        int last;
        st = c10d_join_end(pg, &last);
    } else {
        float x[4] = {1, 2, 3, 4}, outs[8];
        c10d_tensor t = c10d_tensor_1d(x, C10D_FLOAT32, 4);
        c10d_tensor o = c10d_tensor_1d(outs, C10D_FLOAT32, 8);
        switch (sc->kase) {
        case BAD_BCAST_FROM_JOINED:
            st = c10d_broadcast(pg, &t, 0, NULL, NULL);
            what = "BROADCAST float32[4] root 0";
            break;
        case BAD_ALL_GATHER:
            st = c10d_all_gather_into_tensor(pg, &o, &t, NULL, NULL);
            what = "ALL_GATHER float32[4]";
            break;
        case BAD_REDUCE_TO_JOINED:
            st = c10d_reduce(pg, &t, 0, C10D_SUM, NULL, NULL);
            what = "REDUCE float32[4] SUM root 0";
            break;
        default:
            st = c10d_send(pg, &t, 0, 7, NULL, NULL);
            what = "tag 7";
            break;
        }
        /* In ASYNC and OFF a call made before this rank heard of the join
         * may wait for it; the finding arrives within the 2 s allowed. */
    }
    long long took = test_now_ms() - t0;
    /* A small send made before this rank heard of the join is handed to
     * the transport and returns; the finding fails a later call. */
    while (rank == 1 && st == C10D_OK && sc->kase == BAD_SEND_TO_JOINED && took < 2000) {
        st = c10d_barrier(pg, NULL, NULL);
        took = test_now_ms() - t0;
    }
    rc = expect_failure(rank, st, took, C10D_EJOINED, C10D_EJOINED, "rank 0",
                        rank == 1 ? what : "joined after");
    if (!rc && rank == 0 && sc->kase != BAD_SEND_TO_JOINED &&
        !strstr(c10d_errmsg(), sc->kase == BAD_ALL_GATHER ? "ALL_GATHER" : "root 0"))
        rc = 34, fprintf(stderr, "rank 0: the report does not name the call: %s\n",
                         c10d_errmsg());
    c10d_destroy(pg);
    return rc;
}

START_TEST(broadcast_from_a_joined_root)
{
    scenario sc = {world_job("bcast-joined"), modes[_i], BAD_BCAST_FROM_JOINED, 0};
    run_world(2, cannot_shadow_body, &sc, 60);
}
END_TEST

START_TEST(reduce_to_a_joined_root)
{
    scenario sc = {world_job("reduce-joined"), modes[_i], BAD_REDUCE_TO_JOINED, 0};
    run_world(2, cannot_shadow_body, &sc, 60);
}
END_TEST

START_TEST(all_gather_under_join)
{
    scenario sc = {world_job("gather-joined"), modes[_i], BAD_ALL_GATHER, 0};
    run_world(2, cannot_shadow_body, &sc, 60);
}
END_TEST

START_TEST(send_to_a_joined_rank)
{
    scenario sc = {world_job("send-joined"), modes[_i], BAD_SEND_TO_JOINED, 0};
    run_world(2, cannot_shadow_body, &sc, 60);
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

/* --- a rank dying, or leaving, while another is joined --- */

/* World 3: rank 0 joins after 2 steps; rank 2 dies (kase 0: _exit) or
 * calls c10d_destroy (kase 1) after 3; rank 1's next collective and rank
 * 0's join_end fail with EPEERLOST naming rank 2. */
static int lost_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    static const int batches[3] = {2, 10, 3};
    c10d_pg *pg = region_start(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int rc;
    for (int i = 0; i < batches[rank] && (rank != 1 || i < 3); i++)
        if ((rc = step(pg, rank, i, batches, n)) != 0)
            return rc;
    /* Rank 2 goes only once rank 1 has finished the steps they share (a
     * rank that dies fails its peers' unfinished collectives too). */
    c10d_store *s;
    void *v;
    size_t len;
    if (rank != 0 && (c10d_store_connect(&s, coord.url, NULL) != C10D_OK ||
                      (rank == 1 && c10d_store_set(s, "test/stepped", "1", 1) != C10D_OK) ||
                      (rank == 2 && c10d_store_get(s, "test/stepped", &v, &len, 30000) != C10D_OK)))
        FAIL(12, "rank %d: store: %s", rank, c10d_errmsg());
    if (rank == 2)
        c10d_free(v);
    if (rank != 0)
        c10d_store_close(s);
    if (rank == 2) {
        if (sc->kase == 0)
            _exit(0); /* died: its connection drops */
        c10d_destroy(pg); /* left, instead of joining */
        return 0;
    }
    long long t0 = test_now_ms();
    c10d_status st;
    if (rank == 0) {
        int last;
        st = c10d_join_end(pg, &last);
    } else {
        float g = 1;
        c10d_tensor t = c10d_tensor_1d(&g, C10D_FLOAT32, 1);
        st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
        while (st == C10D_OK && test_now_ms() - t0 < 3000) /* a blind one may finish */
            st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    }
    rc = expect_failure(rank, st, rank == 0 ? 0 : test_now_ms() - t0, C10D_EPEERLOST,
                        C10D_EPEERLOST, "rank 2", sc->kase == 0 ? "died" : "left");
    c10d_destroy(pg);
    return rc;
}

START_TEST(a_rank_dies_while_another_is_joined)
{
    scenario sc = {world_job("dies"), modes[_i], 0, 0};
    run_world(3, lost_body, &sc, 60);
}
END_TEST

START_TEST(a_rank_leaves_instead_of_joining)
{
    scenario sc = {world_job("leaves"), modes[_i], 1, 0};
    run_world(3, lost_body, &sc, 60);
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

/* --- misuse --- */

static int misuse_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    c10d_pg *pg = init_mode(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int last;
    if (c10d_join_end(pg, &last) != C10D_EINVAL || !strstr(c10d_errmsg(), "join_begin"))
        FAIL(11, "rank %d: join_end without join_begin: %s", rank, c10d_errmsg());
    c10d_join_opts jo = C10D_JOIN_OPTS_INIT;
    jo.throw_on_early_termination = rank; /* rank 1 differs */
    c10d_status st = C10D_OK;
    if (rank == 1) { /* after rank 0 begun: it finds the region made */
        c10d_barrier(pg, NULL, NULL);
        st = c10d_join_begin(pg, &jo);
        if (st != C10D_EINVAL || !strstr(c10d_errmsg(), "same options"))
            FAIL(12, "rank 1: join_begin with other options: %s", c10d_errmsg());
        jo.throw_on_early_termination = 0;
    }
    if (c10d_join_begin(pg, &jo) != C10D_OK)
        FAIL(13, "rank %d: join_begin: %s", rank, c10d_errmsg());
    if (rank == 0)
        c10d_barrier(pg, NULL, NULL);
    if (c10d_join_begin(pg, &jo) != C10D_EINVAL)
        FAIL(14, "rank %d: a second join_begin was accepted", rank);
    if (c10d_join_end(pg, &last) != C10D_OK || last != 1)
        FAIL(15, "rank %d: join_end: %s", rank, c10d_errmsg());
    if (c10d_active_ranks(NULL) != -1)
        FAIL(16, "c10d_active_ranks(NULL)");
    c10d_destroy(pg);
    return 0;
}

START_TEST(misuse_is_refused)
{
    scenario sc = {world_job("misuse"), C10D_VERIFY_SYNC, 0, 0};
    run_world(2, misuse_body, &sc, 60);
}
END_TEST

/* --- a joined rank that cannot take part --- */

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <sys/resource.h>

/* This process may allocate only `more` bytes beyond what it has now. */
static int limit_memory(size_t more)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmData: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    if (kb < 0)
        return -1;
    struct rlimit rl = {(rlim_t)kb * 1024 + more, (rlim_t)kb * 1024 + more};
    return setrlimit(RLIMIT_DATA, &rl);
}

/* Rank 0 joins with too little memory left to shadow ranks 1 and 2's
 * 64 MiB all_reduce: its join_end fails (ENOMEM), and the others, already
 * in the data plane, fail at once with the coordinator's finding instead
 * of waiting for their timeout. World 3: with one active rank left, a
 * joined rank needs no buffer at all (it takes the header alone). */
static int failed_shadow_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    c10d_pg *pg = region_start(sc, rank, n, 60000);
    if (!pg)
        return 10;
    c10d_status st;
    long long t0 = test_now_ms();
    if (rank == 0) {
        if (limit_memory(16u << 20) != 0)
            FAIL(12, "rank 0: setrlimit");
        int last;
        st = c10d_join_end(pg, &last);
        if (st != C10D_ENOMEM)
            FAIL(13, "rank 0: join_end: %s: %s (want ENOMEM)", c10d_status_name(st),
                 c10d_errmsg());
        c10d_destroy(pg);
        return 0;
    }
    size_t n_el = 16u << 20;
    float *big = calloc(n_el, sizeof *big);
    c10d_tensor t = c10d_tensor_1d(big, C10D_FLOAT32, (int64_t)n_el);
    st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    int rc = expect_failure(rank, st, test_now_ms() - t0, C10D_EABORTED, C10D_EPEERLOST,
                            "rank 0", NULL);
    free(big);
    c10d_destroy(pg);
    return rc;
}

START_TEST(a_joined_rank_that_cannot_shadow_fails_everyone)
{
    scenario sc = {world_job("shadow-fails"), C10D_VERIFY_SYNC, 0, 0};
    run_world(3, failed_shadow_body, &sc, 60);
}
END_TEST
#endif

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
    ctl("set test/go 1", out, sizeof out, &st);
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

/* --- in-band shadowing: what the joined rank learns from the data plane --- */

static int64_t requests_served(void)
{
    c10d_store *s;
    c10d_coord_info info;
    if (c10d_store_connect(&s, coord.url, NULL) != C10D_OK)
        return -1;
    int64_t n = c10d_store_coord_info(s, &info) == C10D_OK ? info.requests : -1;
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
 * key is in the store (monitored_barrier.c's layout:
 * c10d/monitored_barrier/<job>/<generation>/<group>/<n>/arrived/<rank>). */
static int rank1_waits_in_monitored_barrier(const char *job, int timeout_ms)
{
    c10d_store *s;
    if (c10d_store_connect(&s, coord.url, NULL) != C10D_OK)
        return 0;
    char prefix[200];
    snprintf(prefix, sizeof prefix, "c10d/monitored_barrier/%s/", job);
    long long until = test_now_ms() + timeout_ms;
    int found = 0;
    do {
        c10d_key_info *keys = NULL;
        size_t nk = 0;
        if (c10d_store_list(s, prefix, 100, &keys, &nk, NULL) == C10D_OK)
            for (size_t k = 0; k < nk && !found; k++) {
                static const char tail[] = "/world/1/arrived/1";
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
             "c10d/monitored_barrier/%s/.../world/1/arrived/1 in 10 s)", sc->job);
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

/* Whether joined ranks shadow in-band is each rank's own finding (no NCCL
 * for the group); ranks that differ would mix the two paths and wait on
 * each other, so the coordinator refuses the second kind at join_begin. */
static int mixed_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    c10d_pg *pg = init_mode(sc, rank, n, 30000);
    if (!pg)
        return 10;
    if (rank == 1) {
        setenv("C10D_JOIN_INBAND", "0", 1);
        float g = 0; /* rank 0 began first */
        c10d_tensor t = c10d_tensor_1d(&g, C10D_FLOAT32, 1);
        if (c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK)
            FAIL(11, "rank 1: all_reduce: %s", c10d_errmsg());
        c10d_status st = c10d_join_begin(pg, NULL);
        if (st != C10D_EINVAL || !strstr(c10d_errmsg(), "same data planes"))
            FAIL(12, "rank 1: join_begin: %s: %s (want EINVAL)", c10d_status_name(st),
                 c10d_errmsg());
    } else {
        if (c10d_join_begin(pg, NULL) != C10D_OK)
            FAIL(13, "rank 0: join_begin: %s", c10d_errmsg());
        float g = 0;
        c10d_tensor t = c10d_tensor_1d(&g, C10D_FLOAT32, 1);
        if (c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK)
            FAIL(14, "rank 0: all_reduce: %s", c10d_errmsg());
    }
    c10d_destroy(pg);
    return 0;
}

START_TEST(members_that_would_shadow_differently_are_refused)
{
    scenario sc = {world_job("mixed"), C10D_VERIFY_OFF, 0, 0};
    run_world(2, mixed_body, &sc, 60);
}
END_TEST

static Suite *join_suite(void)
{
    Suite *s = suite_create("join");
    TCase *tc = tcase_create("join");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, six_cases, 0, 18);
    tcase_add_loop_test(tc, identities_avg_by_initial_size, 0, 3);
    tcase_add_loop_test(tc, the_last_active_rank_runs_alone, 0, 6);
    tcase_add_loop_test(tc, the_last_active_rank_does_not_wait_for_a_joined_one, 0, 3);
    tcase_add_loop_test(tc, a_joined_rank_behind_or_dead, 0, 7);
    tcase_add_loop_test(tc, identities_avg_by_active_ranks, 0, 3);
    tcase_add_loop_test(tc, broadcast_from_a_joined_root, 0, 3);
    tcase_add_loop_test(tc, reduce_to_a_joined_root, 0, 3);
    tcase_add_loop_test(tc, all_gather_under_join, 0, 3);
    tcase_add_loop_test(tc, send_to_a_joined_rank, 0, 3);
    tcase_add_loop_test(tc, throw_on_early_termination, 0, 3);
    tcase_add_loop_test(tc, world4_joining_at_different_steps, 0, 3);
    tcase_add_loop_test(tc, join_region_in_a_subgroup, 0, 3);
    tcase_add_loop_test(tc, a_rank_dies_while_another_is_joined, 0, 3);
    tcase_add_loop_test(tc, a_rank_leaves_instead_of_joining, 0, 3);
    tcase_add_loop_test(tc, async_collectives_in_a_region, 0, 3);
    tcase_add_test(tc, misuse_is_refused);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    tcase_add_test(tc, a_joined_rank_that_cannot_shadow_fails_everyone);
#endif
    tcase_add_test(tc, ctl_status_shows_the_join);
    tcase_add_test(tc, coordinator_restart_while_joined);
    tcase_add_loop_test(tc, a_joined_rank_shadows_without_the_coordinator, 0, 2);
    tcase_add_loop_test(tc, the_call_after_a_region_is_not_shadowed, 0, 3);
    tcase_add_loop_test(tc, a_monitored_barrier_while_a_rank_is_joined, 0, 3);
    tcase_add_loop_test(tc, an_empty_collective_while_a_rank_is_joined, 0, 3);
    tcase_add_loop_test(tc, six_cases_through_the_coordinator, 0, 18);
    tcase_add_test(tc, members_that_would_shadow_differently_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return c10d_run_suite(join_suite());
}
