#define _GNU_SOURCE /* memmem */
/* The store end to end: a real c10d-coord process on a free port with a
 * real database file, real client processes and threads. */
#include "coord_proc.h"
#include "sim_ranks.h"
#include "state_wait.h"

#include <arpa/inet.h>
#include <c10d/c10d.h>
#include "check_main.h"

#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <errno.h>
#include "frame.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static coord_proc coord;

static void setup(void)
{
    coord_init(&coord);
    ck_assert_int_eq(coord_start(&coord, NULL, NULL, NULL), 0);
}

static void teardown(void)
{
    coord_cleanup(&coord);
}

static c10d_store *connect_timeout(const char *url, int timeout_ms)
{
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = timeout_ms;
    c10d_status st = c10d_store_connect(&s, url, &o);
    ck_assert_msg(st == C10D_OK, "connect to %s: %s", url, c10d_errmsg());
    return s;
}

static c10d_store *connect_store(void)
{
    return connect_timeout(coord.url, 10000);
}

#define OK(call) ck_assert_msg((call) == C10D_OK, "%s: %s", #call, c10d_errmsg())

START_TEST(every_operation_round_trips)
{
    c10d_store *s = connect_store();
    void *v;
    size_t n;
    OK(c10d_store_set(s, "k", "a\0b", 3));
    OK(c10d_store_get(s, "k", &v, &n, 0));
    ck_assert_uint_eq(n, 3);
    ck_assert_mem_eq(v, "a\0b", 3);
    c10d_free(v);

    int64_t r;
    OK(c10d_store_add(s, "ctr", 3, &r));
    OK(c10d_store_add(s, "ctr", -1, &r));
    ck_assert_int_eq(r, 2);

    OK(c10d_store_compare_set(s, "cas", "", 0, "one", 3, &v, &n));
    ck_assert_mem_eq(v, "one", 3);
    c10d_free(v);
    OK(c10d_store_compare_set(s, "cas", "bad", 3, "two", 3, &v, &n));
    ck_assert_mem_eq(v, "one", 3); /* mismatch: current value back */
    c10d_free(v);
    ck_assert_int_eq(c10d_store_compare_set(s, "nokey", "x", 1, "y", 1, &v, &n), C10D_ENOTFOUND);

    OK(c10d_store_append(s, "log", "ab", 2));
    OK(c10d_store_append(s, "log", "cd", 2));
    OK(c10d_store_get(s, "log", &v, &n, 0));
    ck_assert_uint_eq(n, 4);
    ck_assert_mem_eq(v, "abcd", 4);
    c10d_free(v);

    const char *keys[] = {"m1", "m2", "m3"};
    const void *vals[] = {"x", "yy", ""};
    size_t lens[] = {1, 2, 0};
    OK(c10d_store_multi_set(s, keys, vals, lens, 3));
    void *got[3];
    size_t glen[3];
    OK(c10d_store_multi_get(s, keys, 3, got, glen, 0));
    ck_assert_uint_eq(glen[1], 2);
    ck_assert_mem_eq(got[1], "yy", 2);
    ck_assert_uint_eq(glen[2], 0);
    for (int i = 0; i < 3; i++)
        c10d_free(got[i]);

    int all;
    OK(c10d_store_check(s, keys, 3, &all));
    ck_assert_int_eq(all, 1);
    const char *some[] = {"m1", "absent"};
    OK(c10d_store_check(s, some, 2, &all));
    ck_assert_int_eq(all, 0);

    int64_t nk;
    OK(c10d_store_num_keys(s, &nk));
    ck_assert_int_eq(nk, 7);
    int deleted;
    OK(c10d_store_delete_key(s, "k", &deleted));
    ck_assert_int_eq(deleted, 1);
    OK(c10d_store_delete_key(s, "k", &deleted));
    ck_assert_int_eq(deleted, 0);
    ck_assert_int_eq(c10d_store_get(s, "k", &v, &n, 0), C10D_ENOTFOUND);

    c10d_key_info *ki;
    size_t nki;
    int trunc;
    OK(c10d_store_list(s, "m", 0, &ki, &nki, &trunc));
    ck_assert_uint_eq(nki, 3);
    ck_assert_str_eq(ki[0].key, "m1");
    ck_assert_uint_eq(ki[1].size, 2);
    c10d_free(ki);

    c10d_coord_info info;
    OK(c10d_store_coord_info(s, &info));
    ck_assert_int_eq(info.num_keys, 6);
    ck_assert_str_eq(info.db_path, coord.db);
    ck_assert_int_ge(info.clients, 1);
    c10d_store_close(s);
}
END_TEST

