/* The room left on a replica's --data-dir (replica_internal.h).
 *
 * raft writes its log in segments of 8 MiB, created ahead of need, and
 * its term and vote in small files rewritten at each election. On a full
 * disk those writes fail, and dqlite 1.11.1 says nothing: the replica
 * looks alive, but it can neither follow nor vote, so once the leader
 * dies the two replicas left cannot elect one, and its raft stays failed
 * after space is freed. So the supervisor looks at the room left every
 * second: below one segment and a margin it says so, naming the
 * directory and the bytes free; once there is room again it starts its
 * node afresh (the log on disk is raft's, and it is read back as after
 * a restart), so that the replica votes again and the cluster elects. */
#include "replica/replica_internal.h"

#include "log.h"

#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

/* one raft segment (dqlite 1.11.1's) and room for the vote, snapshots */
#define LOW_BYTES (9ull << 20)
/* room again: a little more, so that a disk at the edge does not restart
 * the node every second */
#define ROOM_BYTES (12ull << 20)
#define SAY_EVERY_S 60

int c10ds_replica_disk_check(c10ds_disk_watch *w, const char *dir, unsigned long long id)
{
    struct statvfs v;
    if (statvfs(dir, &v) != 0) {
        if (!w->unreadable)
            c10ds_warn("replica %llu: cannot look at the room left on --data-dir %s: %s", id,
                       dir, strerror(errno));
        w->unreadable = 1;
        return 0;
    }
    w->unreadable = 0;
    unsigned long long free_bytes = (unsigned long long)v.f_bavail * v.f_frsize;
    time_t now = time(NULL);
    if (free_bytes < LOW_BYTES) {
        if (!w->low || now - w->said_at >= SAY_EVERY_S) {
            c10ds_error("replica %llu: --data-dir %s has %llu bytes free (raft needs %llu for "
                        "its next log segment): this replica can neither follow nor vote until "
                        "space is freed there, and without it the others may not elect a "
                        "leader; its node starts again once %llu bytes are free", id, dir,
                        free_bytes, LOW_BYTES, ROOM_BYTES);
            w->said_at = now;
        }
        w->low = 1;
        return 0;
    }
    if (w->low && free_bytes >= ROOM_BYTES) {
        c10ds_info("replica %llu: --data-dir %s has %llu bytes free again: starting its "
                   "dqlite node afresh", id, dir, free_bytes);
        w->low = 0;
        return 1;
    }
    return 0;
}
