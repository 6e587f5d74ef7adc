/* The leading replica's working copy and its mirror in dqlite
 * (server/replica/replica_mirror.c): a batch's changes, as the script sent to
 * dqlite, rebuild the same rows byte for byte and type for type on the
 * real schema; and through a real dqlite node, a replicated database
 * written by one working copy is what the next one loads. */
#include "db/db.h"
#include "replica/dqlite_wire.h"
#include "dqlite_nodes.h"
#include "failure.h"
#include "replica/replica_mirror.h"
#include "db/schema.h"

#include "check_main.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sqlite3 *new_db(void)
{
    sqlite3 *h;
    int version;
    ck_assert_int_eq(sqlite3_open(":memory:", &h), SQLITE_OK);
    ck_assert_msg(c10ds_db_migrate(h, &version) == 0, "%s", c10ds_failure());
    return h;
}

static void exec_ok(sqlite3 *h, const char *sql)
{
    char *msg = NULL;
    ck_assert_msg(sqlite3_exec(h, sql, NULL, NULL, &msg) == SQLITE_OK, "%s: %s", sql,
                  msg ? msg : "?");
}

/* Every table's rows, each value as its type and the hex of its bytes
 * (as text, for numbers), sorted: two databases with the same dump hold
 * the same rows. */
static char *dump(sqlite3 *h)
{
    size_t cap = 1 << 16, len = 0;
    char *out = calloc(1, cap);
    sqlite3_stmt *tables;
    ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT name FROM sqlite_master WHERE type = 'table' "
                                           "AND name NOT LIKE 'sqlite%' ORDER BY name",
                                        -1, &tables, NULL), SQLITE_OK);
    while (sqlite3_step(tables) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(tables, 0);
        char sql[2048] = "SELECT ";
        sqlite3_stmt *cols, *rows;
        char q[256];
        snprintf(q, sizeof q, "SELECT name FROM pragma_table_info('%s')", t);
        ck_assert_int_eq(sqlite3_prepare_v2(h, q, -1, &cols, NULL), SQLITE_OK);
        for (int i = 0; sqlite3_step(cols) == SQLITE_ROW; i++) {
            char part[128];
            snprintf(part, sizeof part, "%stypeof(\"%s\") || ':' || hex(\"%s\")",
                     i ? " || ',' || " : "", sqlite3_column_text(cols, 0),
                     sqlite3_column_text(cols, 0));
            strcat(sql, part);
        }
        sqlite3_finalize(cols);
        char tail[128];
        snprintf(tail, sizeof tail, " AS r FROM \"%s\" ORDER BY r", t);
        strcat(sql, tail);
        ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &rows, NULL), SQLITE_OK);
        while (sqlite3_step(rows) == SQLITE_ROW) {
            const char *r = (const char *)sqlite3_column_text(rows, 0);
            size_t need = strlen(t) + strlen(r) + 4;
            if (len + need >= cap)
                out = realloc(out, cap = 2 * (cap + need));
            len += (size_t)sprintf(out + len, "%s: %s\n", t, r);
        }
        sqlite3_finalize(rows);
    }
    sqlite3_finalize(tables);
    return out;
}

static void same_rows(sqlite3 *a, sqlite3 *b)
{
    char *da = dump(a), *db = dump(b);
    ck_assert_str_eq(da, db);
    free(da);
    free(db);
}

/* Writes what a batch writes, with values that a careless rendering as
 * SQL text would change: quotes, non-ASCII and control bytes in text, NUL
 * bytes in blobs, an empty blob, floats that need 17 digits, infinity. */
static void write_awkward_rows(sqlite3 *h)
{
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(h, "INSERT INTO kv(key, updated_ms, value) VALUES (?, ?, ?)",
                                        -1, &st, NULL), SQLITE_OK);
    static const char *keys[] = {"plain", "it's \"quoted\"", "caf\xc3\xa9 \xe2\x9c\x93",
                                 "tab\there\nnewline", "back\\slash%_"};
    static const unsigned char blob[] = {0, 1, 0x27, 0xff, 0, 'x'};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, keys[i], -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, i == 0 ? INT64_MIN : (int64_t)i * 1000000007LL);
        if (i == 1)
            sqlite3_bind_zeroblob(st, 3, 0); /* empty */
        else
            sqlite3_bind_blob(st, 3, blob, (int)sizeof blob - (int)i % 2, SQLITE_STATIC);
        ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
    }
    /* a float where an INTEGER column cannot make it one: it stays REAL */
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, "float", -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 2, 0.1 + 0.2);
    sqlite3_bind_blob(st, 3, blob, 1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    /* (no text with a NUL byte: dqlite's protocol carries text as C
     * strings, and the coordinator stores none: keys and names are) */
    ck_assert_int_eq(sqlite3_prepare_v2(h, "INSERT INTO meta(name, value) VALUES (?, ?)", -1, &st,
                                        NULL), SQLITE_OK);
    sqlite3_bind_text(st, 1, "ctrl\x01\x7f", -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 2, 0.1 + 0.2);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, "inf", -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 2, INFINITY);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, "whole float", -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 2, 3.0);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
}

