/* Clocks shared by the coordinator and the client library. Deadlines use
 * the monotonic clock (immune to wall-clock steps); records shown to people
 * use wall-clock milliseconds. */
#ifndef C10D_TIME_H
#define C10D_TIME_H

#include <stdint.h>
#include <time.h>

static inline int64_t c10d_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t c10d_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int64_t c10d_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
