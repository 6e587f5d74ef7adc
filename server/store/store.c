#include "store/store.h"

#include "db/db.h"

#include "c10d_time.h"
#include "failure.h"
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int c10ds_store_init(c10ds_store *st, c10ds_db *db)
{
    memset(st, 0, sizeof *st);
    st->db = db;
    st->st_get = c10ds_db_prepare(db, "SELECT value FROM kv WHERE key = ?1");
    /* Neither reads the value (schema 13 keeps it out of the key's index):
     * existence is answered from the index, a length from the row's
     * header, without its overflow pages. */
    st->st_exists = c10ds_db_prepare(db, "SELECT 1 FROM kv WHERE key = ?1");
    st->st_size = c10ds_db_prepare(db, "SELECT length(value) FROM kv WHERE key = ?1");
    st->st_update =
        c10ds_db_prepare(db, "UPDATE kv SET value = ?2, updated_ms = ?3 WHERE key = ?1");
    st->st_insert = c10ds_db_prepare(db, "INSERT INTO kv(key, value, updated_ms) VALUES(?1,?2,?3)");
    st->st_delete = c10ds_db_prepare(db, "DELETE FROM kv WHERE key = ?1");
    /* Prefix queries are primary-key ranges: key >= prefix AND key < next,
     * where next is the smallest string greater than every key with the
     * prefix. Each has a second statement for a prefix with no such string
     * (the empty one, or all 0xff bytes): one statement with "?2 IS NULL
     * OR key < ?2" has SQLite plan the lower bound alone, and read from
     * the prefix to the end of the table (63 ms for 20 keys with a million
     * after them, where the bounded range takes 0.1 ms). */
    static const char *const range[2] = {"key >= ?1 AND key < ?2", "key >= ?1"};
    for (int i = 0; i < 2; i++) {
        char q[256];
        snprintf(q, sizeof q, "SELECT count(*) FROM kv WHERE %s", range[i]);
        st->st_count_range[i] = c10ds_db_prepare(db, q);
        snprintf(q, sizeof q, "SELECT total(length(key) + length(value)) FROM kv WHERE %s",
                 range[i]);
        st->st_bytes_range[i] = c10ds_db_prepare(db, q);
        snprintf(q, sizeof q, "SELECT key, length(value), updated_ms FROM kv WHERE %s ORDER BY "
                 "key LIMIT ?3", range[i]);
        st->st_list_range[i] = c10ds_db_prepare(db, q);
        /* Bounded by a LIMIT on the range (SQLite's DELETE ... LIMIT is a
         * compile-time option): a primary-key range all the same. */
        snprintf(q, sizeof q, "DELETE FROM kv WHERE key IN (SELECT key FROM kv WHERE %s LIMIT "
                 "?3)", range[i]);
        st->st_delete_range[i] = c10ds_db_prepare(db, q);
        if (!st->st_count_range[i] || !st->st_list_range[i] || !st->st_delete_range[i] ||
            !st->st_bytes_range[i]) {
            c10ds_store_fini(st);
            return -1;
        }
    }
    if (!st->st_get || !st->st_exists || !st->st_size || !st->st_update || !st->st_insert ||
        !st->st_delete) {
        c10ds_store_fini(st);
        return -1;
    }
    c10ds_store_recount(st);
    return 0;
}

void c10ds_store_fini(c10ds_store *st)
{
    sqlite3_finalize(st->st_get);
    sqlite3_finalize(st->st_exists);
    sqlite3_finalize(st->st_size);
    sqlite3_finalize(st->st_update);
    sqlite3_finalize(st->st_insert);
    sqlite3_finalize(st->st_delete);
    for (int i = 0; i < 2; i++) {
        sqlite3_finalize(st->st_count_range[i]);
        sqlite3_finalize(st->st_bytes_range[i]);
        sqlite3_finalize(st->st_list_range[i]);
        sqlite3_finalize(st->st_delete_range[i]);
    }
    memset(st, 0, sizeof *st);
}

static int64_t count_range(c10ds_store *st, const char *prefix);

