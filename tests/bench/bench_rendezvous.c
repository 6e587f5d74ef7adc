/* Rendezvous at scale against a real c10d-coord on a real database: N
 * simulated ranks (tests/support/sim_ranks.c: one thread, one connection
 * per host of 8 ranks) join the world of a job at once. Prints how long
 * until every rank has what it needs: the generation, its host's
 * endpoints (shared memory) and its two ring neighbours' (fetched after
 * the rendezvous, as the host backend does at its first collective), with
 * the coordinator's CPU time and peak memory, and the bytes it sent.
 *
 *   bench_rendezvous [--all] [N...]     (default 1024 4096 16384)
 *
 * --all: the old protocol, where every rank receives all N endpoints. */
#include "coord_proc.h"
#include "cpu_time.h"
#include "sim_ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_HOST 8

typedef struct {
    int rank;
    int joined, fetched, failed;
    uint64_t generation;
} sim_rank;

typedef struct {
    int n, all;
    sim_rank *r;
    sim_conn **conn;
    const char *job;
    int joined, fetched, failed;
    double reply_bytes;
} bench;

static void fetch_neighbours(bench *b, sim_rank *s)
{
    int32_t want[2] = {(s->rank + b->n - 1) % b->n, (s->rank + 1) % b->n};
    C10dpb__GroupEndpoints m = C10DPB__GROUP_ENDPOINTS__INIT;
    m.job = (char *)b->job;
    m.generation = s->generation;
    m.name = "world";
    m.rank = s->rank;
    m.n_ranks = b->n > 2 ? 2 : 1;
    m.ranks = want;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_GROUP_ENDPOINTS;
    req.group_endpoints = &m;
    sim_send(b->conn[s->rank / PER_HOST], &req, s);
}

static void on_reply(sim_conn *c, void *tag, C10dpb__Reply *rep, void *arg)
{
    (void)c;
    bench *b = arg;
    sim_rank *s = tag;
    if (!rep || !s) {
        b->failed++;
        return;
    }
    b->reply_bytes += (double)c10dpb__reply__get_packed_size(rep);
    if (rep->status != 0) {
        if (!s->failed++)
            fprintf(stderr, "rank %d: %s\n", s->rank, rep->detail ? rep->detail : "?");
        b->failed++;
        return;
    }
    if (rep->result_case == C10DPB__REPLY__RESULT_GROUP_JOIN) {
        C10dpb__GroupJoinReply *gj = rep->group_join;
        int first = s->rank / PER_HOST * PER_HOST, on_host = b->n - first;
        on_host = on_host < PER_HOST ? on_host : PER_HOST;
        int ok = b->all ? gj->n_endpoints == (size_t)b->n
                        : gj->n_endpoints == (size_t)on_host &&
                              gj->n_endpoint_ranks == (size_t)on_host &&
                              gj->endpoint_ranks[0] == first;
        if (!ok) {
            b->failed++;
            return;
        }
        s->joined = 1;
        s->generation = gj->generation;
        b->joined++;
        if (!b->all)
            fetch_neighbours(b, s);
    } else if (rep->result_case == C10DPB__REPLY__RESULT_GROUP_ENDPOINTS) {
        s->fetched = rep->group_endpoints->n_endpoints >= 1;
        b->fetched += s->fetched;
    }
}

static int finished(void *arg)
{
    bench *b = arg;
    return b->failed || (b->all ? b->joined : b->fetched) == b->n;
}

static void join(bench *b, sim_rank *s)
{
    char ep[96], host[32];
    snprintf(host, sizeof host, "node%d", s->rank / PER_HOST);
    int len = snprintf(ep, sizeof ep, "host=%s\npid=%d\nshm=/c10d.sim.%d\naddr=10.0.%d.%d\n"
                       "port=%d\n", host, 1000 + s->rank, s->rank, s->rank / 250,
                       s->rank % 250, 40000 + s->rank);
    C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
    m.job = (char *)b->job;
    m.name = "world";
    m.rank = s->rank;
    m.world_size = b->n;
    m.has_endpoint = m.has_pid = m.has_timeout_ms = 1;
    m.endpoint.data = (uint8_t *)ep;
    m.endpoint.len = (size_t)len;
    m.host = host;
    m.pid = 1000 + s->rank;
    m.timeout_ms = 120000;
    m.has_peers_on_demand = 1;
    m.peers_on_demand = !b->all;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
    req.group_join = &m;
    sim_send(b->conn[s->rank / PER_HOST], &req, s);
}

static int run(coord_proc *coord, int n, int all)
{
    char job[64];
    snprintf(job, sizeof job, "scale-%d-%s", n, all ? "all" : "lazy");
    bench b = {n, all, calloc((size_t)n, sizeof(sim_rank)), NULL, job, 0, 0, 0, 0};
    sim_loop *L = sim_loop_new(on_reply, &b);
    int nconn = (n + PER_HOST - 1) / PER_HOST;
    b.conn = calloc((size_t)nconn, sizeof *b.conn);
    for (int i = 0; i < nconn; i++)
        if (!(b.conn[i] = sim_connect(L, coord->url))) {
            fprintf(stderr, "cannot connect to %s\n", coord->url);
            return -1;
        }
    double t0 = sim_now_ms(), c0 = cpu_of(coord->pid), g0 = self_cpu();
    for (int r = 0; r < n; r++) {
        b.r[r].rank = r;
        join(&b, &b.r[r]);
    }
    int rc = sim_run(L, finished, &b, (int64_t)sim_now_ms() + 300000);
    double dt = sim_now_ms() - t0;
    printf("rendezvous of %5d ranks: %8.1f ms  (%d/%d got %s; coordinator: CPU %.2f s, "
           "peak RSS %ld MiB, replies %.1f MB; load generator CPU %.2f s)\n", n, dt,
           all ? b.joined : b.fetched, n,
           all ? "all N endpoints" : "their host's and ring neighbours' endpoints",
           cpu_of(coord->pid) - c0, peak_rss_kib(coord->pid) / 1024, b.reply_bytes / 1e6,
           self_cpu() - g0);
    fflush(stdout);
    sim_loop_free(L);
    free(b.conn);
    free(b.r);
    return rc == 0 && !b.failed ? 0 : -1;
}

int main(int argc, char **argv)
{
    int sizes[16] = {1024, 4096, 16384}, all;
    int ns = sim_sizes(argc, argv, "--all", &all, sizes, 3);
    coord_proc coord;
    if (sim_coord_start(&coord) != 0)
        return 1;
    int rc = 0;
    for (int i = 0; i < ns; i++)
        rc |= sizes[i] < 1 || run(&coord, sizes[i], all) != 0;
    coord_cleanup(&coord);
    return rc;
}
