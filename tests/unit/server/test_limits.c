/* What one request must not do to the coordinator,
 * on the engine and a real SQLite database, without the network: crash it
 * (a group_join naming members without the caller), hold it (a world of
 * twenty million), blow up a reply (multi_get of one key many times), or
 * make a reply lie about what was stored (a write that fails mid-batch).
 *
 * One file of ~550 lines on purpose: every case is a finding of one review
 * against the same engine fixture, and a reader checks them as a list. */
#include "engine/engine.h"
#include "engine_fixture.h"
#include "engine_request.h"
#include "engine/request.h"
#include "verify/verify.h"

#include <c10d/pg.h>

#include "c10d_time.h"
#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static engine_fixture fx;

static void setup(void)
{
    engine_fixture_init(&fx, "limits");
    ck_assert_msg(engine_fixture_start(&fx, NULL, NULL) == 0, "%s", fx.err);
}

static void teardown(void)
{
    engine_fixture_stop(&fx);
}

static void run1(c10ds_request *r)
{
    r->next = NULL;
    c10ds_engine_run_batch(fx.eng, r);
}

static c10ds_request *join_req(uint64_t id, const char *job, const char *name, int rank,
                               int world, int32_t *members, size_t n_members)
{
    C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
    m.job = (char *)job;
    m.name = (char *)name;
    m.rank = rank;
    m.world_size = world;
    m.members = members;
    m.n_members = n_members;
    m.has_timeout_ms = 1;
    m.timeout_ms = 50;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
    pb.group_join = &m;
    return engine_request(&pb, 100 + (uint64_t)rank, id);
}

static c10ds_request *set_req(uint64_t client, uint64_t id, const char *key, const void *val,
                              size_t len)
{
    C10dpb__StoreSet m = C10DPB__STORE_SET__INIT;
    m.key = (char *)key;
    m.value.data = (uint8_t *)val;
    m.value.len = len;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_SET;
    pb.set = &m;
    return engine_request(&pb, client, id);
}

static c10ds_request *add_req(uint64_t client, uint64_t id, const char *key, int64_t delta)
{
    C10dpb__StoreAdd m = C10DPB__STORE_ADD__INIT;
    m.key = (char *)key;
    m.delta = delta;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_ADD;
    pb.add = &m;
    return engine_request(&pb, client, id);
}

/* Finding 5: the member list of "world" lacked the caller's rank, and the
 * coordinator read past it (heap overflow under ASan, a crash in release). */
START_TEST(a_group_join_whose_members_lack_the_caller_is_refused)
{
    int32_t members[] = {1, 2};
    run1(join_req(1, "j", "world", 0, 3, members, 2));
    run1(join_req(2, "j", "sub", 0, 3, members, 2));
    ck_assert_int_eq(fx.nreplies, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(fx.replies[i]->status, C10D_EINVAL);
        ck_assert_ptr_nonnull(strstr(fx.replies[i]->detail, "is not one of its members"));
    }
}
END_TEST

/* A subgroup's members must all pass the same ranks in the same order; a
 * member whose list differs from the creator's is refused quoting both
 * (the lists are compared by hash, read back as rows only for this). */
START_TEST(a_member_with_other_ranks_than_the_creator_is_refused)
{
    for (int rank = 0; rank < 4; rank++)
        run1(join_req((uint64_t)rank + 1, "sub", "world", rank, 4, NULL, 0));
    ck_assert_int_eq(fx.nreplies, 4);
    uint64_t gen = fx.replies[0]->group_join->generation;
    int32_t mine[] = {0, 2, 3}, other[] = {0, 3, 2};
    int32_t *lists[] = {mine, other, mine};
    int who[] = {0, 2, 3};
    for (int i = 0; i < 3; i++) {
        c10ds_request *r = join_req(10 + (uint64_t)i, "sub", "world.1", who[i], 4, lists[i], 3);
        r->pb->group_join->has_generation = 1;
        r->pb->group_join->generation = gen;
        run1(r);
    }
    ck_assert_int_eq(fx.nreplies, 5); /* rank 0 and 3 wait for rank 2 */
    ck_assert_int_eq(fx.replies[4]->status, C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(fx.replies[4]->detail, "rank 2 asks for ranks [0,3,2], another "
                                                        "member created it with [0,2,3]"));
    c10ds_request *r = join_req(20, "sub", "world.1", 2, 4, mine, 3);
    r->pb->group_join->has_generation = 1;
    r->pb->group_join->generation = gen;
    run1(r);
    ck_assert_int_eq(fx.nreplies, 8); /* formed: all three answered */
    for (int i = 5; i < 8; i++)
        ck_assert_int_eq(fx.replies[i]->status, C10D_OK);
}
END_TEST

