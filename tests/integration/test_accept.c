/* The coordinator's accepting under pressure: more
 * connections than it has file descriptors, and more than
 * --max-connections. Attackers are plain sockets that connect and hold;
 * the coordinator's CPU time is its own (/proc/<pid>/stat). */
#include "store_coord.h"

#include "check_main.h"
#include "cpu_time.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static void restart_with(long nofile, const char *const *args)
{
    coord_stop(&coord, SIGTERM);
    coord.nofile = nofile;
    ck_assert_int_eq(coord_start(&coord, NULL, args, NULL), 0);
}

/* Polls until the coordinator's log has `want` lines containing s, or
 * (when cpu_from >= 0) it has used more than cpu_limit seconds of CPU
 * since cpu_from; 0 if neither happened within timeout_ms. */
static int wait_log(const char *s, int want, double cpu_from, double cpu_limit, int timeout_ms)
{
    for (long long end = test_now_ms() + timeout_ms; test_now_ms() < end; usleep(10000)) {
        if (coord_log_count(&coord, s) >= want)
            return 1;
        if (cpu_from >= 0 && cpu_of(coord.pid) - cpu_from > cpu_limit)
            return 1;
    }
    return 0;
}

/* A store client that connects and is answered, within timeout_ms. */
static void served_within(int timeout_ms)
{
    c10d_store *s = connect_timeout(coord.url, timeout_ms);
    int64_t n;
    OK(c10d_store_add(s, "served", 1, &n));
    c10d_store_close(s);
}

/* Each failed accept was retried at once: 5.6 s of CPU per 5 s at ulimit
 * -n 256. Now retries pause (up to 500 ms): while the coordinator cannot
 * accept, it costs next to no CPU, a client already connected is served,
 * and once connections close a new client is served. */
START_TEST(out_of_file_descriptors_accept_pauses_and_recovers)
{
    /* --max-connections above what 64 descriptors allow: the accepts
     * themselves fail (EMFILE). */
    const char *args[] = {"--max-connections", "4096", "--log-level", "debug", NULL};
    restart_with(64, args);
    c10d_store *s = connect_store();
    OK(c10d_store_set(s, "normal", "ok", 2));
    enum { HOLD = 100 }; /* ~50 accepted, the rest in the kernel's backlog (128) */
    int fds[HOLD];
    for (int i = 0; i < HOLD; i++)
        fds[i] = raw_connect_coord();
    ck_assert_msg(wait_log("Out of files", 1, -1, 0, 30000), /* NNG_ENOFILES */
                  "the coordinator never ran out of file descriptors");
    /* From here on it cannot accept: count its CPU over four retries at
     * the longest pause (two seconds and more), or until it has spent
     * more than a second, whichever comes first. */
    double cpu0 = cpu_of(coord.pid);
    int retried = wait_log("next try in 500 ms", 4, cpu0, 1.0, 60000);
    double used = cpu_of(coord.pid) - cpu0;
    printf("out of file descriptors: %.3f s of CPU over %d retries at the longest pause\n",
           used, coord_log_count(&coord, "next try in 500 ms"));
    ck_assert_msg(used < 0.5, "the coordinator used %.2f s of CPU while unable to accept", used);
    ck_assert_msg(retried, "the coordinator did not retry its accept 4 times within 60 s");
    void *v;
    size_t n;
    OK(c10d_store_get(s, "normal", &v, &n, C10D_NO_WAIT));
    ck_assert_uint_eq(n, 2);
    c10d_free(v);
    for (int i = 0; i < HOLD; i++)
        close(fds[i]);
    served_within(30000);
    ck_assert(coord_log_contains(&coord, "accepting connections again"));
    c10d_store_close(s);
}
END_TEST

/* 1 when the coordinator closed fd without a reply (EOF or reset),
 * 0 when it stayed open for 10 s. */
static int closed_by_peer(int fd)
{
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char b;
    ssize_t r = read(fd, &b, 1);
    return r == 0 || (r < 0 && errno == ECONNRESET);
}

/* Past --max-connections a connection is closed as soon as it is
 * accepted (and logged); the connections already open keep working, and
 * once one closes a new client gets its place. */
START_TEST(connections_past_max_connections_are_closed_at_once)
{
    const char *args[] = {"--max-connections", "8", NULL};
    restart_with(0, args);
    enum { MAX = 8 };
    c10d_store *ss[MAX];
    for (int i = 0; i < MAX; i++) {
        ss[i] = connect_store();
        OK(c10d_store_set(ss[i], "normal", "ok", 2));
    }
    for (int i = 0; i < 3; i++) {
        int fd = raw_connect_coord();
        ck_assert_msg(closed_by_peer(fd), "connection %d past --max-connections 8 was kept open",
                      MAX + i + 1);
        close(fd);
    }
    ck_assert(coord_log_contains(&coord, "the most --max-connections (8) allows"));
    for (int i = 0; i < MAX; i++) {
        void *v;
        size_t n;
        OK(c10d_store_get(ss[i], "normal", &v, &n, C10D_NO_WAIT));
        c10d_free(v);
    }
    c10d_store_close(ss[0]);
    served_within(30000);
    for (int i = 1; i < MAX; i++)
        c10d_store_close(ss[i]);
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("accept");
    TCase *tc = store_tcase("accept");
    tcase_add_test(tc, out_of_file_descriptors_accept_pauses_and_recovers);
    tcase_add_test(tc, connections_past_max_connections_are_closed_at_once);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
