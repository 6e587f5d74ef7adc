/* Liveness at scale against a real c10d-coord on a real database: N
 * simulated ranks (tests/support/sim_ranks.c: one thread, one connection
 * per host of 8 ranks; the last rank alone on one) form a world and keep
 * a watch parked on the coordinator, as every rank's watch thread does.
 * Prints:
 *   - heartbeats: every rank renewing its watch each second (the idle
 *     heartbeat) for a few seconds: watch messages a second and the
 *     coordinator's CPU per second of it;
 *   - one rank killed (its connection closed): time until the last of the
 *     N-1 others has heard of it;
 *   - one host killed (8 ranks), then 1,000 ranks at once (125 hosts):
 *     time until every survivor has heard of all of them, watch replies
 *     per survivor, and lost-member entries sent in all.
 *
 *   bench_liveness [--full] [N...]     (default 1024 4096 16384)
 *
 * --full: watches that do not take runs (clients before them): every lost
 * member named in full to every survivor. */
#include "coord_proc.h"
#include "cpu_time.h"
#include "sim_ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_HOST 8

typedef struct {
    int rank;
    int alive, joined;
    uint64_t version; /* the job's membership version this rank knows */
    size_t heard;     /* lost members its last reply named */
} sim_rank;

typedef struct {
    int n;
    sim_rank *r;
    sim_conn **conn; /* per host; the last rank alone on the last */
    int nconn;
    const char *job;
    uint64_t gen;
    int joined, failed;
    int wait_ms;        /* the watches' wait (renewed at once when answered) */
    size_t want_lost;   /* a survivor has heard once its reply names this many */
    int heard_all;      /* survivors that have */
    double last_heard_ms;
    long replies, lost_entries; /* entries: members named in full, and runs */
    double reply_bytes;
    int full_lists; /* --full: every lost member in full, as before runs */
} bench;

static int conn_of(const bench *b, int rank)
{
    return rank == b->n - 1 ? b->nconn - 1 : rank / PER_HOST;
}

static void watch(bench *b, sim_rank *s)
{
    C10dpb__Watch m = C10DPB__WATCH__INIT;
    m.job = (char *)b->job;
    m.generation = b->gen;
    m.rank = s->rank;
    m.has_known_version = m.has_wait_ms = 1;
    m.known_version = s->version;
    m.wait_ms = b->wait_ms;
    m.has_lost_ranges_ok = 1;
    m.lost_ranges_ok = !b->full_lists; /* as the library asks */
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_WATCH;
    req.watch = &m;
    sim_send(b->conn[conn_of(b, s->rank)], &req, s);
}

static void on_reply(sim_conn *c, void *tag, C10dpb__Reply *rep, void *arg)
{
    (void)c;
    bench *b = arg;
    sim_rank *s = tag;
    if (!rep || !s || !s->alive)
        return; /* a connection this bench closed */
    if (rep->status != 0) {
        if (!b->failed++)
            fprintf(stderr, "rank %d: %s\n", s->rank, rep->detail ? rep->detail : "?");
        return;
    }
    if (rep->result_case == C10DPB__REPLY__RESULT_GROUP_JOIN) {
        s->joined = 1;
        b->gen = rep->group_join->generation;
        b->joined++;
        return;
    }
    if (rep->result_case != C10DPB__REPLY__RESULT_WATCH)
        return;
    C10dpb__WatchReply *w = rep->watch;
    b->replies++;
    b->lost_entries += (long)(w->n_lost + w->n_lost_ranges);
    b->reply_bytes += (double)c10dpb__reply__get_packed_size(rep);
    if (w->version > s->version)
        s->version = w->version;
    size_t before = s->heard;
    s->heard = w->n_lost;
    for (size_t i = 0; i < w->n_lost_ranges; i++)
        s->heard += (size_t)(w->lost_ranges[i]->last - w->lost_ranges[i]->first + 1);
    if (b->want_lost && before < b->want_lost && s->heard >= b->want_lost) {
        b->heard_all++;
        b->last_heard_ms = sim_now_ms();
    }
    watch(b, s);
}

static int all_joined(void *arg)
{
    bench *b = arg;
    return b->failed || b->joined == b->n;
}

static int survivors_heard(void *arg)
{
    bench *b = arg;
    int alive = 0;
    for (int i = 0; i < b->n; i++)
        alive += b->r[i].alive;
    return b->failed || b->heard_all == alive;
}

static int never(void *arg)
{
    return ((bench *)arg)->failed;
}

static void kill_ranks(bench *b, int from_conn, int nconns)
{
    for (int k = from_conn; k < from_conn + nconns; k++) {
        sim_close(b->conn[k]);
        for (int r = 0; r < b->n; r++)
            if (conn_of(b, r) == k)
                b->r[r].alive = 0;
    }
}

static void report_death(bench *b, sim_loop *L, const char *what, double t0, long replies0,
                         long entries0, double bytes0)
{
    int rc = sim_run(L, survivors_heard, b, (int64_t)sim_now_ms() + 60000);
    int alive = 0;
    for (int i = 0; i < b->n; i++)
        alive += b->r[i].alive;
    printf("  %-32s last of %5d survivors heard after %7.1f ms; %.2f watch replies per "
           "survivor, %ld entries (members, runs), %.1f MB sent%s\n", what, alive,
           b->last_heard_ms - t0, (double)(b->replies - replies0) / alive,
           b->lost_entries - entries0, (b->reply_bytes - bytes0) / 1e6, rc ? " (TIMED OUT)" : "");
    fflush(stdout);
}