void c10ds_store_recount(c10ds_store *st)
{
    st->num_keys = count_range(st, "");
}

static void bind_text(sqlite3_stmt *s, int i, const char *t)
{
    sqlite3_bind_text(s, i, t, -1, SQLITE_STATIC);
}

static void bind_blob(sqlite3_stmt *s, int i, const void *v, size_t n)
{
    /* A zero-length value must still be a BLOB, not NULL (NOT NULL column). */
    if (n == 0)
        sqlite3_bind_zeroblob(s, i, 0);
    else
        sqlite3_bind_blob64(s, i, v, n, SQLITE_STATIC);
}

int c10ds_store_get(c10ds_store *st, const char *key, const void **val, size_t *len)
{
    sqlite3_stmt *s = st->st_get;
    sqlite3_reset(s);
    bind_text(s, 1, key);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *val = sqlite3_column_blob(s, 0);
        *len = (size_t)sqlite3_column_bytes(s, 0);
        return 1;
    }
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : -1;
}

void c10ds_store_release(c10ds_store *st)
{
    sqlite3_reset(st->st_get);
    sqlite3_clear_bindings(st->st_get);
}

/* Runs a one-key statement that yields at most one integer. */
static int lookup_int(sqlite3_stmt *s, const char *key, int64_t *out)
{
    sqlite3_reset(s);
    bind_text(s, 1, key);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

int c10ds_store_exists(c10ds_store *st, const char *key)
{
    int64_t one;
    return lookup_int(st->st_exists, key, &one);
}

int c10ds_store_size(c10ds_store *st, const char *key, size_t *len)
{
    int64_t n = 0;
    int rc = lookup_int(st->st_size, key, &n);
    if (rc == 1)
        *len = (size_t)n;
    return rc;
}

static c10d_status db_error(c10ds_store *st, const char *what, const char *key)
{
    c10ds_failed_db(st->db->h, C10D_ERROR, "database error during %s of key '%s'", what, key);
    c10ds_error("%s", c10ds_failure());
    return C10D_ERROR;
}

c10d_status c10ds_store_set(c10ds_store *st, const char *key, const void *val, size_t len)
{
    /* UPDATE first, INSERT when nothing matched: one statement for an
     * existing key, and we learn whether the key is new (for num_keys). */
    int64_t now = c10d_steady_wall_ms();
    sqlite3_stmt *s = st->st_update;
    sqlite3_reset(s);
    bind_text(s, 1, key);
    bind_blob(s, 2, val, len);
    sqlite3_bind_int64(s, 3, now);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return db_error(st, "set", key);
    if (sqlite3_changes(st->db->h) == 0) {
        s = st->st_insert;
        sqlite3_reset(s);
        bind_text(s, 1, key);
        bind_blob(s, 2, val, len);
        sqlite3_bind_int64(s, 3, now);
        rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc != SQLITE_DONE)
            return db_error(st, "set", key);
        st->num_keys++;
    }
    st->bytes_written += strlen(key) + len;
    if (st->on_write)
        st->on_write(st->on_write_arg, key);
    return C10D_OK;
}

/* Room for a counter's text: a decimal int64 (20 bytes at most) with the
 * blanks and sign strtoll accepts; a longer value is no counter. */
#define COUNTER_BUF 32

/* TCPStore keeps counters as decimal text; so do we, so that get() of a
 * counter reads the same as there. */
static int parse_int64(const void *v, size_t n, int64_t *out)
{
    char buf[COUNTER_BUF];
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (errno || *end || end == buf)
        return -1;
    *out = x;
    return 0;
}

