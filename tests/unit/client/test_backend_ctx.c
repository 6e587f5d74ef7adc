/* The host backend driven through its context alone (client/src/backend/backend.h):
 * two ranks, one thread each, no coordinator and no process group. The
 * context's hooks stand in for the front end: endpoints come from the
 * test, and the liveness check says what the test wants. If a backend
 * reached past its context into the front end's state, this would not
 * link or would crash. */
#include "host/host.h"

#include "c10d_time.h"
#include "check_main.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define N 1024

/* What the two ranks share: their published endpoints, and what the
 * hooks were asked. */
typedef struct {
    char ep[2][1024];
    size_t eplen[2];
    atomic_int published;
    atomic_int fetched;
    int lose_peer; /* once both connected, rank 0's check hook says rank 1 is gone */
    atomic_int connected;
    int local;     /* the rendezvous says both are on this host */
    int strangers; /* silent connections rank 1 opens to rank 0's port before it dials */
    int stranger_fd[32];
    c10di_be_ctx ctx[2];
    c10d_status st[2];
    char msg[2][512];
    float out[2][N];
} world;

static world *of(const c10di_be_ctx *x)
{
    return (world *)(void *)x->pg;
}

static c10d_status check(const c10di_be_ctx *x, const c10di_coll *c, int waiting_for)
{
    (void)waiting_for;
    if (of(x)->lose_peer && x->rank == 0 && atomic_load(&of(x)->connected) == 2)
        return c10di_error(C10D_EPEERLOST, "%s: rank 1 is gone (the test's check hook)",
                           c->what);
    if (c10d_now_ms() > c->deadline_ms)
        return c10di_error(C10D_ETIMEDOUT, "%s: the test's deadline passed", c->what);
    return C10D_OK;
}

static c10d_status failure(const c10di_be_ctx *x, uint64_t seq, char *msg, size_t cap)
{
    (void)x, (void)seq, (void)msg, (void)cap;
    return C10D_OK;
}

static c10d_status fetch(const c10di_be_ctx *x, const int *ranks, size_t n,
                         ProtobufCBinaryData *eps, int timeout_ms)
{
    (void)timeout_ms;
    world *w = of(x);
    atomic_fetch_add(&w->fetched, 1);
    for (size_t i = 0; i < n; i++) {
        eps[i].len = w->eplen[ranks[i]];
        eps[i].data = malloc(eps[i].len);
        memcpy(eps[i].data, w->ep[ranks[i]], eps[i].len);
    }
    return C10D_OK;
}

static void alert(const c10di_be_ctx *x, c10d_status st, const char *report)
{
    (void)x, (void)st, (void)report;
}

static void completed(const c10di_be_ctx *x, uint64_t seq)
{
    (void)x, (void)seq;
}

static uint64_t issued(const c10di_be_ctx *x)
{
    (void)x;
    return 0;
}

static void drain(const c10di_be_ctx *x)
{
    (void)x;
}

static void join_mark(const c10di_be_ctx *x, uint64_t *joined_after1, uint32_t *region)
{
    (void)x;
    *joined_after1 = 0;
    *region = 0;
}

static void join_heard(const c10di_be_ctx *x, int peer, uint64_t after)
{
    (void)x, (void)peer, (void)after;
}

static int avg_by_active(const c10di_be_ctx *x, const c10di_coll *c)
{
    (void)x, (void)c;
    return 0;
}

static const c10di_be_hooks hooks = {check, failure, fetch, alert, completed, issued, drain,
                                     join_mark, join_heard, avg_by_active, NULL};

static void coll_all_reduce(c10di_coll *c, float *buf, uint64_t seq)
{
    memset(c, 0, sizeof *c);
    c->kind = C10DC_ALL_REDUCE;
    c->dtype = C10D_FLOAT32;
    c->op = C10D_SUM;
    c->count = N;
    c->buf = buf;
    c->seq = seq;
    c->fp = (c10dc_fp){C10DC_ALL_REDUCE, C10D_FLOAT32, N, C10DC_NO_ROOT, C10D_SUM,
                       C10DC_DEV_CPU, 0};
    c->timeout_ms = 20000;
    c->deadline_ms = c10d_now_ms() + c->timeout_ms;
    snprintf(c->what, sizeof c->what, "#%llu ALL_REDUCE", (unsigned long long)seq);
}