/* N processes x M adds: the counter is exact, and every add got a
 * distinct result (no add was applied twice or lost). */
START_TEST(concurrent_adds_from_processes_are_exact)
{
    enum { PROCS = 8, ADDS = 250 };
    int fds[PROCS][2];
    for (int p = 0; p < PROCS; p++) {
        ck_assert_int_eq(pipe(fds[p]), 0);
        if (fork() == 0) {
            close(fds[p][0]);
            c10d_store *s = NULL;
            if (c10d_store_connect(&s, coord.url, NULL) != C10D_OK)
                _exit(1);
            for (int i = 0; i < ADDS; i++) {
                int64_t r;
                if (c10d_store_add(s, "ctr", 1, &r) != C10D_OK)
                    _exit(2);
                if (write(fds[p][1], &r, sizeof r) != sizeof r)
                    _exit(3);
            }
            c10d_store_close(s);
            _exit(0);
        }
        close(fds[p][1]);
    }
    char *seen = calloc(PROCS * ADDS + 1, 1);
    int total = 0;
    for (int p = 0; p < PROCS; p++) {
        int64_t r;
        while (read(fds[p][0], &r, sizeof r) == sizeof r) {
            ck_assert_int_ge(r, 1);
            ck_assert_int_le(r, PROCS * ADDS);
            ck_assert_msg(!seen[r], "result %lld returned twice", (long long)r);
            seen[r] = 1;
            total++;
        }
        close(fds[p][0]);
    }
    for (int p = 0; p < PROCS; p++) {
        int st;
        wait(&st);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed: %d", st);
    }
    ck_assert_int_eq(total, PROCS * ADDS);
    c10d_store *s = connect_store();
    int64_t r;
    OK(c10d_store_add(s, "ctr", 0, &r));
    ck_assert_int_eq(r, PROCS * ADDS);
    c10d_store_close(s);
    free(seen);
}
END_TEST

typedef struct {
    c10d_store *s;
    int adds;
    int failures;
} thread_arg;

static void *adder(void *p)
{
    thread_arg *a = p;
    for (int i = 0; i < a->adds; i++)
        if (c10d_store_add(a->s, "tctr", 1, NULL) != C10D_OK)
            a->failures++;
    return NULL;
}

START_TEST(one_handle_many_threads)
{
    enum { T = 8, ADDS = 200 };
    c10d_store *s = connect_store();
    pthread_t th[T];
    thread_arg args[T];
    for (int i = 0; i < T; i++) {
        args[i] = (thread_arg){s, ADDS, 0};
        pthread_create(&th[i], NULL, adder, &args[i]);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(args[i].failures, 0);
    }
    int64_t r;
    OK(c10d_store_add(s, "tctr", 0, &r));
    ck_assert_int_eq(r, T * ADDS);
    c10d_store_close(s);
}
END_TEST

START_TEST(blocked_get_wakes_on_set_from_another_client)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        c10d_store *s = NULL;
        if (c10d_store_connect(&s, coord.url, NULL) != C10D_OK)
            _exit(1);
        void *v;
        size_t n;
        c10d_status st = c10d_store_get(s, "late", &v, &n, 10000);
        long long returned = test_now_ms(); /* monotonic: comparable across processes */
        if (st != C10D_OK || n != 5 || memcmp(v, "hello", 5) != 0)
            _exit(2);
        if (write(fd[1], &returned, sizeof returned) != sizeof returned)
            _exit(3);
        _exit(0);
    }
    close(fd[1]);
    c10d_store *s = connect_store();
    /* The reader is parked on the coordinator, not polling. */
    long long parked;
    ck_assert_msg(wait_parked(coord.url, 1, 10000, &parked),
                  "the get never parked on the coordinator (parked: %lld)", parked);
    long long t_set = test_now_ms();
    OK(c10d_store_set(s, "late", "hello", 5));
    long long returned;
    ck_assert_int_eq(read(fd[0], &returned, sizeof returned), sizeof returned);
    int st;
    waitpid(pid, &st, 0);
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    /* it waited for the set, and the set woke it (generous: CI machines
     * are shared; a poller would still miss by far) */
    ck_assert_int_ge(returned, t_set);
    ck_assert_msg(returned - t_set < 2000, "get returned %lld ms after the set",
                  returned - t_set);
    c10d_store_close(s);
}
END_TEST