/* Finding 10: job names of 256+ bytes broke liveness (keys were cut);
 * the library cut C10D_JOB at 127 bytes, so two long names became one
 * job. One limit, C10D_MAX_JOB_BYTES, refused on both sides. */
START_TEST(a_job_name_over_the_limit_is_refused)
{
    char job[C10D_MAX_JOB_BYTES + 2];
    memset(job, 'j', sizeof job - 1);
    job[sizeof job - 1] = '\0';
    run1(join_req(1, job, "world", 0, 1, NULL, 0));
    ck_assert_int_eq(fx.replies[0]->status, C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(fx.replies[0]->detail, "C10D_MAX_JOB_BYTES"));
    job[sizeof job - 2] = '\0'; /* exactly the limit: served */
    run1(join_req(2, job, "world", 0, 1, NULL, 0));
    ck_assert_int_eq(fx.replies[1]->status, C10D_OK);
}
END_TEST

/* Finding 6: a world of 20,000,000 in a 50-byte request held the engine
 * for seconds and wrote hundreds of MB. */
START_TEST(a_world_larger_than_the_limit_is_refused_at_once)
{
    int64_t t0 = c10d_now_ms();
    run1(join_req(1, "big", "world", 0, 20000000, NULL, 0));
    ck_assert_int_eq(fx.nreplies, 1);
    ck_assert_int_eq(fx.replies[0]->status, C10D_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(fx.replies[0]->detail, "--max-world-size"));
    ck_assert_int_lt(c10d_now_ms() - t0, 100);
}
END_TEST

/* Finding 6: checking a member list was quadratic (400,000 members held
 * everyone for 30 s). A list at the limit, with a duplicate at its end,
 * is checked in well under 100 ms. */
START_TEST(a_long_member_list_is_checked_in_linear_time)
{
    int n = (int)fx.cfg.max_world_size;
    int32_t *members = malloc((size_t)n * sizeof *members);
    for (int i = 0; i < n; i++)
        members[i] = i;
    members[n - 1] = 5; /* twice */
    int64_t t0 = c10d_now_ms();
    run1(join_req(1, "long", "sub", 0, n, members, (size_t)n));
    int64_t took = c10d_now_ms() - t0;
    ck_assert_int_eq(fx.replies[0]->status, C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(fx.replies[0]->detail, "names rank 5 twice"));
    ck_assert_int_lt(took, 100);
    free(members);
}
END_TEST

/* Finding 7: a multi_get naming one large key thousands of times made a
 * 1 GB reply from a 370-byte request. */
START_TEST(a_multi_get_reply_larger_than_a_message_is_refused)
{
    size_t vlen = 512 << 10;
    char *v = calloc(1, vlen);
    run1(set_req(1, 1, "big", v, vlen));
    ck_assert_int_eq(fx.replies[0]->status, C10D_OK);
    char *keys[8];
    for (int i = 0; i < 8; i++)
        keys[i] = "big";
    C10dpb__StoreMultiGet m = C10DPB__STORE_MULTI_GET__INIT;
    m.keys = keys;
    m.n_keys = 8; /* 4 MiB of values against a 2 MiB message limit */
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_MULTI_GET;
    pb.multi_get = &m;
    run1(engine_request(&pb, 1, 2));
    ck_assert_int_eq(fx.replies[1]->status, C10D_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(fx.replies[1]->detail, "--max-message-bytes"));
    m.n_keys = 3; /* 1.5 MiB: fits */
    run1(engine_request(&pb, 1, 3));
    ck_assert_int_eq(fx.replies[2]->status, C10D_OK);
    ck_assert_uint_eq(fx.replies[2]->values->n_values, 3);
    free(v);
}
END_TEST

/* The disk fills up: no more than `spare` pages beyond what the file has
 * now (SQLite's max_page_count plays the full disk); -1 frees it again. */
