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

/* How the readiness loop and a SYNC wait drive it, messages `period_us`
 * apart, a wake-up from sleep costing 35 us: the time spent looking in
 * vain a message, over 2,000 messages. */
static double wasted_us_a_message(int period_us)
{
    c10dc_busy_poll bp;
    c10dc_busy_poll_init(&bp, 50);
    int64_t wasted = 0;
    for (int m = 0; m < 2000; m++) {
        int64_t window = bp.window_ns, period = (int64_t)period_us * US;
        if (window && period <= window) {
            c10dc_busy_poll_caught(&bp); /* found while looking */
            continue;
        }
        if (window) {
            wasted += window;
            c10dc_busy_poll_missed(&bp);
        }
        c10dc_busy_poll_slept(&bp, period + 35 * US);
    }
    return (double)wasted / 2000 / US;
}

/* Messages 50-165 us apart: each sleep is short (with its wake-up, within
 * four windows), so it reopened the window, which then missed: 50 us of
 * looking a message for nothing (a reviewer's measurement: twice the
 * coordinator's CPU at 80 us apart). A window that opened for nothing now
 * stays shut for a cooldown that doubles each time. */
START_TEST(a_window_that_catches_nothing_stays_shut_longer_each_time)
{
    for (int period = 60; period <= 160; period += 20) {
        double wasted = wasted_us_a_message(period);
        ck_assert_msg(wasted < 3.0, "messages %d us apart: %.1f us of looking a message for "
                      "nothing", period, wasted);
    }
    /* back to back, it stays open: nothing wasted */
    ck_assert(wasted_us_a_message(20) < 0.1);
    /* once something is caught, the backoff is forgotten */
    c10dc_busy_poll bp;
    c10dc_busy_poll_init(&bp, 50);
    for (int i = 0; i < 40; i++) { /* openings for nothing: the cooldown grows */
        c10dc_busy_poll_slept(&bp, 100 * US);
        while (bp.window_ns)
            c10dc_busy_poll_missed(&bp);
    }
    ck_assert_uint_ge(bp.backoff, 8);
    while (!bp.window_ns)
        c10dc_busy_poll_slept(&bp, 100 * US);
    c10dc_busy_poll_caught(&bp);
    ck_assert_uint_eq(bp.backoff, 1);
    /* a window that catches stays whole through a late message or two
     * (a client late now and then: before, each halved it, and a few
     * closed it), and closes after three misses in a row */
    c10dc_busy_poll_missed(&bp);
    c10dc_busy_poll_missed(&bp);
    ck_assert_int_eq(bp.window_ns, 50 * US);
    c10dc_busy_poll_caught(&bp);
    for (int i = 0; i < 3; i++)
        c10dc_busy_poll_missed(&bp);
    ck_assert_int_eq(bp.window_ns, 0);
    ck_assert_uint_eq(bp.cooldown, 0); /* it was useful: it may open at once */
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
    tcase_add_test(tc, a_window_that_catches_nothing_stays_shut_longer_each_time);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
