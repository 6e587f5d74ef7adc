/* The coordinator's error carrier (server/failure.c): a detail recorded
 * with the status it returns, read back on the same thread; a detail made
 * of the one before it; cut at C10DS_FAILURE_MAX; one per thread; SQLite's
 * message appended. */
#include "failure.h"

#include "check_main.h"

#include <check.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

START_TEST(failed_returns_its_status_and_the_detail_reads_back)
{
    ck_assert_int_eq(c10ds_failed(C10D_EINVAL, "key '%s' is %d bytes", "k", 3), C10D_EINVAL);
    ck_assert_str_eq(c10ds_failure(), "key 'k' is 3 bytes");
    /* C10D_ERROR is an int function's -1 */
    int rc = c10ds_failed(C10D_ERROR, "no");
    ck_assert_int_eq(rc, -1);
    ck_assert_str_eq(c10ds_failure(), "no");
    /* the next failure replaces it */
    ck_assert_int_eq(c10ds_failed(C10D_ETOOBIG, "%s", "later"), C10D_ETOOBIG);
    ck_assert_str_eq(c10ds_failure(), "later");
}
END_TEST

START_TEST(a_detail_may_quote_the_one_before_it)
{
    c10ds_failed(C10D_ERROR, "no such table: kv");
    c10ds_failed(C10D_ERROR, "migration %s failed: %s", "003", c10ds_failure());
    ck_assert_str_eq(c10ds_failure(), "migration 003 failed: no such table: kv");
    /* and again, the detail as the first argument too */
    c10ds_failed(C10D_ERROR, "%s; %s", c10ds_failure(), c10ds_failure());
    ck_assert_str_eq(c10ds_failure(), "migration 003 failed: no such table: kv; "
                                      "migration 003 failed: no such table: kv");
}
END_TEST

START_TEST(a_long_detail_is_cut_at_the_limit)
{
    static char big[C10DS_FAILURE_MAX * 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ck_assert_int_eq(c10ds_failed(C10D_ERROR, "%s", big), C10D_ERROR);
    ck_assert_uint_eq(strlen(c10ds_failure()), C10DS_FAILURE_MAX - 1);
    ck_assert_int_eq(strncmp(c10ds_failure(), big, C10DS_FAILURE_MAX - 1), 0);
    /* quoting a full one still fits, cut */
    c10ds_failed(C10D_ERROR, "context: %s", c10ds_failure());
    ck_assert_uint_eq(strlen(c10ds_failure()), C10DS_FAILURE_MAX - 1);
    ck_assert_int_eq(strncmp(c10ds_failure(), "context: xxx", 12), 0);
    /* and so does SQLite's tail after a full detail: nothing past the end */
    c10ds_failed_db(NULL, C10D_ERROR, "%s", big);
    ck_assert_uint_eq(strlen(c10ds_failure()), C10DS_FAILURE_MAX - 1);
}
END_TEST

/* Each of two threads records its own detail, waits until the other has
 * recorded too, and reads back its own. */
typedef struct {
    pthread_barrier_t *both;
    int n;
    char read[64];
} worker;

static void *record_then_read(void *arg)
{
    worker *w = arg;
    c10ds_failed(C10D_ERROR, "thread %d's detail", w->n);
    pthread_barrier_wait(w->both);
    snprintf(w->read, sizeof w->read, "%s", c10ds_failure());
    return NULL;
}

START_TEST(each_thread_has_its_own_detail)
{
    c10ds_failed(C10D_ERROR, "the test's own");
    pthread_barrier_t both;
    pthread_barrier_init(&both, NULL, 2);
    worker w[2] = {{&both, 1, ""}, {&both, 2, ""}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, record_then_read, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&both);
    ck_assert_str_eq(w[0].read, "thread 1's detail");
    ck_assert_str_eq(w[1].read, "thread 2's detail");
    ck_assert_str_eq(c10ds_failure(), "the test's own");
}
END_TEST

static void *read_fresh(void *arg)
{
    snprintf(arg, 64, "%s", c10ds_failure());
    return NULL;
}

START_TEST(a_thread_that_never_failed_reads_empty)
{
    c10ds_failed(C10D_ERROR, "not the new thread's");
    char read[64] = "unset";
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, read_fresh, read), 0);
    pthread_join(t, NULL);
    ck_assert_str_eq(read, "");
}
END_TEST

START_TEST(failed_db_appends_sqlites_message)
{
    sqlite3 *h = NULL;
    ck_assert_int_eq(sqlite3_open(":memory:", &h), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    ck_assert_int_ne(sqlite3_prepare_v2(h, "SELECT * FROM nowhere", -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(c10ds_failed_db(h, C10D_ENOTFOUND, "reading %s", "nowhere"),
                     C10D_ENOTFOUND);
    ck_assert_str_eq(c10ds_failure(), "reading nowhere: no such table: nowhere");
    sqlite3_close(h);
    /* no handle at all: SQLite could not even allocate one */
    c10ds_failed_db(NULL, C10D_ERROR, "cannot open database %s", "x.db");
    ck_assert_str_eq(c10ds_failure(), "cannot open database x.db: out of memory");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("failure");
    TCase *tc = tcase_create("carrier");
    tcase_add_test(tc, failed_returns_its_status_and_the_detail_reads_back);
    tcase_add_test(tc, a_detail_may_quote_the_one_before_it);
    tcase_add_test(tc, a_long_detail_is_cut_at_the_limit);
    tcase_add_test(tc, each_thread_has_its_own_detail);
    tcase_add_test(tc, a_thread_that_never_failed_reads_empty);
    tcase_add_test(tc, failed_db_appends_sqlites_message);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
