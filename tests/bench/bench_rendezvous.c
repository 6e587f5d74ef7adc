/* Rendezvous at scale: one process simulates N ranks (a thread each) that
 * join the world of a job at once, 8 ranks to a host, the ranks of a host
 * sharing one connection (real ranks have one each); prints how long until every rank has
 * what it needs: the generation, its host's endpoints (shared memory) and
 * its two ring neighbours' (fetched afterwards, as the host backend does
 * at its first collective). The coordinator is a real c10d-coord on a
 * real database; its CPU time and peak memory are printed too.
 *
 *   bench_rendezvous [--all] [N...]     (default 1024 4096 16384)
 *
 * --all: the old protocol, where every rank receives all N endpoints. */
#include "coord_proc.h"
#include "cpu_time.h"
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    c10di_conn *conn;
    const char *job;
    int rank, n;
    int ok;
} sim_rank;

static pthread_barrier_t go;
static int all_endpoints; /* --all */

#define PER_HOST 8

/* The endpoints of the two ring neighbours, as a rank's first collective
 * fetches them. */
static int fetch_neighbours(sim_rank *s, uint64_t gen)
{
    int32_t want[2] = {(s->rank + s->n - 1) % s->n, (s->rank + 1) % s->n};
    C10dpb__GroupEndpoints m = C10DPB__GROUP_ENDPOINTS__INIT;
    m.job = (char *)s->job;
    m.generation = gen;
    m.name = "world";
    m.rank = s->rank;
    m.n_ranks = s->n > 2 ? 2 : 1;
    m.ranks = want;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_GROUP_ENDPOINTS;
    req.group_endpoints = &m;
    C10dpb__Reply *rep = NULL;
    if (c10di_call(s->conn, &req, 120000, 30000, &rep) != C10D_OK) {
        fprintf(stderr, "rank %d: endpoints: %s\n", s->rank, c10d_errmsg());
        return 0;
    }
    int ok = rep->group_endpoints && rep->group_endpoints->n_endpoints == m.n_ranks;
    c10dpb__reply__free_unpacked(rep, NULL);
    return ok;
}

static void *join(void *arg)
{
    sim_rank *s = arg;
    char ep[96], host[32];
    snprintf(host, sizeof host, "node%d", s->rank / PER_HOST);
    int len = snprintf(ep, sizeof ep, "host=%s\npid=%d\nshm=/c10d.sim.%d\naddr=10.0.%d.%d\n"
                       "port=%d\n", host, 1000 + s->rank, s->rank, s->rank / 250,
                       s->rank % 250, 40000 + s->rank);
    C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
    m.job = (char *)s->job;
    m.name = "world";
    m.rank = s->rank;
    m.world_size = s->n;
    m.has_endpoint = m.has_pid = m.has_timeout_ms = 1;
    m.endpoint.data = (uint8_t *)ep;
    m.endpoint.len = (size_t)len;
    m.host = host;
    m.pid = 1000 + s->rank;
    m.timeout_ms = 120000;
    m.has_peers_on_demand = 1;
    m.peers_on_demand = !all_endpoints;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
    req.group_join = &m;
    C10dpb__Reply *rep = NULL;
    pthread_barrier_wait(&go);
    if (c10di_call(s->conn, &req, 120000, 30000, &rep) != C10D_OK) {
        fprintf(stderr, "rank %d: %s\n", s->rank, c10d_errmsg());
        return NULL;
    }
    C10dpb__GroupJoinReply *gj = rep->group_join;
    int on_host = s->n - s->rank / PER_HOST * PER_HOST;
    on_host = on_host < PER_HOST ? on_host : PER_HOST;
    if (all_endpoints)
        s->ok = gj && gj->n_endpoints == (size_t)s->n;
    else
        s->ok = gj && gj->n_endpoints == (size_t)on_host &&
                gj->n_endpoint_ranks == (size_t)on_host &&
                gj->endpoint_ranks[0] == s->rank / PER_HOST * PER_HOST;
    uint64_t gen = gj ? gj->generation : 0;
    c10dpb__reply__free_unpacked(rep, NULL);
    if (s->ok && !all_endpoints)
        s->ok = fetch_neighbours(s, gen);
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}


static int run(coord_proc *coord, int n)
{
    if (n < 1)
        return -1;
    int nconn = (n + PER_HOST - 1) / PER_HOST;
    c10di_conn **conn = calloc((size_t)nconn, sizeof *conn);
    for (int i = 0; i < nconn; i++)
        if (c10di_conn_open(&conn[i], coord->url, NULL, NULL, 10000) != C10D_OK) {
            fprintf(stderr, "connect: %s\n", c10d_errmsg());
            return -1;
        }
    char job[64];
    snprintf(job, sizeof job, "scale-%d", n);
    sim_rank *s = calloc((size_t)n, sizeof *s);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);
    pthread_barrier_init(&go, NULL, (unsigned)n + 1);
    for (int r = 0; r < n; r++) {
        s[r] = (sim_rank){conn[r / PER_HOST], job, r, n, 0};
        if (pthread_create(&th[r], &attr, join, &s[r]) != 0) {
            fprintf(stderr, "cannot start thread %d\n", r);
            return -1;
        }
    }
    pthread_barrier_wait(&go);
    double t0 = now(), c0 = cpu_of(coord->pid), g0 = self_cpu();
    int ok = 0;
    for (int r = 0; r < n; r++) {
        pthread_join(th[r], NULL);
        ok += s[r].ok;
    }
    double dt = now() - t0;
    printf("rendezvous of %5d ranks: %8.1f ms  (%d/%d got %s; CPU: coordinator %.2f s, this "
           "load generator %.2f s; coordinator peak RSS %ld MiB)\n", n, dt * 1e3, ok, n,
           all_endpoints ? "all endpoints" : "their host's and neighbours' endpoints",
           cpu_of(coord->pid) - c0, self_cpu() - g0, peak_rss_kib(coord->pid) / 1024);
    fflush(stdout);
    pthread_barrier_destroy(&go);
    free(s);
    free(th);
    for (int i = 0; i < nconn; i++)
        c10di_conn_unref(conn[i]);
    free(conn);
    return ok == n ? 0 : -1;
}

int main(int argc, char **argv)
{
    int sizes[16] = {1024, 4096, 16384}, ns = 3, first = 1;
    if (argc > 1 && strcmp(argv[1], "--all") == 0) {
        all_endpoints = 1;
        first = 2;
    }
    if (argc > first)
        for (ns = 0; ns < argc - first && ns < 16; ns++)
            sizes[ns] = atoi(argv[ns + first]);
    coord_proc coord;
    coord_init(&coord);
    const char *extra[] = {"--max-world-size", "65536", NULL};
    if (coord_start(&coord, NULL, extra, NULL) != 0) {
        fprintf(stderr, "cannot start the coordinator\n");
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < ns; i++)
        rc |= run(&coord, sizes[i]) != 0;
    coord_cleanup(&coord);
    return rc;
}
