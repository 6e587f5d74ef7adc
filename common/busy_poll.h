/* How long a thread about to sleep until a socket is readable keeps
 * looking first: the coordinator's readiness loop between requests
 * (server/readiness.c), and a rank waiting for its SYNC verdict
 * (client/src/conn_stream.c).
 *
 * A thread asleep on an idle CPU is woken by an interrupt; on a virtual
 * machine that halts idle CPUs, that costs 30-40 us, twice a round trip
 * (the coordinator woken by the request, the client by the reply): a
 * client calling one get at a time waited 77 us where 40 us would do.
 * Looking a little longer while messages come back to back keeps the CPU
 * awake for the next one. The looking thread yields its CPU between looks
 * (sched_yield), so a runnable thread on that CPU loses nothing.
 *
 * The window adapts, as the kernel's guest halt polling does: it opens
 * (to the maximum) when a sleep ended soon, since what woke it came back
 * within a few windows; it halves each time a whole window passed with
 * nothing, and closes below an eighth. A thread whose messages stopped
 * sleeps at once; one woken every few milliseconds loses at most a few
 * windows between them. */
#ifndef C10D_COMMON_BUSY_POLL_H
#define C10D_COMMON_BUSY_POLL_H

#include <stdint.h>

/* The default maximum (c10d-coord --busy-poll-us, C10D_BUSY_POLL_US). */
#define C10DC_BUSY_POLL_DEFAULT_US 50
/* A sleep this many windows long or shorter opens the window: it is the
 * time from the last message to the next, a wake-up included. */
#define C10DC_BUSY_POLL_REOPEN 4

typedef struct c10dc_busy_poll {
    int64_t max_ns;    /* 0: never look, sleep at once */
    int64_t window_ns; /* how long to look next time; 0: sleep at once */
} c10dc_busy_poll;

void c10dc_busy_poll_init(c10dc_busy_poll *bp, int max_us);
/* A whole window passed with nothing. */
void c10dc_busy_poll_missed(c10dc_busy_poll *bp);
/* The thread slept idle_ns (from when it began to wait) until woken. */
void c10dc_busy_poll_slept(c10dc_busy_poll *bp, int64_t idle_ns);
/* A monotonic clock, in ns, for the above. */
int64_t c10dc_busy_poll_now_ns(void);

#endif
