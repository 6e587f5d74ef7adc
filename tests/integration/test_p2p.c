/* Tagged send/recv beyond test_collectives.c's battery: receives from any
 * member (torch's recv without src) and their verification. Forked ranks,
 * a real c10d-coord; over shared memory and TCP. */
#include "coord_proc.h"
#include "world_proc.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    unsetenv("C10D_HOST_TRANSPORT");
}

#define FAIL(...)                                                                                \
    do {                                                                                         \
        fprintf(stderr, __VA_ARGS__);                                                            \
        fputc('\n', stderr);                                                                     \
        rc = 1;                                                                                  \
        goto out;                                                                                \
    } while (0)

#define CALL(call)                                                                               \
    do {                                                                                         \
        c10d_status st_ = (call);                                                                \
        if (st_ != C10D_OK)                                                                      \
            FAIL("rank %d: %s: %s: %s", rank, #call, c10d_status_name(st_), c10d_errmsg());      \
    } while (0)

/* A group whose calls give up after 10 s: a stall fails the test, not
 * Check's timeout. */
static c10d_pg *init(int rank, int n, const char *job)
{
    return world_init(coord.url, job, rank, n, 10000);
}

/* 2 MiB: more than a p2p link holds (a 256 KiB ring, a TCP socket's buffers). */
#define BIG ((2u << 20) / sizeof(int32_t))

static int32_t pattern(int from, int to, size_t i)
{
    return (int32_t)(from * 1000003 + to * 7919 + (int)i);
}

static void run(int n, rank_fn fn, const char *job)
{
    int failed = world_run(n, fn, (void *)world_job(job), 90, NULL);
    ck_assert_msg(failed == 0, "%d of %d ranks failed (see stderr)", failed, n);
}

/* Receives from any member (world 3): ranks 1 and 2 each send rank 0 a
 * message with tag 6 (which rank 0 takes last, by name), then their own
 * rank with tag 5 and a large message with tag 7; rank 0 takes the tag-5
 * messages, then the tag-7 ones, as they come, sync and async, and learns
 * who sent each. */
static int from_any(int rank, int n, void *arg)
{
    int rc = 0;
    c10d_work *w = NULL;
    c10d_pg *pg = init(rank, n, arg);
    int32_t *big = malloc(BIG * sizeof *big);
    if (!pg || !big)
        FAIL("rank %d: setup", rank);
    c10d_tensor tb = c10d_tensor_1d(big, C10D_INT32, (int64_t)BIG);
    if (rank != 0) {
        int32_t six = 60 + rank, me = rank;
        c10d_tensor t6 = c10d_tensor_1d(&six, C10D_INT32, 1), tm = c10d_tensor_1d(&me, C10D_INT32, 1);
        for (size_t i = 0; i < BIG; i++)
            big[i] = pattern(rank, 0, i);
        CALL(c10d_send(pg, &t6, 0, 6, NULL, NULL));
        CALL(c10d_send(pg, &tm, 0, 5, NULL, NULL));
        CALL(c10d_send(pg, &tb, 0, 7, NULL, NULL));
    } else {
        int seen_small = 0, seen_big = 0;
        for (int k = 0; k < 2 * (n - 1); k++) {
            int src = -1;
            int32_t got = -1;
            c10d_tensor tg = c10d_tensor_1d(&got, C10D_INT32, 1);
            int want_big = k >= n - 1, tag = want_big ? 7 : 5;
            c10d_tensor *t = want_big ? &tb : &tg;
            if (k % 2) {
                c10d_coll_opts co = C10D_COLL_OPTS_INIT;
                co.async_op = 1;
                CALL(c10d_recv_any(pg, t, tag, &src, &co, &w));
                if (src != -1)
                    FAIL("rank 0: the sender (%d) was written before the wait", src);
                CALL(c10d_work_wait(w, C10D_TIMEOUT_DEFAULT));
                c10d_work_free(w);
                w = NULL;
            } else {
                CALL(c10d_recv_any(pg, t, tag, &src, NULL, NULL));
            }
            if (src < 1 || src >= n)
                FAIL("rank 0: recv_any says rank %d sent it", src);
            if (want_big) {
                for (size_t i = 0; i < BIG; i++)
                    if (big[i] != pattern(src, 0, i))
                        FAIL("rank 0: element %zu of rank %d's is %d", i, src, big[i]);
                seen_big |= 1 << src;
            } else {
                if (got != src)
                    FAIL("rank 0: a message from rank %d says %d", src, got);
                seen_small |= 1 << src;
            }
        }
        if (seen_small != ((1 << n) - 2) || seen_big != ((1 << n) - 2))
            FAIL("rank 0: senders seen %#x (small), %#x (big)", seen_small, seen_big);
        for (int p = 1; p < n; p++) {
            int32_t six = -1;
            c10d_tensor t6 = c10d_tensor_1d(&six, C10D_INT32, 1);
            CALL(c10d_recv(pg, &t6, p, 6, NULL, NULL));
            if (six != 60 + p)
                FAIL("rank 0: tag 6 from rank %d says %d", p, six);
        }
    }
    CALL(c10d_barrier(pg, NULL, NULL));
out:
    c10d_work_free(w);
    free(big);
    c10d_destroy(pg);
    return rc;
}

START_TEST(recv_from_any_member) { run(3, from_any, "any"); }
END_TEST
START_TEST(recv_from_any_member_over_tcp)
{
    setenv("C10D_HOST_TRANSPORT", "tcp", 1);
    run(3, from_any, "any");
}
END_TEST

/* A receive from any member is verified against the send it took: rank
 * 2 sends float32[4], rank 0 receives int32[4] from anyone. The
 * coordinator names the sender the data plane found. */
static int from_any_mismatch(int rank, int n, void *arg)
{
    int rc = 0;
    c10d_pg *pg = init(rank, n, arg);
    if (!pg)
        FAIL("rank %d: setup", rank);
    float f[4] = {1, 2, 3, 4};
    int32_t i32[4];
    c10d_tensor tf = c10d_tensor_1d(f, C10D_FLOAT32, 4), ti = c10d_tensor_1d(i32, C10D_INT32, 4);
    c10d_status st = C10D_OK;
    if (rank == 2)
        st = c10d_send(pg, &tf, 0, 5, NULL, NULL);
    else if (rank == 0)
        st = c10d_recv_any(pg, &ti, 5, NULL, NULL, NULL);
    long long t0 = test_now_ms();
    while (st == C10D_OK && test_now_ms() - t0 < 5000)
        st = c10d_barrier(pg, NULL, NULL);
    const char *msg = c10d_errmsg();
    if (st != C10D_EDESYNC ||
        !strstr(msg, "tag 5: rank 2 sent float32[4], rank 0 receives int32[4] (different dtype)"))
        FAIL("rank %d: %s: %s", rank, c10d_status_name(st), msg);
out:
    c10d_destroy(pg);
    return rc;
}

START_TEST(recv_from_any_member_is_verified) { run(3, from_any_mismatch, "anyv"); }
END_TEST

int main(void)
{
    Suite *s = suite_create("p2p");
    TCase *tc = tcase_create("host");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, recv_from_any_member);
    tcase_add_test(tc, recv_from_any_member_over_tcp);
    tcase_add_test(tc, recv_from_any_member_is_verified);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
