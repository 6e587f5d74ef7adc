/* The coordinator's readiness loop (server/net/readiness.c): a
 * request wakes one coordinator thread, which reads it and runs it; the
 * requests of connections that woke it together share one batch (one
 * commit); and a coordinator told not to (C10D_NO_READINESS, the NNG
 * callbacks as before) still serves. While requests come back to back,
 * the loop looks for the next before it sleeps (--busy-poll-us), and an
 * idle one does not. */
#include "store_coord.h"

#include "check_main.h"
#include "cpu_time.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The coordinator's counts now (c10d-ctl status): its numbers only, the
 * strings are freed. */
static c10d_coord_info counts_now(c10d_store *s)
{
    c10d_coord_info *info = NULL;
    OK(c10d_store_coord_info(s, &info));
    c10d_coord_info counts = *info;
    c10d_free(info);
    counts.version = counts.listen_url = counts.db_path = counts.tcpstore_url = NULL;
    return counts;
}

/* Gets on url: how often the coordinator's NNG threads switched, a
 * request. */
static double nng_switches_a_request(pid_t pid, const char *url, int trips)
{
    c10d_store *s = connect_timeout(url, 10000);
    OK(c10d_store_set(s, "k", "v", 1));
    void *v;
    size_t n;
    long long before = nng_thread_switches(pid);
    for (int i = 0; i < trips; i++) {
        OK(c10d_store_get(s, "k", &v, &n, C10D_NO_WAIT));
        ck_assert_int_eq(n, 1);
        c10d_free(v);
    }
    double per = (double)(nng_thread_switches(pid) - before) / trips;
    c10d_store_close(s);
    return per;
}

/* Read through NNG, a request woke NNG's poller thread and then one of
 * NNG's task threads for its callback (coordinator switches a round trip,
 * bench_rtt: 2.0-2.1). The readiness loop is woken by the kernel and
 * reads and runs it itself (1.0): NNG's threads stay asleep. */
START_TEST(a_request_wakes_one_coordinator_thread)
{
    double per = nng_switches_a_request(coord.pid, coord.url, 400);
    printf("the coordinator's NNG threads switched %.2f times a request\n", per);
    ck_assert_msg(per < 0.5, "the coordinator's NNG threads switched %.2f times a request (0: "
                  "the readiness loop read and ran it; 2: NNG's poller read it and handed it "
                  "to a task thread)", per);
}
END_TEST

/* Connections whose requests are waiting in the socket buffers, ready to
 * be read, on the coordinator's port (/proc/net/tcp: established, with
 * bytes in the receive queue). */
static int coordinator_sockets_with_bytes(int port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned lport, st;
        unsigned long tx, rx;
        if (sscanf(line, " %*d: %*x:%x %*x:%*x %x %lx:%lx", &lport, &st, &tx, &rx) == 4 &&
            (int)lport == port && st == 1 && rx > 0)
            n++;
    }
    fclose(f);
    return n;
}

/* Whether every thread of pid is stopped (SIGSTOP takes effect on each
 * thread as it next runs, after kill returns). */
static int all_stopped(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int stopped = 1;
    for (struct dirent *e; stopped && (e = readdir(d)) != NULL;) {
        char path[400], stat[512];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
        FILE *f = fopen(path, "r");
        char *end = f && fgets(stat, sizeof stat, f) ? strrchr(stat, ')') : NULL;
        if (f)
            fclose(f);
        stopped = end && (end[2] == 'T' || end[2] == 't');
    }
    closedir(d);
    return stopped;
}

typedef struct {
    c10d_store *s;
    c10d_status st;
} adder;

static void *add_one(void *arg)
{
    adder *a = arg;
    int64_t r;
    a->st = c10d_store_add(a->s, "together", 1, &r);
    return NULL;
}

/* Eight clients' adds arrive while the coordinator is stopped (SIGSTOP:
 * they wait in its sockets); once it goes on, the loop is woken once for
 * all eight and runs them as one batch, one commit. Through NNG's
 * callbacks the first ran alone on its task thread while the others
 * queued: two batches at least. */