START_TEST(a_parked_get_goes_with_its_connection)
{
    pid_t pid = fork();
    if (pid == 0) {
        c10d_store *s = NULL;
        void *v;
        size_t n;
        if (c10d_store_connect(&s, coord.url, NULL) == C10D_OK)
            c10d_store_get(s, "never", &v, &n, 600000);
        _exit(1);
    }
    long long parked;
    ck_assert_msg(wait_parked(coord.url, 1, 10000, &parked),
                  "the get never parked on the coordinator (parked: %lld)", parked);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* Not kept for ten minutes, holding the dead connection. */
    long long t0 = test_now_ms();
    ck_assert_msg(wait_parked(coord.url, 0, 10000, &parked),
                  "the dead client's get is still parked after 10 s (parked: %lld)", parked);
    ck_assert_int_lt(test_now_ms() - t0, 2000);
}
END_TEST

START_TEST(wait_timeout_names_the_missing_keys)
{
    c10d_store *s = connect_store();
    OK(c10d_store_set(s, "a", "1", 1));
    const char *keys[] = {"a", "b", "c"};
    long long t0 = test_now_ms();
    ck_assert_int_eq(c10d_store_wait(s, keys, 3, 300), C10D_ETIMEDOUT);
    long long took = test_now_ms() - t0;
    ck_assert_str_eq(c10d_errmsg(), "timed out after 300 ms waiting for keys: b, c");
    ck_assert_int_ge(took, 290);
    ck_assert_int_lt(took, 3000);
    void *v;
    size_t n;
    ck_assert_int_eq(c10d_store_get(s, "zzz", &v, &n, 200), C10D_ETIMEDOUT);
    ck_assert_str_eq(c10d_errmsg(), "timed out after 200 ms waiting for key: zzz");
    void *vals[3];
    size_t lens[3];
    ck_assert_int_eq(c10d_store_multi_get(s, keys, 3, vals, lens, 100), C10D_ETIMEDOUT);
    /* On time, not at the coordinator's next liveness sweep (500 ms): an
     * idle engine runs the get on the network thread, and the engine
     * thread, asleep until the sweep, must wake for the new deadline. */
    long long worst = 0;
    for (int i = 0; i < 5; i++) {
        t0 = test_now_ms();
        ck_assert_int_eq(c10d_store_get(s, "zzz", &v, &n, 50), C10D_ETIMEDOUT);
        if (test_now_ms() - t0 > worst)
            worst = test_now_ms() - t0;
        /* not synchronisation: each get starts at another point of the
         * 500 ms sweep period */
        usleep(37 * 1000);
    }
    ck_assert_msg(worst < 300, "a 50 ms get timed out after %lld ms", worst);
    /* and a wait that is satisfied while parked */
    OK(c10d_store_set(s, "b", "1", 1));
    OK(c10d_store_set(s, "c", "1", 1));
    OK(c10d_store_wait(s, keys, 3, 100));
    c10d_store_close(s);
}
END_TEST

START_TEST(prefix_stores_are_isolated)
{
    c10d_store *root = connect_store(), *p1, *p2, *p1a;
    OK(c10d_store_prefix(&p1, root, "job1"));
    OK(c10d_store_prefix(&p2, root, "job2"));
    OK(c10d_store_prefix(&p1a, p1, "a"));
    OK(c10d_store_set(p1, "x", "1", 1));
    OK(c10d_store_set(p2, "x", "2", 1));
    OK(c10d_store_set(p1a, "x", "3", 1));
    void *v;
    size_t n;
    OK(c10d_store_get(root, "job1/x", &v, &n, 0));
    ck_assert_mem_eq(v, "1", 1);
    c10d_free(v);
    OK(c10d_store_get(root, "job1/a/x", &v, &n, 0));
    ck_assert_mem_eq(v, "3", 1);
    c10d_free(v);
    OK(c10d_store_get(p2, "x", &v, &n, 0));
    ck_assert_mem_eq(v, "2", 1);
    c10d_free(v);
    int64_t nk;
    OK(c10d_store_num_keys(p1, &nk));
    ck_assert_int_eq(nk, 2);
    OK(c10d_store_num_keys(p2, &nk));
    ck_assert_int_eq(nk, 1);
    c10d_key_info *ki;
    size_t nki;
    OK(c10d_store_list(p1, NULL, 0, &ki, &nki, NULL));
    ck_assert_uint_eq(nki, 2);
    ck_assert_str_eq(ki[0].key, "a/x"); /* the view's own names */
    ck_assert_str_eq(ki[1].key, "x");
    c10d_free(ki);
    /* closing the parent leaves views working */
    c10d_store_close(root);
    OK(c10d_store_get(p1a, "x", &v, &n, 0));
    c10d_free(v);
    c10d_store_close(p1a);
    c10d_store_close(p1);
    c10d_store_close(p2);
}
END_TEST

