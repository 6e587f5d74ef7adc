/* Clocks and durations shared by the coordinator and the client library.
 * Deadlines use the monotonic clock (immune to wall-clock steps); records
 * shown to people use wall-clock milliseconds.
 *
 * The one time convention inside both programs:
 *   - a duration is a c10d_ms: > 0 is that many milliseconds;
 *     C10D_MS_NO_WAIT (0) is "answer from what is there now";
 *     C10D_MS_FOREVER is "until it ends" (only where something else ends
 *     it, as a work's own timeout does). Nothing else is a duration:
 *     negative values and "0 means the default" exist only at the edges,
 *     converted once there (the public API's C10D_TIMEOUT_DEFAULT and
 *     C10D_NO_WAIT by c10di_timeout, client/src/errors.c; the wire's
 *     absent or 0 by c10ds_wire_ms, server/engine/request.h).
 *   - a deadline is an int64_t absolute time on the monotonic clock,
 *     c10d_now_ms() + a duration.
 * NNG's nng_duration is another convention (-1 is forever, -2 the
 * socket's default, 0 one poll): convert at the call into NNG, with
 * c10d_nng_ms. */
#ifndef C10D_TIME_H
#define C10D_TIME_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds of a duration; an int, as the API and the wire (int32)
 * carry it. */
typedef int c10d_ms;
#define C10D_MS_NO_WAIT 0
#define C10D_MS_FOREVER INT_MAX

/* A duration (or what is left of one: <= 0 when it has passed) as NNG's
 * aio timeouts take it: at least 1 ms, so what is left never becomes one
 * of NNG's negative specials, nor 0, which NNG takes as "poll once";
 * C10D_MS_FOREVER and beyond is NNG's forever (-1). An int32_t, as
 * nng_duration is, so that this header needs no NNG. */
static inline int32_t c10d_nng_ms(int64_t ms)
{
    return ms >= C10D_MS_FOREVER ? -1 : ms < 1 ? 1 : (int32_t)ms;
}

/* Defaults the client and the coordinator must agree on: a request that
 * leaves a timeout out gets on the coordinator what the library would
 * have sent (proto/c10d.proto, "Durations"). */
/* A collective's timeout, and so a process group's (torch's default for
 * gloo and NCCL), when neither the call, the group nor C10D_TIMEOUT_MS
 * names one; CollEntry.timeout_ms and JoinShadow.timeout_ms left out. */
#define C10D_COLL_TIMEOUT_DEFAULT_MS 600000
/* A store's timeout (TCPStore's) when neither the options nor
 * C10D_TIMEOUT_MS name one. */
#define C10D_STORE_TIMEOUT_DEFAULT_MS 300000
/* How long the coordinator holds a GroupJoin that leaves timeout_ms out
 * (this library always sends its group's): a store's default. */
#define C10D_GROUP_JOIN_WAIT_DEFAULT_MS C10D_STORE_TIMEOUT_DEFAULT_MS

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
