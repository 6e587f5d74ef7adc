/* Coordinator throughput for ASYNC verification: N simulated ranks (256 by
 * default) of one world report S collectives each, in batches, from a few
 * threads sharing one connection, as ASYNC ranks' reporter threads do.
 * Every rank reports the same fingerprints (no desync), alternating so
 * that no two consecutive collectives can be merged into a run: the worst
 * case for the coordinator. Prints entries verified per second and the
 * CPU time of the coordinator and of this load generator, then checks
 * (c10d_store_health) that the group is healthy and complete.
 *
 *   bench_verify_load [RANKS] [SEQS] [BATCH] [THREADS] */
#include "coord_proc.h"
#include "cpu_time.h"
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *job = "vload";
static int ranks = 256, seqs = 4096, batch = 64, threads = 4;
static c10di_conn *conn;
static uint64_t generation;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}


/* --- the rendezvous of the simulated ranks --- */

static void *join(void *arg)
{
    int rank = (int)(intptr_t)arg;
    char ep[32];
    snprintf(ep, sizeof ep, "sim %d", rank);
    C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
    m.job = (char *)job;
    m.name = "world";
    m.rank = rank;
    m.world_size = ranks;
    m.has_endpoint = m.has_timeout_ms = 1;
    m.endpoint.data = (uint8_t *)ep;
    m.endpoint.len = strlen(ep);
    m.timeout_ms = 60000;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
    req.group_join = &m;
    C10dpb__Reply *rep = NULL;
    if (c10di_call(conn, &req, 60000, 30000, &rep) != C10D_OK) {
        fprintf(stderr, "join %d: %s\n", rank, c10d_errmsg());
        return (void *)1;
    }
    generation = rep->group_join->generation;
    c10dpb__reply__free_unpacked(rep, NULL);
    return NULL;
}

/* --- the load: thread t reports for ranks t, t+threads, ... --- */

static void *load(void *arg)
{
    int t = (int)(intptr_t)arg;
    C10dpb__CollEntry *e = calloc((size_t)batch, sizeof *e);
    C10dpb__CollEntry **ep = calloc((size_t)batch, sizeof *ep);
    for (int base = 1; base <= seqs; base += batch) {
        int n = seqs - base + 1 < batch ? seqs - base + 1 : batch;
        for (int r = t; r < ranks; r += threads) {
            for (int i = 0; i < n; i++) {
                uint64_t seq = (uint64_t)(base + i);
                c10dpb__coll_entry__init(&e[i]);
                e[i].group = "world";
                e[i].seq = seq;
                e[i].kind = 0; /* ALL_REDUCE */
                e[i].has_count = e[i].has_op = e[i].has_completed = 1;
                e[i].count = (int64_t)(seq % 2 + 1); /* alternating: no runs */
                e[i].op = 0;
                e[i].completed = seq - 1;
                ep[i] = &e[i];
            }
            C10dpb__CollReport m = C10DPB__COLL_REPORT__INIT;
            m.job = (char *)job;
            m.generation = generation;
            m.rank = r;
            m.n_entries = (size_t)n;
            m.entries = ep;
            C10dpb__Request req = C10DPB__REQUEST__INIT;
            req.op_case = C10DPB__REQUEST__OP_COLL_REPORT;
            req.coll_report = &m;
            C10dpb__Reply *rep = NULL;
            if (c10di_call(conn, &req, 0, 30000, &rep) != C10D_OK) {
                fprintf(stderr, "report: %s\n", c10d_errmsg());
                return (void *)1;
            }
            c10dpb__reply__free_unpacked(rep, NULL);
        }
    }
    free(e);
    free(ep);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        ranks = atoi(argv[1]);
    if (argc > 2)
        seqs = atoi(argv[2]);
    if (argc > 3)
        batch = atoi(argv[3]);
    if (argc > 4)
        threads = atoi(argv[4]);
    coord_proc coord;
    coord_init(&coord);
    const char *extra[] = {NULL};
    if (coord_start(&coord, NULL, extra, NULL) != 0 ||
        c10di_conn_open(&conn, coord.url, NULL, NULL, 10000) != C10D_OK) {
        fprintf(stderr, "cannot start or reach the coordinator\n");
        return 1;
    }
    pthread_t *th = calloc((size_t)(ranks > threads ? ranks : threads), sizeof *th);
    int rc = 0;
    for (int r = 0; r < ranks; r++)
        pthread_create(&th[r], NULL, join, (void *)(intptr_t)r);
    for (int r = 0; r < ranks; r++) {
        void *v;
        pthread_join(th[r], &v);
        rc |= v != NULL;
    }
    double t0 = now(), c0 = cpu_of(coord.pid), g0 = self_cpu();
    for (int t = 0; t < threads; t++)
        pthread_create(&th[t], NULL, load, (void *)(intptr_t)t);
    for (int t = 0; t < threads; t++) {
        void *v;
        pthread_join(th[t], &v);
        rc |= v != NULL;
    }
    double dt = now() - t0;
    double total = (double)ranks * seqs;
    printf("%d ranks x %d collectives in batches of %d from %d threads: %.0f entries/s "
           "(%.2f s; CPU: coordinator %.2f s, load generator %.2f s)\n", ranks, seqs, batch,
           threads, total / dt, dt, cpu_of(coord.pid) - c0, self_cpu() - g0);

    c10d_store *s;
    c10d_group_health *g = NULL;
    size_t ng = 0;
    if (c10di_store_over(&s, conn, "", 10000) == C10D_OK &&
        c10d_store_health(s, job, "world", &g, &ng) == C10D_OK && ng == 1) {
        uint64_t min = UINT64_MAX;
        for (size_t i = 0; i < g[0].n_ranks; i++)
            if (g[0].ranks[i].entered < min)
                min = g[0].ranks[i].entered;
        printf("group world: %s, every rank entered #%llu\n",
               g[0].status == C10D_OK ? "healthy" : g[0].report, (unsigned long long)min);
        rc |= g[0].status != C10D_OK || min != (uint64_t)seqs;
        c10d_health_free(g, ng);
        c10d_store_close(s);
    } else {
        fprintf(stderr, "health: %s\n", c10d_errmsg());
        rc = 1;
    }
    c10di_conn_unref(conn);
    coord_cleanup(&coord);
    free(th);
    return rc;
}
