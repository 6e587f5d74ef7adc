/* The NCCL data plane against a real c10d-coord and forked ranks.
 *
 * Without a GPU (CI): a CUDA tensor gets C10D_EBACKEND saying why, before
 * the call is numbered, and the host backend goes on working; asking for
 * C10D_BACKEND_NCCL fails at c10d_init at once; the host backend refuses
 * CUDA tensors and a call refuses tensors on two devices.
 *
 * With a GPU: every collective at world size 1 (data checked), async work
 * handles, the in-place and no-copy paths against the flatten path; at
 * world size 2 (two GPUs, or one GPU where NCCL allows several ranks on
 * it) a sum, the abort that ends a collective whose peer died, and a
 * joined rank shadowing CUDA collectives. Those cases print why they skip
 * where there is no GPU.
 *
 * Just over 500 lines, one program on purpose: CTest runs it twice
 * (test_nccl, and test_nccl --gpu, which exits 77 with the reason where
 * there is no GPU), and both halves choose a backend and set up ranks
 * alike (init_with). */
#include "coord_proc.h"
#include "backend/backends.h"
#include "world_proc.h"
#ifdef C10D_HAVE_NCCL
#include "gpu_api.h"
#endif

#include "c10d_time.h"
#include "check_main.h"

#include <check.h>
#include <sys/wait.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static coord_proc coord;
static char job[128];

static void setup(void)
{
    coord_init(&coord);
    ck_assert_int_eq(coord_start(&coord, NULL, NULL, NULL), 0);
}

static void teardown(void)
{
    coord_cleanup(&coord);
}

#define FAIL(code, ...)                                                                          \
    do {                                                                                         \
        fprintf(stderr, "rank %d: ", rank);                                                      \
        fprintf(stderr, __VA_ARGS__);                                                            \
        fprintf(stderr, " (%s: %s)\n", c10d_status_name(st), c10d_errmsg());                     \
        return code;                                                                             \
    } while (0)

static c10d_pg *init_with(int rank, int n, c10d_backend be, c10d_verify v, c10d_status *st)
{
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.coord_url = coord.url;
    o.job = job;
    o.rank = rank;
    o.world_size = n;
    o.timeout_ms = 20000;
    o.backend = be;
    o.verify = v;
    c10d_pg *pg = NULL;
    *st = c10d_init(&pg, &o);
    return pg;
}

static int gpu_available(void)
{
    return c10di_backend_available(C10DI_DEV_CUDA) == C10D_OK;
}

/* --- without a GPU --- */

static int cuda_without_gpu_body(int rank, int n, void *arg)
{
    c10d_status st;
    c10d_pg *pg = init_with(rank, n, C10D_BACKEND_AUTO, C10D_VERIFY_SYNC, &st);
    if (!pg)
        FAIL(1, "init");
    float x[2] = {1, 2};
    c10d_tensor cpu = c10d_tensor_1d(x, C10D_FLOAT32, 2);
    if ((st = c10d_all_reduce(pg, &cpu, C10D_SUM, NULL, NULL)) != C10D_OK || x[0] != 2)
        FAIL(2, "CPU all_reduce before");
    c10d_tensor gpu = c10d_tensor_1d((void *)0x1000, C10D_FLOAT32, 2);
    gpu.device = 0;
    int64_t t0 = c10d_now_ms();
    st = c10d_all_reduce(pg, &gpu, C10D_SUM, NULL, NULL);
    if (st != C10D_EBACKEND)
        FAIL(3, "CUDA all_reduce without a GPU returned %s", c10d_status_name(st));
    if (!strstr(c10d_errmsg(), "no CUDA device visible") &&
        !strstr(c10d_errmsg(), "built without NCCL") && !strstr(c10d_errmsg(), "not found"))
        FAIL(4, "the message does not say why");
    if (!strstr(c10d_errmsg(), "all_reduce on cuda:0"))
        FAIL(5, "the message does not name the call");
    if (c10d_now_ms() - t0 > 2000)
        FAIL(6, "the refusal took %lld ms", (long long)(c10d_now_ms() - t0));
    /* not numbered, nothing broken: the next CPU call is #2 on both ranks */
    x[0] = 1, x[1] = 2;
    if ((st = c10d_all_reduce(pg, &cpu, C10D_SUM, NULL, NULL)) != C10D_OK || x[0] != 2 || x[1] != 4)
        FAIL(7, "CPU all_reduce after the refusal");
    if ((st = c10d_barrier(pg, NULL, NULL)) != C10D_OK)
        FAIL(8, "barrier after the refusal");
    c10d_destroy(pg);
    return 0;
}