static int port_of(const char *url)
{
    return atoi(strrchr(url, ':') + 1);
}

/* A plain TCP connection to the coordinator, speaking no protocol. */
static int raw_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port_of(coord.url))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Reads until end-of-file (0) or a 2 s timeout or error (-1). */
static int read_until_eof(int fd)
{
    char rb[256];
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t r;
    while ((r = read(fd, rb, sizeof rb)) > 0)
        ;
    return r == 0 || (r < 0 && errno == ECONNRESET) ? 0 : -1;
}

START_TEST(oversized_values_are_refused_and_the_coordinator_carries_on)
{
    coord_stop(&coord, SIGTERM);
    const char *args[] = {"--max-value-bytes", "1024", "--max-message-bytes", "8192", NULL};
    ck_assert_int_eq(coord_start(&coord, NULL, args, NULL), 0);
    c10d_store *s = connect_store();
    char *big = calloc(1, 4096);
    ck_assert_int_eq(c10d_store_set(s, "big", big, 4096), C10D_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "value of 4096 bytes for key 'big' exceeds"));
    OK(c10d_store_set(s, "small", big, 1024));
    OK(c10d_store_append(s, "small", "x", 0));
    ck_assert_int_eq(c10d_store_append(s, "small", "x", 1), C10D_ETOOBIG);

    /* A raw peer that ignores the limits: its over-limit frame gets its
     * connection closed; the coordinator serves everyone else. */
    int fd = raw_connect();
    uint8_t hdr[C10DC_FRAME_HDR];
    c10dc_frame_header(hdr, 1, 100000);
    ck_assert_int_eq(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
    char *huge = calloc(1, 100000);
    (void)!write(fd, huge, 100000); /* may fail half-way: the coordinator hung up */
    ck_assert_msg(read_until_eof(fd) == 0, "connection not closed after an oversized frame");
    close(fd);
    void *v;
    size_t n;
    OK(c10d_store_get(s, "small", &v, &n, 0));
    ck_assert_uint_eq(n, 1024);
    c10d_free(v);
    free(big);
    free(huge);
    c10d_store_close(s);
}
END_TEST

/* Issue 12, finding 9: forty connections each holding 16 MiB of an
 * unfinished frame took 645 MB, for ever. A frame left unfinished is cut
 * off after --frame-timeout; unfinished frames together are capped by
 * --max-pending-bytes; everyone else is served. */
