/* --export PATH (replica.h): the replicated database copied, in one read
 * transaction on the leader, into a new SQLite file that a single-node
 * coordinator serves. */
#include "replica/replica.h"

#include "replica/dqlite_wire.h"
#include "failure.h"
#include "log.h"
#include "replica/replica_internal.h"
#include "replica/replica_mirror.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int c10ds_replica_export(const c10ds_config *cfg)
{
    char addr[64] = "";
    uint64_t id = 0;
    for (int i = 0; i < cfg->npeers && !id; i++) {
        c10ds_dq *d = NULL;
        if (c10ds_dq_connect(&d, cfg->peers[i].address, 5000) == 0 &&
            c10ds_dq_leader(d, &id, addr, sizeof addr) != 0)
            id = 0;
        c10ds_dq_close(d);
    }
    if (!id) {
        c10ds_error("--export: no replica of --peers knows a leader (are a majority running?)");
        return 1;
    }
    int fd = open(cfg->export_path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        c10ds_error("--export %s: %s (it must not exist yet)", cfg->export_path,
                    strerror(errno));
        return 1;
    }
    close(fd);
    c10ds_mirror *m = NULL;
    sqlite3 *h = NULL;
    int rc = 1;
    if (c10ds_mirror_new(&m, addr, DB_NAME, DQ_TIMEOUT_MS) != 0)
        goto out;
    if (sqlite3_open(cfg->export_path, &h) != SQLITE_OK) {
        c10ds_failed(C10D_ERROR, "%s", sqlite3_errmsg(h)); /* NULL h: "out of memory" */
        goto out;
    }
    /* one read transaction on the leader: every table as of one commit */
    static const char *const own[] = {REPLICAS_TABLE, NULL};
    c10ds_dq *d = c10ds_mirror_dq(m);
    if (c10ds_dq_exec_sql(d, "BEGIN", NULL, 0, NULL, NULL) != 0)
        goto out; /* the node's words are c10ds_failure() */
    if (c10ds_mirror_load(m, h, own) != 0)
        goto out;
    c10ds_dq_exec_sql(d, "COMMIT", NULL, 0, NULL, NULL);
    sqlite3_stmt *st = NULL;
    long long keys = -1;
    int version = -1;
    if (sqlite3_prepare_v2(h, "SELECT (SELECT count(*) FROM kv), (SELECT user_version FROM "
                              "pragma_user_version)", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        keys = sqlite3_column_int64(st, 0);
        version = sqlite3_column_int(st, 1);
    }
    sqlite3_finalize(st);
    c10ds_info("exported the replicated database from replica %llu (%s) to %s: schema version "
               "%d, %lld keys", (unsigned long long)id, addr, cfg->export_path, version, keys);
    rc = 0;
out:
    if (rc != 0) {
        c10ds_error("--export %s: %s", cfg->export_path, c10ds_failure());
        unlink(cfg->export_path);
    }
    sqlite3_close(h);
    c10ds_mirror_free(m);
    return rc;
}

