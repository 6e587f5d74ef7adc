/* Tagged send/recv beyond test_collectives.c's battery: receives posted
 * before the sends they wait for (torch's batch_isend_irecv calls irecv,
 * then isend, on every rank, then waits), a posted receive whose sender
 * waits for room while the receiver is in a collective, receives from any
 * member (torch's recv without src) and their verification, and what
 * becomes of a posted receive that is freed or outlives its group. A
 * posted receive holds nothing up: not the calls after it on its group
 * (sync sends included), not another group's, not a wait with a limit.
 * Forked ranks, a real c10d-coord; over shared memory and TCP. */
#include "coord_proc.h"
#include "world_proc.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void teardown(void)
{
    world_coord_stop();
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
    return world_init(world_coord.url, job, rank, n, 10000);
}

/* 2 MiB: more than a p2p link holds (a 256 KiB ring, a TCP socket's buffers). */
#define BIG ((2u << 20) / sizeof(int32_t))

static int32_t pattern(int from, int to, size_t i)
{
    return (int32_t)(from * 1000003 + to * 7919 + (int)i);
}

/* torch's batch_isend_irecv on every rank: for each peer, irecv (tag: the
 * peer) then isend (tag: this rank), a large message and a small one;
 * then every work is waited for. Queued on the lane, each rank's first
 * irecv held its isends up behind it, for ever. */
static int irecv_then_isend(int rank, int n, void *arg)
{
    int rc = 0, k = 0;
    c10d_pg *pg = init(rank, n, arg);
    size_t works = (size_t)n * 2;
    c10d_work **w = calloc(works, sizeof *w);
    int32_t **in = calloc((size_t)n, sizeof *in), **out = calloc((size_t)n, sizeof *out);
    int32_t small_in[64], small_out = rank;
    if (!pg || !w || !in || !out)
        FAIL("rank %d: setup", rank);
    c10d_coll_opts co = C10D_COLL_OPTS_INIT;
    co.async_op = 1;
    for (int p = 0; p < n; p++) {
        if (p == rank)
            continue;
        in[p] = malloc(BIG * sizeof(int32_t));
        out[p] = malloc(BIG * sizeof(int32_t));
        if (!in[p] || !out[p])
            FAIL("rank %d: out of memory", rank);
        for (size_t i = 0; i < BIG; i++)
            out[p][i] = pattern(rank, p, i);
        c10d_tensor ti = c10d_tensor_1d(in[p], C10D_INT32, (int64_t)BIG);
        c10d_tensor to = c10d_tensor_1d(out[p], C10D_INT32, (int64_t)BIG);
        c10d_tensor si = c10d_tensor_1d(&small_in[p], C10D_INT32, 1);
        c10d_tensor so = c10d_tensor_1d(&small_out, C10D_INT32, 1);
        CALL(c10d_recv(pg, &ti, p, p, &co, &w[k++]));
        CALL(c10d_recv(pg, &si, p, 100 + p, &co, &w[k++]));
        CALL(c10d_send(pg, &to, p, rank, NULL, NULL));
        CALL(c10d_send(pg, &so, p, 100 + rank, NULL, NULL));
    }
    for (int i = 0; i < k; i++)
        CALL(c10d_work_wait(w[i], C10D_TIMEOUT_DEFAULT));
    for (int p = 0; p < n; p++) {
        if (p == rank)
            continue;
        if (small_in[p] != p)
            FAIL("rank %d: small message from %d is %d", rank, p, small_in[p]);
        for (size_t i = 0; i < BIG; i++)
            if (in[p][i] != pattern(p, rank, i))
                FAIL("rank %d: element %zu from %d is %d", rank, i, p, in[p][i]);
    }
    CALL(c10d_barrier(pg, NULL, NULL));
out:
    for (int i = 0; w && i < k; i++)
        c10d_work_free(w[i]);
    for (int p = 0; p < n && in; p++)
        free(in[p]), free(out[p]);
    free(in);
    free(out);
    free(w);
    c10d_destroy(pg);
    return rc;
}

