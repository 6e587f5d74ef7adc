#include "big_value.h"

#include <check.h>
#include <stdlib.h>

int largest_sqlite_alloc(void)
{
    int cur, high;
    sqlite3_status(SQLITE_STATUS_MALLOC_SIZE, &cur, &high, 1);
    return high;
}

void store_a_big_value_among_small_ones(c10ds_store *s, sqlite3 *h)
{
    ck_assert_int_eq(sqlite3_exec(h, "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 "
                                     "FROM c WHERE i < 999) INSERT INTO kv(key, value, "
                                     "updated_ms) SELECT printf('k%04d', i), x'00', 0 FROM c",
                                  NULL, NULL, NULL), SQLITE_OK);
    c10ds_store_recount(s);
    char *v = calloc(1, BIG_VALUE);
    ck_assert_int_eq(c10ds_store_set(s, "k0500b", v, BIG_VALUE), C10D_OK);
    free(v);
    largest_sqlite_alloc();
}
