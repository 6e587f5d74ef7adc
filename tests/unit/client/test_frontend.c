/* The front end (pg, coll, plan, verify, join, liveness, work) in one
 * process: a coordinator played by support/fake_conn.c behind conn.h, a
 * data plane played by support/fake_backend.c under the host backend's
 * name, linked in place of the real ones (c10dclient_frontend, the link
 * seam in client/CMakeLists.txt). The calls go through the public API
 * only; what the fakes recorded says what the front end sent and ran.
 * "World 2 alone" is rank 0 of a world of two whose peer never comes: the
 * coordinator answers its rendezvous at once and the fake backend needs
 * no peer, so what the coordinator tells of rank 1 is the test's to say. */
#include "fake_backend.h"
#include "fake_conn.h"

#include "check_main.h"

#include <c10d/c10d.h>
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define REPORT C10DPB__REQUEST__OP_COLL_REPORT

static c10d_pg *init_rank(int rank, int size, c10d_verify verify)
{
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.coord_url = "tcp://fake-coordinator:29400";
    o.rank = rank;
    o.world_size = size;
    o.job = "frontend";
    o.backend = C10D_BACKEND_HOST;
    o.verify = verify;
    o.timeout_ms = 20000;
    c10d_pg *pg = NULL;
    c10d_status st = c10d_init(&pg, &o);
    ck_assert_msg(st == C10D_OK, "c10d_init of rank %d: %s", rank, c10d_errmsg());
    return pg;
}

static c10d_pg *world_alone(int size, c10d_verify verify)
{
    fake_coord_solo(1);
    return init_rank(0, size, verify);
}

/* The tensor the calls carry: the fake backend moves no bytes, so what it
 * holds is never read, and one serves every call of a case. */
static float data[2];

static c10d_tensor two_floats(void)
{
    return c10d_tensor_1d(data, C10D_FLOAT32, 2);
}

/* A blocking all_reduce of two floats: its status. */
static c10d_status all_reduce(c10d_pg *pg, c10d_reduce_op op)
{
    c10d_tensor t = two_floats();
    return c10d_all_reduce(pg, &t, op, NULL, NULL);
}

/* A blocking broadcast of two floats from root: its status. */
static c10d_status broadcast(c10d_pg *pg, int root)
{
    c10d_tensor t = two_floats();
    return c10d_broadcast(pg, &t, root, NULL, NULL);
}

/* An async all_reduce (SUM of two floats) held in the fake backend: it
 * has begun to run there and waits for fake_backend_release (or for the
 * front end's check hook to end it). */
static c10d_work *held_async_all_reduce(c10d_pg *pg)
{
    int begun = fake_backend_count();
    c10d_coll_opts o = C10D_COLL_OPTS_INIT;
    o.async_op = 1;
    c10d_work *w = NULL;
    c10d_tensor t = two_floats();
    fake_backend_hold(1);
    ck_assert_int_eq(c10d_all_reduce(pg, &t, C10D_SUM, &o, &w), C10D_OK);
    ck_assert_ptr_nonnull(w);
    ck_assert(fake_backend_wait_count(begun + 1, 5000));
    return w;
}

/* The i-th call the fake backend was given (failing the case if none). */
static fake_call backend_call(int i)
{
    fake_call c;
    ck_assert_msg(fake_backend_call(i, &c), "the backend was given no call #%d", i);
    return c;
}

/* The i-th report's only entry (failing the case if it has not one). */
static const C10dpb__CollEntry *entry(int i, int *sync, uint64_t *tick)
{
    const C10dpb__Request *r = fake_coord_request(REPORT, i, tick);
    ck_assert_msg(r && r->coll_report->n_entries == 1, "report %d has not one entry", i);
    if (sync)
        *sync = r->coll_report->has_sync && r->coll_report->sync;
    return r->coll_report->entries[0];
}

/* Rank 1 of world (world 2 alone) joins its region 1 after collective
 * after_seq, and rank 0 has heard it. */
static void rank1_joins(uint64_t after_seq)
{
    fake_coord_join("world", 1, 1, after_seq);
    ck_assert(fake_coord_heard(0, 5000));
}

