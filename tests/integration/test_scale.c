/* A 4,096-rank job against a real coordinator: simulated ranks (tests/
 * support/sim_ranks.c: one thread, a connection per host of 8 ranks, the
 * last rank alone on one) form the world, each getting what it needs and
 * no more; then one rank dies and every other one hears of it. */
#include "coord_proc.h"
#include "sim_ranks.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4096
#define PER_HOST 8

static coord_proc coord;

typedef struct {
    int rank, alive;
    int joined, fetched, heard;
    uint64_t version;
} rank_t;

typedef struct {
    rank_t r[N];
    sim_conn *conn[N / PER_HOST + 1];
    int nconn;
    uint64_t gen;
    int joined, fetched, watching, heard;
    int errors;
    char first_error[512];
    double join_reply_bytes;
    int victim;
    int mass; /* the mass failure: lost members a survivor must hear of */
    int want_heard;
} world_t;

static world_t *W;

static int conn_of(int rank)
{
    return rank == N - 1 ? W->nconn - 1 : rank / PER_HOST;
}

static void endpoint_of(int rank, char *buf, size_t cap)
{
    snprintf(buf, cap, "host=node%d\npid=%d\naddr=10.1.%d.%d\nport=%d\n", conn_of(rank),
             1000 + rank, rank / 250, rank % 250, 20000 + rank);
}

static void error(const char *fmt, const char *a, int rank)
{
    if (!W->errors++)
        snprintf(W->first_error, sizeof W->first_error, fmt, rank, a);
}

static void send_watch(rank_t *s)
{
    C10dpb__Watch m = C10DPB__WATCH__INIT;
    m.job = "scale";
    m.generation = W->gen;
    m.rank = s->rank;
    m.has_known_version = m.has_wait_ms = 1;
    m.known_version = s->version;
    m.wait_ms = 60000;
    /* even ranks take runs of lost ranks, as the library does; odd ones
     * every lost member in full, as clients before runs */
    m.has_lost_ranges_ok = 1;
    m.lost_ranges_ok = s->rank % 2 == 0;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_WATCH;
    req.watch = &m;
    sim_send(W->conn[conn_of(s->rank)], &req, s);
}

static void on_join(rank_t *s, C10dpb__GroupJoinReply *gj)
{
    /* Its host's members, in rank order, with their endpoints: no more. */
    int first = s->rank / PER_HOST * PER_HOST, count = PER_HOST;
    if (s->rank == N - 1)
        first = N - 1, count = 1;
    else if (first + count > N - 1)
        count = N - 1 - first;
    int ok = gj->n_endpoints == (size_t)count && gj->n_endpoint_ranks == (size_t)count;
    for (int i = 0; ok && i < count; i++) {
        char want[128];
        endpoint_of(first + i, want, sizeof want);
        ok = gj->endpoint_ranks[i] == first + i && gj->endpoints[i].len == strlen(want) &&
             memcmp(gj->endpoints[i].data, want, strlen(want)) == 0;
    }
    if (!ok) {
        error("rank %d: the rendezvous sent %s", "other endpoints than its host's", s->rank);
        return;
    }
    s->joined = 1;
    W->joined++;
    W->gen = gj->generation;
    /* Then, as at its first collective: its ring neighbours'. */
    int32_t want[2] = {(s->rank + N - 1) % N, (s->rank + 1) % N};
    C10dpb__GroupEndpoints m = C10DPB__GROUP_ENDPOINTS__INIT;
    m.job = "scale";
    m.generation = gj->generation;
    m.name = "world";
    m.rank = s->rank;
    m.n_ranks = 2;
    m.ranks = want;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_GROUP_ENDPOINTS;
    req.group_endpoints = &m;
    sim_send(W->conn[conn_of(s->rank)], &req, s);
}

static void on_endpoints(rank_t *s, C10dpb__GroupJoinReply *gj)
{
    int ok = gj->n_endpoints == 2;
    for (int i = 0; ok && i < 2; i++) {
        char want[128];
        endpoint_of(gj->endpoint_ranks[i], want, sizeof want);
        ok = gj->endpoint_ranks[i] == (s->rank + (i ? 1 : N - 1)) % N &&
             gj->endpoints[i].len == strlen(want) &&
             memcmp(gj->endpoints[i].data, want, strlen(want)) == 0;
    }
    if (!ok) {
        error("rank %d: %s", "wrong neighbour endpoints", s->rank);
        return;
    }
    s->fetched = 1;
    W->fetched++;
}

