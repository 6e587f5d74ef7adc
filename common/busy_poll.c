#include "busy_poll.h"

#include <time.h>

void c10dc_busy_poll_init(c10dc_busy_poll *bp, int max_us)
{
    bp->max_ns = max_us > 0 ? (int64_t)max_us * 1000 : 0;
    bp->window_ns = 0; /* opened by the first short sleep */
}

void c10dc_busy_poll_missed(c10dc_busy_poll *bp)
{
    bp->window_ns /= 2;
    if (bp->window_ns < bp->max_ns / 8)
        bp->window_ns = 0;
}

void c10dc_busy_poll_slept(c10dc_busy_poll *bp, int64_t idle_ns)
{
    if (bp->max_ns && idle_ns <= C10DC_BUSY_POLL_REOPEN * bp->max_ns)
        bp->window_ns = bp->max_ns;
}

int64_t c10dc_busy_poll_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