static void fill_the_disk(int spare)
{
    char sql[64];
    int pages = 1000000;
    if (spare >= 0) {
        sqlite3_exec(fx.db.h, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
        sqlite3_stmt *st;
        sqlite3_prepare_v2(fx.db.h, "PRAGMA page_count", -1, &st, NULL);
        sqlite3_step(st);
        pages = sqlite3_column_int(st, 0) + spare;
        sqlite3_finalize(st);
    }
    snprintf(sql, sizeof sql, "PRAGMA max_page_count=%d", pages);
    sqlite3_exec(fx.db.h, sql, NULL, NULL, NULL);
}

static int64_t stored_number(const char *key)
{
    C10dpb__StoreGet m = C10DPB__STORE_GET__INIT;
    m.key = (char *)key;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_GET;
    pb.get = &m;
    int i = fx.nreplies;
    run1(engine_request(&pb, 9, 1000 + (uint64_t)fx.nreplies));
    if (fx.replies[i]->status != C10D_OK)
        return -1;
    char buf[32] = {0};
    memcpy(buf, fx.replies[i]->value.data,
           fx.replies[i]->value.len < 31 ? fx.replies[i]->value.len : 31);
    return atoll(buf);
}

/* Finding 2: a write failing in the middle of a batch (the disk is full)
 * rolled the batch's transaction back; the later requests ran in
 * autocommit and were stored, yet every reply said nothing was stored,
 * without the cause. Every reply must be true to what is stored and name
 * the cause, and a retried add must count once. */
START_TEST(a_write_failing_mid_batch_leaves_every_reply_true)
{
    run1(add_req(1, 1, "before", 1)); /* a committed key, and the file's pages */
    ck_assert_int_eq(fx.replies[0]->status, C10D_OK);
    fill_the_disk(2);

    size_t vlen = 256 << 10;
    char *v = calloc(1, vlen);
    c10ds_request *a = add_req(2, 1, "a", 1), *big = set_req(3, 1, "big", v, vlen),
                  *b = add_req(4, 1, "b", 1);
    a->next = big;
    big->next = b;
    b->next = NULL;
    c10ds_engine_run_batch(fx.eng, a);
    ck_assert_int_eq(fx.nreplies, 4);
    C10dpb__Reply *ra = fx.replies[1], *rbig = fx.replies[2], *rb = fx.replies[3];
    ck_assert_int_ne(rbig->status, C10D_OK);
    ck_assert_msg(strstr(rbig->detail, "full") != NULL, "the cause is not named: %s",
                  rbig->detail);
    /* What each reply says is what is stored. */
    fill_the_disk(-1);
    int64_t got_a = stored_number("a"), got_b = stored_number("b");
    ck_assert_int_eq(got_a, ra->status == C10D_OK ? 1 : -1);
    ck_assert_int_eq(got_b, rb->status == C10D_OK ? 1 : -1);
    if (ra->status != C10D_OK)
        ck_assert_msg(strstr(ra->detail, "full") != NULL, "a: %s", ra->detail);
    ck_assert_int_eq(stored_number("before"), 1);
    /* Retries with the same ids count once. */
    run1(add_req(2, 1, "a", 1));
    run1(add_req(4, 1, "b", 1));
    ck_assert_int_eq(stored_number("a"), 1);
    ck_assert_int_eq(stored_number("b"), 1);
    free(v);
}
END_TEST

static const char *member_state(const char *job, int rank, char *buf, size_t cap)
{
    sqlite3_stmt *s;
    sqlite3_prepare_v2(fx.db.h, "SELECT state FROM members WHERE job = ?1 AND rank = ?2", -1, &s,
                       NULL);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, rank);
    snprintf(buf, cap, "%s", sqlite3_step(s) == SQLITE_ROW ?
             (const char *)sqlite3_column_text(s, 0) : "(none)");
    sqlite3_finalize(s);
    return buf;
}

/* Finding 17: heartbeat staleness was measured on the wall clock, so a
 * clock step (NTP, an operator) declared every live member dead. */
START_TEST(a_wall_clock_step_kills_no_member)
{
    run1(join_req(1, "steady", "world", 0, 2, NULL, 0)); /* parks: rank 1 is missing */
    char st[32];
    ck_assert_str_eq(member_state("steady", 0, st, sizeof st), "alive");
    c10d_wall_step_ms = 3600 * 1000; /* the clock jumps an hour ahead */
    fx.eng->next_sweep_ms = 0;
    c10ds_engine_run_batch(fx.eng, NULL);
    c10d_wall_step_ms = 0;
    ck_assert_str_eq(member_state("steady", 0, st, sizeof st), "alive");
}
END_TEST