/* World 2 alone, verification off, in a join region (c10d_join_begin's
 * defaults) that rank 1 joined before any collective. */
static c10d_pg *world_with_rank1_joined(void)
{
    c10d_pg *pg = world_alone(2, C10D_VERIFY_OFF);
    ck_assert_int_eq(c10d_join_begin(pg, NULL), C10D_OK);
    rank1_joins(0);
    return pg;
}

static void assert_msg_has(const char *want)
{
    ck_assert_msg(strstr(c10d_errmsg(), want), "the message does not say \"%s\": %s", want,
                  c10d_errmsg());
}

/* --- a call's way: plan -> verify -> backend --- */

START_TEST(test_collective_reaches_backend_after_its_report)
{
    c10d_pg *pg = init_rank(0, 1, C10D_VERIFY_SYNC);
    float x[4] = {1, 2, 3, 4};
    c10d_tensor t = c10d_tensor_1d(x, C10D_FLOAT32, 4);
    ck_assert_int_eq(c10d_all_reduce(pg, &t, C10D_MAX, NULL, NULL), C10D_OK);
    int64_t y[3] = {0};
    c10d_tensor u = c10d_tensor_1d(y, C10D_INT64, 3);
    ck_assert_int_eq(c10d_broadcast(pg, &u, 0, NULL, NULL), C10D_OK);

    ck_assert_int_eq(fake_backend_count(), 2);
    fake_call a = backend_call(0), b = backend_call(1);
    ck_assert_int_eq(a.kind, C10DC_ALL_REDUCE);
    ck_assert_int_eq(a.dtype, C10D_FLOAT32);
    ck_assert_int_eq(a.op, C10D_MAX);
    ck_assert_uint_eq(a.count, 4);
    ck_assert_uint_eq(a.seq, 1);
    ck_assert_int_eq(a.divisor, 0);
    ck_assert_str_eq(a.group, "world");
    ck_assert_int_eq(b.kind, C10DC_BROADCAST);
    ck_assert_int_eq(b.dtype, C10D_INT64);
    ck_assert_uint_eq(b.count, 3);
    ck_assert_int_eq(b.root, 0);
    ck_assert_uint_eq(b.seq, 2);

    /* Each was reported, and answered, before the backend ran it. */
    ck_assert_int_eq(fake_coord_count(REPORT), 2);
    int sync = 0;
    uint64_t t0, t1;
    const C10dpb__CollEntry *e0 = entry(0, &sync, &t0);
    ck_assert(sync);
    ck_assert_str_eq(e0->group, "world");
    ck_assert_uint_eq(e0->seq, 1);
    ck_assert_uint_eq(e0->kind, C10DC_ALL_REDUCE);
    ck_assert_uint_eq(e0->dtype, C10D_FLOAT32);
    ck_assert_int_eq(e0->count, 4);
    ck_assert_uint_eq(e0->op, C10D_MAX);
    const C10dpb__CollEntry *e1 = entry(1, &sync, &t1);
    ck_assert_uint_eq(e1->seq, 2);
    ck_assert_uint_eq(e1->kind, C10DC_BROADCAST);
    ck_assert_int_eq(e1->root, 0);
    ck_assert_uint_lt(t0, a.tick);
    ck_assert_uint_lt(a.tick, t1);
    ck_assert_uint_lt(t1, b.tick);
    c10d_destroy(pg);
}
END_TEST

/* A rank of a world of two, on a thread of its own: an all_reduce and a
 * broadcast from rank 1. */
static void *rank_main(void *arg)
{
    int rank = (int)(intptr_t)arg;
    c10d_pg *pg = init_rank(rank, 2, C10D_VERIFY_SYNC);
    c10d_status st = all_reduce(pg, C10D_SUM);
    if (st == C10D_OK)
        st = broadcast(pg, 1);
    c10d_destroy(pg);
    return (void *)(intptr_t)st;
}

