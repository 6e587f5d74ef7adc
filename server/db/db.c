#include "db/db.h"

#include "config.h"
#include "failure.h"
#include "log.h"
#include "replica/replica_mirror.h"
#include "db/schema.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Why the lock file beside the database could not be made, in terms of
 * what the operator named: the database's directory (missing, or not
 * writable by this user), where the lock file is only the first thing
 * written. */
static int lock_refused(const char *path, const char *lock_path, int err)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    struct stat st;
    if (err == ENOENT && stat(dir, &st) != 0)
        return c10ds_failed(C10D_ERROR, "cannot use database %s: its directory %s does not "
                            "exist (create it, or give another --db)", path, dir);
    if (err == EACCES || err == EROFS || err == EPERM)
        return c10ds_failed(C10D_ERROR, "cannot use database %s: its directory %s is not "
                            "writable by this user (uid %d)%s: c10d-coord writes the database, "
                            "its WAL and a lock file there; give a directory it may write "
                            "(--db), or change the directory's owner", path, dir, (int)getuid(),
                            err == EROFS ? " (a read-only file system)" : "");
    return c10ds_failed(C10D_ERROR, "cannot create %s beside database %s: %s", lock_path, path,
                        strerror(err));
}

/* Takes an exclusive flock on "<path>.lock" and records who holds it, so
 * that a second coordinator on the same database is refused with a message
 * that names the first. flock (not SQLite's own locks) because WAL mode
 * lets several processes write, which is exactly what must not happen.
 * The path is resolved first (a symlink finds the holder's lock file);
 * a hard link is caught by take_file_lock. */
static int take_lock(const char *path, int *fd_out)
{
    char lock_path[PATH_MAX + 8], real[PATH_MAX];
    snprintf(lock_path, sizeof lock_path, "%s.lock", realpath(path, real) ? real : path);
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return lock_refused(path, lock_path, errno);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char holder[256] = "";
        ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
        holder[n > 0 ? n : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        c10ds_failed(C10D_ERROR,
                     "database %s is in use by another c10d-coord (%s); stop it first or use "
                     "another --db",
                     path, holder[0] ? holder : "holder unknown");
        close(fd);
        return -1;
    }
    char host[128] = "?", me[256];
    gethostname(host, sizeof host - 1);
    int n = snprintf(me, sizeof me, "pid %d on host %s\n", (int)getpid(), host);
    if (ftruncate(fd, 0) == 0 && pwrite(fd, me, (size_t)n, 0) < 0)
        c10ds_warn("cannot record the holder in %s: %s", lock_path, strerror(errno));
    *fd_out = fd;
    return 0;
}

/* An exclusive flock on the database file itself: one coordinator per
 * file, whatever path (hard link, symlink, bind mount) names it. Two
 * coordinators on one file through two names corrupt it (each keeps its
 * own WAL, "<name>-wal"). On Linux flock and SQLite's POSIX locks do not
 * meet; the descriptor stays open until after sqlite3_close, since
 * closing a descriptor of the file would drop SQLite's POSIX locks. */
static int take_file_lock(const char *path, int *fd_out)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return c10ds_failed(C10D_ERROR, "cannot open database %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        struct stat sb;
        fstat(fd, &sb);
        c10ds_failed(C10D_ERROR, "database %s is in use by another c10d-coord through another "
                     "path to the same file (device %llu, inode %llu: a hard link or a bind "
                     "mount); stop it first or use another --db", path,
                     (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino);
        close(fd);
        return -1;
    }
    *fd_out = fd;
    return 0;
}

/* Runs sql; on failure records SQLite's message alone (the callers add
 * what they were doing). */
static int exec(sqlite3 *h, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK) {
        c10ds_failed(C10D_ERROR, "%s", msg ? msg : sqlite3_errmsg(h));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

/* SQLite's quick_check (every page and index entry, not the index
 * contents against their tables; linear in the file's size). A damaged
 * file must not be served: it answers existing keys "no such key" and
 * fails writes. The first problem found is the detail recorded. */
static int check_intact(sqlite3 *h)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(h, "PRAGMA quick_check(1)", -1, &s, NULL) != SQLITE_OK)
        return c10ds_failed(C10D_ERROR, "%s", sqlite3_errmsg(h));
    int rc = sqlite3_step(s), ok = 0;
    if (rc == SQLITE_ROW) {
        const char *r = (const char *)sqlite3_column_text(s, 0);
        ok = r && strcmp(r, "ok") == 0;
        if (!ok)
            c10ds_failed(C10D_ERROR, "%s", r ? r : "no answer from quick_check");
    } else {
        c10ds_failed(C10D_ERROR, "%s", sqlite3_errmsg(h));
    }
    sqlite3_finalize(s);
    return ok ? 0 : -1;
}

