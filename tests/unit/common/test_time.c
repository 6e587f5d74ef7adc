/* Durations as common/c10d_time.h gives them to others: NNG's timeouts
 * (c10d_nng_ms), where -1 is forever, -2 the socket's default and 0 a
 * single poll, so that what is left of a deadline must never become one
 * of those by accident. */
#include "c10d_time.h"

#include "check_main.h"

#include <check.h>
#include <nng/nng.h>
#include <stdint.h>

START_TEST(what_is_left_of_a_deadline_is_at_least_a_millisecond_for_nng)
{
    ck_assert_int_eq(c10d_nng_ms(250), 250);
    ck_assert_int_eq(c10d_nng_ms(1), 1);
    /* passed, just now or long ago: one more millisecond, never NNG's
     * poll (0), forever (-1) or the socket's default (-2) */
    ck_assert_int_eq(c10d_nng_ms(0), 1);
    ck_assert_int_eq(c10d_nng_ms(-1), 1);
    ck_assert_int_eq(c10d_nng_ms(-2), 1);
    ck_assert_int_eq(c10d_nng_ms(INT64_MIN), 1);
}
END_TEST

START_TEST(forever_is_nngs_forever_and_never_wraps)
{
    ck_assert_int_eq(c10d_nng_ms(C10D_MS_FOREVER), NNG_DURATION_INFINITE);
    /* a deadline of INT64_MAX (no deadline) leaves more than an int32 */
    ck_assert_int_eq(c10d_nng_ms(INT64_MAX - c10d_now_ms()), NNG_DURATION_INFINITE);
    ck_assert_int_eq(c10d_nng_ms((int64_t)C10D_MS_FOREVER - 1), C10D_MS_FOREVER - 1);
    nng_duration d = c10d_nng_ms(600000);
    ck_assert_int_eq(d, 600000);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("time");
    TCase *tc = tcase_create("nng");
    tcase_add_test(tc, what_is_left_of_a_deadline_is_at_least_a_millisecond_for_nng);
    tcase_add_test(tc, forever_is_nngs_forever_and_never_wraps);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
