/* The leading replica's database, mirrored into dqlite
 * (docs/replication.md, "How a batch is replicated").
 *
 * The engine works on an in-memory SQLite database of its own, exactly as
 * it works on its file in the single-node mode: every read is local and
 * every statement is a function call. dqlite holds the replicated copy:
 * when the engine commits a batch, the rows the batch changed (SQLite's
 * session extension gives them as primary keys with old and new values)
 * go to the replica's dqlite node as one script, BEGIN ... COMMIT, which
 * dqlite makes one raft entry; the engine commits locally and replies only
 * once dqlite has answered. A replica that becomes leader builds its
 * working copy from dqlite (schema and rows) before it serves.
 *
 * Why not run the engine's statements on dqlite itself: dqlite 1.11.1 has
 * no in-process SQL, so each of a batch's dozens of statements would be a
 * round trip to the node (~75 us here), reads included, and the engine's
 * ~520 sqlite3 call sites would move to a new statement layer; measured
 * (bench_dqlite_batch), one script a batch is 7x faster at 32 adds. */
#ifndef C10DS_REPLICA_MIRROR_H
#define C10DS_REPLICA_MIRROR_H

#include "c10d_time.h"

#include <sqlite3.h>
#include <stddef.h>

typedef struct c10ds_mirror c10ds_mirror;

/* Every call that can fail returns -1 (or NULL) and records why for
 * c10ds_failure() (failure.h). */

/* Connects to the dqlite node at address ("a.b.c.d:port" or "@name") and
 * opens database name there. Each later call waits timeout_ms at most. */
int c10ds_mirror_new(c10ds_mirror **out, const char *address, const char *name, c10d_ms timeout_ms);
void c10ds_mirror_free(c10ds_mirror *m);

/* Copies dqlite's schema, user_version and rows into h, an empty
 * database; tables named in skip (NULL-terminated) stay dqlite's own. */
int c10ds_mirror_load(c10ds_mirror *m, sqlite3 *h, const char *const *skip);

/* Runs a migration on dqlite, in one transaction that also sets
 * user_version: the leader migrates both copies, dqlite's first. */
int c10ds_mirror_migrate(c10ds_mirror *m, const char *sql, int user_version);

/* Copies h (schema, rows, user_version) into dqlite's database, which
 * must be empty: a replicated coordinator seeded from a single-node
 * database or an export. In transactions of a few MB; user_version is
 * set by the last, so a seed cut short is seen as one. */
int c10ds_mirror_seed(c10ds_mirror *m, sqlite3 *h);

/* Starts recording h's changes (every table with a primary key). */
int c10ds_mirror_track(c10ds_mirror *m, sqlite3 *h);

/* Sends what changed since the last call (or since track) to dqlite as
 * one transaction and waits for it to commit; nothing to send is 0 at
 * once. Call inside h's open transaction, before committing it locally.
 * On -1 the outcome in dqlite may be unknown (docs/replication.md): the
 * replica must stop serving and rebuild from dqlite. */
int c10ds_mirror_commit(c10ds_mirror *m);

/* What c10ds_mirror_commit would send (the statements, without BEGIN
 * and COMMIT), taken as it takes it: for the tests. A malloc'd string
 * ("" when nothing changed), or NULL. */
char *c10ds_mirror_script(c10ds_mirror *m);

/* A mirror with no node: track and script work, for the tests. */
c10ds_mirror *c10ds_mirror_offline(void);

/* The dqlite connection, for the replica's own queries (replicas table). */
struct c10ds_dq *c10ds_mirror_dq(c10ds_mirror *m);

#endif
