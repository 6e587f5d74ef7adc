/* Join: what fails, and what is refused. A joined rank cannot take part
 * in a broadcast from it, a reduce to it, an all_gather or a send to it
 * (EJOINED on both sides); a rank dying or leaving while another is
 * joined (EPEERLOST naming it); a joined rank without the memory to
 * shadow fails everyone at once; misuse of join_begin and join_end; ranks
 * that would shadow differently. */
#include "join_world.h"

#include "check_main.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- what a joined rank cannot take part in --- */

enum { BAD_BCAST_FROM_JOINED, BAD_ALL_GATHER, BAD_SEND_TO_JOINED, BAD_REDUCE_TO_JOINED };

/* Rank 0 joins after two steps; rank 1 then calls something that needs
 * rank 0's data: both fail with EJOINED naming the call and rank 0. */
static int cannot_shadow_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    static const int batches[2] = {2, 3};
    c10d_pg *pg = region_start(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int rc;
    for (int i = 0; i < 2; i++)
        if ((rc = step(pg, rank, i, batches, n)) != 0)
            return rc;
    long long t0 = test_now_ms();
    c10d_status st;
    const char *what = NULL;
    if (rank == 0) {
        int last;
        st = c10d_join_end(pg, &last);
    } else {
        float x[4] = {1, 2, 3, 4}, outs[8];
        c10d_tensor t = c10d_tensor_1d(x, C10D_FLOAT32, 4);
        c10d_tensor o = c10d_tensor_1d(outs, C10D_FLOAT32, 8);
        switch (sc->kase) {
        case BAD_BCAST_FROM_JOINED:
            st = c10d_broadcast(pg, &t, 0, NULL, NULL);
            what = "BROADCAST float32[4] root 0";
            break;
        case BAD_ALL_GATHER:
            st = c10d_all_gather_into_tensor(pg, &o, &t, NULL, NULL);
            what = "ALL_GATHER float32[4]";
            break;
        case BAD_REDUCE_TO_JOINED:
            st = c10d_reduce(pg, &t, 0, C10D_SUM, NULL, NULL);
            what = "REDUCE float32[4] SUM root 0";
            break;
        default:
            st = c10d_send(pg, &t, 0, 7, NULL, NULL);
            what = "tag 7";
            break;
        }
        /* In ASYNC and OFF a call made before this rank heard of the join
         * may wait for it; the finding arrives within the 2 s allowed. */
    }
    long long took = test_now_ms() - t0;
    /* A small send made before this rank heard of the join is handed to
     * the transport and returns; the finding fails a later call. */
    while (rank == 1 && st == C10D_OK && sc->kase == BAD_SEND_TO_JOINED && took < 2000) {
        st = c10d_barrier(pg, NULL, NULL);
        took = test_now_ms() - t0;
    }
    rc = expect_failure(rank, st, took, C10D_EJOINED, C10D_EJOINED, "rank 0",
                        rank == 1 ? what : "joined after");
    if (!rc && rank == 0 && sc->kase != BAD_SEND_TO_JOINED &&
        !strstr(c10d_errmsg(), sc->kase == BAD_ALL_GATHER ? "ALL_GATHER" : "root 0"))
        rc = 34, fprintf(stderr, "rank 0: the report does not name the call: %s\n",
                         c10d_errmsg());
    c10d_destroy(pg);
    return rc;
}

START_TEST(broadcast_from_a_joined_root)
{
    scenario sc = {world_job("bcast-joined"), modes[_i], BAD_BCAST_FROM_JOINED, 0};
    run_world(2, cannot_shadow_body, &sc, 60);
}
END_TEST

START_TEST(reduce_to_a_joined_root)
{
    scenario sc = {world_job("reduce-joined"), modes[_i], BAD_REDUCE_TO_JOINED, 0};
    run_world(2, cannot_shadow_body, &sc, 60);
}
END_TEST

START_TEST(all_gather_under_join)
{
    scenario sc = {world_job("gather-joined"), modes[_i], BAD_ALL_GATHER, 0};
    run_world(2, cannot_shadow_body, &sc, 60);
}
END_TEST

START_TEST(send_to_a_joined_rank)
{
    scenario sc = {world_job("send-joined"), modes[_i], BAD_SEND_TO_JOINED, 0};
    run_world(2, cannot_shadow_body, &sc, 60);
}
END_TEST

/* --- a rank dying, or leaving, while another is joined --- */

