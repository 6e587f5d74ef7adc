/* The readiness loop's busy-poll window (common/busy_poll.c): opened by a
 * short sleep, halved by each empty look, closed below an eighth. */
#include "busy_poll.h"

#include "check_main.h"

#define US 1000

START_TEST(the_window_opens_on_a_short_sleep_and_closes_when_idle)
{
    c10dc_busy_poll bp;
    c10dc_busy_poll_init(&bp, 50);
    ck_assert_int_eq(bp.window_ns, 0); /* a new loop sleeps at once */
    /* a long sleep (requests a millisecond apart) leaves it closed */
    c10dc_busy_poll_slept(&bp, 1000 * US);
    ck_assert_int_eq(bp.window_ns, 0);
    /* the next request 150 us after the last round, a wake-up included:
     * looking 50 us would likely have caught it */
    c10dc_busy_poll_slept(&bp, 150 * US);
    ck_assert_int_eq(bp.window_ns, 50 * US);
    /* empty looks: 25, 12.5, then below 50/8: closed */
    c10dc_busy_poll_missed(&bp);
    ck_assert_int_eq(bp.window_ns, 25 * US);
    c10dc_busy_poll_missed(&bp);
    ck_assert_int_eq(bp.window_ns, 12500);
    c10dc_busy_poll_missed(&bp);
    c10dc_busy_poll_missed(&bp);
    ck_assert_int_eq(bp.window_ns, 0);
    /* at most 50 + 25 + 12.5 + 6.25 us were spent looking in vain */
}
END_TEST

START_TEST(zero_never_looks)
{
    c10dc_busy_poll bp;
    c10dc_busy_poll_init(&bp, 0);
    c10dc_busy_poll_slept(&bp, 1 * US);
    ck_assert_int_eq(bp.window_ns, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("busy_poll");
    TCase *tc = tcase_create("window");
    tcase_add_test(tc, the_window_opens_on_a_short_sleep_and_closes_when_idle);
    tcase_add_test(tc, zero_never_looks);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
