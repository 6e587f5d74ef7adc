/* The applied-request log: a resent non-idempotent request is answered
 * with the reply it got the first time instead of being applied again.
 * Records are written in the engine's transaction, with the effect they
 * describe, so the log is exactly as durable as the data.
 *
 * Records are kept per client (a connection's random id) and pruned by
 * the table's primary key. A client that says which replies it has
 * (acked_below, sent by libc10dclient) has the records below that dropped
 * as it records the next: a client calling one add at a time keeps one
 * record, so the records of all busy clients share a page or two and a
 * batch of adds from eight clients writes two pages, not nine. Otherwise
 * a client's records more than C10DS_REQLOG_KEEP_IDS requests behind its
 * newest are dropped (a resend comes right after a reconnect, never that
 * late). All of a client's go once it has been quiet for the dedup
 * window. When each client was last seen is kept in memory, rebuilt from
 * the table at start. */
#ifndef C10DS_REQLOG_H
#define C10DS_REQLOG_H

#include "db/db.h"

#include <stddef.h>
#include <stdint.h>

#define C10DS_REQLOG_KEEP_IDS 65536u
#define C10DS_REQLOG_TRIM_EVERY 4096u /* records of a client between trims */

typedef struct c10ds_reqlog_client {
    uint64_t id;         /* 0: a free slot */
    uint64_t newest;     /* its highest recorded request id */
    uint64_t acked;      /* its records below this were dropped (acked_below) */
    int64_t last_ms;     /* wall clock of its last record */
    uint32_t since_trim; /* records since its old ones were last dropped */
} c10ds_reqlog_client;

typedef struct c10ds_reqlog {
    c10ds_db *db;
    sqlite3_stmt *st_find, *st_insert, *st_trim, *st_forget;
    int64_t window_ms;
    int64_t last_prune_ms;
    c10ds_reqlog_client *clients; /* open addressing on id */
    size_t nclients, cap;
} c10ds_reqlog;

int c10ds_reqlog_init(c10ds_reqlog *rl, c10ds_db *db, int window_s);
void c10ds_reqlog_fini(c10ds_reqlog *rl);
/* 1 = seen before: *reply (malloc'd) / *len is the reply it got; 0 = new. */
int c10ds_reqlog_find(c10ds_reqlog *rl, uint64_t client_id, uint64_t request_id, void **reply,
                      size_t *len);
/* Records request_id's reply. acked_below (0: not told) is the client's
 * word that it holds the replies to all its requests below that id: their
 * records are dropped in the same transaction (never request_id's own). */
int c10ds_reqlog_record(c10ds_reqlog *rl, uint64_t client_id, uint64_t request_id,
                        uint64_t acked_below, const void *reply, size_t len);
/* The client's acked_below so far (0: none since this coordinator
 * started): a recorded request below it with no record is a late copy of
 * one it already had answered (still queued on a connection it left), and
 * must not be applied again. */
uint64_t c10ds_reqlog_acked(c10ds_reqlog *rl, uint64_t client_id);
/* Forgets the clients quiet for longer than the window; cheap to call
 * often (it looks once a second). */
void c10ds_reqlog_prune(c10ds_reqlog *rl);
/* How many clients have records (for tests and status). */
size_t c10ds_reqlog_clients(const c10ds_reqlog *rl);

#endif
