#include "world_proc.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void world_spawn(int n, rank_fn fn, void *arg, pid_t *pids)
{
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(300); /* never outlive a stuck test */
            _exit(fn(r, n, arg));
        }
        pids[r] = pid;
    }
}

int world_wait(int n, pid_t *pids, int timeout_s)
{
    int failed = 0, left = n;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < n; r++)
                if (pids[r] == p) {
                    pids[r] = -pids[r];
                    left--;
                    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                        failed++;
                        if (WIFSIGNALED(st))
                            fprintf(stderr, "rank %d killed by signal %d\n", r, WTERMSIG(st));
                        else
                            fprintf(stderr, "rank %d exited with %d\n", r, WEXITSTATUS(st));
                    }
                }
            continue;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > timeout_s) {
            for (int r = 0; r < n; r++)
                if (pids[r] > 0) {
                    fprintf(stderr, "rank %d still running after %d s: killed\n", r, timeout_s);
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], NULL, 0);
                    pids[r] = -pids[r];
                    failed++;
                    left--;
                }
            break;
        }
        usleep(2000);
    }
    for (int r = 0; r < n; r++)
        pids[r] = pids[r] < 0 ? -pids[r] : pids[r];
    return failed;
}

int world_run(int n, rank_fn fn, void *arg, int timeout_s, pid_t *pids)
{
    pid_t local[64];
    pid_t *p = pids ? pids : local;
    world_spawn(n, fn, arg, p);
    return world_wait(n, p, timeout_s);
}

c10d_pg *world_init(const char *url, const char *job, int rank, int n, int timeout_ms)
{
    return world_init_verify(url, job, rank, n, timeout_ms, C10D_VERIFY_DEFAULT);
}

c10d_pg *world_init_verify(const char *url, const char *job, int rank, int n, int timeout_ms,
                           c10d_verify mode)
{
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.coord_url = url;
    o.job = job;
    o.rank = rank;
    o.world_size = n;
    o.timeout_ms = timeout_ms;
    o.verify = mode;
    c10d_pg *pg = NULL;
    c10d_status st = c10d_init(&pg, &o);
    if (st != C10D_OK) {
        fprintf(stderr, "rank %d: c10d_init: %s: %s\n", rank, c10d_status_name(st),
                c10d_errmsg());
        return NULL;
    }
    return pg;
}

coord_proc world_coord;

void world_coord_start(void)
{
    coord_init(&world_coord);
    ck_assert_int_eq(coord_start(&world_coord, NULL, NULL, NULL), 0);
}

void world_coord_stop(void)
{
    coord_cleanup(&world_coord);
}

const char *world_job(const char *base)
{
    static char buf[128];
    static int counter;
    snprintf(buf, sizeof buf, "%s-%d-%d", base, (int)getpid(), ++counter);
    return buf;
}

int world_allreduce_until(c10d_pg *pg, int rank, int n, volatile long long *progress,
                          volatile long long *stop_at)
{
    for (long long i = 0; i < *stop_at; i++) {
        float x[4];
        for (int k = 0; k < 4; k++)
            x[k] = (float)((rank + 1) * (i % 7 + 1) + k);
        c10d_tensor t = c10d_tensor_1d(x, C10D_FLOAT32, 4);
        if (c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK) {
            fprintf(stderr, "rank %d, all_reduce %lld: %s\n", rank, i, c10d_errmsg());
            return 11;
        }
        for (int k = 0; k < 4; k++) {
            float want = (float)(n * (n + 1) / 2 * (i % 7 + 1) + n * k);
            if (x[k] != want) {
                fprintf(stderr, "rank %d, all_reduce %lld: [%d] = %g, not %g\n", rank, i, k,
                        (double)x[k], (double)want);
                return 12;
            }
        }
        *progress = i + 1;
    }
    return 0;
}