static void run(int n, rank_fn fn, const char *job)
{
    int failed = world_run(n, fn, (void *)world_job(job), 90, NULL);
    ck_assert_msg(failed == 0, "%d of %d ranks failed (see stderr)", failed, n);
}

/* The same over TCP instead of shared memory (teardown clears it). */
static void run_over_tcp(int n, rank_fn fn, const char *job)
{
    setenv("C10D_HOST_TRANSPORT", "tcp", 1);
    run(n, fn, job);
}

START_TEST(irecv_then_isend_world_2) { run(2, irecv_then_isend, "posted"); }
END_TEST
START_TEST(irecv_then_isend_world_3) { run(3, irecv_then_isend, "posted"); }
END_TEST
START_TEST(irecv_then_isend_world_3_over_tcp)
{
    run_over_tcp(3, irecv_then_isend, "posted");
}
END_TEST

/* Rank 1 posts an irecv from rank 0, then enters a collective (a barrier
 * of the world, or an all_reduce of a second group); rank 0 sends it
 * 2 MiB, more than the link holds, then enters the collective. Rank 0's
 * send waits for room until rank 1 reads, and nobody waits for the
 * receive while rank 1 sits in the collective: the world's progress
 * thread reads the bytes, or both wait until the timeout. */
static int posted_during_a_collective(int rank, int n, void *arg, int other_group)
{
    int rc = 0;
    c10d_work *w = NULL;
    c10d_pg *g2 = NULL, *pg = init(rank, n, arg);
    int32_t *buf = malloc(BIG * sizeof *buf), v = 1;
    int ranks[2] = {0, 1};
    if (!pg || !buf)
        FAIL("rank %d: setup", rank);
    if (other_group)
        CALL(c10d_new_group(&g2, pg, ranks, 2));
    c10d_tensor t = c10d_tensor_1d(buf, C10D_INT32, (int64_t)BIG),
                tv = c10d_tensor_1d(&v, C10D_INT32, 1);
    c10d_coll_opts co = C10D_COLL_OPTS_INIT;
    co.async_op = 1;
    if (rank == 1)
        CALL(c10d_recv(pg, &t, 0, 3, &co, &w));
    else
        for (size_t i = 0; i < BIG; i++)
            buf[i] = pattern(0, 1, i);
    if (rank == 0)
        CALL(c10d_send(pg, &t, 1, 3, NULL, NULL));
    CALL(other_group ? c10d_all_reduce(g2, &tv, C10D_SUM, NULL, NULL)
                     : c10d_barrier(pg, NULL, NULL));
    if (rank == 1) {
        CALL(c10d_work_wait(w, C10D_TIMEOUT_DEFAULT));
        for (size_t i = 0; i < BIG; i++)
            if (buf[i] != pattern(0, 1, i))
                FAIL("rank 1: element %zu is %d", i, buf[i]);
    }
out:
    c10d_work_free(w);
    free(buf);
    c10d_destroy(g2);
    c10d_destroy(pg);
    return rc;
}

static int posted_during_a_barrier(int rank, int n, void *arg)
{
    return posted_during_a_collective(rank, n, arg, 0);
}

static int posted_during_another_groups(int rank, int n, void *arg)
{
    return posted_during_a_collective(rank, n, arg, 1);
}

START_TEST(posted_recv_while_in_a_collective) { run(2, posted_during_a_barrier, "during"); }
END_TEST
START_TEST(posted_recv_while_in_a_collective_over_tcp)
{
    run_over_tcp(2, posted_during_a_barrier, "during");
}
END_TEST
START_TEST(posted_recv_while_in_another_groups_collective)
{
    run(2, posted_during_another_groups, "during2");
}
END_TEST

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
    run_over_tcp(3, from_any, "any");
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

/* Posted receives match in call order with the sync ones after them; one
 * freed before its message came takes nothing; asking whether one ended
 * moves what arrived; one still posted when its group is destroyed fails,
 * and never touches its buffer. */
