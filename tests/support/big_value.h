/* A 16 MiB value among 1,000 one-byte ones, and SQLite's largest
 * allocation: whether a statement read the big value (the store's and the
 * engine's unit suites). */
#ifndef C10D_TEST_BIG_VALUE_H
#define C10D_TEST_BIG_VALUE_H

#include "store/store.h"

#include <sqlite3.h>

#define BIG_VALUE (16 << 20)

/* SQLite's largest single allocation since the last call: reading a
 * value allocates its size at once, so this says whether a statement read
 * a large value. */
int largest_sqlite_alloc(void);

/* 1,000 one-byte values around a 16 MiB one, under "k0500b". */
void store_a_big_value_among_small_ones(c10ds_store *s, sqlite3 *h);

#endif