static int user_version(sqlite3 *h)
{
    sqlite3_stmt *st;
    int v = -1;
    if (sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    return v;
}

/* Migrates h; a leading replica migrates the replicated copy first, each
 * step in a transaction of its own on both. */
static int migrate(sqlite3 *h, c10ds_mirror *mirror, int *version)
{
    int v = user_version(h);
    if (v < 0)
        return c10ds_failed_db(h, C10D_ERROR, "cannot read the schema version");
    if (v > c10ds_migration_count)
        return c10ds_failed(C10D_ERROR,
                            "database schema version %d is newer than this c10d-coord knows "
                            "(%d); run a newer c10d-coord",
                            v, c10ds_migration_count);
    for (int i = v; i < c10ds_migration_count; i++) {
        const c10ds_migration *m = &c10ds_migrations[i];
        char sql[128];
        if (mirror && c10ds_mirror_migrate(mirror, m->sql, m->version) != 0)
            return c10ds_failed(C10D_ERROR, "migration %s failed: %s", m->name, c10ds_failure());
        if (exec(h, "BEGIN IMMEDIATE") != 0 || exec(h, m->sql) != 0) {
            sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
            return c10ds_failed(C10D_ERROR, "migration %s failed: %s", m->name, c10ds_failure());
        }
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d; COMMIT", m->version);
        if (exec(h, sql) != 0) {
            sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
            return c10ds_failed(C10D_ERROR, "migration %s failed to commit: %s", m->name,
                                c10ds_failure());
        }
        if (v > 0) /* an existing database upgraded: worth a line */
            c10ds_info("database migrated to schema version %d (%s)", m->version, m->name);
    }
    *version = c10ds_migration_count;
    return 0;
}

int c10ds_db_migrate(sqlite3 *h, int *version)
{
    return migrate(h, NULL, version);
}

/* Says that the database at path is damaged, with why (SQLite's words,
 * on one line) and what to do: the same message whichever step found it.
 * Garbage over the header reads "file is not a database" when WAL mode is
 * set, a damaged first page "malformed" there too, a later page only in
 * quick_check; an operator needs the same advice for all three. */
static int report_damaged(const char *path, const char *why)
{
    char msg[C10DS_FAILURE_MAX];
    snprintf(msg, sizeof msg, "database %s is damaged (%s): restore it from a backup or move "
             "it aside and start on a new one (docs/operations.md, \"A damaged database\")",
             path, why);
    for (char *p = msg; *p; p++)
        if (*p == '\n')
            *p = ' ';
    return c10ds_failed(C10D_ERROR, "%s", msg);
}

/* Whether SQLite's last error on h was one of a damaged file. */
static int damaged(sqlite3 *h)
{
    int rc = sqlite3_errcode(h) & 0xff;
    return rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT;
}

int c10ds_db_open(c10ds_db *db, const char *path)
{
    memset(db, 0, sizeof *db);
    db->lock_fd = db->file_fd = -1;
    int memory = strcmp(path, ":memory:") == 0;
    if (!memory && (take_lock(path, &db->lock_fd) != 0 ||
                    take_file_lock(path, &db->file_fd) != 0)) {
        c10ds_db_close(db);
        return -1;
    }
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &db->h, flags, NULL) != SQLITE_OK) {
        c10ds_failed_db(db->h, C10D_ERROR, "cannot open database %s", path);
        goto fail;
    }
    sqlite3_busy_timeout(db->h, C10DS_DB_BUSY_TIMEOUT_MS);
    /* WAL + NORMAL: commits are atomic and survive a process crash; the
     * fsync happens at checkpoint time, off the commit path. */
    if (exec(db->h, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                    "PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY") != 0) {
        if (damaged(db->h))
            report_damaged(path, c10ds_failure());
        else
            c10ds_failed(C10D_ERROR, "cannot configure database %s: %s", path, c10ds_failure());
        goto fail;
    }
    if (check_intact(db->h) != 0) {
        report_damaged(path, c10ds_failure());
        goto fail;
    }
    if (c10ds_db_migrate(db->h, &db->schema_version) != 0) {
        c10ds_failed(C10D_ERROR, "database %s: %s", path, c10ds_failure());
        goto fail;
    }
    db->path = strdup(path);
    return 0;
fail:
    c10ds_db_close(db);
    return -1;
}

