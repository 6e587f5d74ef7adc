/* A small data-parallel training loop on CPU: every rank fits the same
 * linear model y = w.x + b to its own shard of synthetic data, and the
 * gradients are averaged with all_reduce every step, as DDP does. Run it
 * through the launcher:
 *
 *   c10d-run -n 4 -- ./train_linear [steps]
 *
 * Rank 0 prints the loss; at the end every rank checks that its weights
 * are identical to rank 0's (broadcast and compare), which they must be
 * if every step averaged the same gradients. Set TRAIN_FAIL_RANK=R to make
 * rank R exit in the middle, and see how its peers and the launcher
 * report it. */
#include <c10d/c10d.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIM 8
#define SHARD 256

static double frand(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return ((*state >> 8) & 0xffff) / 65536.0 - 0.5;
}

static int die(const char *what, c10d_status st)
{
    fprintf(stderr, "train_linear: %s: %s: %s\n", what, c10d_status_name(st), c10d_errmsg());
    return 1;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    const char *fail = getenv("TRAIN_FAIL_RANK");
    c10d_pg *pg;
    c10d_status st = c10d_init(&pg, NULL); /* everything from the environment */
    if (st != C10D_OK)
        return die("c10d_init", st);
    int rank = c10d_rank(pg), world = c10d_size(pg);

    /* This rank's shard of y = true_w.x + 0.5 + noise. */
    double true_w[DIM], x[SHARD][DIM], y[SHARD];
    for (int d = 0; d < DIM; d++)
        true_w[d] = d - DIM / 2.0;
    unsigned seed = 1234u + (unsigned)rank;
    for (int i = 0; i < SHARD; i++) {
        y[i] = 0.5;
        for (int d = 0; d < DIM; d++) {
            x[i][d] = frand(&seed) * 4;
            y[i] += true_w[d] * x[i][d];
        }
        y[i] += frand(&seed) * 0.01;
    }

    double params[DIM + 1] = {0}; /* w then b: the same start on every rank */
    const double lr = 0.05;
    for (int step = 0; step < steps; step++) {
        if (fail && atoi(fail) == rank && step == steps / 2) {
            fprintf(stderr, "train_linear: rank %d exiting early (TRAIN_FAIL_RANK)\n", rank);
            return 3;
        }
        double grad[DIM + 2] = {0}; /* dw, db, then the loss */
        for (int i = 0; i < SHARD; i++) {
            double pred = params[DIM], err;
            for (int d = 0; d < DIM; d++)
                pred += params[d] * x[i][d];
            err = pred - y[i];
            for (int d = 0; d < DIM; d++)
                grad[d] += 2 * err * x[i][d] / SHARD;
            grad[DIM] += 2 * err / SHARD;
            grad[DIM + 1] += err * err / SHARD;
        }
        c10d_tensor g = c10d_tensor_1d(grad, C10D_FLOAT64, DIM + 2);
        if ((st = c10d_all_reduce(pg, &g, C10D_AVG, NULL, NULL)) != C10D_OK)
            return die("all_reduce", st);
        for (int d = 0; d <= DIM; d++)
            params[d] -= lr * grad[d];
        if (rank == 0 && (step % 50 == 0 || step == steps - 1))
            printf("step %4d  loss %.6f\n", step, grad[DIM + 1]);
    }

    double ref[DIM + 1];
    memcpy(ref, params, sizeof ref);
    c10d_tensor t = c10d_tensor_1d(ref, C10D_FLOAT64, DIM + 1);
    if ((st = c10d_broadcast(pg, &t, 0, NULL, NULL)) != C10D_OK)
        return die("broadcast", st);
    int same = memcmp(ref, params, sizeof ref) == 0;
    int64_t agree = same;
    c10d_tensor a = c10d_tensor_1d(&agree, C10D_INT64, 1);
    if ((st = c10d_all_reduce(pg, &a, C10D_SUM, NULL, NULL)) != C10D_OK)
        return die("all_reduce", st);
    if (rank == 0) {
        printf("trained on %d ranks x %d samples: w[0] = %.3f (true %.1f), b = %.3f (true 0.5)\n",
               world, SHARD, params[0], true_w[0], params[DIM]);
        printf("weights identical on %lld of %d ranks\n", (long long)agree, world);
    }
    c10d_destroy(pg);
    return agree == world && fabs(params[DIM] - 0.5) < 0.05 ? 0 : 4;
}