static c10ds_request *watch_req(uint64_t client, uint64_t id, const char *job, uint64_t gen,
                                int rank)
{
    C10dpb__Watch m = C10DPB__WATCH__INIT;
    m.job = (char *)job;
    m.generation = gen;
    m.rank = rank;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_WATCH;
    pb.watch = &m;
    return engine_request(&pb, client, id);
}

static int vgroups_of(const char *job)
{
    int n = 0;
    for (c10ds_vgroup *g = fx.eng->verify.groups; g; g = g->next)
        n += strcmp(g->job, job) == 0;
    return n;
}

/* Memory flat across generations. Each restart of a job made
 * verification state for its new generation and kept the old ones' (with
 * every rank's trace) for the coordinator's life. */
START_TEST(a_restarted_job_leaves_no_verification_state_behind)
{
    for (uint64_t round = 0; round < 5; round++) {
        uint64_t base = 10 * round + 1;
        run1(join_req(base, "again", "world", 0, 1, NULL, 0)); /* client 100 */
        C10dpb__Reply *j = fx.replies[fx.nreplies - 1];
        ck_assert_int_eq(j->status, C10D_OK);
        uint64_t gen = j->group_join->generation;
        ck_assert_int_eq(gen, round + 1);
        run1(engine_request_report(100, base + 1, "again", gen, 0, 1, 0));
        ck_assert_int_eq(fx.replies[fx.nreplies - 1]->status, C10D_OK);
        ck_assert_int_eq(vgroups_of("again"), 1);
        run1(engine_request_leave(100, base + 2, "again", gen, 0));
        ck_assert_int_eq(fx.replies[fx.nreplies - 1]->status, C10D_OK);
    }
}
END_TEST

/* Finding 13: leave, watch and collective reports took (job, generation,
 * rank) from the message: any client could mark a member left or bind its
 * liveness to its own connection. Each member is bound to the client that
 * joined it. */
START_TEST(only_the_client_that_joined_a_member_speaks_for_it)
{
    run1(join_req(1, "mine", "world", 0, 1, NULL, 0)); /* client 100 */
    ck_assert_int_eq(fx.replies[0]->status, C10D_OK);
    uint64_t gen = fx.replies[0]->group_join->generation;
    run1(engine_request_leave(999, 2, "mine", gen, 0));
    ck_assert_int_eq(fx.replies[1]->status, C10D_EAUTH);
    ck_assert_ptr_nonnull(strstr(fx.replies[1]->detail, "joined by another client"));
    run1(watch_req(999, 3, "mine", gen, 0));
    ck_assert_int_eq(fx.replies[2]->status, C10D_EAUTH);
    char st[32];
    ck_assert_str_eq(member_state("mine", 0, st, sizeof st), "alive");
    run1(engine_request_leave(100, 4, "mine", gen, 0)); /* its own client */
    ck_assert_int_eq(fx.replies[3]->status, C10D_OK);
    ck_assert_str_eq(member_state("mine", 0, st, sizeof st), "left");
}
END_TEST

/* Finding 12: data-plane admission was a hash of job, generation and
 * group name, which anyone can compute. Each group now gets a random
 * secret in the rendezvous reply (the TCP hello carries it). */
START_TEST(each_group_gets_its_own_random_secret)
{
    run1(join_req(1, "s1", "world", 0, 1, NULL, 0));
    run1(join_req(2, "s2", "world", 0, 1, NULL, 0));
    run1(join_req(3, "s1", "world", 0, 1, NULL, 0)); /* the same join resent: the same group */
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(fx.replies[i]->status, C10D_OK);
        ck_assert(fx.replies[i]->group_join->has_secret);
        ck_assert(fx.replies[i]->group_join->secret != 0);
    }
    ck_assert(fx.replies[0]->group_join->secret != fx.replies[1]->group_join->secret);
    ck_assert(fx.replies[0]->group_join->secret == fx.replies[2]->group_join->secret);
}
END_TEST

