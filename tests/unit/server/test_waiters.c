/* The parked-request index (server/engine/waiters.c) alone: requests
 * parked by key and by deadline, woken by a write, expired in deadline
 * order. */
#include "engine/request.h"
#include "engine/waiters.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int main(void)
{
    Suite *s = suite_create("waiters");
    TCase *tc = tcase_create("waiters");
    tcase_add_test(tc, waiters_wake_by_key_and_expire_by_deadline);
    tcase_add_test(tc, waiters_handle_many_keys);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
