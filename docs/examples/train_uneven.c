/* Data-parallel training where ranks hold different numbers of batches
 * (uneven inputs), the case that hangs DDP without Join. Every rank fits
 * the same linear model to its own shard; gradients are averaged with
 * all_reduce every step, and every 10th step the ranks meet at a barrier
 * (as a logging or checkpoint step would). Rank r has 12 + 5r batches an
 * epoch, so the ranks run out at different steps:
 *
 *   c10d-run -n 4 -- ./train_uneven [epochs]
 *
 * Each epoch is a join region (c10d/join.h): a rank out of batches calls
 * c10d_join_end and shadows the others' all_reduces (contributing zeros)
 * and barriers until the last rank is done; no extra collective runs per
 * step. The joined ranks' weights fall behind, so at the end of the epoch
 * every rank takes the last joiner's (a broadcast from it), as DDP's join
 * does. At the end every rank checks that its weights equal rank 0's. */
#include <c10d/c10d.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIM 8
#define BATCH 32

static double frand(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return ((*state >> 8) & 0xffff) / 65536.0 - 0.5;
}

static int die(const char *what, c10d_status st)
{
    fprintf(stderr, "train_uneven: %s: %s: %s\n", what, c10d_status_name(st), c10d_errmsg());
    return 1;
}

int main(int argc, char **argv)
{
    int epochs = argc > 1 ? atoi(argv[1]) : 3;
    c10d_pg *pg;
    c10d_status st = c10d_init(&pg, NULL); /* everything from the environment */
    if (st != C10D_OK)
        return die("c10d_init", st);
    int rank = c10d_rank(pg), world = c10d_size(pg);
    int batches = 12 + 5 * rank; /* uneven on purpose */

    double true_w[DIM];
    for (int d = 0; d < DIM; d++)
        true_w[d] = d - DIM / 2.0;
    unsigned seed = 4321u + (unsigned)rank;
    double params[DIM + 1] = {0}; /* w then b: the same start on every rank */
    const double lr = 0.05;
    long step = 0;
    for (int epoch = 0; epoch < epochs; epoch++) {
        c10d_join_opts jo = C10D_JOIN_OPTS_INIT; /* AVG divides by the world size, as DDP */
        if ((st = c10d_join_begin(pg, &jo)) != C10D_OK)
            return die("join_begin", st);
        double loss = 0;
        for (int b = 0; b < batches; b++, step++) {
            double grad[DIM + 2] = {0}; /* dw, db, then the loss */
            for (int i = 0; i < BATCH; i++) { /* a fresh batch of y = true_w.x + 0.5 */
                double x[DIM], y = 0.5, pred = params[DIM], err;
                for (int d = 0; d < DIM; d++) {
                    x[d] = frand(&seed) * 4;
                    y += true_w[d] * x[d];
                    pred += params[d] * x[d];
                }
                err = pred - y;
                for (int d = 0; d < DIM; d++)
                    grad[d] += 2 * err * x[d] / BATCH;
                grad[DIM] += 2 * err / BATCH;
                grad[DIM + 1] += err * err / BATCH;
            }
            c10d_tensor g = c10d_tensor_1d(grad, C10D_FLOAT64, DIM + 2);
            if ((st = c10d_all_reduce(pg, &g, C10D_AVG, NULL, NULL)) != C10D_OK)
                return die("all_reduce", st);
            /* The average over the world, joined ranks counting as zeros:
             * rescale to the ranks that contributed. */
            double scale = (double)world / c10d_active_ranks(pg);
            for (int d = 0; d <= DIM; d++)
                params[d] -= lr * grad[d] * scale;
            loss = grad[DIM + 1] * scale;
            if (b % 10 == 9 && (st = c10d_barrier(pg, NULL, NULL)) != C10D_OK)
                return die("barrier", st);
        }
        int last = -1;
        if ((st = c10d_join_end(pg, &last)) != C10D_OK) /* out of batches */
            return die("join_end", st);
        /* The last joiner trained on every step: everyone takes its weights. */
        c10d_tensor p = c10d_tensor_1d(params, C10D_FLOAT64, DIM + 1);
        if ((st = c10d_broadcast(pg, &p, last, NULL, NULL)) != C10D_OK)
            return die("broadcast", st);
        if (rank == last)
            printf("epoch %d: %d to %d batches a rank; rank %d joined last, loss %.6f\n", epoch,
                   12, 12 + 5 * (world - 1), last, loss);
    }

    double ref[DIM + 1];
    memcpy(ref, params, sizeof ref);
    c10d_tensor t = c10d_tensor_1d(ref, C10D_FLOAT64, DIM + 1);
    if ((st = c10d_broadcast(pg, &t, 0, NULL, NULL)) != C10D_OK)
        return die("broadcast", st);
    int64_t agree = memcmp(ref, params, sizeof ref) == 0;
    c10d_tensor a = c10d_tensor_1d(&agree, C10D_INT64, 1);
    if ((st = c10d_all_reduce(pg, &a, C10D_SUM, NULL, NULL)) != C10D_OK)
        return die("all_reduce", st);
    if (rank == 0)
        printf("trained %d epochs on %d ranks with uneven batches: b = %.3f (true 0.5); "
               "weights identical on %lld of %d ranks\n", epochs, world, params[DIM],
               (long long)agree, world);
    c10d_destroy(pg);
    return agree == world && fabs(params[DIM] - 0.5) < 0.05 ? 0 : 4;
}