START_TEST(cuda_tensor_without_gpu_is_refused_and_host_goes_on)
{
    if (gpu_available()) {
        printf("SKIP cuda_tensor_without_gpu_is_refused_and_host_goes_on: this machine has a "
               "GPU\n");
        return;
    }
    snprintf(job, sizeof job, "%s", world_job("nogpu"));
    ck_assert_int_eq(world_run(2, cuda_without_gpu_body, NULL, 60, NULL), 0);
}
END_TEST

START_TEST(nccl_backend_without_gpu_fails_at_init)
{
    if (gpu_available()) {
        printf("SKIP nccl_backend_without_gpu_fails_at_init: this machine has a GPU\n");
        return;
    }
    snprintf(job, sizeof job, "%s", world_job("nccl-init"));
    c10d_status st;
    int64_t t0 = c10d_now_ms();
    c10d_pg *pg = init_with(0, 2, C10D_BACKEND_NCCL, C10D_VERIFY_SYNC, &st);
    ck_assert_ptr_null(pg);
    ck_assert_int_eq(st, C10D_EBACKEND);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "C10D_BACKEND_NCCL is unavailable"));
    /* at once: not after waiting for the other rank in the rendezvous */
    ck_assert_int_lt(c10d_now_ms() - t0, 2000);
}
END_TEST

static int refusals_body(int rank, int n, void *arg)
{
    c10d_backend be = *(c10d_backend *)arg;
    c10d_status st;
    c10d_pg *pg = init_with(rank, n, be, C10D_VERIFY_SYNC, &st);
    if (!pg)
        FAIL(1, "init");
    float x[4] = {1, 2, 3, 4}, out[8];
    c10d_tensor gpu = c10d_tensor_1d((void *)0x1000, C10D_FLOAT32, 4);
    gpu.device = 0;
    if (be == C10D_BACKEND_HOST) {
        st = c10d_all_reduce(pg, &gpu, C10D_SUM, NULL, NULL);
        if (st != C10D_EINVAL || !strstr(c10d_errmsg(), "host backend, which takes CPU buffers"))
            FAIL(2, "host backend and a CUDA tensor");
    }
    /* one call, two devices */
    c10d_tensor cpu_out = c10d_tensor_1d(out, C10D_FLOAT32, 4 * n);
    st = c10d_all_gather_into_tensor(pg, &cpu_out, &gpu, NULL, NULL);
    if (st != C10D_EINVAL || !strstr(c10d_errmsg(), "must be on one device") ||
        !strstr(c10d_errmsg(), "cuda:0") || !strstr(c10d_errmsg(), "the CPU"))
        FAIL(3, "mixed devices");
    c10d_tensor bad = c10d_tensor_1d(x, C10D_FLOAT32, 4);
    bad.device = -7;
    if ((st = c10d_all_reduce(pg, &bad, C10D_SUM, NULL, NULL)) != C10D_EINVAL)
        FAIL(4, "device -7");
    c10d_tensor cpu = c10d_tensor_1d(x, C10D_FLOAT32, 4);
    if ((st = c10d_all_reduce(pg, &cpu, C10D_SUM, NULL, NULL)) != C10D_OK || x[3] != 4.0f * n)
        FAIL(5, "CPU all_reduce after the refusals");
    c10d_destroy(pg);
    return 0;
}

START_TEST(wrong_devices_are_refused_before_anything_runs)
{
    c10d_backend be = C10D_BACKEND_HOST;
    snprintf(job, sizeof job, "%s", world_job("refuse-host"));
    ck_assert_int_eq(world_run(2, refusals_body, &be, 60, NULL), 0);
    be = C10D_BACKEND_AUTO;
    snprintf(job, sizeof job, "%s", world_job("refuse-auto"));
    ck_assert_int_eq(world_run(2, refusals_body, &be, 60, NULL), 0);
}
END_TEST

/* --- with a GPU --- */

#ifdef C10D_HAVE_NCCL
static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    return c10di_gpu.cudaMalloc(&p, bytes ? bytes : 4) == cudaSuccess ? p : NULL;
}

static void to_dev(void *d, const void *h, size_t bytes)
{
    c10di_gpu.cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
}

static void to_host(void *h, const void *d, size_t bytes)
{
    c10di_gpu.cudaDeviceSynchronize();
    c10di_gpu.cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
}

static c10d_tensor dev_tensor(void *p, int64_t n)
{
    c10d_tensor t = c10d_tensor_1d(p, C10D_FLOAT32, n);
    t.device = 0;
    return t;
}

