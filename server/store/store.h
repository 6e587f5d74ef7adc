/* The key-value store's logic over the database: what set, get, add,
 * compare_set, append, delete, count and list mean, independent of the wire.
 * Runs on the engine thread, inside the engine's transaction. */
#ifndef C10DS_STORE_H
#define C10DS_STORE_H

#include "db/db.h"

#include <c10d/errors.h>
#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_store {
    c10ds_db *db;
    sqlite3_stmt *st_get, *st_exists, *st_size, *st_update, *st_insert, *st_delete;
    /* Prefix queries, each twice: [prefix, upper) where the prefix has an
     * upper bound, [prefix, end) where it has none (store.c, bind_range). */
    sqlite3_stmt *st_count_range[2], *st_list_range[2], *st_delete_range[2], *st_bytes_range[2];
    int64_t num_keys; /* cached: num_keys is O(1), as in TCPStore */
    uint64_t bytes_written; /* keys and values set, ever (a batch's share bounds it, engine.c) */
    /* Called after every write to a key, so parked readers can be woken. */
    void (*on_write)(void *arg, const char *key);
    void *on_write_arg;
} c10ds_store;

int c10ds_store_init(c10ds_store *st, c10ds_db *db);
void c10ds_store_fini(c10ds_store *st);
/* Re-reads the cached key count (after a rolled-back transaction). */
void c10ds_store_recount(c10ds_store *st);

/* Looks key up. 1 = found: val and len point into SQLite's memory, valid until
 * c10ds_store_release(); 0 = missing; -1 = database error. */
int c10ds_store_get(c10ds_store *st, const char *key, const void **val, size_t *len);
void c10ds_store_release(c10ds_store *st);
/* Neither reads the value, however large: 1 = the key exists (*len: its
 * value's size), 0 = missing, -1 = database error. */
int c10ds_store_exists(c10ds_store *st, const char *key);
int c10ds_store_size(c10ds_store *st, const char *key, size_t *len);

/* Writers: C10D_OK or an error, its message for people in c10ds_failure()
 * (failure.h; a database error is logged too). */
c10d_status c10ds_store_set(c10ds_store *st, const char *key, const void *val, size_t len);
c10d_status c10ds_store_add(c10ds_store *st, const char *key, int64_t delta, int64_t *result);
/* On C10D_OK, cur and clen hold the value after the call (malloc'd; free it). */
c10d_status c10ds_store_compare_set(c10ds_store *st, const char *key, const void *expected,
                                    size_t elen, const void *desired, size_t dlen, void **cur,
                                    size_t *clen);
c10d_status c10ds_store_append(c10ds_store *st, const char *key, const void *val, size_t len,
                               uint64_t max_len);
c10d_status c10ds_store_delete(c10ds_store *st, const char *key, int *deleted);

/* Deletes up to limit keys starting with prefix (a non-empty one; limit
 * < 0: all of them), in byte order: a finished run's store (server/groups/runs.c).
 * Returns how many went, or -1 on a database error. Parked requests are
 * not woken: they wait for keys that are missing, and still are. */
int64_t c10ds_store_delete_prefix(c10ds_store *st, const char *prefix, int64_t limit);

/* Keys starting with prefix (NULL or "" = all). */
int64_t c10ds_store_count(c10ds_store *st, const char *prefix);
/* Bytes of the keys under prefix and their values, or -1 (one pass over
 * the range's index: lengths are read off each row's header). */
int64_t c10ds_store_bytes(c10ds_store *st, const char *prefix);
typedef void (*c10ds_list_fn)(void *arg, const char *key, uint64_t size, int64_t updated_ms);
/* Calls fn for up to limit keys in byte order; returns the number listed,
 * or -1 on error. *more = 1 if keys were left out. */
int64_t c10ds_store_list(c10ds_store *st, const char *prefix, uint64_t limit, c10ds_list_fn fn,
                         void *arg, int *more);

#endif
