/* The leading replica's in-memory database and its mirror in dqlite
 * (replica_mirror.h says why it is built this way). */
#define SQLITE_ENABLE_SESSION 1 /* Debian's libsqlite3 has it; the header wants it said */
#define SQLITE_ENABLE_PREUPDATE_HOOK 1
#include "replica/replica_mirror.h"

#include "replica/dqlite_wire.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A table's column names, read once: a changeset numbers columns. */
typedef struct mtable {
    char *name;
    int ncol;
    char **cols;
} mtable;

struct c10ds_mirror {
    c10ds_dq *dq;
    sqlite3 *h;
    sqlite3_session *session;
    mtable *tables;
    size_t ntables;
    char *buf; /* the script being built */
    size_t len, cap;
    int oom;
};

static void errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* --- the script buffer --- */

static void put(c10ds_mirror *m, const char *s, size_t n)
{
    if (m->oom)
        return;
    if (m->len + n + 1 > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->len + n + 1)
            cap *= 2;
        char *b = realloc(m->buf, cap);
        if (!b) {
            m->oom = 1;
            return;
        }
        m->buf = b;
        m->cap = cap;
    }
    memcpy(m->buf + m->len, s, n);
    m->len += n;
    m->buf[m->len] = '\0';
}

static void puts_(c10ds_mirror *m, const char *s)
{
    put(m, s, strlen(s));
}

static void put_ident(c10ds_mirror *m, const char *s)
{
    put(m, "\"", 1);
    for (const char *p = s; *p; p++) {
        put(m, p, 1);
        if (*p == '"')
            put(m, p, 1); /* doubled */
    }
    put(m, "\"", 1);
}

static void put_hex(c10ds_mirror *m, const unsigned char *p, int n)
{
    static const char digits[] = "0123456789abcdef";
    put(m, "X'", 2);
    char chunk[256];
    int k = 0;
    for (int i = 0; i < n; i++) {
        chunk[k++] = digits[p[i] >> 4];
        chunk[k++] = digits[p[i] & 15];
        if (k == (int)sizeof chunk) {
            put(m, chunk, (size_t)k);
            k = 0;
        }
    }
    put(m, chunk, (size_t)k);
    put(m, "'", 1);
}

/* A value as an SQL literal that reads back as the same value and type:
 * text that is not plain printable ASCII goes as CAST(X'..' AS TEXT),
 * byte for byte; a float keeps a '.' or an exponent (else it would read
 * back as an integer). */
static void put_value(c10ds_mirror *m, sqlite3_value *v)
{
    char num[64];
    switch (sqlite3_value_type(v)) {
    case SQLITE_INTEGER:
        snprintf(num, sizeof num, "%lld", (long long)sqlite3_value_int64(v));
        puts_(m, num);
        return;
    case SQLITE_FLOAT: {
        double d = sqlite3_value_double(v);
        if (isinf(d)) {
            puts_(m, d > 0 ? "9e999" : "-9e999");
            return;
        }
        snprintf(num, sizeof num, "%.17g", d);
        if (!strpbrk(num, ".eE"))
            strcat(num, ".0");
        puts_(m, num);
        return;
    }
    case SQLITE_TEXT: {
        const unsigned char *t = sqlite3_value_text(v);
        int n = sqlite3_value_bytes(v), plain = 1;
        for (int i = 0; i < n && plain; i++)
            plain = t[i] >= 0x20 && t[i] < 0x7f;
        if (!plain) {
            puts_(m, "CAST(");
            put_hex(m, t, n);
            puts_(m, " AS TEXT)");
            return;
        }
        put(m, "'", 1);
        int from = 0;
        for (int i = 0; i < n; i++)
            if (t[i] == '\'') {
                put(m, (const char *)t + from, (size_t)(i + 1 - from));
                put(m, "'", 1);
                from = i + 1;
            }
        put(m, (const char *)t + from, (size_t)(n - from));
        put(m, "'", 1);
        return;
    }
    case SQLITE_BLOB:
        put_hex(m, sqlite3_value_blob(v), sqlite3_value_bytes(v));
        return;
    default:
        puts_(m, "NULL");
    }
}

/* --- columns --- */

