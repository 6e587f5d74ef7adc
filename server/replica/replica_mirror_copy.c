/* The whole replicated database at once (replica_mirror.h): the
 * working copy loaded from dqlite (schema, rows, user_version) when a
 * replica comes to lead, a migration run on dqlite in one transaction,
 * and dqlite seeded from a SQLite file. Apart from replica_mirror.c,
 * which ships each batch's changes: these run once a leadership or once
 * a cluster, on every table, and share only the script buffer and the
 * connection with the batches (replica_mirror_internal.h). */
#include "replica/replica_mirror_internal.h"

#include "failure.h"
#include "replica/dqlite_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int skipped(const char *name, const char *const *skip)
{
    for (; skip && *skip; skip++)
        if (!strcmp(name, *skip))
            return 1;
    return 0;
}

static int bind_row(sqlite3_stmt *st, const c10ds_dq_value *v, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        int rc, k = (int)i + 1;
        switch (v[i].type) {
        case C10DS_DQ_INTEGER:
        case C10DS_DQ_BOOLEAN:
        case C10DS_DQ_UNIXTIME:
            rc = sqlite3_bind_int64(st, k, v[i].i);
            break;
        case C10DS_DQ_FLOAT:
            rc = sqlite3_bind_double(st, k, v[i].f);
            break;
        case C10DS_DQ_TEXT:
        case C10DS_DQ_ISO8601:
            rc = sqlite3_bind_text(st, k, v[i].p, (int)v[i].n, SQLITE_STATIC);
            break;
        case C10DS_DQ_BLOB:
            rc = sqlite3_bind_blob(st, k, v[i].n ? v[i].p : "", (int)v[i].n, SQLITE_STATIC);
            break;
        default:
            rc = sqlite3_bind_null(st, k);
        }
        if (rc != SQLITE_OK)
            return -1;
    }
    return 0;
}

/* Copies one table's rows from dqlite into h. */
static int load_rows(c10ds_mirror *m, sqlite3 *h, const char *table)
{
    m->len = 0;
    m->oom = 0;
    c10ds_mirror_puts(m, "SELECT * FROM ");
    c10ds_mirror_put_ident(m, table);
    c10ds_dq_rows rows = {0};
    if (m->oom)
        return c10ds_failed(C10D_ERROR, "%s: out of memory", table);
    if (c10ds_dq_query_sql(m->dq, m->buf, NULL, 0, &rows) != 0) {
        c10ds_dq_rows_free(&rows);
        return c10ds_mirror_dq_failed(m, table);
    }
    m->len = 0;
    c10ds_mirror_puts(m, "INSERT INTO ");
    c10ds_mirror_put_ident(m, table);
    c10ds_mirror_puts(m, " VALUES (");
    for (unsigned i = 0; i < rows.ncols; i++)
        c10ds_mirror_puts(m, i ? ", ?" : "?");
    c10ds_mirror_puts(m, ")");
    sqlite3_stmt *st = NULL;
    int rc = -1;
    if (!m->oom && sqlite3_prepare_v2(h, m->buf, -1, &st, NULL) == SQLITE_OK) {
        rc = 0;
        for (size_t r = 0; r < rows.nrows && rc == 0; r++) {
            sqlite3_reset(st);
            if (bind_row(st, rows.values + r * rows.ncols, rows.ncols) != 0 ||
                sqlite3_step(st) != SQLITE_DONE)
                rc = -1;
        }
    }
    if (rc != 0)
        c10ds_failed_db(h, C10D_ERROR, "copying %s from the replicated database", table);
    sqlite3_finalize(st);
    c10ds_dq_rows_free(&rows);
    return rc;
}