START_TEST(requests_that_arrive_together_share_a_commit)
{
    enum { CLIENTS = 8 };
    c10d_store *status = connect_store();
    adder a[CLIENTS];
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++)
        a[i].s = connect_store();
    int64_t before = counts_now(status).batches;
    ck_assert_int_eq(kill(coord.pid, SIGSTOP), 0);
    long long until = test_now_ms() + 10000;
    while (!all_stopped(coord.pid) && test_now_ms() < until)
        usleep(1000);
    for (int i = 0; i < CLIENTS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, add_one, &a[i]), 0);
    until = test_now_ms() + 10000;
    int waiting = 0;
    while ((waiting = coordinator_sockets_with_bytes(port_of(coord.url))) < CLIENTS &&
           test_now_ms() < until)
        usleep(1000);
    ck_assert_int_eq(kill(coord.pid, SIGCONT), 0);
    ck_assert_msg(waiting == CLIENTS, "only %d of %d clients' adds reached the stopped "
                  "coordinator's sockets in 10 s", waiting, CLIENTS);
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(a[i].st == C10D_OK, "add %d: %s", i, c10d_strerror(a[i].st));
    }
    /* the adds' batch, and the status call's own */
    int64_t ran = counts_now(status).batches - before;
    ck_assert_msg(ran == 2, "%d adds that arrived together ran in %lld batches (one, and the "
                  "status call's own, expected)", CLIENTS, (long long)ran - 1);
    int64_t total;
    OK(c10d_store_add(status, "together", 0, &total));
    ck_assert_int_eq(total, CLIENTS);
    for (int i = 0; i < CLIENTS; i++)
        c10d_store_close(a[i].s);
    c10d_store_close(status);
}
END_TEST

/* One get at a time, `trips` of them: how many rounds of requests the
 * coordinator found while it looked before sleeping. */
static int64_t polled_over_gets(const char *url, int trips)
{
    c10d_store *s = connect_timeout(url, 10000);
    OK(c10d_store_set(s, "k", "v", 1));
    int64_t before = counts_now(s).polled;
    void *v;
    size_t n;
    for (int i = 0; i < trips; i++) {
        OK(c10d_store_get(s, "k", &v, &n, C10D_NO_WAIT));
        c10d_free(v);
    }
    int64_t polled = counts_now(s).polled - before;
    c10d_store_close(s);
    return polled;
}

/* A client calling one get after another: its next request comes while
 * the loop still looks (a round found awake spares the wake-up of a
 * sleeping thread: 30-40 us each on this VM, bench_store -c 1 get 77 us
 * before, 43-52 us after). --busy-poll-us 0 turns it off: every round
 * then wakes the thread. */
START_TEST(back_to_back_requests_are_found_awake)
{
    int64_t polled = polled_over_gets(coord.url, 2000);
    printf("rounds found awake over 2000 gets: %lld\n", (long long)polled);
    ck_assert_msg(polled >= 20, "only %lld of 2000 back-to-back gets were found while the loop "
                  "looked (--busy-poll-us)", (long long)polled);

    coord_proc off;
    coord_init(&off);
    const char *args[] = {"--busy-poll-us", "0", NULL};
    ck_assert_int_eq(coord_start(&off, NULL, args, NULL), 0);
    ck_assert_int_eq(polled_over_gets(off.url, 500), 0);
    coord_cleanup(&off);
}
END_TEST

/* Once the requests stop, the window closes after a few empty looks: an
 * idle coordinator sleeps, and costs no CPU. */
START_TEST(an_idle_coordinator_does_not_poll)
{
    (void)polled_over_gets(coord.url, 2000);
    double before = cpu_of(coord.pid);
    usleep(1000 * 1000);
    double used = cpu_of(coord.pid) - before;
    printf("an idle coordinator's CPU over 1 s after 2000 gets: %.3f s\n", used);
    ck_assert_msg(used < 0.1, "the coordinator used %.3f s of CPU in the second after its "
                  "requests stopped (still polling?)", used);
}
END_TEST

/* C10D_NO_READINESS=1: every connection is read through NNG's callbacks,
 * as before the loop (a way back, should the loop misbehave somewhere). */
START_TEST(without_the_loop_connections_are_read_through_nng)
{
    coord_proc plain;
    coord_init(&plain);
    setenv("C10D_NO_READINESS", "1", 1);
    int status;
    int rc = coord_start(&plain, NULL, NULL, &status);
    unsetenv("C10D_NO_READINESS");
    ck_assert_int_eq(rc, 0);
    double per = nng_switches_a_request(plain.pid, plain.url, 200);
    /* NNG's poller and a task thread for each: what the first case saves */
    ck_assert_msg(per >= 1.0, "without the loop, the coordinator's NNG threads switched %.2f "
                  "times a request (the loop still read them?)", per);
    coord_cleanup(&plain);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("readiness");
    TCase *tc = store_tcase("loop");
    tcase_add_test(tc, a_request_wakes_one_coordinator_thread);
    tcase_add_test(tc, requests_that_arrive_together_share_a_commit);
    tcase_add_test(tc, without_the_loop_connections_are_read_through_nng);
    tcase_add_test(tc, back_to_back_requests_are_found_awake);
    tcase_add_test(tc, an_idle_coordinator_does_not_poll);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
