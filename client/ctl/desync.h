/* c10d-ctl desync: is every group's collective sequence healthy? */
#ifndef C10D_CTL_DESYNC_H
#define C10D_CTL_DESYNC_H

#include <c10d/c10d.h>

#define EXIT_UNHEALTHY 7

/* Runs `desync [--job J] [--group G]`. Returns the exit code, or -1 with
 * *err set when the coordinator could not be asked. */
int cmd_desync(c10d_store *s, int argc, char **argv, int json, c10d_status *err);
/* `trace --rank R [--group G] [--job J] [-n N]`: a rank's recent collectives. */
int cmd_trace(c10d_store *s, int argc, char **argv, int json, c10d_status *err);
/* `watch [--job J] [--interval MS] [--count K]`: desync, refreshed in place
 * (K refreshes, 0 = until interrupted). */
int cmd_watch(c10d_store *s, int argc, char **argv, c10d_status *err);

#endif