static void on_watch(rank_t *s, C10dpb__WatchReply *w)
{
    if (w->version > s->version)
        s->version = w->version;
    if (W->mass) {
        /* every rank lost so far, each named once, in full or in a run */
        static char seen[N];
        memset(seen, 0, sizeof seen);
        int named = 0;
        for (size_t i = 0; i < w->n_lost; i++)
            named += !seen[w->lost[i]->rank]++;
        for (size_t i = 0; i < w->n_lost_ranges; i++)
            for (int r = w->lost_ranges[i]->first; r <= w->lost_ranges[i]->last; r++)
                named += !seen[r]++;
        if (named == W->mass && !s->heard) {
            int full = s->rank % 2;
            if (full ? w->n_lost != (size_t)W->mass || w->n_lost_ranges
                     : w->n_lost > 16 || !w->n_lost_ranges)
                error("rank %d: %s", full ? "lost members not all in full"
                                          : "more than 16 in full, or no runs", s->rank);
            s->heard = 1;
            W->heard++;
        }
    } else if (!s->heard) {
        for (size_t i = 0; i < w->n_lost; i++)
            if (w->lost[i]->rank == W->victim &&
                w->lost[i]->state == C10DPB__MEMBER_STATE__MEMBER_DEAD) {
                s->heard = 1;
                W->heard++;
            }
    }
    send_watch(s);
}

static void on_reply(sim_conn *c, void *tag, C10dpb__Reply *rep, void *arg)
{
    (void)c, (void)arg;
    rank_t *s = tag;
    if (!s || !s->alive)
        return;
    if (!rep) {
        error("rank %d: %s", "its connection broke", s->rank);
        return;
    }
    if (rep->status != 0) {
        error("rank %d: %s", rep->detail ? rep->detail : "an error", s->rank);
        return;
    }
    switch (rep->result_case) {
    case C10DPB__REPLY__RESULT_GROUP_JOIN:
        W->join_reply_bytes += (double)c10dpb__reply__get_packed_size(rep);
        on_join(s, rep->group_join);
        break;
    case C10DPB__REPLY__RESULT_GROUP_ENDPOINTS: on_endpoints(s, rep->group_endpoints); break;
    case C10DPB__REPLY__RESULT_WATCH: on_watch(s, rep->watch); break;
    default: error("rank %d: %s", "an unexpected reply", s->rank);
    }
}

static int formed(void *a)
{
    (void)a;
    return W->errors || W->fetched == N;
}

static int everyone_heard(void *a)
{
    (void)a;
    return W->errors || W->heard == W->want_heard;
}


/* What `c10d-ctl --coord URL ARGS` printed (malloc'd). */
static char *ctl_output(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --coord %s %s", C10D_CTL_BIN, coord.url, args);
    FILE *p = popen(cmd, "r");
    size_t len = 0, cap = 1 << 16;
    char *out = malloc(cap);
    for (size_t k; p && (k = fread(out + len, 1, cap - len - 1, p)) > 0;) {
        len += k;
        if (len + 1 == cap)
            out = realloc(out, cap *= 2);
    }
    out[len] = '\0';
    if (p)
        pclose(p);
    return out;
}