START_TEST(test_two_ranks_in_two_threads)
{
    /* The coordinator answers the rendezvous once both arrived. */
    pthread_t th[2];
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(pthread_create(&th[r], NULL, rank_main, (void *)(intptr_t)r), 0);
    for (int r = 0; r < 2; r++) {
        void *st = NULL;
        pthread_join(th[r], &st);
        ck_assert_int_eq((int)(intptr_t)st, C10D_OK);
    }
    ck_assert_int_eq(fake_coord_count(C10DPB__REQUEST__OP_GROUP_JOIN), 2);
    ck_assert_int_eq(fake_coord_count(C10DPB__REQUEST__OP_GROUP_LEAVE), 2);
    /* Two SYNC reports per rank, and two calls per rank's backend. */
    int reports[2] = {0}, calls[2] = {0};
    for (int i = 0; i < fake_coord_count(REPORT); i++) {
        const C10dpb__Request *r = fake_coord_request(REPORT, i, NULL);
        ck_assert(r->coll_report->sync);
        ck_assert(r->coll_report->rank == 0 || r->coll_report->rank == 1);
        reports[r->coll_report->rank]++;
    }
    fake_call c;
    for (int i = 0; fake_backend_call(i, &c); i++) {
        ck_assert(c.rank == 0 || c.rank == 1);
        calls[c.rank]++;
        if (c.kind == C10DC_BROADCAST)
            ck_assert_int_eq(c.root, 1);
    }
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(reports[r], 2);
        ck_assert_int_eq(calls[r], 2);
    }
}
END_TEST

START_TEST(test_subgroup_calls_are_its_own)
{
    c10d_pg *pg = world_alone(2, C10D_VERIFY_SYNC);
    c10d_pg *sub = NULL;
    const int members[] = {1, 0}; /* this rank is the subgroup's rank 1 */
    ck_assert_int_eq(c10d_new_group(&sub, pg, members, 2), C10D_OK);
    ck_assert_int_eq(c10d_rank(sub), 1);
    const C10dpb__Request *gj = fake_coord_request(C10DPB__REQUEST__OP_GROUP_JOIN, 1, NULL);
    ck_assert_ptr_nonnull(gj);
    ck_assert_str_eq(gj->group_join->name, "world.1");
    ck_assert_uint_eq(gj->group_join->n_members, 2);
    ck_assert_int_eq(gj->group_join->members[0], 1);
    ck_assert_int_eq(all_reduce(sub, C10D_SUM), C10D_OK);
    ck_assert_int_eq(all_reduce(pg, C10D_SUM), C10D_OK);
    /* Each group numbers its own calls from 1. */
    const C10dpb__CollEntry *a = entry(0, NULL, NULL), *b = entry(1, NULL, NULL);
    ck_assert_str_eq(a->group, "world.1");
    ck_assert_uint_eq(a->seq, 1);
    ck_assert_str_eq(b->group, "world");
    ck_assert_uint_eq(b->seq, 1);
    fake_call c = backend_call(0);
    ck_assert_str_eq(c.group, "world.1");
    ck_assert_int_eq(c.rank, 1);
    c10d_destroy(sub);
    c10d_destroy(pg);
}
END_TEST

/* --- verification modes --- */

START_TEST(test_sync_reports_each_call_and_waits)
{
    c10d_pg *pg = world_alone(2, C10D_VERIFY_SYNC);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(all_reduce(pg, C10D_SUM), C10D_OK);
    ck_assert_int_eq(fake_coord_count(REPORT), 3);
    for (int i = 0; i < 3; i++) {
        int sync = 0;
        const C10dpb__CollEntry *e = entry(i, &sync, NULL);
        ck_assert_msg(sync, "report %d is not SYNC", i);
        ck_assert_uint_eq(e->seq, (uint64_t)i + 1);
        ck_assert(!e->has_repeat);
    }
    c10d_destroy(pg);
}
END_TEST

