/* Coordinator throughput for ASYNC verification against a real c10d-coord
 * on a real database: N simulated ranks (tests/support/sim_ranks.c: one
 * thread, one connection per host of 8 ranks) of one world report S
 * collectives each, in batches, each rank sending its next batch when the
 * last is answered, as an ASYNC rank's reporter does. By default every
 * rank reports the same fingerprints alternating so that no two
 * consecutive collectives merge into a run: the coordinator's worst case;
 * --runs reports one repeating collective, as DDP's buckets do. Prints
 * entries verified per second, the coordinator's CPU time, its resident
 * memory at each quarter of the run (flat: nothing grows per collective),
 * and then checks that the group is healthy and complete.
 *
 *   bench_verify_load [--runs] [RANKS] [SEQS] [BATCH]
 *                     (default 1024 ranks x 1024 collectives, batches of 64) */
#include "coord_proc.h"
#include "cpu_time.h"
#include "sim_ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_HOST 8

static const char *job = "vload";
static int ranks = 1024, seqs = 1024, batch = 64, runs;

typedef struct {
    int rank;
    int sent; /* collectives reported so far */
    int joined;
} sim_rank;

static sim_rank *R;
static sim_conn **conn;
static uint64_t generation;
static int joined, finished, failed;
static long entries_done;
static C10dpb__CollEntry *ebuf;
static C10dpb__CollEntry **eptr;

static void report(sim_rank *s)
{
    int n = seqs - s->sent < batch ? seqs - s->sent : batch;
    for (int i = 0; i < n; i++) {
        uint64_t seq = (uint64_t)(s->sent + i + 1);
        C10dpb__CollEntry *e = &ebuf[i];
        c10dpb__coll_entry__init(e);
        e->group = "world";
        e->seq = seq;
        e->kind = 0; /* ALL_REDUCE */
        e->has_count = e->has_op = e->has_completed = 1;
        e->count = runs ? 25 << 20 : (int64_t)(seq % 2 + 1); /* alternating: no runs */
        e->op = 0;
        e->completed = seq - 1;
        eptr[i] = e;
    }
    C10dpb__CollReport m = C10DPB__COLL_REPORT__INIT;
    m.job = (char *)job;
    m.generation = generation;
    m.rank = s->rank;
    m.n_entries = (size_t)n;
    m.entries = eptr;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_COLL_REPORT;
    req.coll_report = &m;
    s->sent += n;
    sim_send(conn[s->rank / PER_HOST], &req, s);
}

static void on_reply(sim_conn *c, void *tag, C10dpb__Reply *rep, void *arg)
{
    (void)c, (void)arg;
    sim_rank *s = tag;
    if (!rep || !s || rep->status != 0) {
        if (!failed++)
            fprintf(stderr, "rank %d: %s\n", s ? s->rank : -1,
                    rep && rep->detail ? rep->detail : "connection lost");
        return;
    }
    if (rep->result_case == C10DPB__REPLY__RESULT_GROUP_JOIN) {
        generation = rep->group_join->generation;
        s->joined = 1;
        joined++;
        return;
    }
    entries_done += batch < seqs ? batch : seqs;
    if (s->sent < seqs)
        report(s);
    else
        finished++;
}

static int all_joined(void *a)
{
    (void)a;
    return failed || joined == ranks;
}

static long quarter_target;
static int reached_quarter(void *a)
{
    (void)a;
    return failed || finished == ranks || entries_done >= quarter_target;
}

