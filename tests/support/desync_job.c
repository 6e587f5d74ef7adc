/* A two-rank job that desynchronises, for the shell tests that need a real
 * job's records (tests/integration/test_trace_chrome.sh):
 *
 *   desync_job COORD_URL JOB N
 *
 * forks ranks 0 and 1, which run N checked collectives together (ALL_REDUCE
 * and BROADCAST in turn: a trace row each, a few ms apart); then rank
 * 0 calls ALL_REDUCE and rank 1 BROADCAST as collective N+1, which the
 * coordinator finds (C10D_EDESYNC). Both then leave (c10d_destroy). Exits
 * 0 when both ranks saw the first N succeed and collective N+1 fail. */
#include <c10d/c10d.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int rank_main(const char *url, const char *job, int rank, int n)
{
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.coord_url = url;
    o.rank = rank;
    o.world_size = 2;
    o.job = job;
    o.verify = C10D_VERIFY_SYNC;
    o.timeout_ms = 20000;
    c10d_pg *pg = NULL;
    if (c10d_init(&pg, &o) != C10D_OK) {
        fprintf(stderr, "desync_job: rank %d: c10d_init: %s\n", rank, c10d_errmsg());
        return 2;
    }
    float x[4] = {1, 2, 3, 4};
    c10d_tensor t = c10d_tensor_1d(x, C10D_FLOAT32, 4);
    for (int i = 0; i < n; i++) {
        usleep(2000);
        c10d_status st = i % 2 ? c10d_broadcast(pg, &t, 0, NULL, NULL)
                               : c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
        if (st != C10D_OK) {
            fprintf(stderr, "desync_job: rank %d: all_reduce #%d: %s\n", rank, i + 1,
                    c10d_errmsg());
            c10d_destroy(pg);
            return 3;
        }
    }
    /* Rank 1 comes late to the desync: its peer waits in the check. */
    usleep(rank ? 50000 : 20000);
    c10d_status st = rank == 0 ? c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL)
                               : c10d_broadcast(pg, &t, 0, NULL, NULL);
    int rc = st == C10D_OK ? 4 : 0;
    if (rc)
        fprintf(stderr, "desync_job: rank %d: collective #%d did not fail\n", rank, n + 1);
    c10d_destroy(pg);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: desync_job COORD_URL JOB N\n");
        return 2;
    }
    int n = atoi(argv[3]);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        if ((pids[r] = fork()) < 0)
            return 2;
        if (pids[r] == 0)
            _exit(rank_main(argv[1], argv[2], r, n));
    }
    int failed = 0;
    for (int r = 0; r < 2; r++) {
        int st;
        if (waitpid(pids[r], &st, 0) != pids[r] || !WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "desync_job: rank %d failed\n", r);
            failed = 1;
        }
    }
    return failed;
}