c10d_status c10ds_store_add(c10ds_store *st, const char *key, int64_t delta, int64_t *result)
{
    const void *v;
    size_t n;
    int64_t cur = 0;
    /* The size first: a 30-byte add naming a 16 MiB value must not read it. */
    int rc = c10ds_store_size(st, key, &n);
    if (rc == 1 && n >= COUNTER_BUF)
        return c10ds_failed(C10D_EINVAL,
                            "add: key '%s' holds %zu bytes that are not a decimal integer", key, n);
    if (rc >= 0)
        rc = c10ds_store_get(st, key, &v, &n);
    if (rc < 0)
        return db_error(st, "add", key);
    if (rc == 1 && parse_int64(v, n, &cur) != 0) {
        c10ds_store_release(st);
        return c10ds_failed(C10D_EINVAL,
                            "add: key '%s' holds %zu bytes that are not a decimal integer", key, n);
    }
    c10ds_store_release(st);
    int64_t next;
    if (__builtin_add_overflow(cur, delta, &next))
        return c10ds_failed(C10D_EINVAL, "add: %" PRId64 " + %" PRId64 " overflows key '%s'", cur,
                            delta, key);
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%" PRId64, next);
    c10d_status s = c10ds_store_set(st, key, buf, (size_t)len);
    if (s == C10D_OK)
        *result = next;
    return s;
}

static void *dup_bytes(const void *v, size_t n)
{
    void *p = malloc(n + 1);
    if (p) {
        if (n)
            memcpy(p, v, n);
        ((char *)p)[n] = '\0';
    }
    return p;
}

c10d_status c10ds_store_compare_set(c10ds_store *st, const char *key, const void *expected,
                                    size_t elen, const void *desired, size_t dlen, void **cur,
                                    size_t *clen)
{
    const void *v;
    size_t n;
    int rc = c10ds_store_get(st, key, &v, &n);
    if (rc < 0)
        return db_error(st, "compare_set", key);
    if (rc == 0 && elen > 0) {
        /* TCPStore answers `expected` here, as if it had stored: a caller
         * cannot tell that nothing happened. We say so. */
        return c10ds_failed(C10D_ENOTFOUND,
                            "compare_set: key '%s' does not exist (expected a value of %zu "
                            "bytes); nothing stored",
                            key, elen);
    }
    int match = rc == 0 || (n == elen && (n == 0 || memcmp(v, expected, n) == 0));
    if (!match) {
        *cur = dup_bytes(v, n);
        *clen = n;
        c10ds_store_release(st);
        return *cur ? C10D_OK
                    : c10ds_failed(C10D_ENOMEM, "compare_set: out of memory for %zu bytes", n);
    }
    c10ds_store_release(st);
    c10d_status s = c10ds_store_set(st, key, desired, dlen);
    if (s != C10D_OK)
        return s;
    *cur = dup_bytes(desired, dlen);
    *clen = dlen;
    return *cur ? C10D_OK
                : c10ds_failed(C10D_ENOMEM, "compare_set: out of memory for %zu bytes", dlen);
}

c10d_status c10ds_store_append(c10ds_store *st, const char *key, const void *val, size_t len,
                               uint64_t max_len)
{
    const void *v = NULL;
    size_t n = 0;
    /* The size first: a refused append reads nothing. */
    int rc = c10ds_store_size(st, key, &n);
    if (rc < 0)
        return db_error(st, "append", key);
    if (rc == 0)
        n = 0;
    if ((uint64_t)n + len > max_len)
        return c10ds_failed(C10D_ETOOBIG,
                            "append: key '%s' would grow to %zu bytes, over the coordinator's "
                            "limit of %" PRIu64 " (--max-value-bytes)",
                            key, n + len, max_len);
    if (rc == 1 && (rc = c10ds_store_get(st, key, &v, &n)) != 1) /* 0: cannot be, we write */
        return db_error(st, "append", key);
    /* Concatenate here rather than with SQL's ||, which treats BLOBs as
     * text. */
    char *buf = malloc(n + len + 1);
    if (!buf) {
        c10ds_store_release(st);
        return c10ds_failed(C10D_ENOMEM, "append: out of memory for %zu bytes", n + len);
    }
    if (n)
        memcpy(buf, v, n);
    c10ds_store_release(st);
    if (len)
        memcpy(buf + n, val, len);
    c10d_status s = c10ds_store_set(st, key, buf, n + len);
    free(buf);
    return s;
}

