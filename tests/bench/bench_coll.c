/* Collective benchmark of the host backend, one rank of it; run through
 * the launcher (run_coll_bench.sh does):
 *
 *   c10d-run -n 2 -- bench_coll
 *
 * Rank 0 prints the same figures as tests/bench/anchors/torch_gloo_bench.py,
 * so the two can be read side by side: init time, 4-byte all_reduce
 * latency, barrier latency, 1 MiB and 64 MiB all_reduce bus bandwidth
 * (bytes/t * 2(n-1)/n), and all_gather of 4 MiB a rank into a list of views
 * against all_gather_into_tensor into the flat buffer; then a 4-byte
 * send/recv between ranks 0 and 1 (half a ping-pong's round trip, sync
 * calls) and the exchange torch's batch_isend_irecv makes of it (irecv,
 * send, wait, on both). */
#include <c10d/c10d.h>

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

#define CHECK(call)                                                                              \
    do {                                                                                         \
        c10d_status st_ = (call);                                                                \
        if (st_ != C10D_OK) {                                                                    \
            fprintf(stderr, "bench_coll: %s: %s\n", #call, c10d_errmsg());                       \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    double t0 = now();
    c10d_pg *pg;
    CHECK(c10d_init(&pg, NULL));
    double tinit = now() - t0;
    int rank = c10d_rank(pg), world = c10d_size(pg);

    float x = 1;
    c10d_tensor tx = c10d_tensor_1d(&x, C10D_FLOAT32, 1);
    for (int i = 0; i < 50; i++)
        CHECK(c10d_all_reduce(pg, &tx, C10D_SUM, NULL, NULL));
    t0 = now();
    for (int i = 0; i < iters; i++)
        CHECK(c10d_all_reduce(pg, &tx, C10D_SUM, NULL, NULL));
    double small = (now() - t0) / iters;
    t0 = now();
    for (int i = 0; i < iters; i++)
        CHECK(c10d_barrier(pg, NULL, NULL));
    double bar = (now() - t0) / iters;

    double dt[2], bw[2];
    size_t sizes[2] = {1u << 20, 1u << 26};
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k] / 4;
        float *y = malloc(sizes[k]);
        for (size_t i = 0; i < n; i++)
            y[i] = 1;
        c10d_tensor ty = c10d_tensor_1d(y, C10D_FLOAT32, (int64_t)n);
        for (int i = 0; i < 2; i++)
            CHECK(c10d_all_reduce(pg, &ty, C10D_SUM, NULL, NULL));
        /* More iterations than the gloo anchor's 10/50: the verification
         * modes are compared with each other at the few-percent level. */
        int it = k ? 30 : 400;
        t0 = now();
        for (int i = 0; i < it; i++)
            CHECK(c10d_all_reduce(pg, &ty, C10D_SUM, NULL, NULL));
        dt[k] = (now() - t0) / it;
        bw[k] = sizes[k] / dt[k] * 2 * (world - 1) / world / 1e9;
        free(y);
    }

    size_t per = (1u << 22) / 4;
    float *out = calloc(per * (size_t)world, 4), *in = malloc(per * 4);
    for (size_t i = 0; i < per; i++)
        in[i] = 1;
    c10d_tensor *views = calloc((size_t)world, sizeof *views);
    for (int r = 0; r < world; r++)
        views[r] = c10d_tensor_1d(out + (size_t)r * per, C10D_FLOAT32, (int64_t)per);
    c10d_tensor tin = c10d_tensor_1d(in, C10D_FLOAT32, (int64_t)per);
    c10d_tensor tout = c10d_tensor_1d(out, C10D_FLOAT32, (int64_t)(per * (size_t)world));
    double agl = 0, agf = 0;
    for (int round = 0; round < 2; round++) { /* alternate, so neither gets the warm cache */
        for (int i = 0; i < 2; i++)
            CHECK(c10d_all_gather(pg, views, &tin, NULL, NULL));
        t0 = now();
        for (int i = 0; i < 10; i++)
            CHECK(c10d_all_gather(pg, views, &tin, NULL, NULL));
        agl += (now() - t0) / 10 / 2;
        for (int i = 0; i < 2; i++)
            CHECK(c10d_all_gather_into_tensor(pg, &tout, &tin, NULL, NULL));
        t0 = now();
        for (int i = 0; i < 10; i++)
            CHECK(c10d_all_gather_into_tensor(pg, &tout, &tin, NULL, NULL));
        agf += (now() - t0) / 10 / 2;
    }
    /* Point to point between ranks 0 and 1 (the others wait at the barrier). */
    double pp = 0, xch = 0;
    if (rank < 2) {
        int peer = 1 - rank, pit = iters;
        c10d_tensor tp = c10d_tensor_1d(&x, C10D_FLOAT32, 1);
        for (int round = 0; round < 2; round++) {
            t0 = now();
            for (int i = 0; i < pit; i++) {
                if (rank == 0) {
                    CHECK(c10d_send(pg, &tp, peer, 0, NULL, NULL));
                    CHECK(c10d_recv(pg, &tp, peer, 0, NULL, NULL));
                } else {
                    CHECK(c10d_recv(pg, &tp, peer, 0, NULL, NULL));
                    CHECK(c10d_send(pg, &tp, peer, 0, NULL, NULL));
                }
            }
            pp = (now() - t0) / pit / 2;
        }
        float y = 0;
        c10d_tensor ty = c10d_tensor_1d(&y, C10D_FLOAT32, 1);
        c10d_coll_opts ao = C10D_COLL_OPTS_INIT;
        ao.async_op = 1;
        for (int round = 0; round < 2; round++) {
            t0 = now();
            for (int i = 0; i < pit; i++) {
                c10d_work *w = NULL;
                CHECK(c10d_recv(pg, &ty, peer, 1, &ao, &w));
                CHECK(c10d_send(pg, &tp, peer, 1, NULL, NULL));
                CHECK(c10d_work_wait(w, C10D_TIMEOUT_DEFAULT));
                c10d_work_free(w);
            }
            xch = (now() - t0) / pit;
        }
    }
    CHECK(c10d_barrier(pg, NULL, NULL));
    if (rank == 0) {
        const char *v = getenv("C10D_VERIFY");
        printf("c10d world=%d verify=%s init=%.1fms allreduce(4B)=%.1fus barrier=%.1fus\n", world,
               v && *v ? v : "sync", tinit * 1e3, small * 1e6, bar * 1e6);
        for (int k = 0; k < 2; k++)
            printf("  allreduce %zuMiB: %.2f ms busbw=%.2f GB/s\n", sizes[k] >> 20, dt[k] * 1e3,
                   bw[k]);
        printf("  all_gather(list of views) 4MiB/rank: %.2f ms\n", agl * 1e3);
        printf("  all_gather_into_tensor(flat) 4MiB/rank: %.2f ms\n", agf * 1e3);
        printf("  send/recv(4B) one way: %.1f us; irecv+send+wait(4B) exchange: %.1f us\n",
               pp * 1e6, xch * 1e6);
    }
    free(views);
    free(out);
    free(in);
    c10d_destroy(pg);
    return 0;
}