START_TEST(unfinished_requests_are_timed_out_and_capped)
{
    coord_stop(&coord, SIGTERM);
    const char *args[] = {"--frame-timeout", "500", "--max-value-bytes", "1048576",
                          "--max-pending-bytes", "4194304", NULL};
    ck_assert_int_eq(coord_start(&coord, NULL, args, NULL), 0);
    /* 1. half a request, then silence */
    int fd = raw_connect();
    uint8_t hdr[C10DC_FRAME_HDR];
    c10dc_frame_header(hdr, 1, 1 << 20);
    ck_assert_int_eq(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
    char part[1000] = {0};
    ck_assert_int_eq(write(fd, part, sizeof part), (ssize_t)sizeof part);
    long long t0 = test_now_ms();
    ck_assert_msg(read_until_eof(fd) == 0, "a connection holding half a request was not closed");
    long long took = test_now_ms() - t0;
    ck_assert_msg(took >= 400 && took < 1900, "closed after %lld ms (--frame-timeout 500)", took);
    ck_assert(coord_log_contains(&coord, "--frame-timeout"));
    close(fd);
    /* 2. eight connections each holding 1 MiB of a request of 1 MiB +
     * 4 KiB: 8 MiB against a 4 MiB cap. Those over it are closed. */
    int fds[8], closed = 0;
    char *mib = calloc(1, 1 << 20);
    for (int i = 0; i < 8; i++) {
        fds[i] = raw_connect();
        c10dc_frame_header(hdr, 1, (1 << 20) + 4096);
        ck_assert_int_eq(write(fds[i], hdr, sizeof hdr), (ssize_t)sizeof hdr);
        (void)!write(fds[i], mib, 1 << 20); /* may stop short: the coordinator hung up */
    }
    for (int i = 0; i < 8; i++) {
        struct pollfd p = {fds[i], POLLIN, 0};
        if (poll(&p, 1, 300) == 1) {
            char c;
            closed += read(fds[i], &c, 1) <= 0;
        }
    }
    ck_assert_msg(closed >= 4, "only %d of 8 connections over --max-pending-bytes were closed",
                  closed);
    ck_assert(coord_log_contains(&coord, "--max-pending-bytes"));
    /* 3. everyone else is served meanwhile */
    c10d_store *s = connect_store();
    OK(c10d_store_set(s, "k", "v", 1));
    c10d_store_close(s);
    for (int i = 0; i < 8; i++)
        close(fds[i]);
    free(mib);
}
END_TEST

START_TEST(garbage_on_the_port_does_not_hurt_others)
{
    c10d_store *s = connect_store();
    OK(c10d_store_set(s, "before", "1", 1));
    /* 1. raw TCP junk: not even a frame (its length is absurd) */
    for (int i = 0; i < 5; i++) {
        int fd = raw_connect();
        char junk[512];
        for (size_t j = 0; j < sizeof junk; j++)
            junk[j] = j < 4 ? (char)0xff : (char)(rand() & 0xff);
        ck_assert_int_gt(write(fd, junk, sizeof junk), 0);
        /* The coordinator closes it: we must see end-of-file, not a
         * timeout. */
        ck_assert_msg(read_until_eof(fd) == 0, "connection not closed after junk");
        close(fd);
    }
    /* 2. a proper frame whose bytes are not a request */
    int fd = raw_connect();
    uint8_t frame[C10DC_FRAME_HDR + 11];
    c10dc_frame_header(frame, 77, 11);
    memcpy(frame + C10DC_FRAME_HDR, "\xff\xff\xff\xffgarbage", 11);
    ck_assert_int_eq(write(fd, frame, sizeof frame), (ssize_t)sizeof frame);
    uint8_t rb[2048];
    size_t got = 0;
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (ssize_t r; got < C10DC_FRAME_HDR || got < 4 + c10dc_get_u32(rb);) {
        ck_assert_int_gt(r = read(fd, rb + got, sizeof rb - got), 0);
        got += (size_t)r;
    }
    /* The reply is a protocol error for that request, not silence. */
    ck_assert_uint_eq(c10dc_get_u64(rb + 4), 77);
    ck_assert_ptr_nonnull(memmem(rb, got, "could not decode", 16));
    close(fd);

    void *v;
    size_t n;
    OK(c10d_store_get(s, "before", &v, &n, 0));
    c10d_free(v);
    OK(c10d_store_set(s, "after", "1", 1));
    c10d_store_close(s);
}
END_TEST

/* A writer process records each acknowledged set; the coordinator is
 * killed -9 in the middle; after a restart every acknowledged write is
 * there with its value. */
START_TEST(kill_9_keeps_every_acknowledged_write)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        c10d_store *s = NULL;
        c10d_store_opts o = C10D_STORE_OPTS_INIT;
        o.timeout_ms = 1000; /* give up soon after the coordinator dies */
        if (c10d_store_connect(&s, coord.url, &o) != C10D_OK)
            _exit(1);
        for (int i = 0;; i++) {
            char key[32], val[32];
            snprintf(key, sizeof key, "w/%d", i);
            snprintf(val, sizeof val, "value-%d", i);
            if (c10d_store_set(s, key, val, strlen(val)) != C10D_OK)
                break;
            if (write(fd[1], &i, sizeof i) != sizeof i)
                break;
        }
        _exit(0);
    }
    close(fd[1]);
    int acked = -1, i;
    while (acked < 300 && read(fd[0], &i, sizeof i) == sizeof i)
        acked = i;
    ck_assert_int_eq(coord_stop(&coord, SIGKILL), SIGKILL);
    while (read(fd[0], &i, sizeof i) == sizeof i)
        acked = i; /* acknowledged before the kill landed */
    close(fd[0]);
    waitpid(pid, NULL, 0);

    ck_assert_int_eq(coord_start(&coord, NULL, NULL, NULL), 0);
    c10d_store *s = connect_store();
    for (int k = 0; k <= acked; k++) {
        char key[32], want[32];
        snprintf(key, sizeof key, "w/%d", k);
        snprintf(want, sizeof want, "value-%d", k);
        void *v;
        size_t n;
        ck_assert_msg(c10d_store_get(s, key, &v, &n, 0) == C10D_OK, "acknowledged %s lost", key);
        ck_assert_uint_eq(n, strlen(want));
        ck_assert_mem_eq(v, want, n);
        c10d_free(v);
    }
    c10d_store_close(s);
}
END_TEST

