/* The collectives battery; see coll_battery.h. */
#include "coll_battery.h"
#include "coll_reference.h"
#include "world_proc.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const c10d_dtype dtypes[] = {C10D_FLOAT32, C10D_FLOAT64, C10D_FLOAT16, C10D_BFLOAT16,
                                    C10D_INT8,    C10D_UINT8,   C10D_INT32,   C10D_INT64};
static const c10d_reduce_op ops[] = {C10D_SUM, C10D_PROD, C10D_MIN, C10D_MAX, C10D_AVG};
static const int64_t sizes[] = {0, 1, 7, 1000, 20000};
#define N_(a) (sizeof(a) / sizeof((a)[0]))

static int failures;

#define FAIL(...)                                                                                \
    do {                                                                                         \
        if (failures++ < 5) {                                                                    \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fputc('\n', stderr);                                                                 \
        }                                                                                        \
    } while (0)

#define CALL(rank, call)                                                                         \
    do {                                                                                         \
        c10d_status st_ = (call);                                                                \
        if (st_ != C10D_OK) {                                                                    \
            FAIL("rank %d: %s: %s: %s", rank, #call, c10d_status_name(st_), c10d_errmsg());     \
            return;                                                                              \
        }                                                                                        \
    } while (0)

/* --- the checks, one function per collective --- */

static void check_all_reduce(c10d_pg *pg, int async)
{
    int r = c10d_rank(pg), n = c10d_size(pg);
    for (size_t d = 0; d < N_(dtypes); d++)
        for (size_t o = 0; o < N_(ops); o++)
            for (size_t s = 0; s < N_(sizes); s++) {
                c10d_dtype dt = dtypes[d];
                int64_t cnt = sizes[s];
                void *b = alloc_t(dt, cnt);
                for (int64_t i = 0; i < cnt; i++)
                    set_elem(dt, b, i, val(ops[o], r, i));
                c10d_tensor t = c10d_tensor_1d(b, dt, cnt);
                c10d_coll_opts co = C10D_COLL_OPTS_INIT;
                co.async_op = async;
                c10d_work *w = NULL;
                c10d_status st = c10d_all_reduce(pg, &t, ops[o], &co, &w);
                if (st == C10D_OK && async)
                    st = c10d_work_wait(w, C10D_TIMEOUT_DEFAULT);
                c10d_work_free(w);
                if (st != C10D_OK)
                    FAIL("rank %d all_reduce %s %s [%lld]: %s", r, c10d_dtype_name(dt),
                         c10d_reduce_op_name(ops[o]), (long long)cnt, c10d_errmsg());
                for (int64_t i = 0; st == C10D_OK && i < cnt; i++) {
                    double want = expect(dt, ops[o], n, i), got = get_elem(dt, b, i);
                    if (!close_enough(dt, got, want)) {
                        FAIL("rank %d all_reduce %s %s [%lld] element %lld: got %g, want %g", r,
                             c10d_dtype_name(dt), c10d_reduce_op_name(ops[o]), (long long)cnt,
                             (long long)i, got, want);
                        break;
                    }
                }
                free(b);
            }
}

static void check_broadcast_reduce(c10d_pg *pg)
{
    int r = c10d_rank(pg), n = c10d_size(pg);
    const int64_t bsizes[] = {0, 5, 100000}; /* 400 KB takes the chained path */
    for (int root = 0; root < n; root++)
        for (size_t s = 0; s < N_(bsizes); s++) {
            int64_t cnt = bsizes[s];
            float *b = alloc_t(C10D_FLOAT32, cnt);
            for (int64_t i = 0; i < cnt; i++)
                b[i] = r == root ? (float)(i % 1000 + root) : -1;
            c10d_tensor t = c10d_tensor_1d(b, C10D_FLOAT32, cnt);
            CALL(r, c10d_broadcast(pg, &t, root, NULL, NULL));
            for (int64_t i = 0; i < cnt; i++)
                if (b[i] != (float)(i % 1000 + root)) {
                    FAIL("rank %d broadcast root %d [%lld] element %lld: %g", r, root,
                         (long long)cnt, (long long)i, b[i]);
                    break;
                }
            free(b);
        }
    const c10d_reduce_op *rops = ops;
    for (size_t d = 0; d < N_(dtypes); d++)
        for (size_t o = 0; o < N_(ops); o++) {
            c10d_dtype dt = dtypes[d];
            int root = n - 1;
            int64_t cnt = 1000;
            void *b = alloc_t(dt, cnt);
            for (int64_t i = 0; i < cnt; i++)
                set_elem(dt, b, i, val(rops[o], r, i));
            c10d_tensor t = c10d_tensor_1d(b, dt, cnt);
            CALL(r, c10d_reduce(pg, &t, root, rops[o], NULL, NULL));
            for (int64_t i = 0; i < cnt; i++) {
                double want = r == root ? expect(dt, rops[o], n, i) : val(rops[o], r, i);
                if (!close_enough(dt, get_elem(dt, b, i), want)) {
                    FAIL("rank %d reduce %s %s element %lld: got %g want %g", r,
                         c10d_dtype_name(dt), c10d_reduce_op_name(rops[o]), (long long)i,
                         get_elem(dt, b, i), want);
                    break;
                }
            }
            free(b);
        }
}

static void check_gathers(c10d_pg *pg)
{
    int r = c10d_rank(pg), n = c10d_size(pg);
    const int64_t gsizes[] = {0, 3, 50000};
    for (size_t s = 0; s < N_(gsizes); s++) {
        int64_t cnt = gsizes[s];
        int64_t *flat = alloc_t(C10D_INT64, cnt * n), *in = alloc_t(C10D_INT64, cnt);
        for (int64_t i = 0; i < cnt; i++)
            in[i] = r * 1000000 + i;
        c10d_tensor tin = c10d_tensor_1d(in, C10D_INT64, cnt);
        c10d_tensor tout = c10d_tensor_1d(flat, C10D_INT64, cnt * n);
        /* flat */
        CALL(r, c10d_all_gather_into_tensor(pg, &tout, &tin, NULL, NULL));
        for (int64_t i = 0; i < cnt * n; i++)
            if (flat[i] != (i / cnt) * 1000000 + i % cnt) {
                FAIL("rank %d all_gather_into_tensor [%lld] element %lld: %lld", r,
                     (long long)cnt, (long long)i, (long long)flat[i]);
                break;
            }
        /* in place: the input is this rank's slot of the output */
        memset(flat, 0, (size_t)(cnt * n) * 8);
        for (int64_t i = 0; i < cnt; i++)
            flat[r * cnt + i] = r * 1000000 + i;
        c10d_tensor slot = c10d_tensor_1d(flat + r * cnt, C10D_INT64, cnt);
        CALL(r, c10d_all_gather_into_tensor(pg, &tout, &slot, NULL, NULL));
        for (int64_t i = 0; i < cnt * n; i++)
            if (flat[i] != (i / cnt) * 1000000 + i % cnt) {
                FAIL("rank %d all_gather_into_tensor in place element %lld", r, (long long)i);
                break;
            }
        /* list, of separate buffers */
        c10d_tensor *outs = calloc((size_t)n, sizeof *outs);
        for (int j = 0; j < n; j++)
            outs[j] = c10d_tensor_1d(alloc_t(C10D_INT64, cnt), C10D_INT64, cnt);
        CALL(r, c10d_all_gather(pg, outs, &tin, NULL, NULL));
        for (int j = 0; j < n; j++)
            for (int64_t i = 0; i < cnt; i++)
                if (((int64_t *)outs[j].data)[i] != j * 1000000 + i) {
                    FAIL("rank %d all_gather list [%d][%lld]", r, j, (long long)i);
                    break;
                }
        /* gather / scatter with root 0 */
        for (int j = 0; j < n; j++)
            memset(outs[j].data, 0, (size_t)(cnt ? cnt : 1) * 8);
        CALL(r, c10d_gather(pg, r == 0 ? outs : NULL, &tin, 0, NULL, NULL));
        for (int j = 0; r == 0 && j < n; j++)
            for (int64_t i = 0; i < cnt; i++)
                if (((int64_t *)outs[j].data)[i] != j * 1000000 + i) {
                    FAIL("rank %d gather [%d][%lld]", r, j, (long long)i);
                    break;
                }
        int64_t *got = alloc_t(C10D_INT64, cnt);
        c10d_tensor tgot = c10d_tensor_1d(got, C10D_INT64, cnt);
        CALL(r, c10d_scatter(pg, &tgot, r == 0 ? outs : NULL, 0, NULL, NULL));
        for (int64_t i = 0; i < cnt; i++)
            if (got[i] != r * 1000000 + i) {
                FAIL("rank %d scatter element %lld: %lld", r, (long long)i, (long long)got[i]);
                break;
            }
        for (int j = 0; j < n; j++)
            free(outs[j].data);
        free(outs);
        free(got);
        free(flat);
        free(in);
    }
}

static void check_reduce_scatter_all_to_all(c10d_pg *pg)
{
    int r = c10d_rank(pg), n = c10d_size(pg);
    const int64_t rsizes[] = {0, 1, 30000};
    for (size_t d = 0; d < N_(dtypes); d++)
        for (size_t s = 0; s < N_(rsizes) * N_(ops); s++) {
            c10d_dtype dt = dtypes[d];
            c10d_reduce_op op = ops[s % N_(ops)];
            int64_t cnt = rsizes[s / N_(ops)];
            void *in = alloc_t(dt, cnt * n), *out = alloc_t(dt, cnt);
            size_t es = c10d_dtype_size(dt);
            for (int j = 0; j < n; j++)
                for (int64_t i = 0; i < cnt; i++)
                    set_elem(dt, in, j * cnt + i, val(op, r, j * cnt + i));
            c10d_tensor tin = c10d_tensor_1d(in, dt, cnt * n), tout = c10d_tensor_1d(out, dt, cnt);
            CALL(r, c10d_reduce_scatter_tensor(pg, &tout, &tin, op, NULL, NULL));
            for (int64_t i = 0; i < cnt; i++)
                if (!close_enough(dt, get_elem(dt, out, i), expect(dt, op, n, r * cnt + i))) {
                    FAIL("rank %d reduce_scatter_tensor %s %s element %lld: got %g want %g", r,
                         c10d_dtype_name(dt), c10d_reduce_op_name(op), (long long)i,
                         get_elem(dt, out, i), expect(dt, op, n, r * cnt + i));
                    break;
                }
            /* list variant over views into the same buffer */
            c10d_tensor *ins = calloc((size_t)n, sizeof *ins);
            for (int j = 0; j < n; j++)
                ins[j] = c10d_tensor_1d((char *)in + (size_t)(j * cnt) * es, dt, cnt);
            memset(out, 0, (size_t)(cnt ? cnt : 1) * es);
            CALL(r, c10d_reduce_scatter(pg, &tout, ins, op, NULL, NULL));
            for (int64_t i = 0; i < cnt; i++)
                if (!close_enough(dt, get_elem(dt, out, i), expect(dt, op, n, r * cnt + i))) {
                    FAIL("rank %d reduce_scatter %s element %lld", r, c10d_dtype_name(dt),
                         (long long)i);
                    break;
                }
            free(ins);
            /* all_to_all_single: block j of rank r holds (r, j) */
            void *a2a = alloc_t(dt, cnt * n);
            for (int j = 0; j < n; j++)
                for (int64_t i = 0; i < cnt; i++)
                    set_elem(dt, in, j * cnt + i, (double)((r * 7 + j * 3 + i) % 50));
            c10d_tensor ta = c10d_tensor_1d(a2a, dt, cnt * n);
            CALL(r, c10d_all_to_all_single(pg, &ta, &tin, NULL, NULL));
            for (int j = 0; j < n; j++)
                for (int64_t i = 0; i < cnt; i++)
                    if (get_elem(dt, a2a, j * cnt + i) != (double)((j * 7 + r * 3 + i) % 50)) {
                        FAIL("rank %d all_to_all %s block %d element %lld", r,
                             c10d_dtype_name(dt), j, (long long)i);
                        j = n;
                        break;
                    }
            free(a2a);
            free(in);
            free(out);
        }
}

/* Each rank sends two tagged messages to the next and receives the
 * previous rank's in the opposite tag order. */
static void check_p2p_barrier(c10d_pg *pg)
{
    int r = c10d_rank(pg), n = c10d_size(pg);
    if (n > 1) {
        int next = (r + 1) % n, prev = (r + n - 1) % n;
        int32_t a[4] = {r, 1, 2, 3}, b[2] = {r, -1}, ga[4], gb[2];
        c10d_tensor ta = c10d_tensor_1d(a, C10D_INT32, 4), tb = c10d_tensor_1d(b, C10D_INT32, 2);
        c10d_tensor tga = c10d_tensor_1d(ga, C10D_INT32, 4),
                    tgb = c10d_tensor_1d(gb, C10D_INT32, 2);
        CALL(r, c10d_send(pg, &ta, next, 7, NULL, NULL));
        CALL(r, c10d_send(pg, &tb, next, 9, NULL, NULL));
        CALL(r, c10d_recv(pg, &tgb, prev, 9, NULL, NULL));
        CALL(r, c10d_recv(pg, &tga, prev, 7, NULL, NULL));
        if (ga[0] != prev || ga[3] != 3 || gb[0] != prev || gb[1] != -1)
            FAIL("rank %d p2p: got %d %d / %d %d", r, ga[0], ga[3], gb[0], gb[1]);
    }
    for (int i = 0; i < 5; i++)
        CALL(r, c10d_barrier(pg, NULL, NULL));
    CALL(r, c10d_monitored_barrier(pg, 20000, 1));
}

/* Each rank sends 2 MiB (more than a P2P link holds, shm or TCP) to the
 * next, then a small message with another tag, and only then receives
 * from the previous rank: the isend-then-recv ring of torch's
 * batch_isend_irecv. Every send waits on a receiver that is itself
 * sending, so it must read what comes in meanwhile. */
static void check_p2p_ring_larger_than_a_link(c10d_pg *pg)
{
    int r = c10d_rank(pg), n = c10d_size(pg);
    if (n < 2)
        return;
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    size_t cnt = (2u << 20) / sizeof(int32_t);
    int32_t *out = malloc(cnt * sizeof *out), *in = malloc(cnt * sizeof *in), small = r, got = -1;
    for (size_t i = 0; i < cnt; i++)
        out[i] = (int32_t)(r * 1000003 + (int)i);
    c10d_tensor to = c10d_tensor_1d(out, C10D_INT32, (int64_t)cnt),
                ti = c10d_tensor_1d(in, C10D_INT32, (int64_t)cnt),
                ts = c10d_tensor_1d(&small, C10D_INT32, 1), tg = c10d_tensor_1d(&got, C10D_INT32, 1);
    CALL(r, c10d_send(pg, &to, next, 3, NULL, NULL));
    CALL(r, c10d_send(pg, &ts, next, 4, NULL, NULL));
    CALL(r, c10d_recv(pg, &tg, prev, 4, NULL, NULL)); /* the later one first */
    CALL(r, c10d_recv(pg, &ti, prev, 3, NULL, NULL));
    if (got != prev)
        FAIL("rank %d p2p ring: small message %d, want %d", r, got, prev);
    for (size_t i = 0; i < cnt; i++)
        if (in[i] != (int32_t)(prev * 1000003 + (int)i)) {
            FAIL("rank %d p2p ring: element %zu is %d", r, i, in[i]);
            break;
        }
    free(out);
    free(in);
}

/* Several async operations in flight, then a sync one behind them. */
static void check_async_order(c10d_pg *pg)
{
    int r = c10d_rank(pg), n = c10d_size(pg);
    float x[3][100];
    c10d_work *w[3];
    c10d_coll_opts co = C10D_COLL_OPTS_INIT;
    co.async_op = 1;
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 100; i++)
            x[k][i] = (float)(r + k);
        c10d_tensor t = c10d_tensor_1d(x[k], C10D_FLOAT32, 100);
        CALL(r, c10d_all_reduce(pg, &t, C10D_SUM, &co, &w[k]));
    }
    float y = 1;
    c10d_tensor ty = c10d_tensor_1d(&y, C10D_FLOAT32, 1);
    CALL(r, c10d_all_reduce(pg, &ty, C10D_SUM, NULL, NULL)); /* runs after the three */
    for (int k = 0; k < 3; k++) {
        if (!c10d_work_is_completed(w[k]))
            FAIL("rank %d: async #%d not complete after a later sync op", r, k);
        CALL(r, c10d_work_wait(w[k], 10000));
        c10d_work_free(w[k]);
        float want = (float)(n * (n - 1) / 2 + n * k);
        if (x[k][99] != want)
            FAIL("rank %d async all_reduce %d: %g want %g", r, k, x[k][99], want);
    }
    if (y != (float)n)
        FAIL("rank %d: sync after async: %g", r, y);

    /* Other collectives async too, all in flight at once. */
    int64_t b[64], g[64 * 8], in[64], rs_in[64 * 8], rs_out[64];
    for (int i = 0; i < 64; i++)
        b[i] = r == 0 ? i : -1, in[i] = r * 100 + i;
    for (int i = 0; i < 64 * n; i++)
        rs_in[i] = i;
    c10d_tensor tb = c10d_tensor_1d(b, C10D_INT64, 64), tg = c10d_tensor_1d(g, C10D_INT64, 64 * n);
    c10d_tensor tin = c10d_tensor_1d(in, C10D_INT64, 64);
    c10d_tensor trs = c10d_tensor_1d(rs_in, C10D_INT64, 64 * n);
    c10d_tensor tro = c10d_tensor_1d(rs_out, C10D_INT64, 64);
    c10d_work *wb, *wg, *wr, *wbar;
    CALL(r, c10d_broadcast(pg, &tb, 0, &co, &wb));
    CALL(r, c10d_all_gather_into_tensor(pg, &tg, &tin, &co, &wg));
    CALL(r, c10d_reduce_scatter_tensor(pg, &tro, &trs, C10D_SUM, &co, &wr));
    CALL(r, c10d_barrier(pg, &co, &wbar));
    c10d_work *all[] = {wbar, wr, wg, wb}; /* waited out of order */
    for (int k = 0; k < 4; k++) {
        CALL(r, c10d_work_wait(all[k], 30000));
        c10d_work_free(all[k]);
    }
    for (int i = 0; i < 64; i++) {
        if (b[i] != i || rs_out[i] != (int64_t)n * (r * 64 + i)) {
            FAIL("rank %d async broadcast/reduce_scatter element %d: %lld %lld", r, i,
                 (long long)b[i], (long long)rs_out[i]);
            break;
        }
    }
    for (int i = 0; i < 64 * n; i++)
        if (g[i] != (i / 64) * 100 + i % 64) {
            FAIL("rank %d async all_gather element %d", r, i);
            break;
        }
}