int main(int argc, char **argv)
{
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "--runs") == 0) {
        runs = 1;
        first = 2;
    }
    if (argc > first)
        ranks = atoi(argv[first]);
    if (argc > first + 1)
        seqs = atoi(argv[first + 1]);
    if (argc > first + 2)
        batch = atoi(argv[first + 2]);
    if (ranks < 1 || seqs < 1 || batch < 1)
        return 2;
    coord_proc coord;
    coord_init(&coord);
    /* The simulated ranks send no heartbeats (they measure verification
     * alone): a run past the default 10 s of silence had them declared
     * dead, and the group reported a lost member, not a verdict on
     * verification. */
    const char *extra[] = {"--max-world-size", "65536", "--heartbeat-timeout", "3600000", NULL};
    if (coord_start(&coord, NULL, extra, NULL) != 0) {
        fprintf(stderr, "cannot start the coordinator\n");
        return 1;
    }
    sim_loop *L = sim_loop_new(on_reply, NULL);
    int nconn = (ranks + PER_HOST - 1) / PER_HOST;
    conn = calloc((size_t)nconn, sizeof *conn);
    R = calloc((size_t)ranks, sizeof *R);
    ebuf = calloc((size_t)batch, sizeof *ebuf);
    eptr = calloc((size_t)batch, sizeof *eptr);
    for (int i = 0; i < nconn; i++)
        if (!(conn[i] = sim_connect(L, coord.url)))
            return 1;
    for (int r = 0; r < ranks; r++) {
        R[r].rank = r;
        char ep[32], host[32];
        snprintf(ep, sizeof ep, "sim %d", r);
        snprintf(host, sizeof host, "node%d", r / PER_HOST);
        C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
        m.job = (char *)job;
        m.name = "world";
        m.rank = r;
        m.world_size = ranks;
        m.has_endpoint = m.has_timeout_ms = m.has_peers_on_demand = 1;
        m.peers_on_demand = 1;
        m.endpoint.data = (uint8_t *)ep;
        m.endpoint.len = strlen(ep);
        m.host = host;
        m.timeout_ms = 60000;
        C10dpb__Request req = C10DPB__REQUEST__INIT;
        req.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
        req.group_join = &m;
        sim_send(conn[r / PER_HOST], &req, &R[r]);
    }
    if (sim_run(L, all_joined, NULL, (int64_t)sim_now_ms() + 60000) != 0 || failed)
        return 1;
    long rss[4] = {0};
    double t0 = sim_now_ms(), c0 = cpu_of(coord.pid), g0 = self_cpu();
    for (int r = 0; r < ranks; r++)
        report(&R[r]);
    double total = (double)ranks * seqs;
    for (int q = 1; q <= 4; q++) {
        quarter_target = (long)(total * q / 4);
        if (sim_run(L, reached_quarter, NULL, (int64_t)sim_now_ms() + 600000) != 0 || failed)
            return 1;
        rss[q - 1] = rss_kib(coord.pid);
    }
    double dt = (sim_now_ms() - t0) / 1e3;
    printf("%d ranks x %d collectives (%s) in batches of %d: %.0f entries/s (%.2f s; CPU: "
           "coordinator %.2f s = %.2f us an entry, load generator %.2f s); coordinator RSS at "
           "each quarter: %ld, %ld, %ld, %ld MiB\n", ranks, seqs,
           runs ? "one repeating collective" : "alternating, no runs", batch, total / dt, dt,
           cpu_of(coord.pid) - c0, (cpu_of(coord.pid) - c0) / total * 1e6, self_cpu() - g0,
           rss[0] / 1024, rss[1] / 1024, rss[2] / 1024, rss[3] / 1024);
    fflush(stdout);

    /* Healthy and complete: every rank entered the last collective (the
     * connections still open: closed, the ranks would be dead). */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "%s --coord %s desync --job %s", C10D_CTL_BIN, coord.url, job);
    FILE *p = popen(cmd, "r");
    char line[512];
    int healthy = 0, complete = 0;
    char want[64];
    snprintf(want, sizeof want, "#%d", seqs);
    for (int lines = 0; p && fgets(line, sizeof line, p); lines++) {
        int bad = strstr(line, "NOT HEALTHY") != NULL;
        healthy |= !bad && strstr(line, "healthy") != NULL;
        complete |= strstr(line, want) != NULL;
        if (lines < 2 || (bad || strstr(line, "stall") || strstr(line, "lost")))
            fputs(line, stdout); /* the verdict, and why when it is not healthy */
    }
    if (p)
        pclose(p);
    int rc = !(healthy && complete);
    if (rc)
        fprintf(stderr, "the group is not healthy at #%d\n", seqs);
    sim_loop_free(L);
    coord_cleanup(&coord);
    free(conn);
    free(R);
    free(ebuf);
    free(eptr);
    return rc;
}