c10d_status c10ds_store_delete(c10ds_store *st, const char *key, int *deleted)
{
    sqlite3_stmt *s = st->st_delete;
    sqlite3_reset(s);
    bind_text(s, 1, key);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return db_error(st, "delete", key);
    *deleted = sqlite3_changes(st->db->h) > 0;
    st->num_keys -= *deleted;
    return C10D_OK;
}

/* The smallest string greater than every string starting with prefix:
 * increment the last byte that is not 0xff, dropping what follows. Returns
 * 0 (no bound) when every byte is 0xff or the prefix is empty. */
static int prefix_upper_bound(const char *prefix, char *out)
{
    size_t n = strlen(prefix);
    memcpy(out, prefix, n + 1);
    while (n > 0) {
        unsigned char c = (unsigned char)out[n - 1];
        if (c != 0xff) {
            out[n - 1] = (char)(c + 1);
            out[n] = '\0';
            return 1;
        }
        out[--n] = '\0';
    }
    return 0;
}

/* Picks the statement of pair for [prefix, its upper bound), resets it and
 * binds the range: pair[0] where the prefix has an upper bound, pair[1]
 * (no upper bound) where it has none. *upper (free it after the statement
 * ran) is as long as the prefix: a prefix of any length gets its bound (a
 * fixed 8 KiB buffer once left longer ones unbounded, and num_keys counted
 * every key after them). NULL: out of memory. */
static sqlite3_stmt *bind_range(sqlite3_stmt *const pair[2], const char *prefix, char **upper)
{
    if (!(*upper = malloc(strlen(prefix) + 1)))
        return NULL;
    int bounded = prefix_upper_bound(prefix, *upper);
    sqlite3_stmt *s = pair[bounded ? 0 : 1];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    bind_text(s, 1, prefix);
    if (bounded)
        bind_text(s, 2, *upper);
    return s;
}

/* The one number a statement of stmts gives for prefix's range, or -1. */
static int64_t range_number(sqlite3_stmt *const stmts[2], const char *prefix)
{
    char *upper;
    sqlite3_stmt *s = bind_range(stmts, prefix, &upper);
    if (!s)
        return -1;
    int64_t n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_reset(s);
    free(upper);
    return n;
}

static int64_t count_range(c10ds_store *st, const char *prefix)
{
    return range_number(st->st_count_range, prefix);
}

int64_t c10ds_store_bytes(c10ds_store *st, const char *prefix)
{
    return range_number(st->st_bytes_range, prefix);
}

int64_t c10ds_store_delete_prefix(c10ds_store *st, const char *prefix, int64_t limit)
{
    char *upper;
    sqlite3_stmt *s;
    if (!prefix || !*prefix || !(s = bind_range(st->st_delete_range, prefix, &upper)))
        return -1;
    sqlite3_bind_int64(s, 3, limit < 0 ? -1 : limit); /* LIMIT -1: none */
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    free(upper);
    if (rc != SQLITE_DONE) {
        c10ds_error("database error deleting the keys under '%s': %s", prefix,
                    sqlite3_errmsg(st->db->h));
        return -1;
    }
    int64_t n = sqlite3_changes64(st->db->h);
    st->num_keys -= n;
    return n;
}

int64_t c10ds_store_count(c10ds_store *st, const char *prefix)
{
    if (!prefix || !*prefix)
        return st->num_keys;
    return count_range(st, prefix);
}

int64_t c10ds_store_list(c10ds_store *st, const char *prefix, uint64_t limit, c10ds_list_fn fn,
                         void *arg, int *more)
{
    char *upper;
    sqlite3_stmt *s = bind_range(st->st_list_range, prefix ? prefix : "", &upper);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 3, (sqlite3_int64)limit + 1); /* one more: were any left out? */
    int64_t n = 0;
    int rc;
    *more = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if ((uint64_t)n == limit) {
            *more = 1;
            break;
        }
        fn(arg, (const char *)sqlite3_column_text(s, 0), (uint64_t)sqlite3_column_int64(s, 1),
           sqlite3_column_int64(s, 2));
        n++;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        n = -1;
    sqlite3_reset(s);
    free(upper);
    return n;
}
