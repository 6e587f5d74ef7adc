/* Rendezvous at scale: one process simulates N ranks (a thread each,
 * sharing one connection, as a load generator) that join the world of a
 * job at once; prints how long until every rank has its reply with all N
 * endpoints. The coordinator is a real c10d-coord on a real database.
 *
 *   bench_rendezvous [N...]       (default 64 256 1024 4096) */
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

static void *join(void *arg)
{
    sim_rank *s = arg;
    char ep[96];
    int len = snprintf(ep, sizeof ep, "host=node%d\npid=%d\nshm=/c10d.sim.%d\naddr=10.0.%d.%d\n"
                       "port=%d\n", s->rank / 8, 1000 + s->rank, s->rank, s->rank / 250,
                       s->rank % 250, 40000 + s->rank);
    C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
    m.job = (char *)s->job;
    m.name = "world";
    m.rank = s->rank;
    m.world_size = s->n;
    m.has_endpoint = m.has_pid = m.has_timeout_ms = 1;
    m.endpoint.data = (uint8_t *)ep;
    m.endpoint.len = (size_t)len;
    m.host = "sim";
    m.pid = 1000 + s->rank;
    m.timeout_ms = 120000;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
    req.group_join = &m;
    C10dpb__Reply *rep = NULL;
    pthread_barrier_wait(&go);
    if (c10di_call(s->conn, &req, 120000, 30000, &rep) == C10D_OK) {
        s->ok = rep->group_join && rep->group_join->n_endpoints == (size_t)s->n;
        c10dpb__reply__free_unpacked(rep, NULL);
    } else {
        fprintf(stderr, "rank %d: %s\n", s->rank, c10d_errmsg());
    }
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
    c10di_conn *conn;
    if (c10di_conn_open(&conn, coord->url, NULL, NULL, 10000) != C10D_OK) {
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
        s[r] = (sim_rank){conn, job, r, n, 0};
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
    printf("rendezvous of %5d ranks: %8.1f ms  (%d/%d got all %d endpoints; CPU: coordinator "
           "%.2f s, this load generator %.2f s)\n", n, dt * 1e3, ok, n, n,
           cpu_of(coord->pid) - c0, self_cpu() - g0);
    pthread_barrier_destroy(&go);
    free(s);
    free(th);
    c10di_conn_unref(conn);
    return ok == n ? 0 : -1;
}

int main(int argc, char **argv)
{
    int sizes[16] = {64, 256, 1024, 4096}, ns = 4;
    if (argc > 1)
        for (ns = 0; ns < argc - 1 && ns < 16; ns++)
            sizes[ns] = atoi(argv[ns + 1]);
    coord_proc coord;
    coord_init(&coord);
    const char *extra[] = {NULL};
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