int c10ds_mirror_load(c10ds_mirror *m, sqlite3 *h, const char *const *skip)
{
    c10ds_dq_rows v = {0}, schema = {0};
    int rc = -1;
    if (c10ds_dq_query_sql(m->dq, "PRAGMA user_version", NULL, 0, &v) != 0) {
        c10ds_mirror_dq_failed(m, "reading the replicated schema's version");
        goto out;
    }
    if (v.nrows != 1) {
        c10ds_failed(C10D_ERROR, "reading the replicated schema's version: %zu rows, not 1",
                     v.nrows);
        goto out;
    }
    /* tables first, then what stands on them (indexes) */
    if (c10ds_dq_query_sql(m->dq,
                           "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                           "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                           "ORDER BY type <> 'table', rowid",
                           NULL, 0, &schema) != 0) {
        c10ds_mirror_dq_failed(m, "reading the replicated schema");
        goto out;
    }
    char *msg = NULL;
    if (sqlite3_exec(h, "BEGIN", NULL, NULL, &msg) != SQLITE_OK)
        goto sql_failed;
    for (size_t r = 0; r < schema.nrows; r++) {
        const c10ds_dq_value *row = schema.values + r * schema.ncols;
        const char *type = row[0].p, *name = row[1].p, *sql = row[2].p;
        if (row[0].type != C10DS_DQ_TEXT || row[1].type != C10DS_DQ_TEXT ||
            row[2].type != C10DS_DQ_TEXT || skipped(name, skip))
            continue;
        if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK)
            goto sql_failed;
        if (!strcmp(type, "table") && load_rows(m, h, name) != 0) {
            sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
            goto out;
        }
    }
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %lld; COMMIT", (long long)v.values[0].i);
    if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK)
        goto sql_failed;
    rc = 0;
    goto out;
sql_failed:
    c10ds_failed(C10D_ERROR, "building the working copy: %s", msg ? msg : sqlite3_errmsg(h));
    sqlite3_free(msg);
    sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
out:
    c10ds_dq_rows_free(&v);
    c10ds_dq_rows_free(&schema);
    return rc;
}

int c10ds_mirror_migrate(c10ds_mirror *m, const char *sql, int user_version)
{
    char tail[64];
    snprintf(tail, sizeof tail, ";\nPRAGMA user_version = %d;\nCOMMIT", user_version);
    m->len = 0;
    m->oom = 0;
    c10ds_mirror_puts(m, "BEGIN;\n");
    c10ds_mirror_puts(m, sql);
    c10ds_mirror_puts(m, tail);
    return c10ds_mirror_exec_txn(m, "migrating the replicated database");
}

#define SEED_CHUNK_BYTES (4u << 20)

/* Sends what m->buf holds, as one transaction ("BEGIN;" leads it). */
static int seed_flush(c10ds_mirror *m)
{
    c10ds_mirror_puts(m, "COMMIT");
    if (c10ds_mirror_exec_txn(m, "seeding the replicated database") != 0)
        return -1;
    m->len = 0;
    c10ds_mirror_puts(m, "BEGIN;\n");
    return 0;
}

static int seed_rows(c10ds_mirror *m, sqlite3 *h, const char *table)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT * FROM \"%s\"", table);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
        return c10ds_failed_db(h, C10D_ERROR, "reading %s", table);
    int rc = 0, step;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        c10ds_mirror_puts(m, "INSERT INTO ");
        c10ds_mirror_put_ident(m, table);
        c10ds_mirror_puts(m, " VALUES (");
        for (int i = 0; i < sqlite3_column_count(st); i++) {
            if (i)
                c10ds_mirror_puts(m, ", ");
            c10ds_mirror_put_value(m, sqlite3_column_value(st, i));
        }
        c10ds_mirror_puts(m, ");\n");
        if (m->len > SEED_CHUNK_BYTES)
            rc = seed_flush(m);
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = c10ds_failed_db(h, C10D_ERROR, "reading %s", table);
    sqlite3_finalize(st);
    return rc;
}

int c10ds_mirror_seed(c10ds_mirror *m, sqlite3 *h)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                              "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                              "ORDER BY type <> 'table', rowid",
                           -1, &st, NULL) != SQLITE_OK)
        return c10ds_failed_db(h, C10D_ERROR, "reading the schema to seed");
    m->len = 0;
    m->oom = 0;
    c10ds_mirror_puts(m, "BEGIN;\n");
    int rc = 0;
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text(st, 0);
        const char *name = (const char *)sqlite3_column_text(st, 1);
        c10ds_mirror_puts(m, (const char *)sqlite3_column_text(st, 2));
        c10ds_mirror_puts(m, ";\n");
        if (!strcmp(type, "table"))
            rc = seed_rows(m, h, name);
    }
    sqlite3_finalize(st);
    if (rc != 0)
        return -1;
    sqlite3_stmt *v = NULL;
    int version = 0;
    if (sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &v, NULL) == SQLITE_OK &&
        sqlite3_step(v) == SQLITE_ROW)
        version = sqlite3_column_int(v, 0);
    sqlite3_finalize(v);
    char tail[64];
    snprintf(tail, sizeof tail, "PRAGMA user_version = %d;\n", version);
    c10ds_mirror_puts(m, tail);
    c10ds_mirror_puts(m, "COMMIT");
    return c10ds_mirror_exec_txn(m, "seeding the replicated database");
}