/* World 3: rank 0 joins after 2 steps; rank 2 dies (kase 0: _exit) or
 * calls c10d_destroy (kase 1) after 3; rank 1's next collective and rank
 * 0's join_end fail with EPEERLOST naming rank 2. */
static int lost_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    static const int batches[3] = {2, 10, 3};
    c10d_pg *pg = region_start(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int rc;
    for (int i = 0; i < batches[rank] && (rank != 1 || i < 3); i++)
        if ((rc = step(pg, rank, i, batches, n)) != 0)
            return rc;
    /* Rank 2 goes only once rank 1 has finished the steps they share (a
     * rank that dies fails its peers' unfinished collectives too). */
    c10d_store *s;
    void *v;
    size_t len;
    if (rank != 0 && (c10d_store_connect(&s, coord.url, NULL) != C10D_OK ||
                      (rank == 1 && c10d_store_set(s, "test/stepped", "1", 1) != C10D_OK) ||
                      (rank == 2 && c10d_store_get(s, "test/stepped", &v, &len, 30000) != C10D_OK)))
        FAIL(12, "rank %d: store: %s", rank, c10d_errmsg());
    if (rank == 2)
        c10d_free(v);
    if (rank != 0)
        c10d_store_close(s);
    if (rank == 2) {
        if (sc->kase == 0)
            _exit(0); /* died: its connection drops */
        c10d_destroy(pg); /* left, instead of joining */
        return 0;
    }
    long long t0 = test_now_ms();
    c10d_status st;
    if (rank == 0) {
        int last;
        st = c10d_join_end(pg, &last);
    } else {
        float g = 1;
        c10d_tensor t = c10d_tensor_1d(&g, C10D_FLOAT32, 1);
        st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
        while (st == C10D_OK && test_now_ms() - t0 < 3000) /* a blind one may finish */
            st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    }
    rc = expect_failure(rank, st, rank == 0 ? 0 : test_now_ms() - t0, C10D_EPEERLOST,
                        C10D_EPEERLOST, "rank 2", sc->kase == 0 ? "died" : "left");
    c10d_destroy(pg);
    return rc;
}

START_TEST(a_rank_dies_while_another_is_joined)
{
    scenario sc = {world_job("dies"), modes[_i], 0, 0};
    run_world(3, lost_body, &sc, 60);
}
END_TEST

START_TEST(a_rank_leaves_instead_of_joining)
{
    scenario sc = {world_job("leaves"), modes[_i], 1, 0};
    run_world(3, lost_body, &sc, 60);
}
END_TEST

/* --- misuse --- */

static int misuse_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    c10d_pg *pg = init_mode(sc, rank, n, 30000);
    if (!pg)
        return 10;
    int last;
    if (c10d_join_end(pg, &last) != C10D_EINVAL || !strstr(c10d_errmsg(), "join_begin"))
        FAIL(11, "rank %d: join_end without join_begin: %s", rank, c10d_errmsg());
    c10d_join_opts jo = C10D_JOIN_OPTS_INIT;
    jo.throw_on_early_termination = rank; /* rank 1 differs */
    c10d_status st = C10D_OK;
    if (rank == 1) { /* after rank 0 begun: it finds the region made */
        c10d_barrier(pg, NULL, NULL);
        st = c10d_join_begin(pg, &jo);
        if (st != C10D_EINVAL || !strstr(c10d_errmsg(), "same options"))
            FAIL(12, "rank 1: join_begin with other options: %s", c10d_errmsg());
        jo.throw_on_early_termination = 0;
    }
    if (c10d_join_begin(pg, &jo) != C10D_OK)
        FAIL(13, "rank %d: join_begin: %s", rank, c10d_errmsg());
    if (rank == 0)
        c10d_barrier(pg, NULL, NULL);
    if (c10d_join_begin(pg, &jo) != C10D_EINVAL)
        FAIL(14, "rank %d: a second join_begin was accepted", rank);
    if (c10d_join_end(pg, &last) != C10D_OK || last != 1)
        FAIL(15, "rank %d: join_end: %s", rank, c10d_errmsg());
    if (c10d_active_ranks(NULL) != -1)
        FAIL(16, "c10d_active_ranks(NULL)");
    c10d_destroy(pg);
    return 0;
}

START_TEST(misuse_is_refused)
{
    scenario sc = {world_job("misuse"), C10D_VERIFY_SYNC, 0, 0};
    run_world(2, misuse_body, &sc, 60);
}
END_TEST

/* --- a joined rank that cannot take part --- */

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <sys/resource.h>

