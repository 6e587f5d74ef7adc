/* The watcher thread (watch.c): heartbeat, lost members, findings and
 * joins heard from the coordinator. */
#ifndef C10DI_WATCH_H
#define C10DI_WATCH_H

#include "group/group.h"

c10d_status c10di_watch_start(c10di_world *w);
void c10di_watch_stop(c10di_world *w);

#endif
