/* dqlite's messages (dqlite_wire.h): each request's body built
 * (little-endian fields, text and parameters padded to 8 bytes) and each
 * response's decoded, a query's ROWS included. The socket and the
 * exchange of one request for its response are dqlite_wire_conn.c's. */
#include "replica/dqlite_wire.h"

#include "replica/dqlite_wire_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Request types (the protocol's numbers). */
enum { REQ_LEADER = 0, REQ_OPEN = 3, REQ_PREPARE = 4, REQ_EXEC = 5, REQ_QUERY = 6,
       REQ_FINALIZE = 7, REQ_EXEC_SQL = 8, REQ_QUERY_SQL = 9, REQ_ADD = 12, REQ_ASSIGN = 13,
       REQ_REMOVE = 14, REQ_CLUSTER = 16, REQ_TRANSFER = 17 };

#define ROWS_DONE UINT64_C(0xffffffffffffffff)
#define ROWS_PART UINT64_C(0xeeeeeeeeeeeeeeee)

/* --- building a request: little-endian fields, padded to 8 bytes --- */

static int room(c10ds_dq *d, size_t k)
{
    if (d->out_len + k <= d->out_cap)
        return 0;
    size_t cap = (d->out_len + k) * 2 + 64;
    uint8_t *p = realloc(d->out, cap);
    if (!p)
        return -1;
    d->out = p;
    d->out_cap = cap;
    return 0;
}

static void put(c10ds_dq *d, const void *p, size_t n)
{
    memcpy(d->out + d->out_len, p, n);
    d->out_len += n;
}

static void put_u8(c10ds_dq *d, uint8_t v)
{
    put(d, &v, 1);
}

static void put_u32(c10ds_dq *d, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(d, b, 4);
}

void c10ds_dq_put_u64(c10ds_dq *d, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(d, b, 8);
}

void c10ds_dq_pad(c10ds_dq *d)
{
    while (d->out_len % 8)
        put_u8(d, 0);
}