START_TEST(test_async_reports_in_batches)
{
    c10d_pg *pg = world_alone(2, C10D_VERIFY_ASYNC);
    /* The first report is held at the coordinator: what the rank queues
     * meanwhile must go in one batch, the repeated call as one entry. */
    fake_coord_hold_reports(1);
    ck_assert_int_eq(all_reduce(pg, C10D_SUM), C10D_OK);
    ck_assert(fake_coord_wait_count(REPORT, 1, 5000));
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(all_reduce(pg, C10D_SUM), C10D_OK);
    ck_assert_int_eq(broadcast(pg, 1), C10D_OK);
    ck_assert_int_eq(fake_backend_count(), 6); /* nothing waited for the coordinator */
    fake_coord_hold_reports(0);
    c10d_destroy(pg); /* sends what is queued */

    ck_assert_int_eq(fake_coord_count(REPORT), 2);
    const C10dpb__Request *first = fake_coord_request(REPORT, 0, NULL);
    const C10dpb__Request *batch = fake_coord_request(REPORT, 1, NULL);
    ck_assert(!first->coll_report->sync && !batch->coll_report->sync);
    ck_assert_uint_eq(first->coll_report->n_entries, 1);
    ck_assert_uint_eq(first->coll_report->entries[0]->seq, 1);
    ck_assert_uint_eq(batch->coll_report->n_entries, 2);
    const C10dpb__CollEntry *run = batch->coll_report->entries[0];
    ck_assert_uint_eq(run->seq, 2);
    ck_assert_uint_eq(run->repeat, 3); /* #2 .. #5 */
    ck_assert_uint_eq(run->kind, C10DC_ALL_REDUCE);
    const C10dpb__CollEntry *bc = batch->coll_report->entries[1];
    ck_assert_uint_eq(bc->seq, 6);
    ck_assert_uint_eq(bc->kind, C10DC_BROADCAST);
    ck_assert_int_eq(bc->root, 1);
}
END_TEST

START_TEST(test_off_reports_nothing)
{
    c10d_pg *pg = world_alone(2, C10D_VERIFY_OFF);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(all_reduce(pg, C10D_SUM), C10D_OK);
    c10d_destroy(pg);
    ck_assert_int_eq(fake_backend_count(), 3);
    ck_assert_int_eq(fake_coord_count(REPORT), 0);
}
END_TEST

/* --- findings --- */

START_TEST(test_desync_fails_the_call_with_the_coordinators_words)
{
    static const char words[] = "collective #1 of group world: rank 1 called BROADCAST "
                                "float32[2] root 0 where rank 0 called ALL_REDUCE";
    c10d_pg *pg = world_alone(2, C10D_VERIFY_SYNC);
    fake_coord_answer_report(C10D_EDESYNC, words);
    ck_assert_int_eq(all_reduce(pg, C10D_SUM), C10D_EDESYNC);
    assert_msg_has(words);
    assert_msg_has("did not run");
    ck_assert_int_eq(fake_backend_count(), 0);
    /* Recorded against the group: a backend asking about it hears it. */
    char msg[1024];
    ck_assert_int_eq(fake_backend_failure(0, 1, msg, sizeof msg), C10D_EDESYNC);
    ck_assert_msg(strstr(msg, words), "the alert says: %s", msg);
    /* The group is unusable: the next call fails before it is sent. */
    ck_assert_int_ne(all_reduce(pg, C10D_SUM), C10D_OK);
    assert_msg_has(words);
    ck_assert_int_eq(fake_coord_count(REPORT), 1);
    ck_assert_int_eq(fake_backend_count(), 0);
    c10d_destroy(pg);
}
END_TEST

START_TEST(test_lost_member_fails_the_next_collective)
{
    c10d_pg *pg = world_alone(2, C10D_VERIFY_ASYNC);
    ck_assert_int_eq(all_reduce(pg, C10D_SUM), C10D_OK);
    fake_coord_lose(1, C10DPB__MEMBER_STATE__MEMBER_DEAD, "its heartbeats stopped");
    ck_assert(fake_coord_heard(0, 5000));
    ck_assert_int_eq(all_reduce(pg, C10D_SUM), C10D_EPEERLOST);
    assert_msg_has("rank 1 (host fakehost, pid 4242) died: its heartbeats stopped");
    assert_msg_has("#2 ALL_REDUCE");
    ck_assert_int_eq(fake_backend_count(), 1);
    c10d_destroy(pg);
}
END_TEST