static int lines_of(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static int none(void *a)
{
    (void)a;
    return W->errors;
}

START_TEST(rendezvous_of_4096_ranks_and_a_death_among_them)
{
    coord_init(&coord);
    const char *extra[] = {"--max-world-size", "65536", NULL};
    ck_assert_int_eq(coord_start(&coord, NULL, extra, NULL), 0);
    W = calloc(1, sizeof *W);
    sim_loop *L = sim_loop_new(on_reply, NULL);
    W->nconn = (N - 1 + PER_HOST - 1) / PER_HOST + 1;
    for (int i = 0; i < W->nconn; i++)
        ck_assert_ptr_nonnull(W->conn[i] = sim_connect(L, coord.url));
    for (int r = 0; r < N; r++) {
        rank_t *s = &W->r[r];
        s->rank = r;
        s->alive = 1;
        char ep[128], host[32];
        endpoint_of(r, ep, sizeof ep);
        snprintf(host, sizeof host, "node%d", conn_of(r));
        C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
        m.job = "scale";
        m.name = "world";
        m.rank = r;
        m.world_size = N;
        m.has_endpoint = m.has_pid = m.has_timeout_ms = m.has_peers_on_demand = 1;
        m.endpoint.data = (uint8_t *)ep;
        m.endpoint.len = strlen(ep);
        m.host = host;
        m.pid = 1000 + r;
        m.timeout_ms = 120000;
        m.peers_on_demand = 1;
        C10dpb__Request req = C10DPB__REQUEST__INIT;
        req.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
        req.group_join = &m;
        sim_send(W->conn[conn_of(r)], &req, s);
    }
    int rc = sim_run(L, formed, NULL, (int64_t)sim_now_ms() + 60000);
    ck_assert_msg(!W->errors, "%d errors, the first: %s", W->errors, W->first_error);
    ck_assert_msg(rc == 0, "after 60 s %d of %d ranks joined, %d fetched their neighbours",
                  W->joined, N, W->fetched);
    /* Linear: a rank's reply holds its host's 8 endpoints, not 4,096
     * (which would be ~1 GB of replies in all). */
    ck_assert_msg(W->join_reply_bytes < (double)N * 1024, "%.0f bytes of rendezvous replies",
                  W->join_reply_bytes);

    /* Every rank watches; the last one dies. */
    for (int r = 0; r < N; r++)
        send_watch(&W->r[r]);
    for (double until = sim_now_ms() + 30000; sim_parked(coord.url) < N && sim_now_ms() < until;)
        sim_run(L, none, NULL, (int64_t)sim_now_ms() + 20);
    ck_assert_msg(sim_parked(coord.url) >= N, "only %ld watches parked", sim_parked(coord.url));
    W->victim = N - 1;
    W->want_heard = N - 1;
    W->r[N - 1].alive = 0;
    sim_close(W->conn[W->nconn - 1]);
    rc = sim_run(L, everyone_heard, NULL, (int64_t)sim_now_ms() + 30000);
    ck_assert_msg(!W->errors, "%d errors, the first: %s", W->errors, W->first_error);
    ck_assert_msg(rc == 0, "after 30 s %d of %d survivors heard rank %d died", W->heard, N - 1,
                  N - 1);

    /* 12 hosts at once (ranks 8-103): every survivor hears of all 97 lost;
     * those that take runs get at most 16 in full. */
    for (int r = 0; r < N; r++)
        W->r[r].heard = 0;
    W->heard = 0;
    W->mass = 1 + 12 * PER_HOST;
    W->want_heard = N - W->mass;
    for (int k = 1; k <= 12; k++) {
        for (int r = k * PER_HOST; r < (k + 1) * PER_HOST; r++)
            W->r[r].alive = 0;
        sim_close(W->conn[k]);
    }
    rc = sim_run(L, everyone_heard, NULL, (int64_t)sim_now_ms() + 30000);
    ck_assert_msg(!W->errors, "%d errors, the first: %s", W->errors, W->first_error);
    ck_assert_msg(rc == 0, "after 30 s %d of %d survivors heard of all %d lost", W->heard,
                  W->want_heard, W->mass);

    /* c10d-ctl summarizes the 4,096 ranks in a few lines; --all and --json
     * still give every rank. */
    char *out = ctl_output("status --job scale");
    ck_assert_msg(lines_of(out) < 40, "status printed %d lines:\n%.2000s", lines_of(out), out);
    ck_assert_msg(strstr(out, "3999 alive: ranks 0-7,104-4094") != NULL, "%.2000s", out);
    ck_assert_msg(strstr(out, "97 dead: its connection to the coordinator closed") != NULL &&
                      strstr(out, "ranks 8-103,4095") != NULL && strstr(out, "81 more not alive"),
                  "%.2000s", out);
    free(out);
    out = ctl_output("desync --job scale");
    ck_assert_msg(lines_of(out) < 20, "desync printed %d lines", lines_of(out));
    ck_assert_msg(strstr(out, "job scale: 97 ranks 8-103,4095 dead: its connection") != NULL,
                  "%.2000s", out);
    free(out);
    out = ctl_output("status --job scale --all");
    ck_assert_int_ge(lines_of(out), N);
    free(out);
    out = ctl_output("--json status --job scale");
    int ranks_listed = 0;
    for (const char *p = out; (p = strstr(p, "\"rank\":")) != NULL; p++)
        ranks_listed++;
    ck_assert_int_ge(ranks_listed, N);
    free(out);

    sim_loop_free(L);
    free(W);
    coord_cleanup(&coord);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scale");
    TCase *tc = tcase_create("4096");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, rendezvous_of_4096_ranks_and_a_death_among_them);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