/* From review: a request that wrote and then parked in a transaction
 * that is lost (a group_join's arrival) is failed with the cause, not
 * left waiting on state that is gone; a replayed reply (committed in an
 * earlier batch) stays true. */
START_TEST(parked_and_replayed_requests_in_a_lost_transaction)
{
    run1(add_req(5, 1, "ctr", 7)); /* committed: its replay must stay "7" */
    fill_the_disk(3);
    size_t vlen = 256 << 10;
    char *v = calloc(1, vlen);
    c10ds_request *join = join_req(2, "lost", "world", 0, 2, NULL, 0); /* parks: rank 1 missing */
    join->pb->group_join->timeout_ms = 60000;
    c10ds_request *replay = add_req(5, 1, "ctr", 7), *big = set_req(3, 1, "big", v, vlen);
    join->next = replay;
    replay->next = big;
    big->next = NULL;
    c10ds_engine_run_batch(fx.eng, join);
    fill_the_disk(-1);
    int saw_join = 0, saw_replay = 0;
    for (int i = 1; i < fx.nreplies; i++) {
        if (fx.replies[i]->request_id == 2) { /* the join */
            saw_join = 1;
            ck_assert_int_eq(fx.replies[i]->status, C10D_ERROR);
            ck_assert_ptr_nonnull(strstr(fx.replies[i]->detail, "full"));
        }
        if (fx.replies[i]->request_id == 1 && fx.replies[i]->status == C10D_OK) {
            saw_replay = 1;
            ck_assert_int_eq(fx.replies[i]->number, 7);
        }
    }
    ck_assert_msg(saw_join, "the parked join was not answered");
    ck_assert_msg(saw_replay, "the replayed add was not answered as before");
    ck_assert_int_eq(atomic_load(&fx.eng->parked), 0);
    free(v);
}
END_TEST

static long long wal_bytes(void)
{
    char p[160];
    struct stat sb;
    snprintf(p, sizeof p, "%s-wal", fx.path);
    return stat(p, &sb) == 0 ? (long long)sb.st_size : 0;
}

/* Finding 4: SQLite checkpoints at 4 MB of WAL and never shrinks it, so
 * after a full disk the WAL filled it again. The engine checkpoints and
 * truncates the WAL itself: every few seconds, and at once after a lost
 * transaction. */
START_TEST(the_wal_is_checkpointed_and_truncated)
{
    size_t vlen = 512 << 10;
    char *v = calloc(1, vlen);
    fx.eng->next_checkpoint_ms = c10d_now_ms() + 60000; /* not during the writes */
    for (int i = 0; i < 4; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        run1(set_req(1, (uint64_t)i + 1, key, v, vlen));
    }
    ck_assert_int_gt(wal_bytes(), 2 << 20);
    c10ds_engine_run_batch(fx.eng, NULL); /* not due yet: kept */
    ck_assert_int_gt(wal_bytes(), 2 << 20);
    fx.eng->next_checkpoint_ms = 0; /* due */
    c10ds_engine_run_batch(fx.eng, NULL);
    ck_assert_int_eq(wal_bytes(), 0);
    ck_assert_int_gt(fx.eng->next_checkpoint_ms, c10d_now_ms()); /* and due again later */
    free(v);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("engine");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_group_join_whose_members_lack_the_caller_is_refused);
    tcase_add_test(tc, a_world_larger_than_the_limit_is_refused_at_once);
    tcase_add_test(tc, a_job_name_over_the_limit_is_refused);
    tcase_add_test(tc, a_member_with_other_ranks_than_the_creator_is_refused);
    tcase_add_test(tc, a_long_member_list_is_checked_in_linear_time);
    tcase_add_test(tc, a_multi_get_reply_larger_than_a_message_is_refused);
    tcase_add_test(tc, a_write_failing_mid_batch_leaves_every_reply_true);
    tcase_add_test(tc, the_wal_is_checkpointed_and_truncated);
    tcase_add_test(tc, a_wall_clock_step_kills_no_member);
    tcase_add_test(tc, only_the_client_that_joined_a_member_speaks_for_it);
    tcase_add_test(tc, each_group_gets_its_own_random_secret);
    tcase_add_test(tc, parked_and_replayed_requests_in_a_lost_transaction);
    tcase_add_test(tc, a_restarted_job_leaves_no_verification_state_behind);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
