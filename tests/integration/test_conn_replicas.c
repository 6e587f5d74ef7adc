/* A replicated coordinator as the client sees it (docs/replication.md):
 * a list of URLs, of which only the leader's serves. Dead replicas (ports
 * that refuse) are passed over; a follower, played here by a fake that
 * answers every request with C10D_ENOTLEADER and the leader's URL, sends
 * the client on to the leader, with the calls in flight resent and a
 * recorded one (add) applied once. */
#include "store_coord.h"

#include "c10d.pb-c.h"
#include "check_main.h"
#include "frame.h"
#include "frame_server.h"
#include "raw_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* --- a port that refuses: bound, never listening --- */

static int dead_fd[2] = {-1, -1};
static char dead_url[2][64];

static void dead_ports(void)
{
    for (int i = 0; i < 2; i++) {
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t len = sizeof a;
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        dead_fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(dead_fd[i], 0);
        ck_assert_int_eq(bind(dead_fd[i], (struct sockaddr *)&a, sizeof a), 0);
        ck_assert_int_eq(getsockname(dead_fd[i], (struct sockaddr *)&a, &len), 0);
        snprintf(dead_url[i], sizeof dead_url[i], "tcp://127.0.0.1:%d", ntohs(a.sin_port));
    }
}

/* --- a fake replica: a follower, or a proxy to the leader that turns
 * follower --- */

typedef struct fake {
    int lfd;
    char url[64];
    char leader[128];       /* the leader_url it answers with ("": none) */
    const char *upstream;   /* proxy mode: the coordinator it relays to */
    atomic_int proxy;       /* 1: relays; 0: a follower */
    atomic_int drop_reply;  /* proxy: the next reply is lost, and the fake turns follower */
    atomic_int conns;       /* connections accepted */
    atomic_int not_leader;  /* ENOTLEADER replies sent */
    atomic_int stop;
    pthread_t th;
} fake;

static int reply_not_leader(fake *f, int fd, uint64_t id)
{
    C10dpb__Reply r = C10DPB__REPLY__INIT;
    r.request_id = id;
    r.status = C10D_ENOTLEADER;
    r.detail = "this replica does not lead";
    if (f->leader[0])
        r.leader_url = f->leader;
    size_t n = c10dpb__reply__get_packed_size(&r);
    uint8_t buf[512];
    if (C10DC_FRAME_HDR + n > sizeof buf)
        return -1;
    c10dc_frame_header(buf, id, n);
    c10dpb__reply__pack(&r, buf + C10DC_FRAME_HDR);
    atomic_fetch_add(&f->not_leader, 1);
    return raw_write_all(fd, buf, C10DC_FRAME_HDR + n);
}

/* One client connection as a follower: every request answered so. */
static int answer_not_leader(int fd, uint64_t id, void *arg)
{
    return reply_not_leader(arg, fd, id);
}

/* One client connection relayed to the upstream coordinator, until a
 * reply is to be lost (drop_reply): then both connections close, as a
 * leader's do when it loses the lead, and the fake is a follower. */
static void serve_proxy(fake *f, int fd)
{
    int up = raw_connect(f->upstream);
    if (up < 0)
        return;
    uint8_t buf[1 << 16];
    while (!atomic_load(&f->stop)) {
        struct pollfd p[2] = {{fd, POLLIN, 0}, {up, POLLIN, 0}};
        if (poll(p, 2, 20) <= 0)
            continue;
        if (p[0].revents) {
            ssize_t r = read(fd, buf, sizeof buf);
            if (r <= 0 || raw_write_all(up, buf, (size_t)r) != 0)
                break;
        }
        if (p[1].revents) {
            ssize_t r = read(up, buf, sizeof buf);
            if (r <= 0)
                break;
            if (atomic_load(&f->drop_reply)) {
                atomic_store(&f->proxy, 0);
                atomic_store(&f->drop_reply, 0);
                break;
            }
            if (raw_write_all(fd, buf, (size_t)r) != 0)
                break;
        }
    }
    close(up);
}

static void *fake_main(void *arg)
{
    fake *f = arg;
    while (!atomic_load(&f->stop)) {
        struct pollfd p = {f->lfd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        atomic_fetch_add(&f->conns, 1);
        if (atomic_load(&f->proxy))
            serve_proxy(f, fd);
        else
            frame_server_serve(fd, &f->stop, answer_not_leader, f);
        close(fd);
    }
    return NULL;
}

/* Listens on a free port (f->url); no thread yet. */
static void fake_listen(fake *f)
{
    memset(f, 0, sizeof *f);
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(f->lfd, 0);
    ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(f->lfd, 16), 0);
    ck_assert_int_eq(getsockname(f->lfd, (struct sockaddr *)&a, &len), 0);
    snprintf(f->url, sizeof f->url, "tcp://127.0.0.1:%d", ntohs(a.sin_port));
}

/* Serves on f's port, answering with leader as the leader's URL (NULL: a
 * follower that knows none), or relaying to upstream (non-NULL) until it
 * turns follower. */