/* Arguments are checked before anything is sent. */
static void check_bad_arguments(c10d_pg *pg)
{
    int r = c10d_rank(pg), n = c10d_size(pg);
    float f[8];
    int32_t i32[8];
    c10d_tensor t = c10d_tensor_1d(f, C10D_FLOAT32, 8), ti = c10d_tensor_1d(i32, C10D_INT32, 8);
    c10d_tensor null_t = c10d_tensor_1d(NULL, C10D_FLOAT32, 8);
    struct {
        c10d_status st;
        const char *needle;
    } cases[4];
    cases[0].st = c10d_broadcast(pg, &t, n, NULL, NULL);
    cases[0].needle = "out of range";
    cases[1].st = c10d_all_reduce(pg, &null_t, C10D_SUM, NULL, NULL);
    cases[1].needle = "NULL data";
    c10d_tensor small = c10d_tensor_1d(f, C10D_FLOAT32, 8 * n - 1);
    cases[2].st = c10d_all_gather_into_tensor(pg, &small, &t, NULL, NULL);
    cases[2].needle = "elements";
    c10d_tensor big = c10d_tensor_1d(i32, C10D_INT32, 8 * n);
    cases[3].st = c10d_all_gather_into_tensor(pg, &big, &t, NULL, NULL);
    cases[3].needle = "int32";
    (void)ti;
    for (int k = 0; k < 4; k++)
        if (cases[k].st != C10D_EINVAL)
            FAIL("rank %d bad-argument case %d: got %s", r, k, c10d_status_name(cases[k].st));
    /* the group still works */
    CALL(r, c10d_barrier(pg, NULL, NULL));
}

