/* How long a thread about to sleep until a socket is readable keeps
 * looking first: the coordinator's readiness loop between requests
 * (server/net/readiness.c), and a rank waiting for its SYNC verdict
 * (client/src/conn/conn_reader.c).
 *
 * A thread asleep on an idle CPU is woken by an interrupt; on a virtual
 * machine that halts idle CPUs, that costs 30-40 us, twice a round trip
 * (the coordinator woken by the request, the client by the reply): a
 * client calling one get at a time waited 77 us where 40 us would do.
 * Looking a little longer while messages come back to back keeps the CPU
 * awake for the next one. The looking thread yields its CPU between looks
 * (sched_yield), so a runnable thread on that CPU loses nothing.
 *
 * The window adapts, in the manner of the kernel's guest halt polling:
 * - it opens (to the maximum) when a sleep ended soon, since what woke
 *   it came back within a few windows;
 * - once it has caught something, it stays open through a miss or two
 *   (a late client now and then) and closes after
 *   C10DC_BUSY_POLL_MISSES misses in a row: a thread whose messages
 *   stopped sleeps after ~150 us of looking;
 * - until it has caught something, it halves with each miss and closes
 *   below an eighth, and then stays shut for the next `cooldown` short
 *   sleeps, a number that doubles with each such opening for nothing (up
 *   to C10DC_BUSY_POLL_BACKOFF_MAX) and is forgotten once a look catches
 *   something. Messages 50-165 us apart reopened a plain halving window
 *   after every sleep (each sleep, a wake-up included, is short) and
 *   missed every time: a reviewer measured 50 us of looking a message for
 *   nothing, twice the coordinator's CPU. The backoff brings that to
 *   about 1.5 us a message. */
#ifndef C10D_COMMON_BUSY_POLL_H
#define C10D_COMMON_BUSY_POLL_H

#include <stdint.h>

/* The default maximum (c10d-coord --busy-poll-us, C10D_BUSY_POLL_US). */
#define C10DC_BUSY_POLL_DEFAULT_US 50
/* A sleep this many windows long or shorter opens the window: it is the
 * time from the last message to the next, a wake-up included. */
#define C10DC_BUSY_POLL_REOPEN 4
/* Short sleeps at most that a window which opened and caught nothing
 * waits out before it opens again. */
#define C10DC_BUSY_POLL_BACKOFF_MAX 64u
/* Misses in a row that close a window which has caught something. */
#define C10DC_BUSY_POLL_MISSES 3

typedef struct c10dc_busy_poll {
    int64_t max_ns;    /* 0: never look, sleep at once */
    int64_t window_ns; /* how long to look next time; 0: sleep at once */
    int caught;        /* the window caught something since it last opened */
    int misses;        /* misses in a row since it last caught something */
    uint32_t cooldown; /* short sleeps still to wait out before it opens */
    uint32_t backoff;  /* the cooldown after the next opening that catches nothing */
} c10dc_busy_poll;

void c10dc_busy_poll_init(c10dc_busy_poll *bp, int max_us);
/* A whole window passed with nothing. */
void c10dc_busy_poll_missed(c10dc_busy_poll *bp);
/* A look found what it waited for. */
void c10dc_busy_poll_caught(c10dc_busy_poll *bp);
/* The thread slept idle_ns (from when it began to wait) until woken: a
 * closed window opens if that was short, and no cooldown is left. */
void c10dc_busy_poll_slept(c10dc_busy_poll *bp, int64_t idle_ns);
/* A monotonic clock, in ns, for the above. */
int64_t c10dc_busy_poll_now_ns(void);

#endif