/* World size 1: every collective's data path on one GPU. */
static int world1_body(int rank, int n, void *arg)
{
    c10d_verify v = *(c10d_verify *)arg;
    c10d_status st;
    c10d_pg *pg = init_with(rank, n, C10D_BACKEND_AUTO, v, &st);
    if (!pg)
        FAIL(1, "init");
    enum { N = 1 << 16 };
    float *h = malloc(N * sizeof *h), *back = malloc(N * sizeof *back);
    for (int i = 0; i < N; i++)
        h[i] = (float)(i % 1000);
    float *d = dev_alloc(N * sizeof *d), *d2 = dev_alloc(N * sizeof *d2);
    to_dev(d, h, N * sizeof *h);
    c10d_tensor t = dev_tensor(d, N), t2 = dev_tensor(d2, N);
    c10d_reduce_op ops[] = {C10D_SUM, C10D_PROD, C10D_MIN, C10D_MAX, C10D_AVG};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if ((st = c10d_all_reduce(pg, &t, ops[i], NULL, NULL)) != C10D_OK)
            FAIL(2, "all_reduce op %d", (int)ops[i]);
    to_host(back, d, N * sizeof *back);
    if (memcmp(back, h, N * sizeof *h) != 0)
        FAIL(3, "all_reduce at world 1 changed the data");
    if ((st = c10d_broadcast(pg, &t, 0, NULL, NULL)) || (st = c10d_reduce(pg, &t, 0, C10D_SUM, NULL, NULL)))
        FAIL(4, "broadcast/reduce");
    /* flat all_gather, in place (the input is the rank's slot) and not */
    if ((st = c10d_all_gather_into_tensor(pg, &t2, &t, NULL, NULL)) != C10D_OK)
        FAIL(5, "all_gather_into_tensor");
    to_host(back, d2, N * sizeof *back);
    if (memcmp(back, h, N * sizeof *h) != 0)
        FAIL(6, "all_gather_into_tensor data");
    if ((st = c10d_all_gather_into_tensor(pg, &t, &t, NULL, NULL)) != C10D_OK)
        FAIL(7, "in-place all_gather_into_tensor");
    /* list variants: a view of one buffer (no copy) and a separate one */
    if ((st = c10d_all_gather(pg, &t2, &t, NULL, NULL)) != C10D_OK)
        FAIL(8, "all_gather");
    if ((st = c10d_reduce_scatter_tensor(pg, &t2, &t, C10D_SUM, NULL, NULL)) ||
        (st = c10d_reduce_scatter(pg, &t2, &t, C10D_SUM, NULL, NULL)))
        FAIL(9, "reduce_scatter");
    if ((st = c10d_all_to_all_single(pg, &t2, &t, NULL, NULL)) ||
        (st = c10d_gather(pg, &t2, &t, 0, NULL, NULL)) ||
        (st = c10d_scatter(pg, &t2, &t, 0, NULL, NULL)) || (st = c10d_barrier(pg, NULL, NULL)))
        FAIL(10, "all_to_all/gather/scatter/barrier");
    to_host(back, d2, N * sizeof *back);
    if (memcmp(back, h, N * sizeof *h) != 0)
        FAIL(11, "scatter data");
    /* async: a work handle that completes, waited on the caller's stream */
    c10d_coll_opts o = C10D_COLL_OPTS_INIT;
    o.async_op = 1;
    c10d_work *w = NULL;
    if ((st = c10d_all_reduce(pg, &t, C10D_SUM, &o, &w)) != C10D_OK || !w)
        FAIL(12, "async all_reduce");
    if ((st = c10d_work_wait(w, C10D_TIMEOUT_DEFAULT)) != C10D_OK)
        FAIL(13, "work wait");
    int64_t until = c10d_now_ms() + 10000;
    while (!c10d_work_is_completed(w) && c10d_now_ms() < until)
        usleep(100);
    if (!c10d_work_is_completed(w))
        FAIL(14, "work never completed");
    c10d_work_free(w);
    /* a CPU call on the same group still goes to the host backend */
    float x = 3;
    c10d_tensor cpu = c10d_tensor_1d(&x, C10D_FLOAT32, 1);
    if ((st = c10d_all_reduce(pg, &cpu, C10D_SUM, NULL, NULL)) != C10D_OK || x != 3)
        FAIL(15, "CPU all_reduce beside NCCL");
    c10di_gpu.cudaFree(d);
    c10di_gpu.cudaFree(d2);
    free(h);
    free(back);
    c10d_destroy(pg);
    return 0;
}

