/* The leading replica's in-memory database and its mirror in dqlite
 * (replica_mirror.h says why it is built this way): the mirror itself,
 * and a batch's changes (SQLite's session extension) written as SQL and
 * sent to dqlite as one transaction. Loading, migrating and seeding the
 * whole replicated database are replica_mirror_copy.c's. */
#include "replica/replica_mirror_internal.h"

#include "failure.h"
#include "replica/dqlite_wire.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void c10ds_mirror_puts(c10ds_mirror *m, const char *s)
{
    put(m, s, strlen(s));
}

void c10ds_mirror_put_ident(c10ds_mirror *m, const char *s)
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
void c10ds_mirror_put_value(c10ds_mirror *m, sqlite3_value *v)
{
    char num[64];
    switch (sqlite3_value_type(v)) {
    case SQLITE_INTEGER:
        snprintf(num, sizeof num, "%lld", (long long)sqlite3_value_int64(v));
        c10ds_mirror_puts(m, num);
        return;
    case SQLITE_FLOAT: {
        double d = sqlite3_value_double(v);
        if (isinf(d)) {
            c10ds_mirror_puts(m, d > 0 ? "9e999" : "-9e999");
            return;
        }
        snprintf(num, sizeof num, "%.17g", d);
        if (!strpbrk(num, ".eE"))
            strcat(num, ".0");
        c10ds_mirror_puts(m, num);
        return;
    }
    case SQLITE_TEXT: {
        const unsigned char *t = sqlite3_value_text(v);
        int n = sqlite3_value_bytes(v), plain = 1;
        for (int i = 0; i < n && plain; i++)
            plain = t[i] >= 0x20 && t[i] < 0x7f;
        if (!plain) {
            c10ds_mirror_puts(m, "CAST(");
            put_hex(m, t, n);
            c10ds_mirror_puts(m, " AS TEXT)");
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
        c10ds_mirror_puts(m, "NULL");
    }
}

/* --- columns --- */

static c10ds_mirror_table *table_of(c10ds_mirror *m, sqlite3 *h, const char *name, int ncol)
{
    for (size_t i = 0; i < m->ntables; i++) {
        if (strcmp(m->tables[i].name, name) != 0)
            continue;
        if (m->tables[i].ncol != ncol) {
            c10ds_failed(C10D_ERROR, "table %s has not the %d columns its changes have", name,
                         ncol);
            return NULL;
        }
        return &m->tables[i];
    }
    c10ds_mirror_table t = {strdup(name), 0, calloc((size_t)ncol, sizeof(char *))};
    sqlite3_stmt *st = NULL;
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT name FROM pragma_table_info(?1) ORDER BY cid");
    if (!t.name || !t.cols || sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
        c10ds_failed_db(h, C10D_ERROR, "columns of %s", name);
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
        c10ds_failed(C10D_ERROR, "table %s has not the %d columns its changes have", name, ncol);
        goto fail;
    }
    c10ds_mirror_table *grown = realloc(m->tables, (m->ntables + 1) * sizeof *grown);
    if (!grown) {
        c10ds_failed(C10D_ERROR, "out of memory");
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
static void put_where(c10ds_mirror *m, sqlite3_changeset_iter *it, const c10ds_mirror_table *t,
                      const unsigned char *pk)
{
    const char *sep = " WHERE ";
    for (int i = 0; i < t->ncol; i++) {
        sqlite3_value *v = NULL;
        if (!pk[i] || sqlite3changeset_old(it, i, &v) != SQLITE_OK || !v)
            continue;
        c10ds_mirror_puts(m, sep);
        c10ds_mirror_put_ident(m, t->cols[i]);
        c10ds_mirror_puts(m, " = ");
        c10ds_mirror_put_value(m, v);
        sep = " AND ";
    }
}

/* One change as a statement, appended to m->buf. */
static int put_change(c10ds_mirror *m, sqlite3 *h, sqlite3_changeset_iter *it)
{
    const char *tab;
    int ncol, op, indirect, npk;
    unsigned char *pk;
    if (sqlite3changeset_op(it, &tab, &ncol, &op, &indirect) != SQLITE_OK ||
        sqlite3changeset_pk(it, &pk, &npk) != SQLITE_OK)
        return c10ds_failed(C10D_ERROR, "a malformed change");
    const c10ds_mirror_table *t = table_of(m, h, tab, ncol);
    if (!t)
        return -1;
    sqlite3_value *v;
    if (op == SQLITE_INSERT) {
        c10ds_mirror_puts(m, "INSERT INTO ");
        c10ds_mirror_put_ident(m, tab);
        c10ds_mirror_puts(m, " VALUES (");
        for (int i = 0; i < ncol; i++) {
            v = NULL;
            sqlite3changeset_new(it, i, &v);
            if (i)
                c10ds_mirror_puts(m, ", ");
            if (v)
                c10ds_mirror_put_value(m, v);
            else
                c10ds_mirror_puts(m, "NULL");
        }
        c10ds_mirror_puts(m, ")");
    } else if (op == SQLITE_DELETE) {
        c10ds_mirror_puts(m, "DELETE FROM ");
        c10ds_mirror_put_ident(m, tab);
        put_where(m, it, t, pk);
    } else {
        c10ds_mirror_puts(m, "UPDATE ");
        c10ds_mirror_put_ident(m, tab);
        const char *sep = " SET ";
        for (int i = 0; i < ncol; i++) {
            v = NULL;
            if (sqlite3changeset_new(it, i, &v) != SQLITE_OK || !v)
                continue; /* unchanged */
            c10ds_mirror_puts(m, sep);
            c10ds_mirror_put_ident(m, t->cols[i]);
            c10ds_mirror_puts(m, " = ");
            c10ds_mirror_put_value(m, v);
            sep = ", ";
        }
        put_where(m, it, t, pk);
    }
    c10ds_mirror_puts(m, ";\n");
    return 0;
}

/* Appends the changeset's statements to m->buf. */
static int put_changeset(c10ds_mirror *m, sqlite3 *h, const void *cs, int n)
{
    sqlite3_changeset_iter *it = NULL;
    if (sqlite3changeset_start(&it, n, (void *)cs) != SQLITE_OK)
        return c10ds_failed(C10D_ERROR, "cannot read the batch's changes");
    int rc = 0, step;
    while (rc == 0 && (step = sqlite3changeset_next(it)) == SQLITE_ROW)
        rc = put_change(m, h, it);
    if (sqlite3changeset_finalize(it) != SQLITE_OK && rc == 0)
        rc = c10ds_failed(C10D_ERROR, "cannot read the batch's changes");
    if (rc == 0 && m->oom)
        rc = c10ds_failed(C10D_ERROR, "out of memory writing the batch's changes");
    return rc;
}

/* --- dqlite --- */

/* The dqlite call's own detail is c10ds_failure() (dqlite_wire.h). */
int c10ds_mirror_dq_failed(c10ds_mirror *m, const char *what)
{
    return c10ds_failed(C10D_ERROR, "%s: dqlite %s (code %llu)", what, c10ds_failure(),
                        (unsigned long long)c10ds_dq_code(m->dq));
}

int c10ds_mirror_new(c10ds_mirror **out, const char *address, const char *name, c10d_ms timeout_ms)
{
    *out = NULL;
    c10ds_mirror *m = calloc(1, sizeof *m);
    if (!m)
        return c10ds_failed(C10D_ERROR, "out of memory");
    if (c10ds_dq_connect(&m->dq, address, timeout_ms) != 0) {
        free(m);
        return -1;
    }
    if (c10ds_dq_open(m->dq, name) != 0) {
        c10ds_mirror_dq_failed(m, "opening the replicated database");
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

/* Runs script (statements) as one transaction on dqlite. */
int c10ds_mirror_exec_txn(c10ds_mirror *m, const char *what)
{
    if (m->oom)
        return c10ds_failed(C10D_ERROR, "%s: out of memory", what);
    int rc = c10ds_dq_exec_sql(m->dq, m->buf, NULL, 0, NULL, NULL);
    if (rc == 0)
        return 0;
    c10ds_mirror_dq_failed(m, what);
    if (rc == C10DS_DQ_FAILED) { /* a statement failed: the transaction may be open */
        /* the ROLLBACK's own failure would replace the detail: kept aside */
        char why[C10DS_FAILURE_MAX];
        snprintf(why, sizeof why, "%s", c10ds_failure());
        c10ds_dq_exec_sql(m->dq, "ROLLBACK", NULL, 0, NULL, NULL);
        c10ds_failed(C10D_ERROR, "%s", why);
    }
    return -1;
}

int c10ds_mirror_track(c10ds_mirror *m, sqlite3 *h)
{
    if (m->session)
        sqlite3session_delete(m->session);
    m->session = NULL;
    m->h = h;
    if (sqlite3session_create(h, "main", &m->session) != SQLITE_OK ||
        sqlite3session_attach(m->session, NULL) != SQLITE_OK)
        return c10ds_failed_db(h, C10D_ERROR, "cannot record the database's changes");
    return 0;
}

/* prefix, then the statements for what changed since the last call, in
 * m->buf (*changed 0 when nothing did), and a new session for what comes
 * next: a session reports each row against its first value since it
 * began. */
static int take_changes(c10ds_mirror *m, const char *prefix, int *changed)
{
    m->len = 0;
    m->oom = 0;
    c10ds_mirror_puts(m, prefix);
    *changed = !sqlite3session_isempty(m->session);
    if (!*changed)
        return 0;
    int n = 0;
    void *cs = NULL;
    if (sqlite3session_changeset(m->session, &n, &cs) != SQLITE_OK)
        return c10ds_failed_db(m->h, C10D_ERROR, "cannot collect the batch's changes");
    int rc = n > 0 ? put_changeset(m, m->h, cs, n) : 0;
    sqlite3_free(cs);
    if (rc == 0 && c10ds_mirror_track(m, m->h) != 0)
        rc = -1;
    return rc;
}

char *c10ds_mirror_script(c10ds_mirror *m)
{
    int changed;
    if (take_changes(m, "", &changed) != 0)
        return NULL;
    char *s = strdup(m->buf);
    if (!s)
        c10ds_failed(C10D_ERROR, "out of memory");
    return s;
}

int c10ds_mirror_commit(c10ds_mirror *m)
{
    int changed;
    if (take_changes(m, "BEGIN;\n", &changed) != 0)
        return -1;
    if (!changed)
        return 0; /* a batch of reads */
    c10ds_mirror_puts(m, "COMMIT");
    return c10ds_mirror_exec_txn(m, "replicating a batch");
}