typedef struct {
    world *w;
    int rank;
} rank_arg;

/* Connections to rank 0's data port that never say a word, made before
 * rank 1 dials: what a port scanner or a stale peer looks like. */
static void open_strangers(world *w)
{
    C10dpb__HostEndpoint *e = c10dpb__host_endpoint__unpack(NULL, w->eplen[0],
                                                             (const uint8_t *)w->ep[0]);
    if (!e)
        return;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)e->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c10dpb__host_endpoint__free_unpacked(e, NULL);
    for (int i = 0; i < w->strangers; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
            fprintf(stderr, "stranger %d: connect: %s\n", i, strerror(errno));
        w->stranger_fd[i] = fd;
    }
}

static void *rank_main(void *arg)
{
    rank_arg *a = arg;
    world *w = a->w;
    int me = a->rank;
    c10di_be_ctx *x = &w->ctx[me];
    *x = (c10di_be_ctx){.job = "ctx-test", .generation = 1, .group = "world", .host = "here",
                        .coord_url = "ipc:///nowhere", .rank = me, .size = 2,
                        .world_rank = me, .device = -1, .timeout_ms = 20000,
                        .secret = 0x5eed, .hooks = &hooks, .pg = (struct c10d_pg *)(void *)w};
    void *state = NULL;
    c10d_status st = c10di_host_backend.open(x, &state, w->ep[me], sizeof w->ep[me],
                                             &w->eplen[me]);
    if (st == C10D_OK) {
        atomic_fetch_add(&w->published, 1);
        while (atomic_load(&w->published) < 2) /* the rendezvous: both published */
            usleep(100);
        /* On one host the rendezvous hands both endpoints; otherwise only
         * this rank's, and the other's is fetched at first link. */
        if (me == 1 && w->strangers)
            open_strangers(w);
        int32_t ranks[2] = {0, 1};
        ProtobufCBinaryData eps[2] = {{w->eplen[0], (uint8_t *)w->ep[0]},
                                      {w->eplen[1], (uint8_t *)w->ep[1]}};
        c10di_peers peers = w->local ? (c10di_peers){2, ranks, eps}
                                     : (c10di_peers){1, &ranks[me], &eps[me]};
        st = c10di_host_backend.connect(state, &peers);
        atomic_fetch_add(&w->connected, 1);
    }
    if (st == C10D_OK && !(w->lose_peer && me == 1)) {
        for (int i = 0; i < N; i++)
            w->out[me][i] = (float)(me + 1) * (float)i;
        c10di_coll c;
        coll_all_reduce(&c, w->out[me], 1);
        st = c10di_host_backend.run_call(state, &c);
    }
    w->st[me] = st;
    snprintf(w->msg[me], sizeof w->msg[me], "%s", st != C10D_OK ? c10d_errmsg() : "");
    if (state)
        c10di_host_backend.close(state);
    return NULL;
}

static void run_two(world *w)
{
    pthread_t t[2];
    rank_arg a[2] = {{w, 0}, {w, 1}};
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(pthread_create(&t[r], NULL, rank_main, &a[r]), 0);
    for (int r = 0; r < 2; r++)
        pthread_join(t[r], NULL);
}

static void assert_summed(world *w)
{
    for (int r = 0; r < 2; r++) {
        ck_assert_msg(w->st[r] == C10D_OK, "rank %d: %s: %s", r, c10d_status_name(w->st[r]),
                      w->msg[r]);
        for (int i = 0; i < N; i++)
            ck_assert_msg(w->out[r][i] == 3.0f * (float)i, "rank %d element %d: %g", r, i,
                          (double)w->out[r][i]);
    }
}

START_TEST(two_ranks_on_one_host_all_reduce_through_shared_memory)
{
    world *w = calloc(1, sizeof *w);
    w->local = 1;
    run_two(w);
    assert_summed(w);
    ck_assert_int_eq(atomic_load(&w->fetched), 0); /* both endpoints came with the rendezvous */
    free(w);
}
END_TEST