static int posted_lifecycle(int rank, int n, void *arg)
{
    int rc = 0;
    c10d_work *a = NULL, *gone = NULL, *late = NULL;
    c10d_pg *pg = init(rank, n, arg);
    if (!pg)
        FAIL("rank %d: setup", rank);
    int32_t v[3] = {1, 2, 3}, got_a = -1, got_b = -1, got_c = -1, never = -1, untouched = -7;
    c10d_tensor ta = c10d_tensor_1d(&got_a, C10D_INT32, 1),
                tb = c10d_tensor_1d(&got_b, C10D_INT32, 1),
                tc = c10d_tensor_1d(&got_c, C10D_INT32, 1),
                tn = c10d_tensor_1d(&never, C10D_INT32, 1),
                tu = c10d_tensor_1d(&untouched, C10D_INT32, 1);
    c10d_coll_opts co = C10D_COLL_OPTS_INIT;
    co.async_op = 1;
    if (rank == 1) {
        CALL(c10d_recv(pg, &tn, 0, 0, &co, &gone));
        c10d_work_free(gone); /* cancelled before anything was sent: it takes nothing */
        gone = NULL;
    }
    CALL(c10d_barrier(pg, NULL, NULL)); /* (a posted receive holds no collective up) */
    if (rank == 0) {
        for (int i = 0; i < 3; i++) {
            c10d_tensor t = c10d_tensor_1d(&v[i], C10D_INT32, 1);
            CALL(c10d_send(pg, &t, 1, 0, NULL, NULL));
        }
    } else {
        CALL(c10d_recv(pg, &ta, 0, 0, &co, &a));
        /* asking never waits; it ends the receive once its message is here */
        for (int64_t until = now_ms() + 5000; !c10d_work_is_completed(a);)
            if (now_ms() > until)
                FAIL("rank 1: a posted receive not completed after 5 s of asking");
        if (got_a != 1)
            FAIL("rank 1: the first message is %d, want 1 (the cancelled receive took it?)", got_a);
        CALL(c10d_recv(pg, &tb, 0, 0, NULL, NULL)); /* after a */
        if (got_b != 2)
            FAIL("rank 1: posted then sync: %d, %d; want 1, 2", got_a, got_b);
        CALL(c10d_work_wait(a, C10D_TIMEOUT_DEFAULT));
        CALL(c10d_recv(pg, &tc, 0, 0, NULL, NULL));
        if (got_c != 3 || never != -1)
            FAIL("rank 1: third message %d, the cancelled receive's buffer %d", got_c, never);
    }
    CALL(c10d_barrier(pg, NULL, NULL));
    if (rank == 1) /* nobody sends tag 9 */
        CALL(c10d_recv(pg, &tu, 0, 9, &co, &late));
    c10d_destroy(pg);
    pg = NULL;
    if (late) {
        c10d_status st = c10d_work_wait(late, C10D_TIMEOUT_DEFAULT);
        if (st != C10D_EABORTED || !strstr(c10d_errmsg(), "the group was destroyed first") ||
            untouched != -7)
            FAIL("rank 1: a receive posted past its group's end: %s: %s (buffer %d)",
                 c10d_status_name(st), c10d_errmsg(), untouched);
    }
out:
    c10d_work_free(a);
    c10d_work_free(late);
    c10d_destroy(pg);
    return rc;
}

START_TEST(posted_recvs_in_order_cancelled_and_aborted) { run(2, posted_lifecycle, "life"); }
END_TEST

/* On both ranks: irecv from the peer, a collective (on the world, or on a
 * second group), then a sync send to the peer, then the wait, as gloo
 * runs it. Queued on the lane, the receive held the send up behind it on
 * both ranks until the timeout. */
