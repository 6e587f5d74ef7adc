/* c10d-ctl desync, trace, watch: is every group's collective sequence
 * healthy, and where each rank is. Each returns its exit code, after
 * reporting a failure (output.h). */
#ifndef C10D_CTL_DESYNC_H
#define C10D_CTL_DESYNC_H

#include "args.h"

#include <c10d/c10d.h>

#define EXIT_UNHEALTHY 7

/* `desync [--job J] [--group G] [--finished]`: the live runs (and, with
 * --finished, those that are over; with --job, J's run either way): 0
 * healthy (a job still forming too), EXIT_UNHEALTHY not; EXIT_NOTFOUND
 * for a J the coordinator knows nothing of. */
int cmd_desync(c10d_store *s, const ctl_args *a);
/* `trace --rank R [--group G] [--job J] [-n N]`: a rank's recent
 * collectives, and which job's they are (the coordinator picks one when J
 * is not given). */
int cmd_trace(c10d_store *s, const ctl_args *a);
/* `trace --format chrome [--job J] [--group G] [-o FILE]`: every rank's
 * collectives in the group as a Chrome Trace Event Format file
 * (trace_chrome.c). */
int cmd_trace_chrome(c10d_store *s, const ctl_args *a);
/* `watch [--job J] [--group G] [--finished] [--interval MS] [--count K]`:
 * desync, again every MS (K times, 0 = until interrupted): in place on a
 * terminal, one after the other elsewhere, one JSON object a line with
 * --json. Its exit code is the last refresh's (EXIT_NOTFOUND: no J yet). */
int cmd_watch(c10d_store *s, const ctl_args *a);

#endif
