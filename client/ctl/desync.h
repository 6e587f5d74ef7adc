/* c10d-ctl desync: is every group's collective sequence healthy? */
#ifndef C10D_CTL_DESYNC_H
#define C10D_CTL_DESYNC_H

#include "ctl.h"

#define EXIT_UNHEALTHY 7

/* Runs `desync [--job J] [--group G]`. Returns the exit code, or -1 with
 * *err set when the coordinator could not be asked. */
int cmd_desync(c10d_store *s, const ctl_args *a, int json, c10d_status *err);
/* `trace --rank R [--group G] [--job J] [-n N]`: a rank's recent
 * collectives, and which job's they are (the coordinator picks one when J
 * is not given). */
int cmd_trace(c10d_store *s, const ctl_args *a, int json, c10d_status *err);
/* `watch [--job J] [--group G] [--interval MS] [--count K]`: desync, again
 * every MS (K times, 0 = until interrupted): in place on a terminal, one
 * after the other elsewhere, one JSON object a line with --json. */
int cmd_watch(c10d_store *s, const ctl_args *a, int json, c10d_status *err);

#endif
