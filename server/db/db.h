/* The coordinator's SQLite database: the system of record.
 *
 * One writer connection, WAL, synchronous=NORMAL (a committed transaction
 * survives the coordinator's crash; it is fsynced at checkpoints), many
 * updates per transaction (the engine's group commit). A lock file beside
 * the database keeps a second coordinator off the same file. */
#ifndef C10DS_DB_H
#define C10DS_DB_H

#include <sqlite3.h>
#include <stddef.h>

typedef struct c10ds_db {
    sqlite3 *h;
    char *path;
    int lock_fd; /* "<path>.lock": who holds it; -1 for :memory: */
    int file_fd; /* the database file itself, flocked: the same file by any path */
    int schema_version;
    /* A leading replica's: every commit is first replicated through it
     * (replica_mirror.h); when that fails, on_lost is called (and does
     * not return: the replica stops serving). NULL in the single-node mode. */
    struct c10ds_mirror *mirror;
    void (*on_lost)(const char *why);
} c10ds_db;

/* Opens (creating if needed) and migrates the database at path. On failure
 * returns -1, the message for people in c10ds_failure() (failure.h). */
int c10ds_db_open(c10ds_db *db, const char *path);
void c10ds_db_close(c10ds_db *db);

/* A leading replica's database: in memory, built from the replicated one
 * (m), migrated on both, then every commit replicated first. Tables
 * named in skip are the replicas' own, left in dqlite. An empty
 * replicated database is first seeded from seed (a database file) when
 * given. -1 on failure (c10ds_failure() says why). */
int c10ds_db_open_replicated(c10ds_db *db, struct c10ds_mirror *m, const char *const *skip,
                             const char *seed, void (*on_lost)(const char *why));

/* Brings the schema to the newest version, one migration per transaction.
 * Refuses a database newer than this program. Exposed for the tests.
 * -1 on failure (c10ds_failure() says why). */
int c10ds_db_migrate(sqlite3 *h, int *version);

int c10ds_db_begin(c10ds_db *db);
/* Commits; on failure logs, rolls back and returns -1, SQLite's message
 * for the commit (as it was before the rollback) in c10ds_failure(). */
int c10ds_db_commit(c10ds_db *db);
/* Copies the WAL into the database file and truncates the WAL to zero
 * bytes (outside a transaction). SQLite's own checkpoints start at 4 MB
 * of WAL and never shrink the file: after a full disk it would fill the
 * disk again. Returns 0, or -1 (logged). */
int c10ds_db_checkpoint(c10ds_db *db);
void c10ds_db_rollback(c10ds_db *db);

/* Prepares a statement once; returns NULL (and logs) on failure. */
sqlite3_stmt *c10ds_db_prepare(c10ds_db *db, const char *sql);

#endif