static int run(coord_proc *coord, int n, int full)
{
    char job[64];
    snprintf(job, sizeof job, "live-%d", n);
    bench b = {0};
    b.n = n;
    b.full_lists = full;
    b.job = job;
    b.r = calloc((size_t)n, sizeof *b.r);
    b.nconn = (n - 1 + PER_HOST - 1) / PER_HOST + 1;
    b.conn = calloc((size_t)b.nconn, sizeof *b.conn);
    sim_loop *L = sim_loop_new(on_reply, &b);
    for (int i = 0; i < b.nconn; i++)
        if (!(b.conn[i] = sim_connect(L, coord->url)))
            return -1;
    for (int r = 0; r < n; r++) {
        sim_rank *s = &b.r[r];
        s->rank = r;
        s->alive = 1;
        char host[32];
        snprintf(host, sizeof host, "node%d", conn_of(&b, r));
        C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
        m.job = job;
        m.name = "world";
        m.rank = r;
        m.world_size = n;
        m.has_endpoint = m.has_pid = m.has_timeout_ms = m.has_peers_on_demand = 1;
        m.endpoint.data = (uint8_t *)"x";
        m.endpoint.len = 1;
        m.host = host;
        m.pid = 1000 + r;
        m.timeout_ms = 120000;
        m.peers_on_demand = 1;
        C10dpb__Request req = C10DPB__REQUEST__INIT;
        req.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
        req.group_join = &m;
        sim_send(b.conn[conn_of(&b, r)], &req, s);
    }
    if (sim_run(L, all_joined, &b, (int64_t)sim_now_ms() + 120000) != 0 || b.failed)
        return -1;
    printf("%d ranks (%d connections)%s:\n", n, b.nconn,
           full ? ", every lost member named in full (--full)" : "");

    /* Heartbeats: each rank's watch answered after a second and renewed. */
    b.wait_ms = 1000;
    for (int r = 0; r < n; r++)
        watch(&b, &b.r[r]);
    sim_run(L, never, &b, (int64_t)sim_now_ms() + 1500); /* every watch renewed once */
    long rep0 = b.replies;
    double t0 = sim_now_ms(), c0 = cpu_of(coord->pid);
    sim_run(L, never, &b, (int64_t)sim_now_ms() + 3000);
    double secs = (sim_now_ms() - t0) / 1e3;
    printf("  heartbeats (a watch a second per rank): %.0f watch messages/s, coordinator CPU "
           "%.0f%% of a core, RSS %ld MiB\n", (double)(b.replies - rep0) / secs,
           100 * (cpu_of(coord->pid) - c0) / secs, rss_kib(coord->pid) / 1024);

    /* Deaths: watches wait long, so that only a death answers them. */
    b.wait_ms = 60000;
    sim_run(L, never, &b, (int64_t)sim_now_ms() + 1200); /* every watch now a long one */
    for (double until = sim_now_ms() + 10000; sim_parked(coord->url) < n && sim_now_ms() < until;)
        sim_run(L, never, &b, (int64_t)sim_now_ms() + 20);
    long e0 = b.lost_entries;
    double by0 = b.reply_bytes;
    rep0 = b.replies;
    b.want_lost = 1;
    b.heard_all = 0;
    t0 = sim_now_ms();
    kill_ranks(&b, b.nconn - 1, 1); /* the last rank, alone on its connection */
    report_death(&b, L, "1 rank killed:", t0, rep0, e0, by0);

    e0 = b.lost_entries, rep0 = b.replies, by0 = b.reply_bytes;
    b.want_lost = 1 + PER_HOST;
    b.heard_all = 0;
    t0 = sim_now_ms();
    kill_ranks(&b, 0, 1); /* host 0 */
    report_death(&b, L, "1 host (8 ranks) killed:", t0, rep0, e0, by0);

    if (n >= 2048) {
        e0 = b.lost_entries, rep0 = b.replies, by0 = b.reply_bytes;
        b.want_lost = 1 + PER_HOST + 1000;
        b.heard_all = 0;
        t0 = sim_now_ms();
        kill_ranks(&b, 1, 125); /* hosts 1..125 */
        report_death(&b, L, "1,000 ranks (125 hosts) killed:", t0, rep0, e0, by0);
    }
    sim_loop_free(L);
    free(b.conn);
    free(b.r);
    return b.failed ? -1 : 0;
}

int main(int argc, char **argv)
{
    int sizes[16] = {1024, 4096, 16384}, full;
    int ns = sim_sizes(argc, argv, "--full", &full, sizes, 3);
    coord_proc coord;
    if (sim_coord_start(&coord) != 0)
        return 1;
    int rc = 0;
    for (int i = 0; i < ns; i++)
        rc |= sizes[i] < 2 || run(&coord, sizes[i], full) != 0;
    coord_cleanup(&coord);
    return rc;
}