static size_t padded(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Room for a message of body at most `body` bytes: the header's 8 come
 * first, filled in by send_request. */
static int begin(c10ds_dq *d, size_t body)
{
    d->out_len = 0;
    if (room(d, 8 + padded(body) + 8) != 0)
        return c10ds_dq_wire_error(d, "out of memory building a request");
    d->out_len = 8;
    return 0;
}

static void put_text(c10ds_dq *d, const char *s)
{
    put(d, s, strlen(s) + 1);
    c10ds_dq_pad(d);
}

static size_t text_size(const char *s)
{
    return padded(strlen(s) + 1);
}

/* The parameters' tuple: a u8 count, a type byte each, padding, then the
 * values; none at all when there are none. */
static size_t params_size(const c10ds_dq_value *v, unsigned n)
{
    if (!n)
        return 0;
    size_t k = padded(1 + n);
    for (unsigned i = 0; i < n; i++)
        k += v[i].type == C10DS_DQ_TEXT ? padded(v[i].n + 1)
             : v[i].type == C10DS_DQ_BLOB ? 8 + padded(v[i].n)
                                          : 8;
    return k;
}

static int put_params(c10ds_dq *d, const c10ds_dq_value *v, unsigned n)
{
    if (!n)
        return 0;
    if (n > 255)
        return c10ds_dq_wire_error(d, "%u parameters: the protocol takes at most 255", n);
    put_u8(d, (uint8_t)n);
    for (unsigned i = 0; i < n; i++) {
        if (v[i].type != C10DS_DQ_INTEGER && v[i].type != C10DS_DQ_FLOAT &&
            v[i].type != C10DS_DQ_TEXT && v[i].type != C10DS_DQ_BLOB &&
            v[i].type != C10DS_DQ_NULL && v[i].type != C10DS_DQ_BOOLEAN)
            return c10ds_dq_wire_error(d, "parameter %u: type %d cannot be sent", i + 1, v[i].type);
        put_u8(d, (uint8_t)v[i].type);
    }
    c10ds_dq_pad(d);
    for (unsigned i = 0; i < n; i++) {
        switch (v[i].type) {
        case C10DS_DQ_FLOAT: {
            uint64_t bits;
            memcpy(&bits, &v[i].f, 8);
            c10ds_dq_put_u64(d, bits);
            break;
        }
        case C10DS_DQ_TEXT:
            if (memchr(v[i].p, 0, v[i].n))
                return c10ds_dq_wire_error(d, "parameter %u: text with a NUL byte", i + 1);
            put(d, v[i].p, v[i].n);
            put_u8(d, 0);
            c10ds_dq_pad(d);
            break;
        case C10DS_DQ_BLOB:
            c10ds_dq_put_u64(d, v[i].n);
            put(d, v[i].p, v[i].n);
            c10ds_dq_pad(d);
            break;
        case C10DS_DQ_NULL:
            c10ds_dq_put_u64(d, 0);
            break;
        default: /* INTEGER, BOOLEAN */
            c10ds_dq_put_u64(d, (uint64_t)v[i].i);
        }
    }
    return 0;
}

/* --- reading a response's fields --- */

uint64_t c10ds_dq_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

uint32_t c10ds_dq_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A text field at *off of the response: its start, or NULL if it does not
 * end within the body; *off moves past its padding. */
const char *c10ds_dq_get_text(const uint8_t *body, size_t len, size_t *off)
{
    if (*off >= len)
        return NULL;
    const uint8_t *nul = memchr(body + *off, 0, len - *off);
    if (!nul)
        return NULL;
    const char *s = (const char *)body + *off;
    *off += padded((size_t)(nul - (body + *off)) + 1);
    return s;
}

/* --- requests --- */

int c10ds_dq_leader(c10ds_dq *d, uint64_t *id, char *address, size_t len)
{
    if (begin(d, 8) != 0)
        return -1;
    c10ds_dq_put_u64(d, 0);
    int rv = c10ds_dq_roundtrip(d, REQ_LEADER, C10DS_DQ_RES_SERVER);
    if (rv != 0)
        return rv;
    size_t off = 8;
    const char *a = d->in_len >= 8 ? c10ds_dq_get_text(d->in, d->in_len, &off) : NULL;
    if (!a)
        return c10ds_dq_wire_error(d, "a malformed SERVER response");
    *id = c10ds_dq_get_u64(d->in);
    snprintf(address, len, "%s", a);
    return 0;
}

int c10ds_dq_open(c10ds_dq *d, const char *name)
{
    if (begin(d, text_size(name) + 8 + 8) != 0)
        return -1;
    put_text(d, name);
    c10ds_dq_put_u64(d, 0);     /* flags: unused */
    put_text(d, "");   /* vfs: unused */
    int rv = c10ds_dq_roundtrip(d, REQ_OPEN, C10DS_DQ_RES_DB);
    if (rv == 0 && d->in_len >= 4)
        d->db = c10ds_dq_get_u32(d->in);
    return rv;
}

int c10ds_dq_prepare(c10ds_dq *d, const char *sql, uint32_t *stmt, uint64_t *nparams)
{
    if (begin(d, 8 + text_size(sql)) != 0)
        return -1;
    c10ds_dq_put_u64(d, d->db);
    put_text(d, sql);
    int rv = c10ds_dq_roundtrip(d, REQ_PREPARE, C10DS_DQ_RES_STMT);
    if (rv != 0)
        return rv;
    if (d->in_len < 16)
        return c10ds_dq_wire_error(d, "a malformed STMT response");
    *stmt = c10ds_dq_get_u32(d->in + 4);
    if (nparams)
        *nparams = c10ds_dq_get_u64(d->in + 8);
    return 0;
}

int c10ds_dq_finalize(c10ds_dq *d, uint32_t stmt)
{
    if (begin(d, 8) != 0)
        return -1;
    put_u32(d, d->db);
    put_u32(d, stmt);
    return c10ds_dq_roundtrip(d, REQ_FINALIZE, C10DS_DQ_RES_EMPTY);
}

static int result(c10ds_dq *d, int rv, uint64_t *last_id, uint64_t *changes)
{
    if (rv != 0)
        return rv;
    if (d->in_len < 16)
        return c10ds_dq_wire_error(d, "a malformed RESULT response");
    if (last_id)
        *last_id = c10ds_dq_get_u64(d->in);
    if (changes)
        *changes = c10ds_dq_get_u64(d->in + 8);
    return 0;
}

/* The body EXEC and QUERY share: the database, the statement, its
 * parameters. 0, or -1 (said in d). */
static int build_stmt(c10ds_dq *d, uint32_t stmt, const c10ds_dq_value *params, unsigned n)
{
    if (begin(d, 8 + params_size(params, n)) != 0)
        return -1;
    put_u32(d, d->db);
    put_u32(d, stmt);
    return put_params(d, params, n);
}

/* The body EXEC_SQL and QUERY_SQL share: the database, the SQL, the
 * parameters of its first statement. */
static int build_sql(c10ds_dq *d, const char *sql, const c10ds_dq_value *params, unsigned n)
{
    if (begin(d, 8 + text_size(sql) + params_size(params, n)) != 0)
        return -1;
    c10ds_dq_put_u64(d, d->db);
    put_text(d, sql);
    return put_params(d, params, n);
}

int c10ds_dq_exec(c10ds_dq *d, uint32_t stmt, const c10ds_dq_value *params, unsigned n,
                  uint64_t *last_id, uint64_t *changes)
{
    if (build_stmt(d, stmt, params, n) != 0)
        return -1;
    return result(d, c10ds_dq_roundtrip(d, REQ_EXEC, C10DS_DQ_RES_RESULT), last_id, changes);
}

int c10ds_dq_exec_sql(c10ds_dq *d, const char *sql, const c10ds_dq_value *params, unsigned n,
                      uint64_t *last_id, uint64_t *changes)
{
    if (build_sql(d, sql, params, n) != 0)
        return -1;
    return result(d, c10ds_dq_roundtrip(d, REQ_EXEC_SQL, C10DS_DQ_RES_RESULT), last_id, changes);
}

/* --- rows --- */

/* What rows->mem holds: each ROWS message's body, kept for the values
 * that point into it. */
typedef struct bodies {
    size_t n, cap;
    uint8_t **b;
} bodies;

void c10ds_dq_rows_free(c10ds_dq_rows *rows)
{
    bodies *m = rows->mem;
    if (m) {
        for (size_t i = 0; i < m->n; i++)
            free(m->b[i]);
        free(m->b);
        free(m);
    }
    free(rows->names);
    free(rows->values);
    memset(rows, 0, sizeof *rows);
}

/* Takes d->in (a ROWS body) into rows. Returns 1 when more ROWS follow,
 * 0 when this was the last, -1 on a malformed body. */
static int take_rows(c10ds_dq *d, c10ds_dq_rows *rows)
{
    bodies *m = rows->mem;
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 4;
        uint8_t **b = realloc(m->b, cap * sizeof *b);
        if (!b)
            return c10ds_dq_wire_error(d, "out of memory reading rows");
        m->b = b;
        m->cap = cap;
    }
    uint8_t *body = d->in;
    size_t len = d->in_len;
    m->b[m->n++] = body;
    d->in = NULL; /* now the rows' */
    if (len < 8)
        return c10ds_dq_wire_error(d, "a malformed ROWS response");
    uint64_t ncols = c10ds_dq_get_u64(body);
    if (ncols == 0 || ncols > 65536 || (rows->names && ncols != rows->ncols))
        return c10ds_dq_wire_error(d, "a ROWS response of %llu columns", (unsigned long long)ncols);
    size_t off = 8;
    char **names = rows->names ? NULL : calloc(ncols, sizeof *names);
    if (!rows->names && !names)
        return c10ds_dq_wire_error(d, "out of memory reading rows");
    for (uint64_t c = 0; c < ncols; c++) {
        const char *name = c10ds_dq_get_text(body, len, &off);
        if (!name) {
            free(names);
            return c10ds_dq_wire_error(d, "a malformed ROWS response (column names)");
        }
        if (names)
            names[c] = (char *)name;
    }
    if (names) {
        rows->names = names;
        rows->ncols = (unsigned)ncols;
    }
    size_t header = padded((ncols + 1) / 2);
    for (;;) {
        if (off + 8 > len)
            return c10ds_dq_wire_error(d, "a ROWS response without its end");
        uint64_t marker = c10ds_dq_get_u64(body + off);
        if (marker == ROWS_DONE || marker == ROWS_PART)
            return marker == ROWS_PART;
        if (off + header > len)
            return c10ds_dq_wire_error(d, "a malformed ROWS response (row header)");
        c10ds_dq_value *v = realloc(rows->values, (rows->nrows + 1) * ncols * sizeof *v);
        if (!v)
            return c10ds_dq_wire_error(d, "out of memory reading rows");
        rows->values = v;
        v += rows->nrows * ncols;
        const uint8_t *types = body + off;
        off += header;
        for (uint64_t c = 0; c < ncols; c++) {
            int type = (types[c / 2] >> (c % 2 ? 4 : 0)) & 0xf;
            memset(&v[c], 0, sizeof v[c]);
            v[c].type = type;
            if (type == C10DS_DQ_TEXT || type == C10DS_DQ_ISO8601) {
                const char *s = c10ds_dq_get_text(body, len, &off);
                if (!s)
                    return c10ds_dq_wire_error(d, "a malformed ROWS response (text)");
                v[c].p = s;
                v[c].n = strlen(s);
                continue;
            }
            if (off + 8 > len)
                return c10ds_dq_wire_error(d, "a malformed ROWS response (value)");
            uint64_t w = c10ds_dq_get_u64(body + off);
            off += 8;
            if (type == C10DS_DQ_BLOB) {
                if (w > len - off)
                    return c10ds_dq_wire_error(d, "a malformed ROWS response (blob)");
                v[c].p = body + off;
                v[c].n = (size_t)w;
                off += padded((size_t)w);
            } else if (type == C10DS_DQ_FLOAT) {
                memcpy(&v[c].f, &w, 8);
            } else if (type == C10DS_DQ_INTEGER || type == C10DS_DQ_UNIXTIME ||
                       type == C10DS_DQ_BOOLEAN) {
                v[c].i = (int64_t)w;
            } else if (type != C10DS_DQ_NULL) {
                return c10ds_dq_wire_error(d, "a ROWS response with a value of type %d", type);
            }
        }
        rows->nrows++;
    }
}

