/* What a stopping engine still runs (SIGTERM): requests already queued,
 * until --drain-timeout; those still queued then are dropped unanswered,
 * and so are those that arrive while it stops, counted by operation and
 * named in one log line once the connections are closed. Their clients see the
 * connection close and resend them to the next coordinator (request ids
 * make a resent add or append safe), as they do after any restart. A
 * million queued gets once kept a SIGTERMed coordinator running for more
 * than 6 s, past systemd's TimeoutStopSec and its SIGKILL. */
#ifndef C10DS_DRAIN_H
#define C10DS_DRAIN_H

#include "c10d_time.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Operation cases counted apart (the engine's dispatch table's size). */
#define C10DS_DRAIN_OPS 64

typedef struct c10ds_drain {
    atomic_llong deadline_ms; /* 0 while serving; then when dropping begins (monotonic) */
    /* by op_case ([0]: cases beyond the table): by the batch running,
     * and by network threads whose requests come too late */
    atomic_ullong dropped[C10DS_DRAIN_OPS];
    atomic_ullong total;
} c10ds_drain;

/* Queued requests are still run for timeout_ms from now, then dropped. */
void c10ds_drain_begin(c10ds_drain *d, c10d_ms timeout_ms);
/* Whether queued requests are now dropped instead of run. */
int c10ds_drain_over(c10ds_drain *d);
/* Counts a request of op_case as dropped (the caller frees it). */
void c10ds_drain_count(c10ds_drain *d, int op_case);
/* Logs what was dropped, if anything: names[op_case] (NULL: unknown). */
void c10ds_drain_report(c10ds_drain *d, const char *const *names, c10d_ms timeout_ms);

#endif
