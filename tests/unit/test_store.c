/* The store's semantics (store.c), the parked-request index (waiters.c)
 * and the engine's batch (engine.c): dedup, parking, wake-ups, expiry,
 * limits — on a real SQLite database, without the network. */
#include "db/db.h"
#include "engine/engine.h"
#include "engine_fixture.h"
#include "engine_request.h"
#include "engine/reqlog.h"
#include "engine/request.h"
#include "store/store.h"
#include "engine/waiters.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static c10ds_db db;
static c10ds_store st;
static char err[1024];

static void setup(void)
{
    ck_assert_int_eq(c10ds_db_open(&db, ":memory:", err, sizeof err), 0);
    ck_assert_int_eq(c10ds_store_init(&st, &db), 0);
}

static void teardown(void)
{
    c10ds_store_fini(&st);
    c10ds_db_close(&db);
}

static void expect_value(const char *key, const void *v, size_t n)
{
    const void *got;
    size_t len;
    ck_assert_int_eq(c10ds_store_get(&st, key, &got, &len), 1);
    ck_assert_uint_eq(len, n);
    if (n)
        ck_assert_mem_eq(got, v, n);
    c10ds_store_release(&st);
}

START_TEST(set_get_overwrite_and_binary_values)
{
    ck_assert_int_eq(c10ds_store_set(&st, "k", "a\0b", 3, err, sizeof err), C10D_OK);
    expect_value("k", "a\0b", 3);
    ck_assert_int_eq(c10ds_store_set(&st, "k", "", 0, err, sizeof err), C10D_OK);
    expect_value("k", "", 0);
    ck_assert_int_eq(c10ds_store_count(&st, NULL), 1);
    ck_assert_int_eq(c10ds_store_exists(&st, "nope"), 0);
}
END_TEST

START_TEST(add_counts_in_decimal_text_and_refuses_non_integers)
{
    int64_t v;
    ck_assert_int_eq(c10ds_store_add(&st, "n", 5, &v, err, sizeof err), C10D_OK);
    ck_assert_int_eq(v, 5);
    ck_assert_int_eq(c10ds_store_add(&st, "n", -7, &v, err, sizeof err), C10D_OK);
    ck_assert_int_eq(v, -2);
    expect_value("n", "-2", 2);
    c10ds_store_set(&st, "s", "abc", 3, err, sizeof err);
    ck_assert_int_eq(c10ds_store_add(&st, "s", 1, &v, err, sizeof err), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "not a decimal integer"));
    c10ds_store_set(&st, "big", "9223372036854775807", 19, err, sizeof err);
    ck_assert_int_eq(c10ds_store_add(&st, "big", 1, &v, err, sizeof err), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "overflows"));
}
END_TEST

START_TEST(compare_set_semantics)
{
    void *cur;
    size_t n;
    /* missing key + empty expected: creates */
    ck_assert_int_eq(
        c10ds_store_compare_set(&st, "c", "", 0, "v1", 2, &cur, &n, err, sizeof err), C10D_OK);
    ck_assert_mem_eq(cur, "v1", 2);
    free(cur);
    /* match: swaps */
    ck_assert_int_eq(
        c10ds_store_compare_set(&st, "c", "v1", 2, "v2", 2, &cur, &n, err, sizeof err), C10D_OK);
    ck_assert_mem_eq(cur, "v2", 2);
    free(cur);
    /* mismatch: leaves it, returns the current value */
    ck_assert_int_eq(
        c10ds_store_compare_set(&st, "c", "zz", 2, "v3", 2, &cur, &n, err, sizeof err), C10D_OK);
    ck_assert_mem_eq(cur, "v2", 2);
    free(cur);
    expect_value("c", "v2", 2);
    /* missing key + non-empty expected: nothing stored, and said so */
    ck_assert_int_eq(
        c10ds_store_compare_set(&st, "m", "x", 1, "y", 1, &cur, &n, err, sizeof err),
        C10D_ENOTFOUND);
    ck_assert_int_eq(c10ds_store_exists(&st, "m"), 0);
    ck_assert_ptr_nonnull(strstr(err, "nothing stored"));
}
END_TEST