static int irecv_collective_send(int rank, int n, void *arg, int other_group, int big)
{
    int rc = 0;
    c10d_work *w = NULL;
    c10d_pg *g2 = NULL, *pg = init(rank, n, arg);
    size_t count = big ? BIG : 1;
    int32_t *in = calloc(count, sizeof *in), *out = malloc(count * sizeof *out), v = 1;
    if (!pg || !in || !out)
        FAIL("rank %d: setup", rank);
    int ranks[2] = {0, 1}, peer = 1 - rank;
    if (other_group)
        CALL(c10d_new_group(&g2, pg, ranks, 2));
    for (size_t i = 0; i < count; i++)
        out[i] = pattern(rank, peer, i);
    c10d_tensor ti = c10d_tensor_1d(in, C10D_INT32, (int64_t)count),
                to = c10d_tensor_1d(out, C10D_INT32, (int64_t)count),
                tv = c10d_tensor_1d(&v, C10D_INT32, 1);
    c10d_coll_opts co = C10D_COLL_OPTS_INIT;
    co.async_op = 1;
    int64_t t0 = now_ms();
    CALL(c10d_recv(pg, &ti, peer, 0, &co, &w));
    CALL(c10d_all_reduce(other_group ? g2 : pg, &tv, C10D_SUM, NULL, NULL));
    CALL(c10d_send(pg, &to, peer, 0, NULL, NULL));
    CALL(c10d_work_wait(w, C10D_TIMEOUT_DEFAULT));
    if (v != 2)
        FAIL("rank %d: all_reduce gave %d, want 2", rank, v);
    for (size_t i = 0; i < count; i++)
        if (in[i] != pattern(peer, rank, i))
            FAIL("rank %d: element %zu is %d", rank, i, in[i]);
    if (now_ms() - t0 > 5000) /* the group's 10 s timeout would have failed it */
        FAIL("rank %d: irecv, all_reduce, send took %lld ms", rank,
             (long long)(now_ms() - t0));
out:
    c10d_work_free(w);
    free(in);
    free(out);
    c10d_destroy(g2);
    c10d_destroy(pg);
    return rc;
}

static int irecv_allreduce_send(int rank, int n, void *arg)
{
    return irecv_collective_send(rank, n, arg, 0, 0);
}

static int irecv_other_group_send(int rank, int n, void *arg)
{
    return irecv_collective_send(rank, n, arg, 1, 0);
}

static int irecv_other_group_send_big(int rank, int n, void *arg)
{
    return irecv_collective_send(rank, n, arg, 1, 1);
}

START_TEST(irecv_collective_send_same_group) { run(2, irecv_allreduce_send, "ics"); }
END_TEST
START_TEST(irecv_collective_send_other_group) { run(2, irecv_other_group_send, "ics2"); }
END_TEST
START_TEST(irecv_collective_send_big_over_tcp)
{
    run_over_tcp(2, irecv_other_group_send_big, "ics3");
}
END_TEST

/* A wait with a limit returns at the limit, the receive still posted; it
 * then completes when its message comes. Asking whether it completed
 * never blocks the sync send after it. */
static int wait_with_a_limit(int rank, int n, void *arg)
{
    int rc = 0;
    c10d_work *w = NULL;
    c10d_pg *pg = init(rank, n, arg);
    int32_t in = -1, out = 40 + rank;
    if (!pg)
        FAIL("rank %d: setup", rank);
    c10d_tensor ti = c10d_tensor_1d(&in, C10D_INT32, 1), to = c10d_tensor_1d(&out, C10D_INT32, 1);
    c10d_coll_opts co = C10D_COLL_OPTS_INIT;
    co.async_op = 1;
    CALL(c10d_recv(pg, &ti, 1 - rank, 3, &co, &w));
    if (c10d_work_is_completed(w) && rank == 1)
        FAIL("rank 1: completed before rank 0 sent");
    if (rank == 1) {
        int64_t t0 = now_ms();
        c10d_status st = c10d_work_wait(w, 300);
        int64_t took = now_ms() - t0;
        if (st != C10D_ETIMEDOUT || !strstr(c10d_errmsg(), "not finished after 300 ms") ||
            took < 250 || took > 3000)
            FAIL("rank 1: wait(300) gave %s after %lld ms: %s", c10d_status_name(st),
                 (long long)took, c10d_errmsg());
    }
    CALL(c10d_barrier(pg, NULL, NULL)); /* rank 1's wait ran out before rank 0 sends */
    CALL(c10d_send(pg, &to, 1 - rank, 3, NULL, NULL));
    CALL(c10d_work_wait(w, 5000));
    if (in != 40 + (1 - rank))
        FAIL("rank %d: got %d", rank, in);
out:
    c10d_work_free(w);
    c10d_destroy(pg);
    return rc;
}