static mtable *table_of(c10ds_mirror *m, sqlite3 *h, const char *name, int ncol, char *err,
                        size_t errlen)
{
    for (size_t i = 0; i < m->ntables; i++)
        if (!strcmp(m->tables[i].name, name))
            return m->tables[i].ncol == ncol ? &m->tables[i] : NULL;
    mtable t = {strdup(name), 0, calloc((size_t)ncol, sizeof(char *))};
    sqlite3_stmt *st = NULL;
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT name FROM pragma_table_info(?1) ORDER BY cid");
    if (!t.name || !t.cols || sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
        errf(err, errlen, "columns of %s: %s", name, sqlite3_errmsg(h));
        goto fail;
    }
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (t.ncol == ncol) {
            t.ncol++; /* more columns than the changeset has: refused below */
            break;
        }
        const char *c = (const char *)sqlite3_column_text(st, 0);
        if (!(t.cols[t.ncol++] = strdup(c ? c : "")))
            break;
    }
    sqlite3_finalize(st);
    if (t.ncol != ncol) {
        errf(err, errlen, "table %s has not the %d columns its changes have", name, ncol);
        goto fail;
    }
    mtable *grown = realloc(m->tables, (m->ntables + 1) * sizeof *grown);
    if (!grown) {
        errf(err, errlen, "out of memory");
        goto fail;
    }
    m->tables = grown;
    m->tables[m->ntables] = t;
    return &m->tables[m->ntables++];
fail:
    for (int i = 0; t.cols && i < ncol; i++)
        free(t.cols[i]);
    free(t.cols);
    free(t.name);
    return NULL;
}

/* " WHERE pk1 = v AND pk2 = v" from a change's old values */
static void put_where(c10ds_mirror *m, sqlite3_changeset_iter *it, const mtable *t,
                      const unsigned char *pk)
{
    const char *sep = " WHERE ";
    for (int i = 0; i < t->ncol; i++) {
        sqlite3_value *v = NULL;
        if (!pk[i] || sqlite3changeset_old(it, i, &v) != SQLITE_OK || !v)
            continue;
        puts_(m, sep);
        put_ident(m, t->cols[i]);
        puts_(m, " = ");
        put_value(m, v);
        sep = " AND ";
    }
}

/* One change as a statement, appended to m->buf. */
static int put_change(c10ds_mirror *m, sqlite3 *h, sqlite3_changeset_iter *it, char *err,
                      size_t errlen)
{
    const char *tab;
    int ncol, op, indirect, npk;
    unsigned char *pk;
    if (sqlite3changeset_op(it, &tab, &ncol, &op, &indirect) != SQLITE_OK ||
        sqlite3changeset_pk(it, &pk, &npk) != SQLITE_OK) {
        errf(err, errlen, "a malformed change");
        return -1;
    }
    const mtable *t = table_of(m, h, tab, ncol, err, errlen);
    if (!t)
        return -1;
    sqlite3_value *v;
    if (op == SQLITE_INSERT) {
        puts_(m, "INSERT INTO ");
        put_ident(m, tab);
        puts_(m, " VALUES (");
        for (int i = 0; i < ncol; i++) {
            v = NULL;
            sqlite3changeset_new(it, i, &v);
            if (i)
                puts_(m, ", ");
            if (v)
                put_value(m, v);
            else
                puts_(m, "NULL");
        }
        puts_(m, ")");
    } else if (op == SQLITE_DELETE) {
        puts_(m, "DELETE FROM ");
        put_ident(m, tab);
        put_where(m, it, t, pk);
    } else {
        puts_(m, "UPDATE ");
        put_ident(m, tab);
        const char *sep = " SET ";
        for (int i = 0; i < ncol; i++) {
            v = NULL;
            if (sqlite3changeset_new(it, i, &v) != SQLITE_OK || !v)
                continue; /* unchanged */
            puts_(m, sep);
            put_ident(m, t->cols[i]);
            puts_(m, " = ");
            put_value(m, v);
            sep = ", ";
        }
        put_where(m, it, t, pk);
    }
    puts_(m, ";\n");
    return 0;
}

/* Appends the changeset's statements to m->buf. */
static int put_changeset(c10ds_mirror *m, sqlite3 *h, const void *cs, int n, char *err,
                         size_t errlen)
{
    sqlite3_changeset_iter *it = NULL;
    if (sqlite3changeset_start(&it, n, (void *)cs) != SQLITE_OK) {
        errf(err, errlen, "cannot read the batch's changes");
        return -1;
    }
    int rc = 0, step;
    while (rc == 0 && (step = sqlite3changeset_next(it)) == SQLITE_ROW)
        rc = put_change(m, h, it, err, errlen);
    if (sqlite3changeset_finalize(it) != SQLITE_OK && rc == 0) {
        errf(err, errlen, "cannot read the batch's changes");
        rc = -1;
    }
    if (rc == 0 && m->oom) {
        errf(err, errlen, "out of memory writing the batch's changes");
        rc = -1;
    }
    return rc;
}

/* --- dqlite --- */

