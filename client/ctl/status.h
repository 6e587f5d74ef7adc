/* c10d-ctl status: the coordinator and its jobs. */
#ifndef C10D_CTL_STATUS_H
#define C10D_CTL_STATUS_H

#include "args.h"

#include <c10d/c10d.h>

/* `status [--job J]`: the coordinator and its jobs; a J it does not know
 * is C10D_ENOTFOUND's exit code. */
int cmd_status(c10d_store *s, const ctl_args *a);

#endif