static void fake_run(fake *f, const char *leader, const char *upstream)
{
    snprintf(f->leader, sizeof f->leader, "%s", leader ? leader : "");
    f->upstream = upstream;
    atomic_store(&f->proxy, upstream != NULL);
    ck_assert_int_eq(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_start(fake *f, const char *leader, const char *upstream)
{
    fake_listen(f);
    fake_run(f, leader, upstream);
}

/* Two followers that name each other as the leader. */
static void fake_pair(fake *a, fake *b)
{
    fake_listen(a);
    fake_listen(b);
    fake_run(a, b->url, NULL);
    fake_run(b, a->url, NULL);
}

static void fake_stop(fake *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->th, NULL);
    close(f->lfd);
}

/* --- the cases --- */

static c10d_store *connect_list(const char *list)
{
    return connect_timeout(list, 10000);
}

static void set_and_get(c10d_store *s)
{
    OK(c10d_store_set(s, "k", "v1", 2));
    void *v = NULL;
    size_t n = 0;
    OK(c10d_store_get(s, "k", &v, &n, C10D_NO_WAIT));
    ck_assert_uint_eq(n, 2);
    ck_assert_mem_eq(v, "v1", 2);
    c10d_free(v);
}

START_TEST(a_dead_first_url_is_passed_over)
{
    dead_ports();
    char list[1024];
    snprintf(list, sizeof list, "%s,%s", dead_url[0], coord.url);
    c10d_store *s = connect_list(list);
    set_and_get(s);
    ck_assert_str_eq(c10d_store_url(s), list); /* the list, as given */
    c10d_store_close(s);
}
END_TEST

START_TEST(the_coordinator_listed_last_after_two_dead_ones_is_found)
{
    dead_ports();
    char list[1024];
    /* "host:port" and spaces are taken in a list as in one URL */
    snprintf(list, sizeof list, "%s, %s,%s", dead_url[0], dead_url[1] + strlen("tcp://"),
             coord.url);
    long long t0 = test_now_ms();
    c10d_store *s = connect_list(list);
    /* one round of refused dials, no back-off between them: far below
     * the 870 ms of the back-off's first five steps */
    ck_assert_int_lt(test_now_ms() - t0, 800);
    set_and_get(s);
    c10d_store_close(s);
}
END_TEST

START_TEST(a_list_in_c10d_coord_is_used)
{
    dead_ports();
    char list[1024];
    snprintf(list, sizeof list, "%s,%s", dead_url[0], coord.url);
    setenv("C10D_COORD", list, 1);
    c10d_store *s = connect_list(NULL);
    unsetenv("C10D_COORD");
    set_and_get(s);
    c10d_store_close(s);
}
END_TEST

START_TEST(all_dead_names_every_url)
{
    dead_ports();
    char list[1024];
    snprintf(list, sizeof list, "%s,%s", dead_url[0], dead_url[1]);
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 300;
    ck_assert_int_eq(c10d_store_connect(&s, list, &o), C10D_EUNAVAIL);
    ck_assert_msg(strstr(c10d_errmsg(), list) != NULL, "%s", c10d_errmsg());
}
END_TEST

/* The follower is the only URL listed: the leader it names (not in the
 * list) is dialled, from the hello on. */
START_TEST(a_follower_sends_the_client_to_the_leader_it_names)
{
    fake f;
    fake_start(&f, coord.url, NULL);
    c10d_store *s = connect_list(f.url);
    set_and_get(s);
    int64_t r = 0;
    OK(c10d_store_add(s, "n", 5, &r));
    ck_assert_int_eq(r, 5);
    ck_assert_int_ge(atomic_load(&f.not_leader), 1); /* the hello went there first */
    int seen = atomic_load(&f.not_leader);
    OK(c10d_store_add(s, "n", 1, &r)); /* and stays with the leader */
    ck_assert_int_eq(r, 6);
    ck_assert_int_eq(atomic_load(&f.not_leader), seen);
    c10d_store_close(s);
    fake_stop(&f);
}
END_TEST

/* A follower that knows no leader: the next URL is tried. */
START_TEST(a_follower_without_a_leader_sends_the_client_on_down_the_list)
{
    fake f;
    fake_start(&f, NULL, NULL);
    char list[1024];
    snprintf(list, sizeof list, "%s,%s", f.url, coord.url);
    c10d_store *s = connect_list(list);
    set_and_get(s);
    ck_assert_int_ge(atomic_load(&f.not_leader), 1);
    c10d_store_close(s);
    fake_stop(&f);
}
END_TEST

/* The replica the client is on loses the lead after running an add and
 * before its reply left (the connection drops, as a replica's do when it
 * stops leading); dialled again it is a follower, naming the leader. The
 * add is resent there with its request id and applied once. */
START_TEST(an_add_in_flight_when_the_lead_moves_is_applied_once)
{
    fake f;
    fake_start(&f, coord.url, coord.url);
    c10d_store *s = connect_list(f.url);
    int64_t r = 0;
    OK(c10d_store_add(s, "n", 10, &r));
    ck_assert_int_eq(r, 10);
    ck_assert_int_eq(atomic_load(&f.not_leader), 0);
    atomic_store(&f.drop_reply, 1);
    OK(c10d_store_add(s, "n", 1, &r));
    ck_assert_int_eq(r, 11);
    ck_assert_int_ge(atomic_load(&f.not_leader), 1); /* it went by the follower */
    ck_assert_int_eq(atomic_load(&f.proxy), 0);
    void *v = NULL;
    size_t n = 0;
    OK(c10d_store_get(s, "n", &v, &n, C10D_NO_WAIT));
    ck_assert_str_eq(v, "11");
    c10d_free(v);
    c10d_store_close(s);
    fake_stop(&f);
}
END_TEST

/* The same with four threads adding at once on the one connection: the
 * replies lost are several, and every add is resent and applied once. */
static c10d_store *adder_store;
static atomic_int adds_done;

static void *adder(void *arg)
{
    (void)arg;
    for (int i = 0; i < 50; i++) {
        if (c10d_store_add(adder_store, "n", 1, NULL) != C10D_OK)
            return (void *)1;
        atomic_fetch_add(&adds_done, 1);
    }
    return NULL;
}

START_TEST(adds_in_flight_from_threads_when_the_lead_moves_are_applied_once)
{
    fake f;
    fake_start(&f, coord.url, coord.url);
    adder_store = connect_list(f.url);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, adder, NULL), 0);
    long long until = test_now_ms() + 10000;
    while (atomic_load(&adds_done) < 20 && test_now_ms() < until)
        sched_yield();
    atomic_store(&f.drop_reply, 1);
    for (int i = 0; i < 4; i++) {
        void *rc;
        pthread_join(th[i], &rc);
        ck_assert_msg(rc == NULL, "an add failed");
    }
    ck_assert_int_ge(atomic_load(&f.not_leader), 1);
    void *v = NULL;
    size_t n = 0;
    OK(c10d_store_get(adder_store, "n", &v, &n, C10D_NO_WAIT));
    ck_assert_str_eq(v, "200");
    c10d_free(v);
    c10d_store_close(adder_store);
    fake_stop(&f);
}
END_TEST

