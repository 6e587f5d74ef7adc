#include "busy_poll.h"

#include <time.h>

void c10dc_busy_poll_init(c10dc_busy_poll *bp, int max_us)
{
    bp->max_ns = max_us > 0 ? (int64_t)max_us * 1000 : 0;
    bp->window_ns = 0; /* opened by the first short sleep */
    bp->caught = bp->misses = 0;
    bp->cooldown = 0;
    bp->backoff = 1;
}

void c10dc_busy_poll_missed(c10dc_busy_poll *bp)
{
    if (bp->caught) { /* a useful window: a late message now and then is no reason */
        if (++bp->misses >= C10DC_BUSY_POLL_MISSES)
            bp->window_ns = 0; /* its messages stopped: sleep */
        return;
    }
    bp->window_ns /= 2;
    if (bp->window_ns >= bp->max_ns / 8)
        return;
    bp->window_ns = 0;
    if (!bp->caught) { /* it opened for nothing: wait longer before the next */
        bp->cooldown = bp->backoff;
        if (bp->backoff < C10DC_BUSY_POLL_BACKOFF_MAX)
            bp->backoff *= 2;
    }
}

void c10dc_busy_poll_caught(c10dc_busy_poll *bp)
{
    bp->caught = 1;
    bp->misses = 0;
    bp->backoff = 1;
}

void c10dc_busy_poll_slept(c10dc_busy_poll *bp, int64_t idle_ns)
{
    if (!bp->max_ns || idle_ns > C10DC_BUSY_POLL_REOPEN * bp->max_ns)
        return;
    if (bp->window_ns)
        return; /* still open, halving: a sleep does not undo a miss */
    if (bp->cooldown) {
        bp->cooldown--;
        return;
    }
    bp->caught = bp->misses = 0; /* a new opening */
    bp->window_ns = bp->max_ns;
}

int64_t c10dc_busy_poll_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