/* The number of tables in h, or -1. */
static int count_tables(sqlite3 *h)
{
    sqlite3_stmt *st = NULL;
    int n = -1;
    if (sqlite3_prepare_v2(h, "SELECT count(*) FROM sqlite_master WHERE type = 'table'", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* An empty replicated database starts from path's content (a single-node
 * database or an export), copied into h and then into dqlite. */
static int seed_from(sqlite3 *h, c10ds_mirror *m, const char *path)
{
    sqlite3 *src = NULL;
    if (sqlite3_open_v2(path, &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        c10ds_failed_db(src, C10D_ERROR, "--seed %s", path);
        sqlite3_close(src);
        return -1;
    }
    int v = user_version(src), intact = check_intact(src) == 0;
    if (!intact || v <= 0) {
        if (intact) /* but no schema of ours */
            c10ds_failed(C10D_ERROR, "--seed %s: not a c10d-coord database (no schema version)",
                         path);
        else
            c10ds_failed(C10D_ERROR, "--seed %s: %s", path, c10ds_failure());
        sqlite3_close(src);
        return -1;
    }
    sqlite3_backup *b = sqlite3_backup_init(h, "main", src, "main");
    int rc = b ? sqlite3_backup_step(b, -1) : SQLITE_ERROR;
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE) {
        c10ds_failed_db(h, C10D_ERROR, "--seed %s: copying it", path);
        sqlite3_close(src);
        return -1;
    }
    sqlite3_close(src);
    if (c10ds_mirror_seed(m, h) != 0)
        return c10ds_failed(C10D_ERROR, "--seed %s: %s", path, c10ds_failure());
    c10ds_info("the replicated database was seeded from %s (schema version %d)", path, v);
    return 0;
}

int c10ds_db_open_replicated(c10ds_db *db, c10ds_mirror *m, const char *const *skip,
                             const char *seed, void (*on_lost)(const char *why))
{
    memset(db, 0, sizeof *db);
    db->lock_fd = db->file_fd = -1;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    /* In memory: durability is the replicated log's (dqlite's raft), and
     * this copy is rebuilt from it each time a replica starts to lead. */
    if (sqlite3_open_v2(":memory:", &db->h, flags, NULL) != SQLITE_OK ||
        exec(db->h, "PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY") != 0) {
        c10ds_failed_db(db->h, C10D_ERROR, "cannot open the working copy");
        goto fail;
    }
    if (c10ds_mirror_load(m, db->h, skip) != 0) {
        c10ds_failed(C10D_ERROR, "replicated database: %s", c10ds_failure());
        goto fail;
    }
    int empty = user_version(db->h) == 0, tables = count_tables(db->h);
    if (empty && tables > 0) {
        c10ds_failed(C10D_ERROR, "the replicated database holds %d tables but no schema "
                     "version: a --seed cut short? Stop every replica, remove their "
                     "--data-dir, and start again", tables);
        goto fail;
    }
    if (seed && !empty)
        c10ds_warn("--seed %s ignored: the replicated database is not empty", seed);
    if (seed && empty && seed_from(db->h, m, seed) != 0)
        goto fail;
    if (migrate(db->h, m, &db->schema_version) != 0 || c10ds_mirror_track(m, db->h) != 0) {
        c10ds_failed(C10D_ERROR, "replicated database: %s", c10ds_failure());
        goto fail;
    }
    db->path = strdup(":memory:");
    db->mirror = m;
    db->on_lost = on_lost;
    return 0;
fail:
    c10ds_db_close(db);
    return -1;
}

void c10ds_db_close(c10ds_db *db)
{
    if (db->h) {
        /* Closing the last connection checkpoints the WAL into the file. */
        if (sqlite3_close(db->h) != SQLITE_OK)
            c10ds_warn("closing the database: %s", sqlite3_errmsg(db->h));
        db->h = NULL;
    }
    if (db->file_fd >= 0) {
        close(db->file_fd); /* after sqlite3_close: see take_file_lock */
        db->file_fd = -1;
    }
    if (db->lock_fd >= 0) {
        close(db->lock_fd); /* releases the flock */
        db->lock_fd = -1;
    }
    free(db->path);
    db->path = NULL;
}

int c10ds_db_begin(c10ds_db *db)
{
    return sqlite3_exec(db->h, "BEGIN", NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

int c10ds_db_commit(c10ds_db *db)
{
    if (db->mirror && c10ds_mirror_commit(db->mirror) != 0) {
        /* Not answered, not kept: the batch's clients send it again to
         * whichever replica leads next, which has it or not as a whole. */
        c10ds_db_rollback(db);
        db->on_lost(c10ds_failure());
    }
    if (sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
        return 0;
    /* SQLite's words, recorded before the rollback (which replaces them
     * with its own): the engine quotes them to every request of the batch */
    c10ds_failed(C10D_ERROR, "%s", sqlite3_errmsg(db->h));
    c10ds_error("commit failed: %s", c10ds_failure());
    c10ds_db_rollback(db);
    return -1;
}

int c10ds_db_checkpoint(c10ds_db *db)
{
    const char *file = db->h ? sqlite3_db_filename(db->h, "main") : NULL;
    if (!file || !*file) /* in memory (a replica's too): no WAL */
        return 0;
    /* Never waits: an outside reader (an online backup with sqlite3's
     * .backup) would otherwise hold the engine for the busy timeout, every
     * time. Busy now, it is tried again at the next one. */
    sqlite3_busy_timeout(db->h, 0);
    int rc = sqlite3_wal_checkpoint_v2(db->h, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    sqlite3_busy_timeout(db->h, C10DS_DB_BUSY_TIMEOUT_MS);
    if (rc == SQLITE_OK)
        return 0;
    if (rc == SQLITE_BUSY)
        c10ds_debug("checkpointing the database's WAL: busy (a reader); next time");
    else
        c10ds_warn("checkpointing the database's WAL: %s", sqlite3_errmsg(db->h));
    return -1;
}

void c10ds_db_rollback(c10ds_db *db)
{
    if (!sqlite3_get_autocommit(db->h))
        sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

sqlite3_stmt *c10ds_db_prepare(c10ds_db *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v3(db->h, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
        c10ds_error("cannot prepare '%s': %s", sql, sqlite3_errmsg(db->h));
        return NULL;
    }
    return st;
}
