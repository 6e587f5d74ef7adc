/* What a replica's files share; others see replica.h:
 *
 *   replica_supervisor.c  the supervisor process: the dqlite node, the
 *                         engine process it starts again as the role moves
 *   replica.c             in the engine process: who leads, the refusal of a
 *                         replica that does not, the threads that watch the
 *                         role and grow the membership
 *   replica_export.c      --export: the replicated database copied out
 *   replica_disk.c        the room left on --data-dir, for the supervisor
 */
#ifndef C10DS_REPLICA_INTERNAL_H
#define C10DS_REPLICA_INTERNAL_H

#include <time.h>

#define ENGINE_ENV "C10D_REPLICA_SUPERVISOR" /* the supervisor's pid, in the engine's env */
#define DB_NAME "c10d"
#define REPLICAS_TABLE "c10d_replicas"
#define DQ_TIMEOUT_MS 10000

static inline void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* What the supervisor knows of the room on its --data-dir (zeroed at
 * start). */
typedef struct c10ds_disk_watch {
    int low;        /* below what raft needs: said so */
    int unreadable; /* statvfs failed: said so */
    time_t said_at;
} c10ds_disk_watch;

/* Looks at the room left on dir (replica_disk.c), saying so when it is
 * too little for raft (again every minute). Returns 1 when there is room
 * again after too little: the node is to be started afresh. */
int c10ds_replica_disk_check(c10ds_disk_watch *w, const char *dir, unsigned long long id);

#endif
