/* Stalls: when the engine could not look at what arrived.
 *
 * A member is dead when it has been silent for --heartbeat-timeout, but a
 * heartbeat can only be heard when the engine runs: a batch held by a
 * slow request or a disk that stops, or the whole coordinator paused
 * (SIGSTOP, a paused VM, swapping), leaves heartbeats queued or unsent,
 * since a rank's next heartbeat follows the answer to its last. Silence in that time says
 * nothing about the rank: the liveness judge (c10ds_groups_sweep) does
 * not count it, and neither do the timeouts the coordinator keeps (parked
 * requests, verification's pending collectives: engine_stalls.c)
 * (docs/liveness.md, "When the coordinator stalls").
 *
 * The engine notes each stall as an interval of the liveness clock
 * (c10d_steady_wall_ms): the part of a batch beyond C10DS_STALL_GRACE_MS,
 * and, when a batch finds the sweep (due every 500 ms, the engine thread
 * wakes for it) overdue by more than that, the time since it was due. Intervals that ended
 * more than a heartbeat timeout ago are forgotten: a member silent since
 * before one has been silent for longer than the timeout since, so no
 * verdict depends on them; longer timeouts are kept on the heard clock,
 * which needs only the total. Only the thread running a batch (engine.c's
 * `busy`) touches them. */
#ifndef C10DS_STALLS_H
#define C10DS_STALLS_H

#include <stddef.h>
#include <stdint.h>

/* A batch may take this long before the rest of it counts as a stall: a
 * busy engine (thousands of requests a batch) is still listening; one
 * held for seconds is not. */
#define C10DS_STALL_GRACE_MS 200

typedef struct {
    int64_t from, to;
} c10ds_stall;

typedef struct {
    c10ds_stall *v; /* in time order, not overlapping */
    size_t n, cap;
    /* Every stall so far, in ms, never forgotten: what the engine's heard
     * clock (c10ds_engine_heard_ms) leaves out, for timeouts longer than a
     * heartbeat timeout (a collective's, judged by verification). */
    int64_t total_ms;
} c10ds_stalls;

/* Records that the engine could not look in [from, to) and forgets the
 * stalls that ended before forget_before. Returns how much of [from, to)
 * no earlier stall covered (what total_ms grew by: the engine postpones
 * parked deadlines by it). Out of memory, the interval is not kept (a
 * member may then be judged as before: by the clock alone) but counts. */
int64_t c10ds_stalls_note(c10ds_stalls *s, int64_t from, int64_t to, int64_t forget_before);
/* How much of [from, to) the engine was stalled. */
int64_t c10ds_stalls_within(const c10ds_stalls *s, int64_t from, int64_t to);
void c10ds_stalls_fini(c10ds_stalls *s);

#endif