/* Two followers naming each other (an election, as each saw it last),
 * and no leader: the client backs off after each round instead of
 * bouncing between them, and gives up at its timeout saying no leader
 * was found. */
START_TEST(followers_naming_each_other_do_not_make_the_client_spin)
{
    fake a, b;
    fake_pair(&a, &b);
    char list[1024];
    snprintf(list, sizeof list, "%s,%s", a.url, b.url);
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 1500;
    long long t0 = test_now_ms();
    ck_assert_int_eq(c10d_store_connect(&s, list, &o), C10D_EUNAVAIL);
    long long took = test_now_ms() - t0;
    ck_assert_msg(strstr(c10d_errmsg(), "no leader found") && strstr(c10d_errmsg(), list),
                  "%s", c10d_errmsg());
    ck_assert_int_ge(took, 1400);
    ck_assert_int_lt(took, 4000);
    /* back-offs of 20, 50, 100, 200, then 500 ms between rounds of two
     * connections: about 16 in 1.5 s; a client that spun made thousands */
    int conns = atomic_load(&a.conns) + atomic_load(&b.conns);
    ck_assert_int_ge(conns, 4);
    ck_assert_int_le(conns, 40);
    fake_stop(&a);
    fake_stop(&b);
}
END_TEST

/* The same two followers and the leader listed last: found, though
 * neither follower names it. */
START_TEST(followers_naming_each_other_do_not_hide_the_leader)
{
    fake a, b;
    fake_pair(&a, &b);
    char list[1024];
    snprintf(list, sizeof list, "%s,%s,%s", a.url, b.url, coord.url);
    c10d_store *s = connect_list(list);
    set_and_get(s);
    c10d_store_close(s);
    fake_stop(&a);
    fake_stop(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conn_replicas");
    TCase *tc = store_tcase("conn_replicas");
    tcase_add_test(tc, a_dead_first_url_is_passed_over);
    tcase_add_test(tc, the_coordinator_listed_last_after_two_dead_ones_is_found);
    tcase_add_test(tc, a_list_in_c10d_coord_is_used);
    tcase_add_test(tc, all_dead_names_every_url);
    tcase_add_test(tc, a_follower_sends_the_client_to_the_leader_it_names);
    tcase_add_test(tc, a_follower_without_a_leader_sends_the_client_on_down_the_list);
    tcase_add_test(tc, an_add_in_flight_when_the_lead_moves_is_applied_once);
    tcase_add_test(tc, adds_in_flight_from_threads_when_the_lead_moves_are_applied_once);
    tcase_add_test(tc, followers_naming_each_other_do_not_make_the_client_spin);
    tcase_add_test(tc, followers_naming_each_other_do_not_hide_the_leader);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
