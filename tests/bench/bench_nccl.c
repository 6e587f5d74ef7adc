/* The NCCL data plane against the same NCCL calls made directly, one rank
 * of it, nccl-tests style; run through the launcher (run_nccl_bench.sh):
 *
 *   c10d-run -n 1 -- bench_nccl [max_bytes]
 *
 * For all_reduce and all_gather_into_tensor, sizes 8 B to 256 MiB (x4): the
 * time per call, algbw and busbw of raw NCCL (a communicator this program
 * makes itself) and of c10d with verification OFF, ASYNC and SYNC, each
 * c10d column with its ratio to raw. Calls are issued back to back and the
 * device synchronised at the end, as nccl-tests does, so the CPU runs
 * ahead of the GPU once calls are long enough; SYNC's round trip to the
 * coordinator is then hidden, and its added time per call is printed.
 * Last: list all_gather into views of one buffer (no copy) against a list
 * of separate buffers (the flatten-and-copy path) at 1 GiB total.
 * Without a GPU it says why and exits 0. */
#include "gpu_api.h"
#include "backend/backends.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define CK(call)                                                                                 \
    do {                                                                                         \
        c10d_status st_ = (call);                                                                \
        if (st_ != C10D_OK) {                                                                    \
            fprintf(stderr, "bench_nccl: %s: %s\n", #call, c10d_errmsg());                       \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)
#define CU(call)                                                                                 \
    do {                                                                                         \
        int e_ = (int)(call);                                                                    \
        if (e_ != 0) {                                                                           \
            fprintf(stderr, "bench_nccl: %s failed (%d)\n", #call, e_);                          \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

static int rank, world, dev;
static ncclComm_t raw;
static cudaStream_t raw_stream;
static void *in, *out; /* device buffers: max bytes in, world * max out */

enum { AR, AG };

static double time_raw(int what, size_t bytes, int iters)
{
    size_t count = bytes / 4;
    double t0 = 0;
    for (int i = -2; i < iters; i++) {
        if (i == 0) {
            CU(c10di_gpu.cudaStreamSynchronize(raw_stream));
            t0 = now();
        }
        if (what == AR)
            CU(c10di_gpu.ncclAllReduce(in, in, count, ncclFloat32, ncclSum, raw, raw_stream));
        else
            CU(c10di_gpu.ncclAllGather(in, out, count, ncclFloat32, raw, raw_stream));
    }
    CU(c10di_gpu.cudaStreamSynchronize(raw_stream));
    return (now() - t0) / iters;
}

static double time_c10d(c10d_pg *pg, int what, size_t bytes, int iters)
{
    size_t count = bytes / 4;
    c10d_tensor ti = c10d_tensor_1d(in, C10D_FLOAT32, (int64_t)count);
    c10d_tensor to = c10d_tensor_1d(out, C10D_FLOAT32, (int64_t)count * world);
    ti.device = to.device = dev;
    double t0 = 0;
    for (int i = -2; i < iters; i++) {
        if (i == 0) {
            CU(c10di_gpu.cudaDeviceSynchronize());
            t0 = now();
        }
        if (what == AR)
            CK(c10d_all_reduce(pg, &ti, C10D_SUM, NULL, NULL));
        else
            CK(c10d_all_gather_into_tensor(pg, &to, &ti, NULL, NULL));
    }
    CU(c10di_gpu.cudaDeviceSynchronize());
    return (now() - t0) / iters;
}

static c10d_pg *init_mode(c10d_verify v, const char *tag)
{
    char job[256];
    const char *base = getenv("C10D_JOB");
    snprintf(job, sizeof job, "%s-%s", base ? base : "bench_nccl", tag);
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.job = job;
    o.verify = v;
    o.device = dev;
    c10d_pg *pg = NULL;
    CK(c10d_init(&pg, &o));
    return pg;
}

static void make_raw(void)
{
    c10d_store *s;
    CK(c10d_store_connect(&s, NULL, NULL));
    char key[256];
    const char *base = getenv("C10D_JOB");
    snprintf(key, sizeof key, "bench_nccl/%s/raw_id", base ? base : "bench");
    ncclUniqueId id;
    if (rank == 0) {
        CU(c10di_gpu.ncclGetUniqueId(&id));
        CK(c10d_store_set(s, key, &id, sizeof id));
    } else {
        void *v;
        size_t len;
        CK(c10d_store_get(s, key, &v, &len, 60000));
        memcpy(&id, v, sizeof id);
        c10d_free(v);
    }
    c10d_store_close(s);
    CU(c10di_gpu.ncclCommInitRank(&raw, world, id, rank));
    CU(c10di_gpu.cudaStreamCreateWithFlags(&raw_stream, cudaStreamNonBlocking));
}

int main(int argc, char **argv)
{
    size_t max = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)256 << 20;
    rank = (int)c10di_env_long("RANK", 0);
    world = (int)c10di_env_long("WORLD_SIZE", 1);
    if (c10di_backend_available(C10DI_DEV_CUDA) != C10D_OK) {
        if (rank == 0)
            printf("bench_nccl: skipped: %s\n", c10d_errmsg());
        return 0;
    }
    dev = (int)(c10di_env_long("LOCAL_RANK", rank) % c10di_gpu.devices);
    CU(c10di_gpu.cudaSetDevice(dev));
    CU(c10di_gpu.cudaMalloc(&in, max));
    CU(c10di_gpu.cudaMalloc(&out, max * (size_t)world));
    CU(c10di_gpu.cudaMemsetAsync(in, 0, max, NULL));
    make_raw();
    c10d_verify modes[3] = {C10D_VERIFY_OFF, C10D_VERIFY_ASYNC, C10D_VERIFY_SYNC};
    const char *names[3] = {"off", "async", "sync"};
    c10d_pg *pgs[3];
    for (int m = 0; m < 3; m++)
        pgs[m] = init_mode(modes[m], names[m]);
    if (rank == 0)
        printf("# bench_nccl: world %d, cuda:%d, NCCL %d (%s)\n"
               "# time in us per call; ratio = c10d / raw; busbw in GB/s\n", world, dev,
               c10di_gpu.nccl_version, c10di_gpu.nccl_path);
    for (int what = AR; what <= AG; what++) {
        if (rank == 0)
            printf("\n%-22s %12s %9s %8s %8s | %9s %6s | %9s %6s | %9s %6s %9s\n",
                   what == AR ? "all_reduce" : "all_gather_into_tensor", "bytes", "raw us",
                   "algbw", "busbw", "OFF us", "ratio", "ASYNC us", "ratio", "SYNC us",
                   "ratio", "SYNC+us");
        for (size_t bytes = 8; bytes <= max; bytes *= 4) {
            int iters = bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 50 : 20;
            double r = time_raw(what, bytes, iters);
            double t[3];
            for (int m = 0; m < 3; m++)
                t[m] = time_c10d(pgs[m], what, bytes, iters);
            double r2 = time_raw(what, bytes, iters); /* raw again: the noise floor */
            if (r2 < r)
                r = r2;
            size_t moved = what == AR ? bytes : bytes * (size_t)world;
            double algbw = moved / r / 1e9;
            double factor = what == AR ? 2.0 * (world - 1) / world : (double)(world - 1) / world;
            if (rank == 0)
                printf("%-22s %12zu %9.1f %8.2f %8.2f | %9.1f %6.3f | %9.1f %6.3f | %9.1f %6.3f "
                       "%9.1f\n", "", moved, r * 1e6, algbw, algbw * (world > 1 ? factor : 1),
                       t[0] * 1e6, t[0] / r, t[1] * 1e6, t[1] / r, t[2] * 1e6, t[2] / r,
                       (t[2] - t[0]) * 1e6);
        }
    }
    /* list all_gather at 1 GiB total: views of one buffer vs separate buffers */
    size_t total = (size_t)1 << 30, per = total / (size_t)world;
    void *flat = NULL, *mine = NULL;
    CU(c10di_gpu.cudaMalloc(&flat, total));
    CU(c10di_gpu.cudaMalloc(&mine, per));
    c10d_tensor *views = calloc((size_t)world, sizeof *views);
    c10d_tensor *apart = calloc((size_t)world, sizeof *apart);
    for (int i = 0; i < world; i++) {
        views[i] = c10d_tensor_1d((char *)flat + (size_t)i * per, C10D_UINT8, (int64_t)per);
        views[i].device = dev;
        void *p = NULL;
        CU(c10di_gpu.cudaMalloc(&p, per));
        apart[i] = c10d_tensor_1d(p, C10D_UINT8, (int64_t)per);
        apart[i].device = dev;
    }
    c10d_tensor ti = c10d_tensor_1d(mine, C10D_UINT8, (int64_t)per);
    ti.device = dev;
    double tv = 1e9, ta = 1e9;
    for (int round = 0; round < 5; round++) {
        double t0 = now();
        CK(c10d_all_gather(pgs[0], views, &ti, NULL, NULL));
        CU(c10di_gpu.cudaDeviceSynchronize());
        double t1 = now();
        CK(c10d_all_gather(pgs[0], apart, &ti, NULL, NULL));
        CU(c10di_gpu.cudaDeviceSynchronize());
        double t2 = now();
        if (round > 0) { /* the first round allocates the scratch buffer */
            tv = t1 - t0 < tv ? t1 - t0 : tv;
            ta = t2 - t1 < ta ? t2 - t1 : ta;
        }
    }
    if (rank == 0)
        printf("\nlist all_gather, 1 GiB total: views of one buffer %.2f ms, separate buffers "
               "(flatten + copy) %.2f ms: views %.2fx faster\n", tv * 1e3, ta * 1e3, ta / tv);
    for (int m = 0; m < 3; m++)
        c10d_destroy(pgs[m]);
    c10di_gpu.ncclCommDestroy(raw);
    return 0;
}
