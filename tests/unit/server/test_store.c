/* The store's semantics (server/store/store.c) on a real SQLite database,
 * without the engine or the network: values, counters, compare-and-set,
 * appends, prefixes, and what reads a big value. */
#include "big_value.h"
#include "db/db.h"
#include "failure.h"
#include "store/store.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static c10ds_db db;
static c10ds_store st;

static void setup(void)
{
    ck_assert_int_eq(c10ds_db_open(&db, ":memory:"), 0);
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
    ck_assert_int_eq(c10ds_store_set(&st, "k", "a\0b", 3), C10D_OK);
    expect_value("k", "a\0b", 3);
    ck_assert_int_eq(c10ds_store_set(&st, "k", "", 0), C10D_OK);
    expect_value("k", "", 0);
    ck_assert_int_eq(c10ds_store_count(&st, NULL), 1);
    ck_assert_int_eq(c10ds_store_exists(&st, "nope"), 0);
}
END_TEST

START_TEST(add_counts_in_decimal_text_and_refuses_non_integers)
{
    int64_t v;
    ck_assert_int_eq(c10ds_store_add(&st, "n", 5, &v), C10D_OK);
    ck_assert_int_eq(v, 5);
    ck_assert_int_eq(c10ds_store_add(&st, "n", -7, &v), C10D_OK);
    ck_assert_int_eq(v, -2);
    expect_value("n", "-2", 2);
    c10ds_store_set(&st, "s", "abc", 3);
    ck_assert_int_eq(c10ds_store_add(&st, "s", 1, &v), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "not a decimal integer"));
    c10ds_store_set(&st, "big", "9223372036854775807", 19);
    ck_assert_int_eq(c10ds_store_add(&st, "big", 1, &v), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "overflows"));
}
END_TEST

START_TEST(compare_set_semantics)
{
    void *cur;
    size_t n;
    /* missing key + empty expected: creates */
    ck_assert_int_eq(
        c10ds_store_compare_set(&st, "c", "", 0, "v1", 2, &cur, &n), C10D_OK);
    ck_assert_mem_eq(cur, "v1", 2);
    free(cur);
    /* match: swaps */
    ck_assert_int_eq(
        c10ds_store_compare_set(&st, "c", "v1", 2, "v2", 2, &cur, &n), C10D_OK);
    ck_assert_mem_eq(cur, "v2", 2);
    free(cur);
    /* mismatch: leaves it, returns the current value */
    ck_assert_int_eq(
        c10ds_store_compare_set(&st, "c", "zz", 2, "v3", 2, &cur, &n), C10D_OK);
    ck_assert_mem_eq(cur, "v2", 2);
    free(cur);
    expect_value("c", "v2", 2);
    /* missing key + non-empty expected: nothing stored, and said so */
    ck_assert_int_eq(
        c10ds_store_compare_set(&st, "m", "x", 1, "y", 1, &cur, &n),
        C10D_ENOTFOUND);
    ck_assert_int_eq(c10ds_store_exists(&st, "m"), 0);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "nothing stored"));
}
END_TEST

START_TEST(append_creates_and_concatenates_bytes)
{
    ck_assert_int_eq(c10ds_store_append(&st, "a", "x\0", 2, 100), C10D_OK);
    ck_assert_int_eq(c10ds_store_append(&st, "a", "yz", 2, 100), C10D_OK);
    expect_value("a", "x\0yz", 4);
    ck_assert_int_eq(c10ds_store_append(&st, "a", "0123456789", 10, 10),
                     C10D_ETOOBIG);
    expect_value("a", "x\0yz", 4);
}
END_TEST

START_TEST(delete_and_counts_follow)
{
    int d;
    c10ds_store_set(&st, "a", "1", 1);
    c10ds_store_set(&st, "b", "1", 1);
    ck_assert_int_eq(c10ds_store_count(&st, NULL), 2);
    ck_assert_int_eq(c10ds_store_delete(&st, "a", &d), C10D_OK);
    ck_assert_int_eq(d, 1);
    ck_assert_int_eq(c10ds_store_delete(&st, "a", &d), C10D_OK);
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
        c10ds_store_set(&st, keys[i], "v", 1);
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
    /* A prefix over 8 KiB lost its upper bound and
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
        c10ds_store_set(&st, k, "v", 1);
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
    c10ds_store_set(&st, "\xff\xff", "v", 1);
    c10ds_store_set(&st, "\xff\xff/x", "v", 1);
    c10ds_store_set(&st, "\xff", "v", 1);
    ck_assert_int_eq(c10ds_store_count(&st, "\xff\xff"), 2);
    ck_assert_int_eq(c10ds_store_delete_prefix(&st, "\xff\xff", 1), 1);
    ck_assert_int_eq(c10ds_store_delete_prefix(&st, "\xff\xff", -1), 1);
    ck_assert_int_eq(c10ds_store_exists(&st, "\xff"), 1);
    ck_assert_int_eq(c10ds_store_count(&st, NULL), 100001);
    ck_assert_int_eq(c10ds_store_count(&st, ""), 100001);
}
END_TEST

/* The kv table was WITHOUT ROWID, the value inside the key's index, and
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
    ck_assert_int_eq(c10ds_store_add(&st, "k0500b", 1, &r), C10D_EINVAL);
    ck_assert_int_eq(c10ds_store_append(&st, "k0500b", "x", 1, BIG_VALUE),
                     C10D_ETOOBIG);
    ck_assert_int_eq(c10ds_store_add(&st, "k0501", 1, &r), C10D_EINVAL);
    ck_assert_int_lt(largest_sqlite_alloc(), 1 << 20);
    /* the witness sees a read: a get of the value itself */
    const void *v;
    ck_assert_int_eq(c10ds_store_get(&st, "k0500b", &v, &n), 1);
    c10ds_store_release(&st);
    ck_assert_int_ge(largest_sqlite_alloc(), BIG_VALUE);
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
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
