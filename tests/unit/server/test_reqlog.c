/* The applied-request log (server/engine/reqlog.c) on a real SQLite
 * database, without the engine: a client's recent requests kept, the
 * rest trimmed, records dropped once the client holds their replies, a
 * quiet client forgotten. */
#include "db/db.h"
#include "engine/reqlog.h"
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

int main(void)
{
    Suite *s = suite_create("reqlog");
    TCase *tc = tcase_create("logic");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, reqlog_keeps_a_clients_recent_requests_and_trims_the_rest);
    tcase_add_test(tc, reqlog_forgets_a_client_quiet_for_the_window);
    tcase_add_test(tc, reqlog_drops_the_records_a_client_says_it_has_the_replies_to);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
