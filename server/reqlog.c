#include "reqlog.h"

#include "c10d_time.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

int c10ds_reqlog_init(c10ds_reqlog *rl, c10ds_db *db, int window_s)
{
    memset(rl, 0, sizeof *rl);
    rl->db = db;
    rl->window_ms = (int64_t)window_s * 1000;
    rl->st_find = c10ds_db_prepare(
        db, "SELECT reply FROM applied_requests WHERE client_id = ?1 AND request_id = ?2");
    rl->st_insert = c10ds_db_prepare(db, "INSERT OR REPLACE INTO applied_requests"
                                         "(client_id, request_id, reply, at_ms) VALUES(?1,?2,?3,?4)");
    rl->st_prune = c10ds_db_prepare(db, "DELETE FROM applied_requests WHERE at_ms < ?1");
    if (!rl->st_find || !rl->st_insert || !rl->st_prune) {
        c10ds_reqlog_fini(rl);
        return -1;
    }
    return 0;
}

void c10ds_reqlog_fini(c10ds_reqlog *rl)
{
    sqlite3_finalize(rl->st_find);
    sqlite3_finalize(rl->st_insert);
    sqlite3_finalize(rl->st_prune);
    memset(rl, 0, sizeof *rl);
}

int c10ds_reqlog_find(c10ds_reqlog *rl, uint64_t client_id, uint64_t request_id, void **reply,
                      size_t *len)
{
    sqlite3_stmt *s = rl->st_find;
    sqlite3_reset(s);
    sqlite3_bind_int64(s, 1, (sqlite3_int64)client_id);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)request_id);
    int found = 0;
    if (sqlite3_step(s) == SQLITE_ROW) {
        size_t n = (size_t)sqlite3_column_bytes(s, 0);
        void *p = malloc(n ? n : 1);
        if (p) {
            if (n)
                memcpy(p, sqlite3_column_blob(s, 0), n);
            *reply = p;
            *len = n;
            found = 1;
        }
    }
    sqlite3_reset(s);
    return found;
}

int c10ds_reqlog_record(c10ds_reqlog *rl, uint64_t client_id, uint64_t request_id,
                        const void *reply, size_t len)
{
    sqlite3_stmt *s = rl->st_insert;
    sqlite3_reset(s);
    sqlite3_bind_int64(s, 1, (sqlite3_int64)client_id);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)request_id);
    sqlite3_bind_blob64(s, 3, reply, len, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, c10d_wall_ms());
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        c10ds_error("recording request %llu of client %016llx: %s", (unsigned long long)request_id,
                    (unsigned long long)client_id, sqlite3_errmsg(rl->db->h));
        return -1;
    }
    return 0;
}

void c10ds_reqlog_prune(c10ds_reqlog *rl)
{
    int64_t now = c10d_wall_ms();
    if (now - rl->last_prune_ms < 1000)
        return;
    rl->last_prune_ms = now;
    sqlite3_stmt *s = rl->st_prune;
    sqlite3_reset(s);
    sqlite3_bind_int64(s, 1, now - rl->window_ms);
    if (sqlite3_step(s) != SQLITE_DONE)
        c10ds_warn("pruning the applied-request log: %s", sqlite3_errmsg(rl->db->h));
    sqlite3_reset(s);
}
