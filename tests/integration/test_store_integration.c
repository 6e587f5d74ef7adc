/* The store end to end: a real c10d-coord process on a free port with a
 * real database file, real client processes and threads: every operation,
 * exact counters under concurrency, a get parked until another client's
 * set (and dropped with its connection), timeouts that name the missing
 * keys, prefix views. The coordinator against bad clients is
 * test_store_hostile.c's; its restarts and its database test_store_restart.c's. */
#include "state_wait.h"
#include "store_coord.h"

#include "check_main.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

START_TEST(every_operation_round_trips)
{
    c10d_store *s = connect_store();
    void *v;
    size_t n;
    OK(c10d_store_set(s, "k", "a\0b", 3));
    OK(c10d_store_get(s, "k", &v, &n, C10D_NO_WAIT));
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
    OK(c10d_store_get(s, "log", &v, &n, C10D_NO_WAIT));
    ck_assert_uint_eq(n, 4);
    ck_assert_mem_eq(v, "abcd", 4);
    c10d_free(v);

    const char *keys[] = {"m1", "m2", "m3"};
    const void *vals[] = {"x", "yy", ""};
    size_t lens[] = {1, 2, 0};
    OK(c10d_store_multi_set(s, keys, vals, lens, 3));
    void *got[3];
    size_t glen[3];
    OK(c10d_store_multi_get(s, keys, 3, got, glen, C10D_NO_WAIT));
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
    ck_assert_int_eq(c10d_store_get(s, "k", &v, &n, C10D_NO_WAIT), C10D_ENOTFOUND);
    /* the one timeout convention (c10d/common.h): anything else is refused */
    ck_assert_int_eq(c10d_store_get(s, "k", &v, &n, -7), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "c10d_store_get: timeout_ms is -7"));
    const char *missing[] = {"k"};
    ck_assert_int_eq(c10d_store_wait(s, missing, 1, C10D_NO_WAIT), C10D_ENOTFOUND);

    c10d_key_info *ki;
    size_t nki;
    int trunc;
    OK(c10d_store_list(s, "m", 0, &ki, &nki, &trunc));
    ck_assert_uint_eq(nki, 3);
    ck_assert_str_eq(ki[0].key, "m1");
    ck_assert_uint_eq(ki[1].size, 2);
    c10d_free(ki);

    c10d_coord_info *info = NULL;
    OK(c10d_store_coord_info(s, &info));
    ck_assert_int_eq(info->num_keys, 6);
    ck_assert_str_eq(info->db_path, coord.db);
    ck_assert_int_ge(info->clients, 1);
    c10d_free(info); /* one allocation, its strings inside */
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
    OK(c10d_store_get(root, "job1/x", &v, &n, C10D_NO_WAIT));
    ck_assert_mem_eq(v, "1", 1);
    c10d_free(v);
    OK(c10d_store_get(root, "job1/a/x", &v, &n, C10D_NO_WAIT));
    ck_assert_mem_eq(v, "3", 1);
    c10d_free(v);
    OK(c10d_store_get(p2, "x", &v, &n, C10D_NO_WAIT));
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
    OK(c10d_store_get(p1a, "x", &v, &n, C10D_NO_WAIT));
    c10d_free(v);
    c10d_store_close(p1a);
    c10d_store_close(p1);
    c10d_store_close(p2);
}
END_TEST


int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("store_integration");
    TCase *tc = store_tcase("store_integration");
    tcase_add_test(tc, every_operation_round_trips);
    tcase_add_test(tc, concurrent_adds_from_processes_are_exact);
    tcase_add_test(tc, one_handle_many_threads);
    tcase_add_test(tc, blocked_get_wakes_on_set_from_another_client);
    tcase_add_test(tc, a_parked_get_goes_with_its_connection);
    tcase_add_test(tc, wait_timeout_names_the_missing_keys);
    tcase_add_test(tc, prefix_stores_are_isolated);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
