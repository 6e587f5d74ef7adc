/* Clocks shared by the coordinator and the client library. Deadlines use
 * the monotonic clock (immune to wall-clock steps); records shown to people
 * use wall-clock milliseconds. */
#ifndef C10D_TIME_H
#define C10D_TIME_H

#include <pthread.h>
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

/* A condition variable whose timed waits run on the monotonic clock, so a
 * wall-clock step neither cuts a wait short nor stretches it. 0 or errno. */
static inline int c10d_cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc;
}

/* The monotonic time ms from now, for pthread_cond_timedwait on a
 * condition variable made by c10d_cond_init_monotonic. */
static inline struct timespec c10d_deadline_ts(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

/* Added to the wall clock: tests step it with this, as NTP or an operator
 * would step the real one (0 otherwise). */
extern int64_t c10d_wall_step_ms;

static inline int64_t c10d_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + c10d_wall_step_ms;
}

/* Wall-clock milliseconds that never step: the wall clock at the first
 * call, advanced by the monotonic clock since. For times a process stores
 * and compares (heartbeat staleness, the order members were lost, how
 * long a rank has waited): a clock step must not make every live member
 * look silent for an hour. Near the wall clock, so it reads as a date. */
int64_t c10d_steady_wall_ms(void);

#endif
