/* A client of dqlite's wire protocol (protocol version 1, the parameter
 * format of dqlite 1.11.1), for the coordinator's replicas
 * (docs/replication.md): dqlite 1.11.1 has no in-process SQL, so even the
 * coordinator's own node is reached through this, on an abstract unix
 * socket ("@name") or TCP ("a.b.c.d:port", IPv4 literals, as 1.11.1
 * takes them).
 *
 * Written from the protocol's layouts (every message an 8-byte header, a
 * u32 body length in 8-byte words, a u8 type, then a body padded to 8
 * bytes), not from dqlite's code. One request at a time per connection,
 * blocking, each call bounded by the connection's timeout. Returns: 0 on
 * success; C10DS_DQ_FAILED when the node answered FAILURE (its code, e.g.
 * C10DS_DQ_NOT_LEADER, in c10ds_dq_code, its message recorded for
 * c10ds_failure(), failure.h); -1 when the connection failed (it is then
 * unusable: close it; what went wrong is c10ds_failure()'s). */
#ifndef C10DS_DQLITE_WIRE_H
#define C10DS_DQLITE_WIRE_H

#include "c10d_time.h"

#include <stddef.h>
#include <stdint.h>

#define C10DS_DQ_FAILED 1
/* FAILURE codes that mean "ask the leader" (SQLite extended codes) */
#define C10DS_DQ_NOT_LEADER 10250       /* SQLITE_IOERR | 40 << 8 */
#define C10DS_DQ_LEADERSHIP_LOST 10506  /* | 41 << 8: a COMMIT's outcome is unknown */

/* Value types, as the protocol numbers them. */
enum {
    C10DS_DQ_INTEGER = 1,
    C10DS_DQ_FLOAT = 2,
    C10DS_DQ_TEXT = 3,
    C10DS_DQ_BLOB = 4,
    C10DS_DQ_NULL = 5,
    C10DS_DQ_UNIXTIME = 9, /* rows only: 1.11.1 refuses it as a parameter */
    C10DS_DQ_ISO8601 = 10,
    C10DS_DQ_BOOLEAN = 11,
};

/* A parameter or a row's value. Text is NUL-terminated; a row's strings
 * and blobs point into its c10ds_dq_rows. */
typedef struct c10ds_dq_value {
    int type;
    int64_t i; /* INTEGER, UNIXTIME, BOOLEAN */
    double f;  /* FLOAT */
    const void *p; /* TEXT, ISO8601 (NUL-terminated), BLOB */
    size_t n;      /* BLOB's length; TEXT's, without the NUL */
} c10ds_dq_value;

/* A query's rows, all of them (ROWS may come in many messages). */
typedef struct c10ds_dq_rows {
    unsigned ncols;
    char **names;          /* ncols */
    size_t nrows;
    c10ds_dq_value *values; /* nrows * ncols, row by row */
    void *mem;             /* what the above point into */
} c10ds_dq_rows;

typedef struct c10ds_dq c10ds_dq;

/* Connects and sends the handshake; -1 (c10ds_failure() says why) if not. */
int c10ds_dq_connect(c10ds_dq **out, const char *address, c10d_ms timeout_ms);
void c10ds_dq_close(c10ds_dq *d);
/* Ends the call another thread is blocked in on d (it fails; d is then
 * unusable): for stopping a thread that waits on a node. */
void c10ds_dq_interrupt(c10ds_dq *d);

/* The last FAILURE's code: 0 after a success, or when what went wrong
 * was on the wire. */
uint64_t c10ds_dq_code(const c10ds_dq *d);

/* Who leads: id 0 and "" when this node does not know (or is no voter). */
int c10ds_dq_leader(c10ds_dq *d, uint64_t *id, char *address, size_t len);
/* Opens the connection's one database. */
int c10ds_dq_open(c10ds_dq *d, const char *name);
/* Prepares sql's first statement: *stmt names it on this connection. */
int c10ds_dq_prepare(c10ds_dq *d, const char *sql, uint32_t *stmt, uint64_t *nparams);
int c10ds_dq_finalize(c10ds_dq *d, uint32_t stmt);
/* Runs a statement (at most 255 parameters); *last_id / *changes may be
 * NULL. */
int c10ds_dq_exec(c10ds_dq *d, uint32_t stmt, const c10ds_dq_value *params, unsigned n,
                  uint64_t *last_id, uint64_t *changes);
/* Runs sql, every statement of it (parameters bind to the first). */
int c10ds_dq_exec_sql(c10ds_dq *d, const char *sql, const c10ds_dq_value *params, unsigned n,
                      uint64_t *last_id, uint64_t *changes);
/* Runs a query and reads all its rows into *rows (free with
 * c10ds_dq_rows_free, also after a failure). */
int c10ds_dq_query(c10ds_dq *d, uint32_t stmt, const c10ds_dq_value *params, unsigned n,
                   c10ds_dq_rows *rows);
int c10ds_dq_query_sql(c10ds_dq *d, const char *sql, const c10ds_dq_value *params, unsigned n,
                       c10ds_dq_rows *rows);
void c10ds_dq_rows_free(c10ds_dq_rows *rows);

/* Membership, on the leader: a node joins as a spare (add), and is made
 * a voter (role 0), standby (1) or spare (2) by assign. */
int c10ds_dq_add(c10ds_dq *d, uint64_t id, const char *address);
int c10ds_dq_assign(c10ds_dq *d, uint64_t id, uint64_t role);
/* Takes node id out of the cluster (on the leader). */
int c10ds_dq_remove(c10ds_dq *d, uint64_t id);
/* Hands the leader's role to voter id (on the leader): the way a leader
 * stops without the others waiting out an election timeout. */
int c10ds_dq_transfer(c10ds_dq *d, uint64_t id);
/* The cluster's nodes: *n of them, ids[] and roles[] (each may be NULL)
 * up to cap. */
int c10ds_dq_cluster(c10ds_dq *d, uint64_t *ids, uint64_t *roles, size_t cap, size_t *n);

#endif
