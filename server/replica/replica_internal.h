/* What a replica's files share; others see replica.h:
 *
 *   replica_supervisor.c  the supervisor process: the dqlite node, the
 *                         engine process it starts again as the role moves
 *   replica.c             in the engine process: who leads, the refusal of a
 *                         replica that does not, the threads that watch the
 *                         role and grow the membership
 *   replica_export.c      --export: the replicated database copied out
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

#endif