static int dq_failed(c10ds_mirror *m, const char *what, char *err, size_t errlen)
{
    errf(err, errlen, "%s: dqlite %s (code %llu)", what, c10ds_dq_errmsg(m->dq),
         (unsigned long long)c10ds_dq_code(m->dq));
    return -1;
}

int c10ds_mirror_new(c10ds_mirror **out, const char *address, const char *name, int timeout_ms,
                     char *err, size_t errlen)
{
    *out = NULL;
    c10ds_mirror *m = calloc(1, sizeof *m);
    if (!m) {
        errf(err, errlen, "out of memory");
        return -1;
    }
    if (c10ds_dq_connect(&m->dq, address, timeout_ms, err, errlen) != 0) {
        free(m);
        return -1;
    }
    if (c10ds_dq_open(m->dq, name) != 0) {
        dq_failed(m, "opening the replicated database", err, errlen);
        c10ds_mirror_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

c10ds_mirror *c10ds_mirror_offline(void)
{
    return calloc(1, sizeof(c10ds_mirror));
}

struct c10ds_dq *c10ds_mirror_dq(c10ds_mirror *m)
{
    return m->dq;
}

void c10ds_mirror_free(c10ds_mirror *m)
{
    if (!m)
        return;
    if (m->session)
        sqlite3session_delete(m->session);
    c10ds_dq_close(m->dq);
    for (size_t i = 0; i < m->ntables; i++) {
        for (int c = 0; c < m->tables[i].ncol; c++)
            free(m->tables[i].cols[c]);
        free(m->tables[i].cols);
        free(m->tables[i].name);
    }
    free(m->tables);
    free(m->buf);
    free(m);
}

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
static int load_rows(c10ds_mirror *m, sqlite3 *h, const char *table, char *err, size_t errlen)
{
    m->len = 0;
    m->oom = 0;
    puts_(m, "SELECT * FROM ");
    put_ident(m, table);
    c10ds_dq_rows rows = {0};
    if (m->oom || c10ds_dq_query_sql(m->dq, m->buf, NULL, 0, &rows) != 0) {
        c10ds_dq_rows_free(&rows);
        return dq_failed(m, table, err, errlen);
    }
    m->len = 0;
    puts_(m, "INSERT INTO ");
    put_ident(m, table);
    puts_(m, " VALUES (");
    for (unsigned i = 0; i < rows.ncols; i++)
        puts_(m, i ? ", ?" : "?");
    puts_(m, ")");
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
        errf(err, errlen, "copying %s from the replicated database: %s", table,
             sqlite3_errmsg(h));
    sqlite3_finalize(st);
    c10ds_dq_rows_free(&rows);
    return rc;
}

int c10ds_mirror_load(c10ds_mirror *m, sqlite3 *h, const char *const *skip, char *err,
                      size_t errlen)
{
    c10ds_dq_rows v = {0}, schema = {0};
    int rc = -1;
    if (c10ds_dq_query_sql(m->dq, "PRAGMA user_version", NULL, 0, &v) != 0 || v.nrows != 1) {
        dq_failed(m, "reading the replicated schema's version", err, errlen);
        goto out;
    }
    /* tables first, then what stands on them (indexes) */
    if (c10ds_dq_query_sql(m->dq,
                           "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                           "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                           "ORDER BY type <> 'table', rowid",
                           NULL, 0, &schema) != 0) {
        dq_failed(m, "reading the replicated schema", err, errlen);
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
        if (!strcmp(type, "table") && load_rows(m, h, name, err, errlen) != 0) {
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
    errf(err, errlen, "building the working copy: %s", msg ? msg : sqlite3_errmsg(h));
    sqlite3_free(msg);
    sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
out:
    c10ds_dq_rows_free(&v);
    c10ds_dq_rows_free(&schema);
    return rc;
}

/* Runs script (statements) as one transaction on dqlite. */
static int exec_txn(c10ds_mirror *m, const char *what, char *err, size_t errlen)
{
    if (m->oom) {
        errf(err, errlen, "%s: out of memory", what);
        return -1;
    }
    int rc = c10ds_dq_exec_sql(m->dq, m->buf, NULL, 0, NULL, NULL);
    if (rc == 0)
        return 0;
    dq_failed(m, what, err, errlen);
    if (rc == C10DS_DQ_FAILED) /* a statement failed: the transaction may be open */
        c10ds_dq_exec_sql(m->dq, "ROLLBACK", NULL, 0, NULL, NULL);
    return -1;
}

int c10ds_mirror_migrate(c10ds_mirror *m, const char *sql, int user_version, char *err,
                         size_t errlen)
{
    char tail[64];
    snprintf(tail, sizeof tail, ";\nPRAGMA user_version = %d;\nCOMMIT", user_version);
    m->len = 0;
    m->oom = 0;
    puts_(m, "BEGIN;\n");
    puts_(m, sql);
    puts_(m, tail);
    return exec_txn(m, "migrating the replicated database", err, errlen);
}

#define SEED_CHUNK_BYTES (4u << 20)

/* Sends what m->buf holds, as one transaction ("BEGIN;" leads it). */
static int seed_flush(c10ds_mirror *m, char *err, size_t errlen)
{
    puts_(m, "COMMIT");
    if (exec_txn(m, "seeding the replicated database", err, errlen) != 0)
        return -1;
    m->len = 0;
    puts_(m, "BEGIN;\n");
    return 0;
}

static int seed_rows(c10ds_mirror *m, sqlite3 *h, const char *table, char *err, size_t errlen)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT * FROM \"%s\"", table);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
        errf(err, errlen, "reading %s: %s", table, sqlite3_errmsg(h));
        return -1;
    }
    int rc = 0, step;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        puts_(m, "INSERT INTO ");
        put_ident(m, table);
        puts_(m, " VALUES (");
        for (int i = 0; i < sqlite3_column_count(st); i++) {
            if (i)
                puts_(m, ", ");
            put_value(m, sqlite3_column_value(st, i));
        }
        puts_(m, ");\n");
        if (m->len > SEED_CHUNK_BYTES)
            rc = seed_flush(m, err, errlen);
    }
    if (rc == 0 && step != SQLITE_DONE) {
        errf(err, errlen, "reading %s: %s", table, sqlite3_errmsg(h));
        rc = -1;
    }
    sqlite3_finalize(st);
    return rc;
}

