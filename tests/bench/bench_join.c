/* What a join region costs per step, one rank of it; run through the
 * launcher (run_join_bench.sh does, for each verification mode):
 *
 *   c10d-run -n 2 -- bench_join [STEPS]
 *
 * A step is one all_reduce (SUM) of 4 B or 1 MiB. For each size, three
 * ways, alternated over three rounds (the minimum of each is printed):
 *   plain      outside any join region
 *   region     inside c10d_join_begin .. c10d_join_end, nobody joined
 *              (target: <= 1.05x plain)
 *   joined     inside a region in which rank 0 joined at once, so every
 *              step is shadowed by it (target: <= 1.2x plain)
 * Step times are those of the last rank, which never joins. For the
 * joined way a second figure counts, spread over the steps, the region's
 * end too: join_end and a barrier after it, which waits until the joined
 * rank has shadowed every step (where the last active rank does not wait
 * for it per step, that is where it catches up). The anchor,
 * tests/bench/anchors/torch_join_bench.py, prints what torch's Join costs a
 * small DDP model on gloo (2 extra all_reduces a step). */
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
            fprintf(stderr, "bench_join: %s: %s\n", #call, c10d_errmsg());                       \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

enum { PLAIN, REGION, JOINED, WAYS };

/* Seconds per step of `steps` all_reduces on t, one way; *with_end: the
 * same with join_end and the barrier after it counted. */
static double run(c10d_pg *pg, c10d_tensor *t, int steps, int way, double *with_end)
{
    int rank = c10d_rank(pg), last;
    if (way != PLAIN)
        CHECK(c10d_join_begin(pg, NULL));
    if (way == JOINED && rank == 0) {
        CHECK(c10d_join_end(pg, &last)); /* shadows every step below */
        CHECK(c10d_barrier(pg, NULL, NULL));
        return 0;
    }
    CHECK(c10d_barrier(pg, NULL, NULL)); /* start together (a joined rank shadows it) */
    double t0 = now();
    for (int i = 0; i < steps; i++)
        CHECK(c10d_all_reduce(pg, t, C10D_SUM, NULL, NULL));
    double dt = (now() - t0) / steps;
    if (way != PLAIN)
        CHECK(c10d_join_end(pg, &last));
    if (way == JOINED) {
        CHECK(c10d_barrier(pg, NULL, NULL)); /* the joined rank is out of its join_end */
        *with_end = (now() - t0) / steps;
    }
    return dt;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 2000;
    c10d_pg *pg;
    CHECK(c10d_init(&pg, NULL));
    int rank = c10d_rank(pg), world = c10d_size(pg);
    size_t sizes[2] = {4, 1u << 20};
    const char *names[2] = {"4B", "1MiB"};
    const char *v = getenv("C10D_VERIFY");
    if (rank == world - 1)
        printf("c10d join world=%d verify=%s\n", world, v && *v ? v : "sync");
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k] / 4;
        float *y = calloc(n, 4);
        c10d_tensor t = c10d_tensor_1d(y, C10D_FLOAT32, (int64_t)n);
        int it = k ? steps / 10 : steps;
        double best[WAYS] = {1e9, 1e9, 1e9}, best_end = 1e9, end = 0;
        for (int i = 0; i < 20; i++) /* warm the links */
            CHECK(c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL));
        for (int round = 0; round < 3; round++)
            for (int way = 0; way < WAYS; way++) {
                double dt = run(pg, &t, it, way, &end);
                if (dt > 0 && dt < best[way])
                    best[way] = dt;
                if (way == JOINED && end > 0 && end < best_end)
                    best_end = end;
            }
        if (rank == world - 1)
            printf("  allreduce %-4s step: plain %.1f us, in a region %.1f us (%.2fx), "
                   "one rank joined %.1f us (%.2fx; %.2fx with the region's end)\n", names[k],
                   best[PLAIN] * 1e6, best[REGION] * 1e6, best[REGION] / best[PLAIN],
                   best[JOINED] * 1e6, best[JOINED] / best[PLAIN], best_end / best[PLAIN]);
        free(y);
    }
    c10d_destroy(pg);
    return 0;
}