typedef struct {
    char url[256]; /* a copy: the test rewrites coord.url on each restart */
    atomic_int stop;
    atomic_int ok, failed;
} restart_arg;

static void *add_until_stopped(void *p)
{
    restart_arg *a = p;
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 15000;
    if (c10d_store_connect(&s, a->url, &o) != C10D_OK) {
        a->failed++;
        return NULL;
    }
    while (!atomic_load(&a->stop)) {
        if (c10d_store_add(s, "rctr", 1, NULL) == C10D_OK)
            a->ok++;
        else
            a->failed++;
    }
    c10d_store_close(s);
    return NULL;
}

/* Waits until the two clients had `more` adds acknowledged beyond those so
 * far: they talk to the coordinator that runs now. */
static void wait_adds(restart_arg *a, restart_arg *b, int more, const char *when)
{
    int base = atomic_load(&a->ok) + atomic_load(&b->ok);
    long long t0 = test_now_ms();
    while (atomic_load(&a->ok) + atomic_load(&b->ok) < base + more && test_now_ms() - t0 < 15000)
        usleep(1000);
    int got = atomic_load(&a->ok) + atomic_load(&b->ok) - base;
    ck_assert_msg(got >= more, "%s: %d adds acknowledged in 15 s, not %d (%d failed)", when, got,
                  more, atomic_load(&a->failed) + atomic_load(&b->failed));
}

/* A client busy with adds while the coordinator is killed -9 and restarted
 * on the same port and database: every call completes, and the counter
 * equals the adds acknowledged (resent adds were not applied twice). */
START_TEST(client_rides_through_a_coordinator_restart)
{
    char listen[64];
    snprintf(listen, sizeof listen, "tcp://127.0.0.1:%d", port_of(coord.url));
    restart_arg a = {"", 0, 0, 0}, b;
    snprintf(a.url, sizeof a.url, "%s", coord.url);
    pthread_t th[2];
    b = a;
    pthread_create(&th[0], NULL, add_until_stopped, &a);
    pthread_create(&th[1], NULL, add_until_stopped, &b);
    wait_adds(&a, &b, 50, "before the first restart");
    for (int round = 0; round < 3; round++) {
        coord_stop(&coord, round == 1 ? SIGTERM : SIGKILL);
        /* not synchronisation: the coordinator stays down a while, so the
         * clients' calls fail, redial and back off before it is back */
        usleep(400000);
        ck_assert_int_eq(coord_start(&coord, listen, NULL, NULL), 0);
        wait_adds(&a, &b, 50, round == 2 ? "after the last restart" : "after a restart");
    }
    atomic_store(&a.stop, 1);
    atomic_store(&b.stop, 1);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    ck_assert_int_eq(a.failed + b.failed, 0);
    ck_assert_int_gt(a.ok + b.ok, 100);
    c10d_store *s = connect_store();
    int64_t r;
    OK(c10d_store_add(s, "rctr", 0, &r));
    ck_assert_int_eq(r, a.ok + b.ok);
    c10d_store_close(s);
}
END_TEST

START_TEST(second_coordinator_on_the_same_database_is_refused)
{
    coord_proc second = coord; /* same dir and database */
    second.pid = 0;
    snprintf(second.log, sizeof second.log, "%s/second.log", coord.dir);
    int st = 0;
    ck_assert_int_eq(coord_start(&second, NULL, NULL, &st), -1);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 1);
    char pid[64];
    snprintf(pid, sizeof pid, "in use by another c10d-coord (pid %d", (int)coord.pid);
    ck_assert_msg(coord_log_contains(&second, pid), "second coordinator's log lacks '%s'", pid);
}
END_TEST

/* Issue 12, finding 1: the lock was keyed on the path, so a hard link or
 * a symlink to a live database started a second coordinator on the same
 * file (2,000 writes through each corrupted it). */
START_TEST(second_coordinator_through_a_link_is_refused)
{
    const char *kinds[] = {"hard link", "symlink"};
    for (int k = 0; k < 2; k++) {
        coord_proc second = coord;
        second.pid = 0;
        snprintf(second.db, sizeof second.db, "%s/other-name-%d.db", coord.dir, k);
        snprintf(second.log, sizeof second.log, "%s/second-%d.log", coord.dir, k);
        ck_assert_int_eq(k == 0 ? link(coord.db, second.db) : symlink(coord.db, second.db), 0);
        int st = 0;
        ck_assert_msg(coord_start(&second, NULL, NULL, &st) == -1,
                      "a second coordinator started on the database through a %s", kinds[k]);
        ck_assert(WIFEXITED(st));
        ck_assert_int_eq(WEXITSTATUS(st), 1);
        ck_assert_msg(coord_log_contains(&second, "in use by another c10d-coord"),
                      "the %s: the second coordinator's log does not say why", kinds[k]);
        unlink(second.db);
    }
    /* The first one still serves. */
    c10d_store *s = connect_store();
    OK(c10d_store_set(s, "still", "here", 4));
    c10d_store_close(s);
}
END_TEST