static int read_rows(c10ds_dq *d, int rv, c10ds_dq_rows *rows)
{
    memset(rows, 0, sizeof *rows);
    if (rv != 0)
        return rv;
    if (!(rows->mem = calloc(1, sizeof(bodies))))
        return c10ds_dq_wire_error(d, "out of memory reading rows");
    /* ROWS messages follow one another unasked until the last */
    while ((rv = take_rows(d, rows)) == 1) {
        if (c10ds_dq_recv_response(d) != 0)
            return -1;
        if (d->in_type != C10DS_DQ_RES_ROWS)
            return c10ds_dq_wire_error(d, "response type %u amid a query's rows", d->in_type);
    }
    return rv;
}

int c10ds_dq_query(c10ds_dq *d, uint32_t stmt, const c10ds_dq_value *params, unsigned n,
                   c10ds_dq_rows *rows)
{
    memset(rows, 0, sizeof *rows);
    if (build_stmt(d, stmt, params, n) != 0)
        return -1;
    return read_rows(d, c10ds_dq_roundtrip(d, REQ_QUERY, C10DS_DQ_RES_ROWS), rows);
}

int c10ds_dq_query_sql(c10ds_dq *d, const char *sql, const c10ds_dq_value *params, unsigned n,
                       c10ds_dq_rows *rows)
{
    memset(rows, 0, sizeof *rows);
    if (build_sql(d, sql, params, n) != 0)
        return -1;
    return read_rows(d, c10ds_dq_roundtrip(d, REQ_QUERY_SQL, C10DS_DQ_RES_ROWS), rows);
}