START_TEST(append_creates_and_concatenates_bytes)
{
    ck_assert_int_eq(c10ds_store_append(&st, "a", "x\0", 2, 100, err, sizeof err), C10D_OK);
    ck_assert_int_eq(c10ds_store_append(&st, "a", "yz", 2, 100, err, sizeof err), C10D_OK);
    expect_value("a", "x\0yz", 4);
    ck_assert_int_eq(c10ds_store_append(&st, "a", "0123456789", 10, 10, err, sizeof err),
                     C10D_ETOOBIG);
    expect_value("a", "x\0yz", 4);
}
END_TEST

START_TEST(delete_and_counts_follow)
{
    int d;
    c10ds_store_set(&st, "a", "1", 1, err, sizeof err);
    c10ds_store_set(&st, "b", "1", 1, err, sizeof err);
    ck_assert_int_eq(c10ds_store_count(&st, NULL), 2);
    ck_assert_int_eq(c10ds_store_delete(&st, "a", &d, err, sizeof err), C10D_OK);
    ck_assert_int_eq(d, 1);
    ck_assert_int_eq(c10ds_store_delete(&st, "a", &d, err, sizeof err), C10D_OK);
    ck_assert_int_eq(d, 0);
    ck_assert_int_eq(c10ds_store_count(&st, NULL), 1);
    c10ds_store_recount(&st);
    ck_assert_int_eq(c10ds_store_count(&st, NULL), 1);
}
END_TEST

static void collect(void *arg, const char *key, uint64_t size, int64_t updated_ms)
{
    char *out = arg;
    strcat(out, key);
    strcat(out, ";");
}