/* Runs m's script for what changed on target (as dqlite would). */
static void replay(c10ds_mirror *m, sqlite3 *target)
{
    char *script = c10ds_mirror_script(m);
    ck_assert_msg(script != NULL, "%s", c10ds_failure());
    exec_ok(target, "BEGIN");
    exec_ok(target, script);
    exec_ok(target, "COMMIT");
    free(script);
}

START_TEST(a_batch_s_script_rebuilds_the_same_rows)
{
    sqlite3 *leader = new_db(), *copy = new_db();
    c10ds_mirror *m = c10ds_mirror_offline();
    ck_assert_msg(c10ds_mirror_track(m, leader) == 0, "%s", c10ds_failure());

    exec_ok(leader, "BEGIN");
    write_awkward_rows(leader);
    replay(m, copy);
    exec_ok(leader, "COMMIT");
    same_rows(leader, copy);
    /* the exact double, not its 15-digit quote() */
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(copy, "SELECT updated_ms = 0.1 + 0.2, typeof(updated_ms) "
                                              "FROM kv WHERE key = 'float'",
                                        -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(st, 0), 1);
    ck_assert_str_eq((const char *)sqlite3_column_text(st, 1), "real");
    sqlite3_finalize(st);

    /* updates (one column of several), deletes, and a savepoint rolled
     * back inside the batch (store_ops.c's multi_set does that) */
    exec_ok(leader, "BEGIN");
    exec_ok(leader, "UPDATE kv SET value = x'00ff' WHERE key = 'plain'");
    exec_ok(leader, "DELETE FROM kv WHERE key LIKE 'tab%'");
    exec_ok(leader, "UPDATE meta SET value = NULL WHERE name = 'inf'");
    exec_ok(leader, "SAVEPOINT s; INSERT INTO kv VALUES ('rolled back', 1, x'01'); "
                    "UPDATE kv SET updated_ms = 5 WHERE key = 'plain'; ROLLBACK TO s; RELEASE s");
    exec_ok(leader, "INSERT INTO kv VALUES ('added then deleted', 1, x'01')");
    exec_ok(leader, "DELETE FROM kv WHERE key = 'added then deleted'");
    char *script = c10ds_mirror_script(m);
    ck_assert_ptr_nonnull(script);
    ck_assert_ptr_null(strstr(script, "rolled back"));
    ck_assert_ptr_null(strstr(script, "added then deleted"));
    ck_assert_ptr_null(strstr(script, "'caf")); /* only the batch's rows, not the first's */
    exec_ok(copy, script);
    free(script);
    exec_ok(leader, "COMMIT");
    same_rows(leader, copy);

    /* a batch that reads only sends nothing */
    script = c10ds_mirror_script(m);
    ck_assert_str_eq(script, "");
    free(script);
    c10ds_mirror_free(m);
    sqlite3_close(leader);
    sqlite3_close(copy);
}
END_TEST

static void lost(const char *why)
{
    ck_abort_msg("the replicated commit failed: %s", why);
}

/* A leader's working copy over a real node: migrated on both, its
 * commits replicated; a second working copy (the next leader's) loads
 * the same rows and schema version, and migrating it again is nothing. */
