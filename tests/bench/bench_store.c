/* bench_store: store throughput and latency, measured like
 * tests/bench/anchors/torch_store_bench.py so the two can stand side by side.
 *
 *   bench_store [-c CLIENTS] [-n OPS] [--coord URL] [--only OP]
 *
 * Starts its own c10d-coord (database in a temporary directory) unless
 * --coord is given. Each of CLIENTS processes runs OPS of each operation
 * back to back; aggregate ops/s = all ops / the slowest client's time, as
 * in the torch anchor. Every set is acknowledged and durable. --only runs
 * one operation (set, get, add, multi_set, multi_get), so a profile of the
 * coordinator holds that operation alone; get and multi_get read the keys
 * the sets would have written, so alone they read missing keys. */
#include "coord_proc.h"

#include <c10d/c10d.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { OP_SET, OP_GET, OP_ADD, OP_MSET, OP_MGET, NOPS };
static const char *op_names[NOPS] = {"set", "get", "add", "multi_set(10)", "multi_get(10)"};
#define BATCH 10

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void die(const char *what)
{
    fprintf(stderr, "bench_store: %s: %s\n", what, c10d_errmsg());
    _exit(1);
}

/* Runs one client; writes per-op latencies (us) and its phase times. */
static int only_op = -1; /* --only: the one operation run, or -1 for all */

static void client(const char *url, int idx, int ops, float *lat, double *phase)
{
    c10d_store *s;
    if (c10d_store_connect(&s, url, NULL) != C10D_OK)
        die("connect");
    char key[64], val[17] = "vvvvvvvvvvvvvvvv";
    for (int op = 0; op < NOPS; op++) {
        if (only_op >= 0 && op != only_op)
            continue;
        int n = (op == OP_MSET || op == OP_MGET) ? ops / BATCH : ops;
        double t0 = now_s();
        for (int i = 0; i < n; i++) {
            double a = now_s();
            c10d_status st = C10D_OK;
            if (op == OP_SET) {
                snprintf(key, sizeof key, "k%d_%d", idx, i);
                st = c10d_store_set(s, key, val, 16);
            } else if (op == OP_GET) {
                void *v;
                size_t len;
                snprintf(key, sizeof key, "k%d_%d", idx, i);
                if ((st = c10d_store_get(s, key, &v, &len, C10D_NO_WAIT)) == C10D_OK)
                    c10d_free(v);
            } else if (op == OP_ADD) {
                st = c10d_store_add(s, "ctr", 1, NULL);
            } else {
                char names[BATCH][64];
                const char *keys[BATCH];
                const void *vals[BATCH];
                size_t lens[BATCH];
                void *got[BATCH];
                for (int j = 0; j < BATCH; j++) {
                    snprintf(names[j], sizeof names[j], "m%d_%d_%d", idx, i, j);
                    keys[j] = names[j];
                    vals[j] = val;
                    lens[j] = 16;
                }
                if (op == OP_MSET) {
                    st = c10d_store_multi_set(s, keys, vals, lens, BATCH);
                } else if ((st = c10d_store_multi_get(s, keys, BATCH, got, lens,
                                                      C10D_NO_WAIT)) == C10D_OK) {
                    for (int j = 0; j < BATCH; j++)
                        c10d_free(got[j]);
                }
            }
            if (st != C10D_OK && !(st == C10D_ENOTFOUND && only_op >= 0))
                die(op_names[op]);
            lat[(size_t)op * ops + i] = (float)((now_s() - a) * 1e6);
        }
        phase[op] = now_s() - t0;
    }
    c10d_store_close(s);
}

int main(int argc, char **argv)
{
    int clients = 1, ops = 2000;
    const char *url = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-c") && i + 1 < argc)
            clients = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc)
            ops = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--coord") && i + 1 < argc)
            url = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            const char *name = argv[++i];
            for (int op = 0; op < NOPS; op++)
                if (!strncmp(op_names[op], name, strlen(name)) && strlen(name) >= 3)
                    only_op = op;
            if (only_op < 0) {
                fprintf(stderr, "bench_store: --only takes set, get, add, multi_set or "
                        "multi_get, not '%s'\n", name);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench_store [-c CLIENTS] [-n OPS] [--coord URL] "
                    "[--only set|get|add|multi_set|multi_get]\n");
            return 2;
        }
    }
    if (clients < 1 || ops < BATCH) {
        fprintf(stderr, "bench_store: need at least 1 client and %d ops\n", BATCH);
        return 2;
    }
    coord_proc coord;
    int own = url == NULL;
    if (own) {
        coord_init(&coord);
        if (coord_start(&coord, NULL, NULL, NULL) != 0) {
            fprintf(stderr, "bench_store: could not start c10d-coord (log: %s)\n", coord.log);
            return 1;
        }
        url = coord.url;
    }
    size_t nlat = (size_t)clients * NOPS * ops;
    float *lat = mmap(NULL, nlat * sizeof(float), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    double *phase = mmap(NULL, (size_t)clients * NOPS * sizeof(double), PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    for (int c = 0; c < clients; c++) {
        if (fork() == 0) {
            client(url, c, ops, lat + (size_t)c * NOPS * ops, phase + (size_t)c * NOPS);
            _exit(0);
        }
    }
    int failed = 0;
    for (int c = 0; c < clients; c++) {
        int st;
        wait(&st);
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    if (failed) {
        fprintf(stderr, "bench_store: a client failed\n");
        if (own)
            coord_cleanup(&coord);
        return 1;
    }
    float *all = malloc((size_t)clients * ops * sizeof(float));
    for (int op = 0; op < NOPS; op++) {
        if (only_op >= 0 && op != only_op)
            continue;
        int n = (op == OP_MSET || op == OP_MGET) ? ops / BATCH : ops;
        double worst = 0;
        size_t k = 0;
        for (int c = 0; c < clients; c++) {
            double t = phase[(size_t)c * NOPS + op];
            worst = t > worst ? t : worst;
            memcpy(all + k, lat + ((size_t)c * NOPS + op) * ops, (size_t)n * sizeof(float));
            k += (size_t)n;
        }
        qsort(all, k, sizeof(float), cmp_f);
        double total = (double)clients * n;
        printf("c10d-store clients=%d %s: %.0f ops/s aggregate, %.1f us/op per client, "
               "p50 %.1f us, p99 %.1f us%s\n",
               clients, op_names[op], total / worst, worst / n * 1e6, all[k / 2],
               all[(size_t)(k * 0.99)], op == OP_MSET || op == OP_MGET ? " (per call)" : "");
    }
    free(all);
    if (own) {
        coord_stop(&coord, SIGTERM);
        coord_cleanup(&coord);
    }
    return 0;
}
