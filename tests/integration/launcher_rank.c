/* A rank for test_launcher.sh, doing what its first argument says:
 *
 *   env      prints the launcher's variables, one NAME=VALUE a line
 *   partial  prints "part-R-" and, after a pause in which the other ranks
 *            print whole lines, "end-R" and its newline
 *   desync   two all_reduces; at the second, rank 1 calls a barrier
 *            instead, after rank 0 entered its all_reduce (so the
 *            coordinator's report names rank 1 as the one that called
 *            something else); exits 1 on the error
 *   restart  rank 1 exits 3 in attempt 0 (TORCHELASTIC_RESTART_COUNT=0),
 *            after the job formed; every rank then meets again in an
 *            all_reduce and prints the sum and its attempt */
#include <c10d/c10d.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int die(const char *what, c10d_status st)
{
    fprintf(stderr, "launcher_rank: %s: %s: %s\n", what, c10d_status_name(st), c10d_errmsg());
    return 1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *env_rank = getenv("RANK");
    int r = env_rank ? atoi(env_rank) : -1;
    if (!strcmp(mode, "env")) {
        const char *names[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                               "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE",
                               "ROLE_NAME", "TORCHELASTIC_RESTART_COUNT",
                               "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "C10D_JOB",
                               "C10D_JOB_KEY"};
        for (size_t i = 0; i < sizeof names / sizeof *names; i++)
            printf("%s=%s\n", names[i], getenv(names[i]) ? getenv(names[i]) : "(unset)");
        return 0;
    }
    if (!strcmp(mode, "partial")) {
        if (r == 0) {
            printf("part-0-");
            fflush(stdout);
            usleep(600 * 1000); /* rank 1 prints its lines meanwhile */
            printf("end-0\n");
        } else {
            usleep(200 * 1000);
            printf("line-%d-a\nline-%d-b\n", r, r);
        }
        return 0;
    }
    c10d_pg *pg;
    c10d_status st = c10d_init(&pg, NULL);
    if (st != C10D_OK)
        return die("c10d_init", st);
    int rank = c10d_rank(pg);
    double v[2] = {1, 2};
    c10d_tensor t = c10d_tensor_1d(v, C10D_FLOAT64, 2);
    if (!strcmp(mode, "desync")) {
        if ((st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL)) != C10D_OK)
            return die("all_reduce #1", st);
        if (rank == 1) {
            usleep(500 * 1000); /* after rank 0: the coordinator names rank 1 second */
            st = c10d_barrier(pg, NULL, NULL);
        } else {
            st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
        }
        if (st != C10D_OK)
            return die("collective #2", st);
        c10d_destroy(pg);
        return 0;
    }
    if (!strcmp(mode, "restart")) {
        const char *attempt = getenv("TORCHELASTIC_RESTART_COUNT");
        if ((st = c10d_barrier(pg, NULL, NULL)) != C10D_OK)
            return die("barrier", st);
        if (rank == 1 && attempt && !strcmp(attempt, "0")) {
            fprintf(stderr, "launcher_rank: rank 1 fails attempt 0\n");
            return 3;
        }
        if ((st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL)) != C10D_OK)
            return die("all_reduce", st);
        printf("sum %g attempt %s\n", v[0], attempt ? attempt : "(unset)");
        c10d_destroy(pg);
        return 0;
    }
    fprintf(stderr, "launcher_rank: unknown mode '%s'\n", mode);
    return 2;
}