/* --- membership --- */

int c10ds_dq_add(c10ds_dq *d, uint64_t id, const char *address)
{
    if (begin(d, 8 + text_size(address)) != 0)
        return -1;
    c10ds_dq_put_u64(d, id);
    put_text(d, address);
    return c10ds_dq_roundtrip(d, REQ_ADD, C10DS_DQ_RES_EMPTY);
}

/* REMOVE and TRANSFER: a node's id, answered EMPTY */
static int about_node(c10ds_dq *d, int type, uint64_t id)
{
    if (begin(d, 8) != 0)
        return -1;
    c10ds_dq_put_u64(d, id);
    return c10ds_dq_roundtrip(d, type, C10DS_DQ_RES_EMPTY);
}

int c10ds_dq_remove(c10ds_dq *d, uint64_t id)
{
    return about_node(d, REQ_REMOVE, id);
}

int c10ds_dq_transfer(c10ds_dq *d, uint64_t id)
{
    return about_node(d, REQ_TRANSFER, id);
}

int c10ds_dq_assign(c10ds_dq *d, uint64_t id, uint64_t role)
{
    if (begin(d, 16) != 0)
        return -1;
    c10ds_dq_put_u64(d, id);
    c10ds_dq_put_u64(d, role);
    return c10ds_dq_roundtrip(d, REQ_ASSIGN, C10DS_DQ_RES_EMPTY);
}

int c10ds_dq_cluster(c10ds_dq *d, uint64_t *ids, uint64_t *roles, size_t cap, size_t *n)
{
    if (begin(d, 8) != 0)
        return -1;
    c10ds_dq_put_u64(d, 1); /* format 1: with roles */
    int rv = c10ds_dq_roundtrip(d, REQ_CLUSTER, C10DS_DQ_RES_SERVERS);
    if (rv != 0)
        return rv;
    if (d->in_len < 8)
        return c10ds_dq_wire_error(d, "a malformed SERVERS response");
    uint64_t count = c10ds_dq_get_u64(d->in);
    size_t off = 8;
    for (uint64_t i = 0; i < count; i++) {
        if (off + 8 > d->in_len)
            return c10ds_dq_wire_error(d, "a malformed SERVERS response");
        uint64_t id = c10ds_dq_get_u64(d->in + off);
        off += 8;
        if (!c10ds_dq_get_text(d->in, d->in_len, &off) || off + 8 > d->in_len)
            return c10ds_dq_wire_error(d, "a malformed SERVERS response");
        uint64_t role = c10ds_dq_get_u64(d->in + off);
        off += 8;
        if (i < cap) {
            if (ids)
                ids[i] = id;
            if (roles)
                roles[i] = role;
        }
    }
    *n = (size_t)count;
    return 0;
}
