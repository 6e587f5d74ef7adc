/* bench_big_values: a normal client's get latency while other clients
 * flood the coordinator with requests naming one 16 MiB value many times
 * (a 45 KB check naming it 4,096 times once held the engine ~100 s).
 *
 *   bench_big_values [-n NAMED] [-s SECONDS] [-c FLOODERS] [--coord URL]
 *
 * Starts its own c10d-coord (database in a temporary directory) unless
 * --coord is given (an older coordinator, for the figures before). Stores
 * "big" (16 MiB, the default --max-value-bytes) and "small"; then, for
 * each flood (none; check, wait and multi_get naming "big" NAMED times,
 * default 4096; a get of "big" itself), FLOODERS processes (default 2)
 * send it back to back for SECONDS (default 3) while this process gets
 * "small" and times each get. Prints the gets' p50, p99 and worst, and
 * how many flood requests were answered and how. A flood request already
 * sent when the time is up is waited for, and so is a get behind it. */
#include "coord_proc.h"

#include <c10d/c10d.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { FLOOD_NONE, FLOOD_CHECK, FLOOD_WAIT, FLOOD_MULTI_GET, FLOOD_GET_BIG, NFLOODS };
static const char *flood_names[NFLOODS] = {"none", "check", "wait", "multi_get", "get big"};
#define BIG (16u << 20)
#define MAX_GETS 1000000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static c10d_store *connect_or_die(const char *url)
{
    c10d_store *s;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 600000; /* an old coordinator may take minutes */
    if (c10d_store_connect(&s, url, &o) != C10D_OK) {
        fprintf(stderr, "bench_big_values: connect %s: %s\n", url, c10d_errmsg());
        exit(1);
    }
    return s;
}

/* What the flooders share with this process. */
typedef struct shared {
    volatile int stop;
    long gets; /* the measurer's, latencies in lat */
    long answered[NFLOODS], ok[NFLOODS], toobig[NFLOODS], other[NFLOODS];
} shared;

static void flooder(const char *url, int kind, int named, shared *sh)
{
    c10d_store *s = connect_or_die(url);
    const char **keys = malloc((size_t)named * sizeof *keys);
    void **vals = malloc((size_t)named * sizeof *vals);
    size_t *lens = malloc((size_t)named * sizeof *lens);
    for (int i = 0; i < named; i++)
        keys[i] = "big";
    while (!sh->stop) {
        c10d_status st;
        int all;
        void *v;
        size_t n;
        if (kind == FLOOD_CHECK) {
            st = c10d_store_check(s, keys, (size_t)named, &all);
        } else if (kind == FLOOD_WAIT) {
            st = c10d_store_wait(s, keys, (size_t)named, 10000);
        } else if (kind == FLOOD_MULTI_GET) {
            if ((st = c10d_store_multi_get(s, keys, (size_t)named, vals, lens, 10000)) == C10D_OK)
                for (int i = 0; i < named; i++)
                    c10d_free(vals[i]);
        } else {
            if ((st = c10d_store_get(s, "big", &v, &n, C10D_NO_WAIT)) == C10D_OK)
                c10d_free(v);
        }
        __atomic_add_fetch(&sh->answered[kind], 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(st == C10D_OK       ? &sh->ok[kind]
                           : st == C10D_ETOOBIG ? &sh->toobig[kind]
                                                : &sh->other[kind],
                           1, __ATOMIC_RELAXED);
    }
    c10d_store_close(s);
    _exit(0);
}

int main(int argc, char **argv)
{
    int named = 4096, flooders = 2;
    double secs = 3;
    const char *url = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            named = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            secs = atof(argv[++i]);
        else if (!strcmp(argv[i], "-c") && i + 1 < argc)
            flooders = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--coord") && i + 1 < argc)
            url = argv[++i];
        else {
            fprintf(stderr, "usage: bench_big_values [-n NAMED] [-s SECONDS] [-c FLOODERS] "
                            "[--coord URL]\n");
            return 2;
        }
    }
    coord_proc coord = {0};
    if (!url) {
        coord_init(&coord);
        if (coord_start(&coord, NULL, NULL, NULL) != 0) {
            fprintf(stderr, "bench_big_values: cannot start c10d-coord (log %s)\n", coord.log);
            return 1;
        }
        url = coord.url;
    }
    /* Every client is a child of its own: a process's connection does not
     * survive a fork, and this one only counts. */
    pid_t setter = fork();
    if (setter == 0) {
        c10d_store *s = connect_or_die(url);
        char *big = malloc(BIG);
        memset(big, 'b', BIG);
        if (c10d_store_set(s, "big", big, BIG) != C10D_OK ||
            c10d_store_set(s, "small", "s", 1) != C10D_OK) {
            fprintf(stderr, "bench_big_values: set: %s\n", c10d_errmsg());
            _exit(1);
        }
        c10d_store_close(s);
        _exit(0);
    }
    int status;
    if (waitpid(setter, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    double *lat = mmap(NULL, MAX_GETS * sizeof *lat, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    printf("a client's get of a 1-byte key while %d clients flood (\"big\", 16 MiB, named %d "
           "times), %.0f s each\n",
           flooders, named, secs);
    printf("%-10s %8s %10s %10s %10s  %s\n", "flood", "gets", "p50 ms", "p99 ms", "worst ms",
           "flood answered (ok/ETOOBIG/other)");
    fflush(stdout);
    for (int kind = 0; kind < NFLOODS; kind++) {
        sh->stop = 0;
        pid_t pids[64];
        int np = 0;
        for (int c = 0; kind != FLOOD_NONE && c < flooders && np < 64; c++)
            if ((pids[np++] = fork()) == 0)
                flooder(url, kind, named, sh);
        pid_t measurer = fork();
        if (measurer == 0) {
            c10d_store *s = connect_or_die(url);
            usleep(100000); /* the flooders connect and start */
            long n = 0;
            double end = now_s() + secs;
            while (n < MAX_GETS && now_s() < end) {
                void *v;
                size_t len;
                double t0 = now_s();
                if (c10d_store_get(s, "small", &v, &len, C10D_NO_WAIT) != C10D_OK) {
                    fprintf(stderr, "bench_big_values: get: %s\n", c10d_errmsg());
                    _exit(1);
                }
                lat[n++] = (now_s() - t0) * 1e3;
                c10d_free(v);
            }
            sh->gets = n;
            c10d_store_close(s);
            _exit(0);
        }
        waitpid(measurer, &status, 0);
        sh->stop = 1;
        for (int c = 0; c < np; c++) /* not wait(): the coordinator is a child too */
            waitpid(pids[c], NULL, 0);
        long n = sh->gets;
        if (n == 0)
            return 1;
        qsort(lat, (size_t)n, sizeof *lat, cmp_d);
        printf("%-10s %8ld %10.3f %10.3f %10.3f  %ld (%ld/%ld/%ld)\n", flood_names[kind], n,
               lat[n / 2], lat[(size_t)((double)n * 0.99)], lat[n - 1], sh->answered[kind],
               sh->ok[kind], sh->toobig[kind], sh->other[kind]);
        fflush(stdout);
    }
    if (coord.pid)
        coord_cleanup(&coord);
    return 0;
}