START_TEST(ranks_apart_link_over_tcp_with_the_endpoint_the_fetch_hook_gives)
{
    world *w = calloc(1, sizeof *w);
    run_two(w);
    assert_summed(w);
    /* The higher rank dials: it asked for the lower one's endpoint. */
    ck_assert_int_ge(atomic_load(&w->fetched), 1);
    free(w);
}
END_TEST

/* Twelve silent connections reach rank 0's listener before rank 1's
 * link: more than the slots for connections being admitted. Each was read
 * with a 5 s wait of its own, so the link came after a minute, past the
 * all_reduce's 20 s deadline; now they wait beside it and the oldest
 * make room. */
START_TEST(silent_strangers_on_the_data_port_hold_no_link_up)
{
    world *w = calloc(1, sizeof *w);
    w->strangers = 12;
    run_two(w);
    assert_summed(w);
    for (int i = 0; i < w->strangers; i++)
        close(w->stranger_fd[i]);
    free(w);
}
END_TEST

START_TEST(the_published_endpoint_is_a_host_endpoint_message)
{
    world *w = calloc(1, sizeof *w);
    w->local = 1;
    run_two(w);
    C10dpb__HostEndpoint *e = c10dpb__host_endpoint__unpack(NULL, w->eplen[0],
                                                             (const uint8_t *)w->ep[0]);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e->host, "here");
    ck_assert_int_eq(e->pid, (int)getpid());
    ck_assert_int_gt(e->port, 0);
    ck_assert_str_ne(e->shm, "");
    c10dpb__host_endpoint__free_unpacked(e, NULL);
    free(w);
}
END_TEST

START_TEST(a_loss_the_check_hook_reports_ends_the_wait)
{
    world *w = calloc(1, sizeof *w);
    w->local = 1;
    w->lose_peer = 1; /* rank 1 connects, then never calls the all_reduce */
    run_two(w);
    ck_assert_int_eq(w->st[1], C10D_OK);
    ck_assert_msg(w->st[0] == C10D_EPEERLOST, "rank 0: %s: %s", c10d_status_name(w->st[0]),
                  w->msg[0]);
    ck_assert_msg(strstr(w->msg[0], "the test's check hook"), "%s", w->msg[0]);
    free(w);
}
END_TEST

START_TEST(an_endpoint_that_is_not_a_host_backends_is_refused)
{
    c10di_be_ctx x = {.job = "ctx-test", .group = "g", .host = "here", .coord_url = "",
                      .rank = 0, .size = 2, .world_rank = 0, .device = -1,
                      .timeout_ms = 1000, .hooks = &hooks};
    world w = {0};
    x.pg = (struct c10d_pg *)(void *)&w;
    char ep[1024];
    size_t len = 0;
    void *state = NULL;
    ck_assert_int_eq(c10di_host_backend.open(&x, &state, ep, sizeof ep, &len), C10D_OK);
    /* what endpoints looked like before they were a protobuf message */
    static const char text[] = "host=here\npid=1\nshm=\naddr=127.0.0.1\nport=1\n";
    int32_t ranks[2] = {0, 1};
    ProtobufCBinaryData eps[2] = {{len, (uint8_t *)ep}, {sizeof text - 1, (uint8_t *)text}};
    c10di_peers peers = {2, ranks, eps};
    c10d_status st = c10di_host_backend.connect(state, &peers);
    ck_assert_int_eq(st, C10D_EPROTO);
    ck_assert_msg(strstr(c10d_errmsg(), "endpoint of rank 1"), "%s", c10d_errmsg());
    c10di_host_backend.close(state);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend_ctx");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, two_ranks_on_one_host_all_reduce_through_shared_memory);
    tcase_add_test(tc, ranks_apart_link_over_tcp_with_the_endpoint_the_fetch_hook_gives);
    tcase_add_test(tc, silent_strangers_on_the_data_port_hold_no_link_up);
    tcase_add_test(tc, the_published_endpoint_is_a_host_endpoint_message);
    tcase_add_test(tc, a_loss_the_check_hook_reports_ends_the_wait);
    tcase_add_test(tc, an_endpoint_that_is_not_a_host_backends_is_refused);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