START_TEST(prefix_ranges_are_exact)
{
    const char *keys[] = {"a/1", "a/2", "a0", "a\xff", "a\xff\xff/x", "b/1", "a/"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        c10ds_store_set(&st, keys[i], "v", 1, err, sizeof err);
    ck_assert_int_eq(c10ds_store_count(&st, "a/"), 3);
    ck_assert_int_eq(c10ds_store_count(&st, "a"), 6);
    ck_assert_int_eq(c10ds_store_count(&st, "a\xff"), 2);
    ck_assert_int_eq(c10ds_store_count(&st, "a\xff\xff"), 1);
    char out[256] = "";
    int more;
    ck_assert_int_eq(c10ds_store_list(&st, "a/", 10, collect, out, &more), 3);
    ck_assert_str_eq(out, "a/;a/1;a/2;");
    ck_assert_int_eq(more, 0);
    out[0] = '\0';
    ck_assert_int_eq(c10ds_store_list(&st, "", 2, collect, out, &more), 2);
    ck_assert_int_eq(more, 1);
    /* Issue 12, finding 22: a prefix over 8 KiB lost its upper bound and
     * counted every key after it ("b/1" here). */
    char *longp = malloc(10001);
    memset(longp, 'a', 10000);
    longp[10000] = '\0';
    ck_assert_int_eq(c10ds_store_count(&st, longp), 0);
    out[0] = '\0';
    ck_assert_int_eq(c10ds_store_list(&st, longp, 10, collect, out, &more), 0);
    free(longp);
}
END_TEST

static int count_ops(void *arg)
{
    (*(long *)arg)++;
    return 0;
}

/* SQLite instructions (in hundreds) that fn(arg) runs. */
#define OPS_OF(call)                                                                               \
    ({                                                                                             \
        long n_ = 0;                                                                               \
        sqlite3_progress_handler(db.h, 100, count_ops, &n_);                                       \
        call;                                                                                      \
        sqlite3_progress_handler(db.h, 0, NULL, NULL);                                             \
        n_;                                                                                        \
    })

/* A prefix's count, list and delete read its range and no further: with
 * "key >= ?1 AND (?2 IS NULL OR key < ?2)" SQLite used the lower bound
 * only and read every key after the prefix (a run's end deleting 20 keys
 * took 63 ms with a million keys after them). */
START_TEST(a_prefix_reads_only_its_own_range)
{
    ck_assert_int_eq(sqlite3_exec(db.h, "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 "
                                        "FROM c WHERE i < 99999) INSERT INTO kv(key, value, "
                                        "updated_ms) SELECT 'z/' || i, x'00', 0 FROM c", NULL, NULL, NULL), SQLITE_OK);
    for (int i = 0; i < 20; i++) {
        char k[32];
        snprintf(k, sizeof k, "jobs/j/1/k%d", i);
        c10ds_store_set(&st, k, "v", 1, err, sizeof err);
    }
    c10ds_store_recount(&st);
    char out[1024] = "";
    int more;
    long ops = OPS_OF(ck_assert_int_eq(c10ds_store_count(&st, "jobs/j/1/"), 20));
    ck_assert_msg(ops < 100, "counting 20 keys ran %ld00 instructions", ops);
    ops = OPS_OF(ck_assert_int_eq(c10ds_store_list(&st, "jobs/j/1/", 100, collect, out, &more),
                                  20));
    ck_assert_msg(ops < 100, "listing 20 keys ran %ld00 instructions", ops);
    ops = OPS_OF(ck_assert_int_eq(c10ds_store_delete_prefix(&st, "jobs/j/1/", -1), 20));
    ck_assert_msg(ops < 100, "deleting 20 keys ran %ld00 instructions", ops);
    ck_assert_int_eq(c10ds_store_count(&st, NULL), 100000);
    /* a prefix with no upper bound (all 0xff) still counts and deletes
     * exactly its own keys */
    c10ds_store_set(&st, "\xff\xff", "v", 1, err, sizeof err);
    c10ds_store_set(&st, "\xff\xff/x", "v", 1, err, sizeof err);
    c10ds_store_set(&st, "\xff", "v", 1, err, sizeof err);
    ck_assert_int_eq(c10ds_store_count(&st, "\xff\xff"), 2);
    ck_assert_int_eq(c10ds_store_delete_prefix(&st, "\xff\xff", 1), 1);
    ck_assert_int_eq(c10ds_store_delete_prefix(&st, "\xff\xff", -1), 1);
    ck_assert_int_eq(c10ds_store_exists(&st, "\xff"), 1);
    ck_assert_int_eq(c10ds_store_count(&st, NULL), 100001);
    ck_assert_int_eq(c10ds_store_count(&st, ""), 100001);
}
END_TEST

/* --- waiters --- */

START_TEST(waiters_wake_by_key_and_expire_by_deadline)
{
    c10ds_waiters *w = c10ds_waiters_new();
    c10ds_request r[4];
    memset(r, 0, sizeof r);
    r[0].deadline_ms = 300;
    r[1].deadline_ms = 100;
    r[2].deadline_ms = 200;
    r[3].deadline_ms = 50;
    ck_assert_int_eq(c10ds_waiters_park(w, &r[0], "x"), 0);
    ck_assert_int_eq(c10ds_waiters_park(w, &r[1], "y"), 0);
    ck_assert_int_eq(c10ds_waiters_park(w, &r[2], "x"), 0);
    ck_assert_int_eq(c10ds_waiters_park(w, &r[3], "z"), 0);
    ck_assert_int_eq(c10ds_waiters_next_deadline(w), 50);
    c10ds_waiters_touch(w, "x");
    c10ds_waiters_touch(w, "nobody");
    c10ds_request *ready = c10ds_waiters_take_ready(w);
    ck_assert_ptr_eq(ready, &r[0]); /* park order */
    ck_assert_ptr_eq(ready->next, &r[2]);
    ck_assert_ptr_null(ready->next->next);
    ck_assert_uint_eq(c10ds_waiters_count(w), 2);
    ck_assert_ptr_null(c10ds_waiters_pop_expired(w, 49));
    ck_assert_ptr_eq(c10ds_waiters_pop_expired(w, 150), &r[3]);
    ck_assert_ptr_eq(c10ds_waiters_pop_expired(w, 150), &r[1]);
    ck_assert_ptr_null(c10ds_waiters_pop_expired(w, 150));
    ck_assert_int_eq(c10ds_waiters_next_deadline(w), INT64_MAX);
    c10ds_waiters_free(w, NULL);
}
END_TEST

START_TEST(waiters_handle_many_keys)
{
    enum { N = 5000 };
    c10ds_waiters *w = c10ds_waiters_new();
    c10ds_request *r = calloc(N, sizeof *r);
    char key[32];
    for (int i = 0; i < N; i++) {
        r[i].deadline_ms = 1000 + (i * 7919) % N;
        snprintf(key, sizeof key, "k%d", i);
        ck_assert_int_eq(c10ds_waiters_park(w, &r[i], key), 0);
    }
    for (int i = 0; i < N; i += 2) {
        snprintf(key, sizeof key, "k%d", i);
        c10ds_waiters_touch(w, key);
    }
    int woke = 0;
    for (c10ds_request *x = c10ds_waiters_take_ready(w); x; x = x->next)
        woke++;
    ck_assert_int_eq(woke, N / 2);
    int64_t last = 0;
    for (c10ds_request *x; (x = c10ds_waiters_pop_expired(w, INT64_MAX - 1)) != NULL;) {
        ck_assert_int_ge(x->deadline_ms, last);
        last = x->deadline_ms;
        ck_assert_int_eq((x - r) % 2, 1);
    }
    c10ds_waiters_free(w, NULL);
    free(r);
}
END_TEST

/* --- the engine's batch, with a fake transport --- */

static engine_fixture fx;

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

static c10ds_request *get_req(uint64_t id, const char *key, int timeout_ms)
{
    C10dpb__StoreGet m = C10DPB__STORE_GET__INIT;
    m.key = (char *)key;
    m.has_timeout_ms = 1;
    m.timeout_ms = timeout_ms;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_GET;
    pb.get = &m;
    return engine_request(&pb, 1, id);
}

static c10ds_request *set_req(uint64_t id, const char *key, const char *val)
{
    C10dpb__StoreSet m = C10DPB__STORE_SET__INIT;
    m.key = (char *)key;
    m.value.data = (uint8_t *)val;
    m.value.len = strlen(val);
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_SET;
    pb.set = &m;
    return engine_request(&pb, 2, id);
}

/* SQLite's largest single allocation since the last call: reading a
 * value allocates its size at once, so this says whether a statement read
 * a large value. */
static int largest_sqlite_alloc(void)
{
    int cur, high;
    sqlite3_status(SQLITE_STATUS_MALLOC_SIZE, &cur, &high, 1);
    return high;
}

#define BIG_VALUE (16 << 20)

/* 1,000 one-byte values around a 16 MiB one, under "k0500b". */
static void store_a_big_value_among_small_ones(c10ds_store *s, sqlite3 *h)
{
    ck_assert_int_eq(sqlite3_exec(h, "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 "
                                     "FROM c WHERE i < 999) INSERT INTO kv(key, value, "
                                     "updated_ms) SELECT printf('k%04d', i), x'00', 0 FROM c",
                                  NULL, NULL, NULL), SQLITE_OK);
    c10ds_store_recount(s);
    char *v = calloc(1, BIG_VALUE);
    ck_assert_int_eq(c10ds_store_set(s, "k0500b", v, BIG_VALUE, err, sizeof err), C10D_OK);
    free(v);
    largest_sqlite_alloc();
}

/* Issue 24: kv was WITHOUT ROWID, the value inside the key's index, and
 * SQLite reads a whole overflowing row to compare a key with it: one 16
 * MiB value made the lookups of its neighbours read it (20-30 ms each),
 * and an existence check read it too. Now only what returns the value
 * reads it. */
START_TEST(a_big_value_is_read_only_by_what_returns_it)
{
    store_a_big_value_among_small_ones(&st, db.h);
    size_t n = 0;
    int64_t r;
    ck_assert_int_eq(c10ds_store_exists(&st, "k0500b"), 1);
    ck_assert_int_eq(c10ds_store_size(&st, "k0500b", &n), 1);
    ck_assert_uint_eq(n, BIG_VALUE);
    ck_assert_int_eq(c10ds_store_exists(&st, "k0501"), 1);
    expect_value("k0500", "", 1);
    expect_value("k0501", "", 1);
    ck_assert_int_eq(c10ds_store_add(&st, "k0500b", 1, &r, err, sizeof err), C10D_EINVAL);
    ck_assert_int_eq(c10ds_store_append(&st, "k0500b", "x", 1, BIG_VALUE, err, sizeof err),
                     C10D_ETOOBIG);
    ck_assert_int_eq(c10ds_store_add(&st, "k0501", 1, &r, err, sizeof err), C10D_EINVAL);
    ck_assert_int_lt(largest_sqlite_alloc(), 1 << 20);
    /* the witness sees a read: a get of the value itself */
    const void *v;
    ck_assert_int_eq(c10ds_store_get(&st, "k0500b", &v, &n), 1);
    c10ds_store_release(&st);
    ck_assert_int_ge(largest_sqlite_alloc(), BIG_VALUE);
}
END_TEST

/* --- the applied-request log (reqlog.c) --- */

static int logged(c10ds_reqlog *rl, uint64_t client, uint64_t id)
{
    void *reply = NULL;
    size_t len = 0;
    int found = c10ds_reqlog_find(rl, client, id, &reply, &len);
    free(reply);
    return found;
}

START_TEST(reqlog_keeps_a_clients_recent_requests_and_trims_the_rest)
{
    c10ds_reqlog rl;
    ck_assert_int_eq(c10ds_reqlog_init(&rl, &db, 600), 0);
    uint64_t last = C10DS_REQLOG_KEEP_IDS + 2 * C10DS_REQLOG_TRIM_EVERY;
    ck_assert_int_eq(c10ds_db_begin(&db), 0);
    for (uint64_t id = 1; id <= last; id++)
        ck_assert_int_eq(c10ds_reqlog_record(&rl, 7, id, 0, "r", 1), 0);
    ck_assert_int_eq(c10ds_reqlog_record(&rl, 8, 1, 0, "other", 5), 0);
    ck_assert_int_eq(c10ds_db_commit(&db), 0);
    /* the newest KEEP_IDS of client 7 stay; the oldest went; client 8's
     * one record is not touched by 7's trims */
    ck_assert(logged(&rl, 7, last));
    ck_assert(logged(&rl, 7, last - C10DS_REQLOG_KEEP_IDS + C10DS_REQLOG_TRIM_EVERY));
    ck_assert(!logged(&rl, 7, 1));
    ck_assert(logged(&rl, 8, 1));
    ck_assert_uint_eq(c10ds_reqlog_clients(&rl), 2);
    c10ds_reqlog_fini(&rl);
    /* a restarted coordinator knows its clients again, from the table */
    ck_assert_int_eq(c10ds_reqlog_init(&rl, &db, 600), 0);
    ck_assert_uint_eq(c10ds_reqlog_clients(&rl), 2);
    ck_assert(logged(&rl, 7, last));
    c10ds_reqlog_fini(&rl);
}
END_TEST

/* Rows of the table for a client. */
static int rows_of(uint64_t client)
{
    sqlite3_stmt *s = c10ds_db_prepare(&db, "SELECT count(*) FROM applied_requests "
                                            "WHERE client_id = ?1");
    sqlite3_bind_int64(s, 1, (sqlite3_int64)client);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    int n = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return n;
}

START_TEST(reqlog_drops_the_records_a_client_says_it_has_the_replies_to)
{
    c10ds_reqlog rl;
    ck_assert_int_eq(c10ds_reqlog_init(&rl, &db, 600), 0);
    /* 1 and 2 in flight together (acked_below 1), then 3 once both were
     * answered: 1 and 2 go, 3 stays */
    ck_assert_int_eq(c10ds_reqlog_record(&rl, 7, 1, 1, "a", 1), 0);
    ck_assert_int_eq(c10ds_reqlog_record(&rl, 7, 2, 1, "b", 1), 0);
    ck_assert(logged(&rl, 7, 1) && logged(&rl, 7, 2));
    ck_assert_int_eq(c10ds_reqlog_record(&rl, 7, 3, 3, "c", 1), 0);
    ck_assert(!logged(&rl, 7, 1) && !logged(&rl, 7, 2) && logged(&rl, 7, 3));
    /* a client claiming more than it can have keeps the new record */
    ck_assert_int_eq(c10ds_reqlog_record(&rl, 7, 4, 99, "d", 1), 0);
    ck_assert(logged(&rl, 7, 4));
    ck_assert_int_eq(rows_of(7), 1);
    /* a thousand adds one at a time: one row, not a thousand */
    for (uint64_t id = 5; id < 1005; id++)
        ck_assert_int_eq(c10ds_reqlog_record(&rl, 8, id, id, "n", 1), 0);
    ck_assert_int_eq(rows_of(8), 1);
    ck_assert(logged(&rl, 8, 1004));
    /* another client's records are not touched; one that does not say
     * (acked_below 0) keeps its own */
    ck_assert_int_eq(c10ds_reqlog_record(&rl, 9, 1, 0, "x", 1), 0);
    ck_assert_int_eq(c10ds_reqlog_record(&rl, 9, 2, 0, "y", 1), 0);
    ck_assert_int_eq(rows_of(9), 2);
    ck_assert_int_eq(rows_of(7), 1);
    c10ds_reqlog_fini(&rl);
}
END_TEST

START_TEST(reqlog_forgets_a_client_quiet_for_the_window)
{
    c10ds_reqlog rl;
    ck_assert_int_eq(c10ds_reqlog_init(&rl, &db, 0), 0); /* a window of 0 s */
    ck_assert_int_eq(c10ds_reqlog_record(&rl, 7, 1, 0, "r", 1), 0);
    ck_assert(logged(&rl, 7, 1));
    usleep(5000);
    rl.last_prune_ms = 0; /* prune looks once a second: make it look now */
    c10ds_reqlog_prune(&rl);
    ck_assert(!logged(&rl, 7, 1));
    ck_assert_uint_eq(c10ds_reqlog_clients(&rl), 0);
    /* the client may come back */
    ck_assert_int_eq(c10ds_reqlog_record(&rl, 7, 2, 0, "r", 1), 0);
    ck_assert(logged(&rl, 7, 2));
    c10ds_reqlog_fini(&rl);
}
END_TEST

/* In memory, with limits small enough to reach. */
static void engine_setup(void)
{
    engine_fixture_init(&fx, NULL);
    fx.cfg.max_key_bytes = 64;
    fx.cfg.max_value_bytes = 16;
    fx.cfg.max_multi_keys = 4;
    ck_assert_msg(engine_fixture_start(&fx, NULL, NULL) == 0, "%s", fx.err);
}

static void engine_teardown(void)
{
    engine_fixture_stop(&fx);
}

static void run1(c10ds_request *r)
{
    r->next = NULL;
    c10ds_engine_run_batch(fx.eng, r);
}

START_TEST(resent_add_is_applied_once)
{
    run1(add_req(77, 1, "ctr", 5));
    run1(add_req(77, 1, "ctr", 5)); /* the same request again: a resend */
    run1(add_req(77, 2, "ctr", 5)); /* a new request */
    run1(add_req(78, 1, "ctr", 5)); /* same id, other client: new */
    ck_assert_int_eq(fx.nreplies, 4);
    ck_assert_int_eq(fx.replies[0]->number, 5);
    ck_assert_int_eq(fx.replies[1]->number, 5); /* the first reply, replayed */
    ck_assert_int_eq(fx.replies[2]->number, 10);
    ck_assert_int_eq(fx.replies[3]->number, 15);
    ck_assert_uint_eq(fx.replies[1]->request_id, 1);
}
END_TEST

static c10ds_request *add_acked(uint64_t client, uint64_t id, uint64_t acked_below)
{
    C10dpb__StoreAdd m = C10DPB__STORE_ADD__INIT;
    m.key = "ctr";
    m.delta = 1;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_ADD;
    pb.add = &m;
    pb.has_acked_below = 1;
    pb.acked_below = acked_below;
    return engine_request(&pb, client, id);
}

/* Two adds in flight together (each saying acked_below 1): a resend of
 * the first after the second was applied is still answered from its
 * record; once the client says it has both replies, their records go. */
START_TEST(a_record_stays_until_the_client_says_it_has_the_reply)
{
    run1(add_acked(77, 1, 1));
    run1(add_acked(77, 2, 1));
    run1(add_acked(77, 1, 1)); /* the first, resent */
    ck_assert_int_eq(fx.nreplies, 3);
    ck_assert_int_eq(fx.replies[2]->number, 1); /* its first reply, not 3 */
    run1(add_acked(77, 3, 3));
    ck_assert_int_eq(fx.replies[3]->number, 3);
    void *reply = NULL;
    size_t len = 0;
    ck_assert(!c10ds_reqlog_find(&fx.eng->reqlog, 77, 1, &reply, &len));
    ck_assert(!c10ds_reqlog_find(&fx.eng->reqlog, 77, 2, &reply, &len));
    ck_assert(c10ds_reqlog_find(&fx.eng->reqlog, 77, 3, &reply, &len));
    free(reply);
    /* a late copy of 2 (left on a connection the client gave up) finds no
     * record: it is refused, not applied a second time (a reviewer's case:
     * the counter went to 3 where 2 was right) */
    run1(add_acked(77, 2, 1));
    ck_assert_int_eq(fx.nreplies, 5);
    ck_assert_int_eq(fx.replies[4]->status, C10D_EPROTO);
    ck_assert_ptr_nonnull(strstr(fx.replies[4]->detail, "late copy"));
    run1(add_acked(77, 4, 4));
    ck_assert_int_eq(fx.replies[5]->number, 4); /* 3 + 1: the copy added nothing */
}
END_TEST

START_TEST(get_parks_until_set_in_a_later_batch)
{
    run1(get_req(1, "late", 10000));
    ck_assert_int_eq(fx.nreplies, 0);
    ck_assert_int_eq(atomic_load(&fx.eng->parked), 1);
    run1(set_req(2, "late", "v"));
    ck_assert_int_eq(fx.nreplies, 2);
    /* the set is answered first (it ran first), then the woken get */
    ck_assert_uint_eq(fx.replies[0]->request_id, 2);
    ck_assert_uint_eq(fx.replies[1]->request_id, 1);
    ck_assert_int_eq(fx.replies[1]->status, C10D_OK);
    ck_assert_mem_eq(fx.replies[1]->value.data, "v", 1);
    ck_assert_int_eq(atomic_load(&fx.eng->parked), 0);
}
END_TEST

START_TEST(parked_get_times_out_naming_the_key)
{
    run1(get_req(1, "never", 30));
    ck_assert_int_eq(fx.nreplies, 0);
    usleep(50000);
    c10ds_engine_run_batch(fx.eng, NULL);
    ck_assert_int_eq(fx.nreplies, 1);
    ck_assert_int_eq(fx.replies[0]->status, C10D_ETIMEDOUT);
    ck_assert_str_eq(fx.replies[0]->detail, "timed out after 30 ms waiting for key: never");
}
END_TEST

START_TEST(get_without_wait_is_enotfound)
{
    run1(get_req(1, "nope", 0));
    ck_assert_int_eq(fx.replies[0]->status, C10D_ENOTFOUND);
}
END_TEST

/* A check, wait or multi_get (op) of keys; wait and multi_get wait up to
 * timeout_ms. */
static c10ds_request *keys_req(uint64_t id, C10dpb__Request__OpCase op, char **keys, size_t n,
                               int timeout_ms)
{
    C10dpb__StoreCheck c = C10DPB__STORE_CHECK__INIT;
    C10dpb__StoreWait w = C10DPB__STORE_WAIT__INIT;
    C10dpb__StoreMultiGet g = C10DPB__STORE_MULTI_GET__INIT;
    c.keys = w.keys = g.keys = keys;
    c.n_keys = w.n_keys = g.n_keys = n;
    w.has_timeout_ms = g.has_timeout_ms = 1;
    w.timeout_ms = g.timeout_ms = timeout_ms;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = op;
    if (op == C10DPB__REQUEST__OP_CHECK)
        pb.check = &c;
    else if (op == C10DPB__REQUEST__OP_WAIT)
        pb.wait = &w;
    else
        pb.multi_get = &g;
    return engine_request(&pb, 1, id);
}

/* Issue 24: check, wait and multi_get naming one 16 MiB value 4,096
 * times read it 4,096 times (~100 s of the engine). Existence reads no
 * value; multi_get refuses by the sizes before reading; a key named again
 * is read once and answered in every place it was named. */
START_TEST(requests_naming_a_big_value_many_times_do_not_read_it)
{
    fx.cfg.max_multi_keys = 4096;
    fx.cfg.max_value_bytes = BIG_VALUE;
    fx.cfg.max_message_bytes = BIG_VALUE + (1 << 20);
    store_a_big_value_among_small_ones(&fx.eng->store, fx.db.h);
    char *keys[4096];
    for (int i = 0; i < 4096; i++)
        keys[i] = i % 2 ? "k0500b" : "k0501"; /* repeats, not side by side */
    run1(keys_req(1, C10DPB__REQUEST__OP_CHECK, keys, 4096, 0));
    run1(keys_req(2, C10DPB__REQUEST__OP_WAIT, keys, 4096, 1000));
    run1(keys_req(3, C10DPB__REQUEST__OP_MULTI_GET, keys, 4096, 1000));
    ck_assert_int_lt(largest_sqlite_alloc(), 1 << 20);
    ck_assert_int_eq(fx.nreplies, 3);
    ck_assert_int_eq(fx.replies[0]->status, C10D_OK);
    ck_assert(fx.replies[0]->flag);
    ck_assert_int_eq(fx.replies[1]->status, C10D_OK);
    ck_assert_int_eq(fx.replies[2]->status, C10D_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(fx.replies[2]->detail, "--max-message-bytes"));
    /* the small one named 4,096 times: read once, in every place */
    for (int i = 0; i < 4096; i++)
        keys[i] = i % 2 ? "k0501" : "k0499";
    run1(keys_req(4, C10DPB__REQUEST__OP_MULTI_GET, keys, 4096, 1000));
    ck_assert_int_eq(fx.replies[3]->status, C10D_OK);
    ck_assert_uint_eq(fx.replies[3]->values->n_values, 4096);
    for (int i = 0; i < 4096; i++)
        ck_assert_uint_eq(fx.replies[3]->values->values[i].len, 1);
    /* a timeout names each missing key once */
    keys[0] = keys[2] = "gone";
    run1(keys_req(5, C10DPB__REQUEST__OP_WAIT, keys, 4, 30));
    ck_assert_int_eq(fx.nreplies, 4);
    usleep(50000);
    c10ds_engine_run_batch(fx.eng, NULL);
    ck_assert_int_eq(fx.replies[4]->status, C10D_ETIMEDOUT);
    ck_assert_str_eq(fx.replies[4]->detail, "timed out after 30 ms waiting for key: gone");
}
END_TEST

START_TEST(limits_are_enforced_with_reasons)
{
    run1(set_req(1, "k", "this value is longer than sixteen bytes"));
    ck_assert_int_eq(fx.replies[0]->status, C10D_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(fx.replies[0]->detail, "--max-value-bytes"));
    char longkey[100];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[99] = '\0';
    run1(set_req(2, longkey, "v"));
    ck_assert_int_eq(fx.replies[1]->status, C10D_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(fx.replies[1]->detail, "--max-key-bytes"));
    run1(set_req(3, "", "v"));
    ck_assert_int_eq(fx.replies[2]->status, C10D_EINVAL);
}
END_TEST

START_TEST(wrong_token_is_refused)
{
    fx.cfg.token = "s3cret";
    run1(set_req(1, "k", "v"));
    ck_assert_int_eq(fx.replies[0]->status, C10D_EAUTH);
    ck_assert_int_eq(c10ds_store_exists(&fx.eng->store, "k"), 0);
    fx.cfg.token = NULL;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("logic");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, set_get_overwrite_and_binary_values);
    tcase_add_test(tc, add_counts_in_decimal_text_and_refuses_non_integers);
    tcase_add_test(tc, compare_set_semantics);
    tcase_add_test(tc, append_creates_and_concatenates_bytes);
    tcase_add_test(tc, delete_and_counts_follow);
    tcase_add_test(tc, prefix_ranges_are_exact);
    tcase_add_test(tc, a_prefix_reads_only_its_own_range);
    tcase_add_test(tc, a_big_value_is_read_only_by_what_returns_it);
    tcase_add_test(tc, reqlog_keeps_a_clients_recent_requests_and_trims_the_rest);
    tcase_add_test(tc, reqlog_forgets_a_client_quiet_for_the_window);
    tcase_add_test(tc, reqlog_drops_the_records_a_client_says_it_has_the_replies_to);
    suite_add_tcase(s, tc);
    TCase *tw = tcase_create("waiters");
    tcase_add_test(tw, waiters_wake_by_key_and_expire_by_deadline);
    tcase_add_test(tw, waiters_handle_many_keys);
    suite_add_tcase(s, tw);
    TCase *te = tcase_create("engine");
    tcase_add_checked_fixture(te, engine_setup, engine_teardown);
    tcase_add_test(te, resent_add_is_applied_once);
    tcase_add_test(te, a_record_stays_until_the_client_says_it_has_the_reply);
    tcase_add_test(te, get_parks_until_set_in_a_later_batch);
    tcase_add_test(te, parked_get_times_out_naming_the_key);
    tcase_add_test(te, get_without_wait_is_enotfound);
    tcase_add_test(te, requests_naming_a_big_value_many_times_do_not_read_it);
    tcase_add_test(te, limits_are_enforced_with_reasons);
    tcase_add_test(te, wrong_token_is_refused);
    suite_add_tcase(s, te);
    return c10d_run_suite(s);
}