/* This process may allocate only `more` bytes beyond what it has now. */
static int limit_memory(size_t more)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmData: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    if (kb < 0)
        return -1;
    struct rlimit rl = {(rlim_t)kb * 1024 + more, (rlim_t)kb * 1024 + more};
    return setrlimit(RLIMIT_DATA, &rl);
}

/* Rank 0 joins with too little memory left to shadow ranks 1 and 2's
 * 64 MiB all_reduce: its join_end fails (ENOMEM), and the others, already
 * in the data plane, fail at once with the coordinator's finding instead
 * of waiting for their timeout. World 3: with one active rank left, a
 * joined rank needs no buffer at all (it takes the header alone). */
static int failed_shadow_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    c10d_pg *pg = region_start(sc, rank, n, 60000);
    if (!pg)
        return 10;
    c10d_status st;
    long long t0 = test_now_ms();
    if (rank == 0) {
        if (limit_memory(16u << 20) != 0)
            FAIL(12, "rank 0: setrlimit");
        int last;
        st = c10d_join_end(pg, &last);
        if (st != C10D_ENOMEM)
            FAIL(13, "rank 0: join_end: %s: %s (want ENOMEM)", c10d_status_name(st),
                 c10d_errmsg());
        c10d_destroy(pg);
        return 0;
    }
    size_t n_el = 16u << 20;
    float *big = calloc(n_el, sizeof *big);
    c10d_tensor t = c10d_tensor_1d(big, C10D_FLOAT32, (int64_t)n_el);
    st = c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL);
    int rc = expect_failure(rank, st, test_now_ms() - t0, C10D_EABORTED, C10D_EPEERLOST,
                            "rank 0", NULL);
    free(big);
    c10d_destroy(pg);
    return rc;
}

START_TEST(a_joined_rank_that_cannot_shadow_fails_everyone)
{
    scenario sc = {world_job("shadow-fails"), C10D_VERIFY_SYNC, 0, 0};
    run_world(3, failed_shadow_body, &sc, 60);
}
END_TEST
#endif

/* Whether joined ranks shadow in-band is each rank's own finding (no NCCL
 * for the group); ranks that differ would mix the two paths and wait on
 * each other, so the coordinator refuses the second kind at join_begin. */
static int mixed_body(int rank, int n, void *arg)
{
    const scenario *sc = arg;
    c10d_pg *pg = init_mode(sc, rank, n, 30000);
    if (!pg)
        return 10;
    if (rank == 1) {
        setenv("C10D_JOIN_INBAND", "0", 1);
        float g = 0; /* rank 0 began first */
        c10d_tensor t = c10d_tensor_1d(&g, C10D_FLOAT32, 1);
        if (c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK)
            FAIL(11, "rank 1: all_reduce: %s", c10d_errmsg());
        c10d_status st = c10d_join_begin(pg, NULL);
        if (st != C10D_EINVAL || !strstr(c10d_errmsg(), "same data planes"))
            FAIL(12, "rank 1: join_begin: %s: %s (want EINVAL)", c10d_status_name(st),
                 c10d_errmsg());
    } else {
        if (c10d_join_begin(pg, NULL) != C10D_OK)
            FAIL(13, "rank 0: join_begin: %s", c10d_errmsg());
        float g = 0;
        c10d_tensor t = c10d_tensor_1d(&g, C10D_FLOAT32, 1);
        if (c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK)
            FAIL(14, "rank 0: all_reduce: %s", c10d_errmsg());
    }
    c10d_destroy(pg);
    return 0;
}

START_TEST(members_that_would_shadow_differently_are_refused)
{
    scenario sc = {world_job("mixed"), C10D_VERIFY_OFF, 0, 0};
    run_world(2, mixed_body, &sc, 60);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("join_failures");
    TCase *tc = join_tcase("join_failures");
    tcase_add_loop_test(tc, broadcast_from_a_joined_root, 0, 3);
    tcase_add_loop_test(tc, reduce_to_a_joined_root, 0, 3);
    tcase_add_loop_test(tc, all_gather_under_join, 0, 3);
    tcase_add_loop_test(tc, send_to_a_joined_rank, 0, 3);
    tcase_add_loop_test(tc, a_rank_dies_while_another_is_joined, 0, 3);
    tcase_add_loop_test(tc, a_rank_leaves_instead_of_joining, 0, 3);
    tcase_add_test(tc, misuse_is_refused);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    tcase_add_test(tc, a_joined_rank_that_cannot_shadow_fails_everyone);
#endif
    tcase_add_test(tc, members_that_would_shadow_differently_are_refused);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