/* Bytes of shared memory this process has mapped (its segment and its
 * local peers'), from /proc/self/maps. */
static size_t shm_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    size_t total = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (strstr(line, "/dev/shm/c10d.") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
            total += hi - lo;
    }
    if (f)
        fclose(f);
    return total;
}

size_t shm_limit; /* when set, a rank may map at most this much */

int battery(int rank, int n, void *arg)
{
    c10d_pg *pg = world_init(world_coord.url, arg, rank, n, 60000);
    if (!pg)
        return 10;
    if (shm_limit && shm_mapped() > shm_limit)
        FAIL("rank %d maps %zu bytes of shared memory (limit %zu)", rank, shm_mapped(),
             shm_limit);
    check_all_reduce(pg, 0);
    check_broadcast_reduce(pg);
    check_gathers(pg);
    check_reduce_scatter_all_to_all(pg);
    check_p2p_barrier(pg);
    check_p2p_ring_larger_than_a_link(pg);
    check_async_order(pg);
    check_bad_arguments(pg);
    check_all_reduce(pg, 1);
    c10d_destroy(pg);
    return failures ? 1 : 0;
}

void run_battery(int n)
{
    int failed = world_run(n, battery, (void *)world_job("coll"), 240, NULL);
    ck_assert_msg(failed == 0, "%d of %d ranks failed (see stderr)", failed, n);
}