START_TEST(sigterm_is_a_clean_shutdown)
{
    c10d_store *s = connect_store();
    OK(c10d_store_set(s, "k", "v", 1));
    c10d_store_close(s);
    int st = coord_stop(&coord, SIGTERM);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    ck_assert(coord_log_contains(&coord, "stopped cleanly"));
    /* The WAL was checkpointed into the database and removed. */
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", coord.db);
    ck_assert_int_ne(access(wal, F_OK), 0);
}
END_TEST

/* Issue 12, finding 3: a damaged database started silently ("-1 keys"),
 * then answered existing keys "no such key". It must be refused at start
 * with a message that says the file is damaged. */
START_TEST(a_damaged_database_is_refused_at_start)
{
    c10d_store *s = connect_store();
    char key[32], val[512];
    memset(val, 'v', sizeof val);
    for (int i = 0; i < 200; i++) { /* a few pages of keys */
        snprintf(key, sizeof key, "key%03d", i);
        OK(c10d_store_set(s, key, val, sizeof val));
    }
    c10d_store_close(s);
    ck_assert(WIFEXITED(coord_stop(&coord, SIGTERM))); /* checkpointed into the file */
    /* Garbage over pages 3 to 12 of the file (4 KiB pages), as a bad disk
     * or a half-restored copy leaves it. */
    int fd = open(coord.db, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    char junk[4096];
    memset(junk, 0x5a, sizeof junk);
    for (int p = 2; p < 12; p++)
        ck_assert_int_eq(pwrite(fd, junk, sizeof junk, (off_t)p * 4096), (ssize_t)sizeof junk);
    close(fd);
    int st = 0;
    ck_assert_int_eq(coord_start(&coord, NULL, NULL, &st), -1);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 1);
    ck_assert_msg(coord_log_contains(&coord, "is damaged"), "the log does not say the database "
                  "is damaged");
}
END_TEST

START_TEST(token_is_required_when_configured)
{
    coord_stop(&coord, SIGTERM);
    char tf[600];
    snprintf(tf, sizeof tf, "%s/token", coord.dir);
    FILE *f = fopen(tf, "w");
    fputs("s3cret\n", f);
    fclose(f);
    const char *args[] = {"--token-file", tf, NULL};
    ck_assert_int_eq(coord_start(&coord, NULL, args, NULL), 0);
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 2000;
    unsetenv("C10D_TOKEN");
    ck_assert_int_eq(c10d_store_connect(&s, coord.url, &o), C10D_EAUTH);
    o.token = "wrong";
    ck_assert_int_eq(c10d_store_connect(&s, coord.url, &o), C10D_EAUTH);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "does not match"));
    /* Issue 12, finding 11: each refusal was a log line (6,000 refused
     * tokens, 6,084 lines). Warnings of one kind are limited to 10 a
     * second, the rest counted. */
    long long t0 = test_now_ms();
    for (int i = 0; i < 300; i++)
        ck_assert_int_eq(c10d_store_connect(&s, coord.url, &o), C10D_EAUTH);
    long long secs = (test_now_ms() - t0) / 1000 + 2;
    FILE *log = fopen(coord.log, "r");
    char line[4096];
    int refusals = 0;
    while (fgets(line, sizeof line, log))
        refusals += strstr(line, "token") != NULL && strstr(line, "refused") != NULL;
    fclose(log);
    ck_assert_msg(refusals <= 10 * secs, "%d log lines for 300 refused tokens in %lld s",
                  refusals, secs);
    o.token = "s3cret";
    OK(c10d_store_connect(&s, coord.url, &o));
    OK(c10d_store_set(s, "k", "v", 1));
    c10d_store_close(s);
}
END_TEST

static char late_listen[64];

static void *start_late(void *arg)
{
    /* not synchronisation: the scenario is a coordinator that starts
     * 0.5 s after its client */
    usleep(500000);
    *(int *)arg = coord_start(&coord, late_listen, NULL, NULL);
    return NULL;
}