START_TEST(test_lost_member_ends_a_call_blocked_in_the_backend)
{
    c10d_pg *pg = world_alone(2, C10D_VERIFY_SYNC);
    c10d_work *w = held_async_all_reduce(pg);
    fake_coord_lose(1, C10DPB__MEMBER_STATE__MEMBER_LEFT, "it called c10d_destroy");
    ck_assert_int_eq(c10d_work_wait(w, C10D_TIMEOUT_DEFAULT), C10D_EPEERLOST);
    assert_msg_has("rank 1 (host fakehost, pid 4242) left the job");
    c10d_work_free(w);
    c10d_destroy(pg);
}
END_TEST

/* --- work handles --- */

START_TEST(test_async_work_wait_test_and_timeout)
{
    c10d_pg *pg = init_rank(0, 1, C10D_VERIFY_SYNC);
    c10d_work *w = held_async_all_reduce(pg);
    ck_assert_int_eq(c10d_work_is_completed(w), 0);
    ck_assert_int_eq(c10d_work_wait(w, C10D_NO_WAIT), C10D_ETIMEDOUT);
    assert_msg_has("still running");
    ck_assert_int_eq(c10d_work_wait(w, 50), C10D_ETIMEDOUT);
    assert_msg_has("not finished after 50 ms");
    fake_backend_release();
    ck_assert_int_eq(c10d_work_wait(w, C10D_TIMEOUT_DEFAULT), C10D_OK);
    ck_assert_int_eq(c10d_work_is_completed(w), 1);
    ck_assert_int_eq(backend_call(0).async, 1);
    c10d_work_free(w);
    c10d_destroy(pg);
}
END_TEST

START_TEST(test_work_freed_before_it_completes)
{
    c10d_pg *pg = init_rank(0, 1, C10D_VERIFY_SYNC);
    c10d_work_free(held_async_all_reduce(pg)); /* the lane frees it when it ends */
    fake_backend_release();
    /* A sync call after it runs behind it, on the lane, and completes. */
    ck_assert_int_eq(all_reduce(pg, C10D_SUM), C10D_OK);
    ck_assert_int_eq(fake_backend_count(), 2);
    fake_call a = backend_call(0), b = backend_call(1);
    ck_assert_int_eq(a.st, C10D_OK);
    ck_assert_uint_eq(a.seq, 1);
    ck_assert_uint_eq(b.seq, 2);
    c10d_destroy(pg);
}
END_TEST

START_TEST(test_call_timeout_ends_a_held_call)
{
    c10d_pg *pg = init_rank(0, 1, C10D_VERIFY_SYNC);
    c10d_tensor t = two_floats();
    c10d_coll_opts o = C10D_COLL_OPTS_INIT;
    o.timeout_ms = 100;
    fake_backend_hold(1);
    ck_assert_int_eq(c10d_all_reduce(pg, &t, C10D_SUM, &o, NULL), C10D_ETIMEDOUT);
    assert_msg_has("timed out after 100 ms");
    c10d_destroy(pg);
}
END_TEST

/* --- join --- */