START_TEST(wait_with_a_limit_leaves_the_recv_posted) { run(2, wait_with_a_limit, "lim"); }
END_TEST

/* A receive from any member that gets a message of the wrong size fails
 * with EINVAL, and the coordinator hears of it under its sender, so the
 * next collective names the mismatched pair, not a desync of its own. */
static int any_wrong_size(int rank, int n, void *arg)
{
    int rc = 0;
    c10d_pg *pg = init(rank, n, arg);
    if (!pg)
        FAIL("rank %d: setup", rank);
    if (rank == 0) {
        int32_t big[2] = {7, 8};
        c10d_tensor tb = c10d_tensor_1d(big, C10D_INT32, 2);
        CALL(c10d_send(pg, &tb, 1, 0, NULL, NULL));
    } else {
        int32_t a = -1;
        int src = -5;
        c10d_tensor ta = c10d_tensor_1d(&a, C10D_INT32, 1);
        c10d_status st = c10d_recv_any(pg, &ta, 0, &src, NULL, NULL);
        if (st != C10D_EINVAL || !strstr(c10d_errmsg(), "rank 0 sent 8 bytes with tag 0"))
            FAIL("rank 1: recv_any of the wrong size: %s: %s", c10d_status_name(st),
                 c10d_errmsg());
    }
    /* Send/recv are checked in the background (a queued report): the
     * coordinator's SYNC answers give every rank the same barrier that
     * first knows of it. */
    c10d_status st = C10D_OK;
    for (int64_t until = now_ms() + 10000; st == C10D_OK && now_ms() < until;)
        st = c10d_barrier(pg, NULL, NULL);
    if (st != C10D_EDESYNC ||
        !strstr(c10d_errmsg(), "rank 0 sent int32[2], rank 1 receives int32[1] (different shape)"))
        FAIL("rank %d: barrier after the mismatch: %s: %s", rank, c10d_status_name(st),
             c10d_errmsg());
out:
    c10d_destroy(pg);
    return rc;
}

START_TEST(recv_from_any_of_the_wrong_size_is_named) { run(2, any_wrong_size, "anyw"); }
END_TEST

int main(void)
{
    Suite *s = suite_create("p2p");
    TCase *tc = tcase_create("host");
    tcase_add_checked_fixture(tc, world_coord_start, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, irecv_then_isend_world_2);
    tcase_add_test(tc, irecv_then_isend_world_3);
    tcase_add_test(tc, irecv_then_isend_world_3_over_tcp);
    tcase_add_test(tc, posted_recv_while_in_a_collective);
    tcase_add_test(tc, posted_recv_while_in_a_collective_over_tcp);
    tcase_add_test(tc, recv_from_any_member);
    tcase_add_test(tc, recv_from_any_member_over_tcp);
    tcase_add_test(tc, recv_from_any_member_is_verified);
    tcase_add_test(tc, posted_recvs_in_order_cancelled_and_aborted);
    tcase_add_test(tc, irecv_collective_send_same_group);
    tcase_add_test(tc, irecv_collective_send_other_group);
    tcase_add_test(tc, irecv_collective_send_big_over_tcp);
    tcase_add_test(tc, posted_recv_while_in_another_groups_collective);
    tcase_add_test(tc, wait_with_a_limit_leaves_the_recv_posted);
    tcase_add_test(tc, recv_from_any_of_the_wrong_size_is_named);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