START_TEST(gpu_world1_every_collective)
{
    if (!gpu_available()) {
        printf("SKIP gpu_world1_every_collective: %s\n", c10d_errmsg());
        return;
    }
    c10d_verify modes[] = {C10D_VERIFY_OFF, C10D_VERIFY_ASYNC, C10D_VERIFY_SYNC};
    for (int i = 0; i < 3; i++) {
        snprintf(job, sizeof job, "%s", world_job("gpu1"));
        ck_assert_int_eq(world_run(1, world1_body, &modes[i], 120, NULL), 0);
    }
}
END_TEST

static int two_ranks_possible(void)
{
    return c10di_gpu.devices >= 2 || c10di_gpu.nccl_version >= 23000;
}

static int world2_body(int rank, int n, void *arg)
{
    int die = *(int *)arg;
    setenv("C10D_NCCL_BLOCKING_WAIT", "1", 1);
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.coord_url = coord.url;
    o.job = job;
    o.rank = rank;
    o.world_size = n;
    o.timeout_ms = 60000;
    o.device = rank % c10di_gpu.devices;
    c10d_pg *pg = NULL;
    c10d_status st = c10d_init(&pg, &o);
    if (st != C10D_OK)
        FAIL(1, "init");
    enum { N = 1 << 20 };
    float *h = malloc(N * sizeof *h);
    for (int i = 0; i < N; i++)
        h[i] = (float)(rank + 1);
    float *d = dev_alloc(N * sizeof *d);
    to_dev(d, h, N * sizeof *h);
    c10d_tensor t = dev_tensor(d, N);
    t.device = o.device;
    if ((st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL)) != C10D_OK)
        FAIL(2, "all_reduce");
    to_host(h, d, N * sizeof *h);
    if (h[0] != 3 || h[N - 1] != 3)
        FAIL(3, "sum %g, expected 3", h[0]);
    if (die) {
        if (rank == 1)
            _exit(0); /* dies without a word, while rank 0 is in a collective */
        int64_t t0 = c10d_now_ms();
        st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
        if (st != C10D_EPEERLOST || !strstr(c10d_errmsg(), "rank 1"))
            FAIL(4, "expected EPEERLOST naming rank 1");
        if (c10d_now_ms() - t0 > 5000)
            FAIL(5, "the abort took %lld ms", (long long)(c10d_now_ms() - t0));
    }
    c10d_destroy(pg);
    return 0;
}

/* Join on CUDA tensors: rank 0 joins at once and shadows on its device
 * (identity buffers: zeros, +inf for MIN, a pre-multiplied sum for an AVG
 * over the one active rank); rank 1's results are its own data alone. */
static int join_body(int rank, int n, void *arg)
{
    (void)arg;
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.coord_url = coord.url;
    o.job = job;
    o.rank = rank;
    o.world_size = n;
    o.timeout_ms = 60000;
    o.device = rank % c10di_gpu.devices;
    c10d_pg *pg = NULL;
    c10d_status st = c10d_init(&pg, &o);
    if (st != C10D_OK)
        FAIL(1, "init");
    c10d_join_opts jo = C10D_JOIN_OPTS_INIT;
    jo.divide_by_initial_world_size = 0;
    if ((st = c10d_join_begin(pg, &jo)) != C10D_OK)
        FAIL(2, "join_begin");
    int last = -1;
    if (rank == 1) {
        enum { N = 1 << 16 };
        float *h = malloc(2 * N * sizeof *h);
        float *d = dev_alloc(2 * N * sizeof *d);
        const c10d_reduce_op ops[] = {C10D_SUM, C10D_MIN, C10D_MAX, C10D_PROD, C10D_AVG};
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            for (int i = 0; i < N; i++)
                h[i] = (float)(i % 7) - 3.0f;
            to_dev(d, h, N * sizeof *h);
            c10d_tensor t = dev_tensor(d, N);
            t.device = o.device;
            if ((st = c10d_all_reduce(pg, &t, ops[k], NULL, NULL)) != C10D_OK)
                FAIL(3, "all_reduce %s", c10d_reduce_op_name(ops[k]));
            to_host(h, d, N * sizeof *h);
            for (int i = 0; i < N; i++)
                if (h[i] != (float)(i % 7) - 3.0f)
                    FAIL(4, "%s element %d: %g", c10d_reduce_op_name(ops[k]), i, h[i]);
        }
        for (int i = 0; i < 2 * N; i++) /* reduce_scatter: this rank's block is the second */
            h[i] = (float)i;
        to_dev(d, h, 2 * N * sizeof *h);
        float *d2 = dev_alloc(N * sizeof *d2);
        c10d_tensor in = dev_tensor(d, 2 * N), out = dev_tensor(d2, N);
        in.device = out.device = o.device;
        if ((st = c10d_reduce_scatter_tensor(pg, &out, &in, C10D_SUM, NULL, NULL)) != C10D_OK)
            FAIL(5, "reduce_scatter_tensor");
        to_host(h, d2, N * sizeof *h);
        if (h[0] != (float)N || h[N - 1] != (float)(2 * N - 1))
            FAIL(6, "reduce_scatter: %g .. %g", h[0], h[N - 1]);
        if ((st = c10d_barrier(pg, NULL, NULL)) != C10D_OK)
            FAIL(7, "barrier");
        free(h);
    }
    if ((st = c10d_join_end(pg, &last)) != C10D_OK || last != 1)
        FAIL(8, "join_end (last %d)", last);
    c10d_destroy(pg);
    return 0;
}