START_TEST(test_join_region_avg_divides_by_active_ranks)
{
    c10d_pg *pg = world_alone(2, C10D_VERIFY_OFF);
    c10d_join_opts jo = C10D_JOIN_OPTS_INIT;
    jo.divide_by_initial_world_size = 0; /* AVG over the ranks that contributed */
    ck_assert_int_eq(c10d_join_begin(pg, &jo), C10D_OK);
    ck_assert_int_eq(fake_coord_count(C10DPB__REQUEST__OP_JOIN_BEGIN), 1);
    const C10dpb__Request *jb = fake_coord_request(C10DPB__REQUEST__OP_JOIN_BEGIN, 0, NULL);
    ck_assert_uint_eq(jb->join_begin->region, 1);
    ck_assert_str_eq(jb->join_begin->group, "world");
    /* No peek/announce in this backend: the coordinator tells joiners. */
    ck_assert(!jb->join_begin->inband);
    ck_assert(!jb->join_begin->divide_by_initial_world_size);
    /* Nobody joined yet: an AVG still waits for the coordinator (SYNC,
     * though verification is OFF) and divides by both ranks. */
    ck_assert_int_eq(all_reduce(pg, C10D_AVG), C10D_OK);
    /* A SUM in the region, nobody joined, under OFF: held, not sent. */
    ck_assert_int_eq(all_reduce(pg, C10D_SUM), C10D_OK);
    ck_assert_int_eq(fake_coord_count(REPORT), 1);
    rank1_joins(2); /* rank 1 ran out of inputs after #2 */
    ck_assert_int_eq(all_reduce(pg, C10D_AVG), C10D_OK);
    ck_assert_int_eq(c10d_active_ranks(pg), 1);

    fake_call c = backend_call(0);
    ck_assert_int_eq(c.op, C10D_AVG);
    ck_assert_int_eq(c.divisor, 2);
    ck_assert_int_eq(backend_call(1).divisor, 0); /* a SUM divides by nothing */
    ck_assert_int_eq(backend_call(2).divisor, 1);
    /* #3 was reported SYNC, after the held #2 */
    int sync = 0;
    const C10dpb__CollEntry *e = entry(fake_coord_count(REPORT) - 1, &sync, NULL);
    ck_assert(sync);
    ck_assert_uint_eq(e->seq, 3);
    ck_assert_uint_eq(e->join_known, 1);
    c10d_destroy(pg);
}
END_TEST

START_TEST(test_join_divide_by_initial_world_size)
{
    /* c10d_join_begin's default: an AVG divides by the group's size. */
    c10d_pg *pg = world_with_rank1_joined();
    ck_assert_int_eq(all_reduce(pg, C10D_AVG), C10D_OK);
    /* the group's size, as the backend does by itself */
    ck_assert_int_eq(backend_call(0).divisor, 0);
    c10d_destroy(pg);
}
END_TEST

START_TEST(test_send_to_a_joined_peer_is_refused)
{
    c10d_pg *pg = world_with_rank1_joined();
    c10d_tensor t = two_floats();
    ck_assert_int_eq(c10d_send(pg, &t, 1, 7, NULL, NULL), C10D_EJOINED);
    assert_msg_has("rank 1");
    assert_msg_has("(tag 7)");
    ck_assert_int_eq(fake_backend_count(), 0);
    /* Its entry reached the coordinator before the refusal, though OFF
     * holds entries: the coordinator makes it the group's finding, so
     * every rank hears of it. */
    ck_assert_int_eq(fake_coord_count(REPORT), 1);
    const C10dpb__CollEntry *e = entry(0, NULL, NULL);
    ck_assert_uint_eq(e->kind, C10DC_SEND);
    ck_assert_int_eq(e->root, 1);
    ck_assert_int_eq(e->tag, 7);
    ck_assert_uint_eq(e->join_known, 1);
    c10d_destroy(pg);
}
END_TEST

/* --- a receive from any member --- */

START_TEST(test_recv_from_any_is_reported_under_its_sender)
{
    c10d_pg *pg = world_alone(2, C10D_VERIFY_ASYNC);
    fake_backend_any_source_from(1);
    c10d_tensor t = two_floats();
    int src = -1;
    ck_assert_int_eq(c10d_recv_any(pg, &t, 5, &src, NULL, NULL), C10D_OK);
    ck_assert_int_eq(src, 1);
    fake_backend_any_source_from(-1);
    c10d_destroy(pg); /* sends what is queued */
    /* Reported once, after the data plane said who sent it: as the
     * receive from rank 1, which the coordinator matches with its send. */
    ck_assert_int_eq(backend_call(0).kind, C10DC_RECV);
    int recvs = 0;
    for (int i = 0; i < fake_coord_count(REPORT); i++) {
        const C10dpb__Request *r = fake_coord_request(REPORT, i, NULL);
        for (size_t k = 0; k < r->coll_report->n_entries; k++) {
            const C10dpb__CollEntry *e = r->coll_report->entries[k];
            if (e->kind != C10DC_RECV)
                continue;
            recvs++;
            ck_assert_int_eq(e->root, 1);
            ck_assert_int_eq(e->tag, 5);
        }
    }
    ck_assert_int_eq(recvs, 1);
}
END_TEST

/* --- arguments --- */

