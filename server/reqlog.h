/* The applied-request log: a resent non-idempotent request is answered
 * with the reply it got the first time instead of being applied again.
 * Records are written in the engine's transaction, with the effect they
 * describe, so the log is exactly as durable as the data. */
#ifndef C10DS_REQLOG_H
#define C10DS_REQLOG_H

#include "db.h"

#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_reqlog {
    c10ds_db *db;
    sqlite3_stmt *st_find, *st_insert, *st_prune;
    int64_t window_ms;
    int64_t last_prune_ms;
} c10ds_reqlog;

int c10ds_reqlog_init(c10ds_reqlog *rl, c10ds_db *db, int window_s);
void c10ds_reqlog_fini(c10ds_reqlog *rl);
/* 1 = seen before: *reply (malloc'd) / *len is the reply it got; 0 = new. */
int c10ds_reqlog_find(c10ds_reqlog *rl, uint64_t client_id, uint64_t request_id, void **reply,
                      size_t *len);
int c10ds_reqlog_record(c10ds_reqlog *rl, uint64_t client_id, uint64_t request_id,
                        const void *reply, size_t len);
/* Forgets records older than the window; cheap to call often. */
void c10ds_reqlog_prune(c10ds_reqlog *rl);

#endif