START_TEST(gpu_world2_join_shadows_on_cuda)
{
    if (!gpu_available() || !two_ranks_possible()) {
        printf("SKIP gpu_world2_join_shadows_on_cuda: %s\n",
               gpu_available() ? "one GPU and NCCL < 2.30 (no NCCL_MULTI_RANK_GPU_ENABLE)"
                               : c10d_errmsg());
        return;
    }
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
    snprintf(job, sizeof job, "%s", world_job("gpu-join"));
    ck_assert_int_eq(world_run(2, join_body, NULL, 120, NULL), 0);
}
END_TEST

START_TEST(gpu_world2_sum_and_abort_when_a_peer_dies)
{
    if (!gpu_available() || !two_ranks_possible()) {
        printf("SKIP gpu_world2_sum_and_abort_when_a_peer_dies: %s\n",
               gpu_available() ? "one GPU and NCCL < 2.30 (no NCCL_MULTI_RANK_GPU_ENABLE)"
                               : c10d_errmsg());
        return;
    }
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
    int die = 0;
    snprintf(job, sizeof job, "%s", world_job("gpu2"));
    ck_assert_int_eq(world_run(2, world2_body, &die, 120, NULL), 0);
    die = 1;
    snprintf(job, sizeof job, "%s", world_job("gpu2-die"));
    pid_t pids[2];
    world_spawn(2, world2_body, &die, pids);
    ck_assert_int_eq(world_wait(2, pids, 120), 0);
}
END_TEST
#endif

#ifdef C10D_HAVE_NCCL
/* Whether this machine can run the GPU cases, asked in a child process
 * (loading CUDA in the parent would break the ranks it forks); the reason
 * goes into why when it cannot. */
static int gpu_cases_possible(char *why, size_t cap)
{
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(why, cap, "pipe: %s", strerror(errno));
        return 0;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        int ok = gpu_available();
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ok ? "" : c10d_errmsg());
        ssize_t w = write(fd[1], msg, strlen(msg));
        (void)w;
        _exit(ok ? 0 : 1);
    }
    close(fd[1]);
    ssize_t k = read(fd[0], why, cap - 1);
    why[k > 0 ? k : 0] = '\0';
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}
#endif

/* `test_nccl`: what holds without a GPU (and the refusals everywhere).
 * `test_nccl --gpu`: the GPU cases; without a GPU it exits 77, which CTest
 * reports as skipped (SKIP_RETURN_CODE), with the reason on stdout. */
int main(int argc, char **argv)
{
    int gpu = argc > 1 && strcmp(argv[1], "--gpu") == 0;
    if (gpu) {
#ifdef C10D_HAVE_NCCL
        char why[512];
        if (!gpu_cases_possible(why, sizeof why)) {
            printf("SKIP: the GPU cases need a GPU: %s\n", why);
            return 77;
        }
#else
        printf("SKIP: built without NCCL (no CUDA toolkit or NCCL headers at configure time)\n");
        return 77;
#endif
    }
    Suite *s = suite_create("nccl");
    TCase *tc = tcase_create(gpu ? "gpu" : "nccl");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    if (!gpu) {
        tcase_add_test(tc, cuda_tensor_without_gpu_is_refused_and_host_goes_on);
        tcase_add_test(tc, nccl_backend_without_gpu_fails_at_init);
        tcase_add_test(tc, wrong_devices_are_refused_before_anything_runs);
    }
#ifdef C10D_HAVE_NCCL
    if (gpu) {
        tcase_add_test(tc, gpu_world1_every_collective);
        tcase_add_test(tc, gpu_world2_sum_and_abort_when_a_peer_dies);
        tcase_add_test(tc, gpu_world2_join_shadows_on_cuda);
    }
#endif
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