START_TEST(test_bad_arguments_are_refused_before_anything_is_sent)
{
    c10d_pg *pg = world_alone(2, C10D_VERIFY_SYNC);
    c10d_tensor t = two_floats();
    c10d_tensor bad_dtype = t, no_data = t, bad_shape = t;
    bad_dtype.dtype = (c10d_dtype)99;
    no_data.data = NULL;
    bad_shape.ndim = -1;
    c10d_coll_opts async = C10D_COLL_OPTS_INIT;
    async.async_op = 1;
    c10d_coll_opts old = C10D_COLL_OPTS_INIT;
    old.version = 999;
    ck_assert_int_eq(c10d_all_reduce(NULL, &t, C10D_SUM, NULL, NULL), C10D_EINVAL);
    ck_assert_int_eq(c10d_all_reduce(pg, NULL, C10D_SUM, NULL, NULL), C10D_EINVAL);
    ck_assert_int_eq(c10d_all_reduce(pg, &bad_dtype, C10D_SUM, NULL, NULL), C10D_EINVAL);
    assert_msg_has("unknown dtype 99");
    ck_assert_int_eq(c10d_all_reduce(pg, &no_data, C10D_SUM, NULL, NULL), C10D_EINVAL);
    ck_assert_int_eq(c10d_all_reduce(pg, &bad_shape, C10D_SUM, NULL, NULL), C10D_EINVAL);
    ck_assert_int_eq(all_reduce(pg, (c10d_reduce_op)77), C10D_EINVAL);
    ck_assert_int_eq(c10d_all_reduce(pg, &t, C10D_SUM, &async, NULL), C10D_EINVAL);
    ck_assert_int_eq(c10d_all_reduce(pg, &t, C10D_SUM, &old, NULL), C10D_EINVAL);
    ck_assert_int_eq(broadcast(pg, 2), C10D_EINVAL);
    assert_msg_has("root 2 is out of range for group world of size 2");
    ck_assert_int_eq(broadcast(pg, -1), C10D_EINVAL);
    ck_assert_int_eq(c10d_reduce(pg, &t, 5, C10D_SUM, NULL, NULL), C10D_EINVAL);
    ck_assert_int_eq(c10d_send(pg, &t, 2, 0, NULL, NULL), C10D_EINVAL);
    ck_assert_int_eq(fake_coord_count(REPORT), 0);
    ck_assert_int_eq(fake_backend_count(), 0);
    /* Nothing was numbered: the next call is #1, as on every peer. */
    ck_assert_int_eq(all_reduce(pg, C10D_SUM), C10D_OK);
    ck_assert_uint_eq(entry(0, NULL, NULL)->seq, 1);
    c10d_destroy(pg);
}
END_TEST

Suite *frontend_suite(void);
Suite *frontend_suite(void)
{
    Suite *s = suite_create("frontend");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_collective_reaches_backend_after_its_report);
    tcase_add_test(tc, test_two_ranks_in_two_threads);
    tcase_add_test(tc, test_subgroup_calls_are_its_own);
    tcase_add_test(tc, test_sync_reports_each_call_and_waits);
    tcase_add_test(tc, test_async_reports_in_batches);
    tcase_add_test(tc, test_off_reports_nothing);
    tcase_add_test(tc, test_desync_fails_the_call_with_the_coordinators_words);
    tcase_add_test(tc, test_lost_member_fails_the_next_collective);
    tcase_add_test(tc, test_lost_member_ends_a_call_blocked_in_the_backend);
    tcase_add_test(tc, test_async_work_wait_test_and_timeout);
    tcase_add_test(tc, test_work_freed_before_it_completes);
    tcase_add_test(tc, test_call_timeout_ends_a_held_call);
    tcase_add_test(tc, test_join_region_avg_divides_by_active_ranks);
    tcase_add_test(tc, test_join_divide_by_initial_world_size);
    tcase_add_test(tc, test_send_to_a_joined_peer_is_refused);
    tcase_add_test(tc, test_recv_from_any_is_reported_under_its_sender);
    tcase_add_test(tc, test_bad_arguments_are_refused_before_anything_is_sent);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return c10d_run_suite(frontend_suite());
}