START_TEST(the_next_leader_loads_what_the_last_one_committed)
{
    dq_node node;
    ck_assert_int_eq(dq_node_start(&node, 1, "mirror"), 0);
    c10ds_mirror *m1, *m2;
    ck_assert_msg(c10ds_mirror_new(&m1, node.addr, "c10d", 5000) == 0, "%s", c10ds_failure());
    static const char *const skip[] = {"theirs", NULL};
    ck_assert_int_eq(c10ds_dq_exec_sql(c10ds_mirror_dq(m1), "CREATE TABLE theirs (x)", NULL, 0,
                                       NULL, NULL), 0);
    c10ds_db a;
    ck_assert_msg(c10ds_db_open_replicated(&a, m1, skip, NULL, lost) == 0, "%s", c10ds_failure());
    ck_assert_int_eq(a.schema_version, C10D_TEST_SCHEMA_VERSION);
    ck_assert_int_eq(c10ds_db_begin(&a), 0);
    write_awkward_rows(a.h);
    ck_assert_int_eq(c10ds_db_commit(&a), 0);
    ck_assert_int_eq(c10ds_db_begin(&a), 0);
    exec_ok(a.h, "DELETE FROM kv WHERE key = 'plain'");
    ck_assert_int_eq(c10ds_db_commit(&a), 0);

    ck_assert_msg(c10ds_mirror_new(&m2, node.addr, "c10d", 5000) == 0, "%s", c10ds_failure());
    c10ds_db b;
    ck_assert_msg(c10ds_db_open_replicated(&b, m2, skip, NULL, lost) == 0, "%s", c10ds_failure());
    ck_assert_int_eq(b.schema_version, C10D_TEST_SCHEMA_VERSION);
    same_rows(a.h, b.h);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(b.h, "SELECT count(*) FROM sqlite_master WHERE name = "
                                             "'theirs'", -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(st, 0), 0); /* the replicas' own table stays there */
    sqlite3_finalize(st);
    c10ds_db_close(&a);
    c10ds_db_close(&b);
    c10ds_mirror_free(m1);
    c10ds_mirror_free(m2);
    dq_node_stop(&node);
}
END_TEST

/* A replicated coordinator seeded from a single-node database of an older
 * schema: the leader migrates it, dqlite first, once; the next leader
 * finds it current and runs none. */
START_TEST(an_old_seed_is_migrated_once_on_the_leader)
{
    char path[] = "/tmp/c10d-seed-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    sqlite3 *old;
    ck_assert_int_eq(sqlite3_open(path, &old), SQLITE_OK);
    int from = c10ds_migration_count - 2;
    for (int i = 0; i < from; i++) {
        exec_ok(old, c10ds_migrations[i].sql);
        char v[64];
        snprintf(v, sizeof v, "PRAGMA user_version = %d", c10ds_migrations[i].version);
        exec_ok(old, v);
    }
    exec_ok(old, "INSERT INTO meta(name, value) VALUES ('seeded', 'yes')");
    sqlite3_close(old);

    dq_node node;
    ck_assert_int_eq(dq_node_start(&node, 1, "seed"), 0);
    c10ds_mirror *m1, *m2;
    ck_assert_msg(c10ds_mirror_new(&m1, node.addr, "c10d", 5000) == 0, "%s", c10ds_failure());
    c10ds_db a, b;
    ck_assert_msg(c10ds_db_open_replicated(&a, m1, NULL, path, lost) == 0, "%s", c10ds_failure());
    ck_assert_int_eq(a.schema_version, c10ds_migration_count);
    /* dqlite's copy is at the newest version, with the seed's rows */
    c10ds_dq_rows rows = {0};
    ck_assert_int_eq(c10ds_dq_query_sql(c10ds_mirror_dq(m1), "PRAGMA user_version", NULL, 0,
                                        &rows), 0);
    ck_assert_int_eq(rows.values[0].i, c10ds_migration_count);
    c10ds_dq_rows_free(&rows);
    ck_assert_int_eq(c10ds_dq_query_sql(c10ds_mirror_dq(m1), "SELECT value FROM meta WHERE "
                                        "name = 'seeded'", NULL, 0, &rows), 0);
    ck_assert_uint_eq(rows.nrows, 1);
    c10ds_dq_rows_free(&rows);
    /* the next leader: nothing to migrate (a migration run twice fails:
     * its CREATE TABLE exists), the seed ignored */
    ck_assert_msg(c10ds_mirror_new(&m2, node.addr, "c10d", 5000) == 0, "%s", c10ds_failure());
    ck_assert_msg(c10ds_db_open_replicated(&b, m2, NULL, path, lost) == 0, "%s", c10ds_failure());
    same_rows(a.h, b.h);
    c10ds_db_close(&a);
    c10ds_db_close(&b);
    c10ds_mirror_free(m1);
    c10ds_mirror_free(m2);
    dq_node_stop(&node);
    unlink(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("replica_mirror");
    TCase *tc = tcase_create("mirror");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_batch_s_script_rebuilds_the_same_rows);
    tcase_add_test(tc, the_next_leader_loads_what_the_last_one_committed);
    tcase_add_test(tc, an_old_seed_is_migrated_once_on_the_leader);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