int c10ds_mirror_seed(c10ds_mirror *m, sqlite3 *h, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                              "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                              "ORDER BY type <> 'table', rowid",
                           -1, &st, NULL) != SQLITE_OK) {
        errf(err, errlen, "reading the schema to seed: %s", sqlite3_errmsg(h));
        return -1;
    }
    m->len = 0;
    m->oom = 0;
    puts_(m, "BEGIN;\n");
    int rc = 0;
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text(st, 0);
        const char *name = (const char *)sqlite3_column_text(st, 1);
        puts_(m, (const char *)sqlite3_column_text(st, 2));
        puts_(m, ";\n");
        if (!strcmp(type, "table"))
            rc = seed_rows(m, h, name, err, errlen);
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
    puts_(m, tail);
    puts_(m, "COMMIT");
    return exec_txn(m, "seeding the replicated database", err, errlen);
}

int c10ds_mirror_track(c10ds_mirror *m, sqlite3 *h, char *err, size_t errlen)
{
    if (m->session)
        sqlite3session_delete(m->session);
    m->session = NULL;
    m->h = h;
    if (sqlite3session_create(h, "main", &m->session) != SQLITE_OK ||
        sqlite3session_attach(m->session, NULL) != SQLITE_OK) {
        errf(err, errlen, "cannot record the database's changes: %s", sqlite3_errmsg(h));
        return -1;
    }
    return 0;
}

/* prefix, then the statements for what changed since the last call, in
 * m->buf (*changed 0 when nothing did), and a new session for what comes
 * next: a session reports each row against its first value since it
 * began. */
static int take_changes(c10ds_mirror *m, const char *prefix, int *changed, char *err,
                        size_t errlen)
{
    m->len = 0;
    m->oom = 0;
    puts_(m, prefix);
    *changed = !sqlite3session_isempty(m->session);
    if (!*changed)
        return 0;
    int n = 0;
    void *cs = NULL;
    if (sqlite3session_changeset(m->session, &n, &cs) != SQLITE_OK) {
        errf(err, errlen, "cannot collect the batch's changes: %s", sqlite3_errmsg(m->h));
        return -1;
    }
    int rc = n > 0 ? put_changeset(m, m->h, cs, n, err, errlen) : 0;
    sqlite3_free(cs);
    if (rc == 0 && c10ds_mirror_track(m, m->h, err, errlen) != 0)
        rc = -1;
    return rc;
}

char *c10ds_mirror_script(c10ds_mirror *m, char *err, size_t errlen)
{
    int changed;
    if (take_changes(m, "", &changed, err, errlen) != 0)
        return NULL;
    char *s = strdup(m->buf);
    if (!s)
        errf(err, errlen, "out of memory");
    return s;
}

int c10ds_mirror_commit(c10ds_mirror *m, char *err, size_t errlen)
{
    int changed;
    if (take_changes(m, "BEGIN;\n", &changed, err, errlen) != 0)
        return -1;
    if (!changed)
        return 0; /* a batch of reads */
    puts_(m, "COMMIT");
    return exec_txn(m, "replicating a batch", err, errlen);
}