START_TEST(client_started_before_the_coordinator_waits_for_it)
{
    snprintf(late_listen, sizeof late_listen, "tcp://127.0.0.1:%d", port_of(coord.url));
    coord_stop(&coord, SIGTERM);
    int started = -1;
    pthread_t th;
    pthread_create(&th, NULL, start_late, &started);
    long long t0 = test_now_ms();
    c10d_store *s = connect_timeout(late_listen, 10000);
    ck_assert_int_ge(test_now_ms() - t0, 400);
    OK(c10d_store_set(s, "k", "v", 1));
    c10d_store_close(s);
    pthread_join(th, NULL);
    ck_assert_int_eq(started, 0);
}
END_TEST

/* A client that lost a reply sends the request again with the same id; the
 * coordinator must answer it from its request log, not apply it twice. Sent
 * here twice over a raw connection to a real coordinator (debug logging
 * on, so its log says it replayed), with the same client id and request
 * id: two equal replies, the counter added to once. */
static int replies_seen;
static int64_t numbers[2];

static void count_reply(sim_conn *c, void *tag, C10dpb__Reply *rep, void *arg)
{
    (void)c, (void)tag, (void)arg;
    if (rep && replies_seen < 2 && rep->result_case == C10DPB__REPLY__RESULT_NUMBER)
        numbers[replies_seen++] = rep->number;
}

static int two_replies(void *a)
{
    (void)a;
    return replies_seen == 2;
}

START_TEST(a_resent_request_is_answered_from_the_request_log)
{
    coord_stop(&coord, SIGTERM);
    const char *args[] = {"--log-level", "debug", NULL};
    ck_assert_int_eq(coord_start(&coord, NULL, args, NULL), 0);
    sim_loop *L = sim_loop_new(count_reply, NULL);
    sim_conn *c = sim_connect(L, coord.url);
    ck_assert_ptr_nonnull(c);
    for (int copy = 0; copy < 2; copy++) {
        C10dpb__StoreAdd add = C10DPB__STORE_ADD__INIT;
        add.key = "resent";
        add.delta = 5;
        C10dpb__Request req = C10DPB__REQUEST__INIT;
        req.op_case = C10DPB__REQUEST__OP_ADD;
        req.add = &add;
        ck_assert_int_eq(sim_send_as(c, &req, NULL, 0x5eed, 41), 0);
    }
    ck_assert_int_eq(sim_run(L, two_replies, NULL, (int64_t)sim_now_ms() + 10000), 0);
    ck_assert_int_eq(numbers[0], 5);
    ck_assert_int_eq(numbers[1], 5); /* the first reply, replayed */
    sim_loop_free(L);
    c10d_store *s = connect_store();
    void *v;
    size_t n;
    OK(c10d_store_get(s, "resent", &v, &n, 0));
    ck_assert_int_eq((int)n, 1);
    ck_assert_int_eq(memcmp(v, "5", 1), 0);
    c10d_free(v);
    c10d_store_close(s);
    ck_assert(coord_log_contains(&coord, "request 41 of client 0000000000005eed (add) was "
                                         "applied before"));
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("store_integration");
    TCase *tc = tcase_create("coordinator");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_resent_request_is_answered_from_the_request_log);
    tcase_add_test(tc, every_operation_round_trips);
    tcase_add_test(tc, concurrent_adds_from_processes_are_exact);
    tcase_add_test(tc, one_handle_many_threads);
    tcase_add_test(tc, blocked_get_wakes_on_set_from_another_client);
    tcase_add_test(tc, second_coordinator_through_a_link_is_refused);
    tcase_add_test(tc, a_damaged_database_is_refused_at_start);
    tcase_add_test(tc, a_parked_get_goes_with_its_connection);
    tcase_add_test(tc, wait_timeout_names_the_missing_keys);
    tcase_add_test(tc, prefix_stores_are_isolated);
    tcase_add_test(tc, oversized_values_are_refused_and_the_coordinator_carries_on);
    tcase_add_test(tc, garbage_on_the_port_does_not_hurt_others);
    tcase_add_test(tc, unfinished_requests_are_timed_out_and_capped);
    tcase_add_test(tc, kill_9_keeps_every_acknowledged_write);
    tcase_add_test(tc, client_rides_through_a_coordinator_restart);
    tcase_add_test(tc, second_coordinator_on_the_same_database_is_refused);
    tcase_add_test(tc, sigterm_is_a_clean_shutdown);
    tcase_add_test(tc, token_is_required_when_configured);
    tcase_add_test(tc, client_started_before_the_coordinator_waits_for_it);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
