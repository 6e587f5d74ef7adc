#include "replica/dqlite_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* Request and response types (the protocol's numbers). */
enum { REQ_LEADER = 0, REQ_OPEN = 3, REQ_PREPARE = 4, REQ_EXEC = 5, REQ_QUERY = 6,
       REQ_FINALIZE = 7, REQ_EXEC_SQL = 8, REQ_QUERY_SQL = 9, REQ_ADD = 12, REQ_ASSIGN = 13,
       REQ_REMOVE = 14, REQ_CLUSTER = 16, REQ_TRANSFER = 17 };
enum { RES_FAILURE = 0, RES_SERVER = 1, RES_SERVERS = 3, RES_DB = 4, RES_STMT = 5,
       RES_RESULT = 6, RES_ROWS = 7, RES_EMPTY = 8 };

#define PROTOCOL_VERSION 1
#define ROWS_DONE UINT64_C(0xffffffffffffffff)
#define ROWS_PART UINT64_C(0xeeeeeeeeeeeeeeee)
/* A response larger than this is taken for garbage, not allocated. */
#define MAX_BODY (UINT64_C(1) << 30)

struct c10ds_dq {
    int fd;
    uint64_t code;   /* the last FAILURE's, or 0 */
    char msg[512];
    uint8_t *out;    /* the request being built */
    size_t out_len, out_cap;
    uint8_t *in;     /* the last response's body */
    size_t in_len;
    uint8_t in_type;
    uint32_t db;     /* the open database's id */
};

/* --- the connection's state and its errors --- */

static int wire_error(c10ds_dq *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    d->code = 0;
    return -1;
}

uint64_t c10ds_dq_code(const c10ds_dq *d)
{
    return d->code;
}

const char *c10ds_dq_errmsg(const c10ds_dq *d)
{
    return d->msg;
}

/* Why a read or write failed: SO_RCVTIMEO and SO_SNDTIMEO end a blocked
 * call with EAGAIN, which strerror calls "Resource temporarily
 * unavailable". */
static const char *io_why(void)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return "timed out (the node did not answer within the connection's timeout)";
    return errno ? strerror(errno) : "the node closed the connection";
}

/* Moves all n bytes: sends them (writing) or receives them; -1 when the
 * socket fails, times out or (receiving) the node closed it (errno 0). */
static int move_all(int fd, uint8_t *p, size_t n, int writing)
{
    while (n) {
        errno = 0;
        ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    return move_all(fd, (uint8_t *)p, n, 1);
}

static int read_all(int fd, uint8_t *p, size_t n)
{
    return move_all(fd, p, n, 0);
}

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

static void put_u64(c10ds_dq *d, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(d, b, 8);
}

static void pad(c10ds_dq *d)
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
        return wire_error(d, "out of memory building a request");
    d->out_len = 8;
    return 0;
}

static void put_text(c10ds_dq *d, const char *s)
{
    put(d, s, strlen(s) + 1);
    pad(d);
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
        return wire_error(d, "%u parameters: the protocol takes at most 255", n);
    put_u8(d, (uint8_t)n);
    for (unsigned i = 0; i < n; i++) {
        if (v[i].type != C10DS_DQ_INTEGER && v[i].type != C10DS_DQ_FLOAT &&
            v[i].type != C10DS_DQ_TEXT && v[i].type != C10DS_DQ_BLOB &&
            v[i].type != C10DS_DQ_NULL && v[i].type != C10DS_DQ_BOOLEAN)
            return wire_error(d, "parameter %u: type %d cannot be sent", i + 1, v[i].type);
        put_u8(d, (uint8_t)v[i].type);
    }
    pad(d);
    for (unsigned i = 0; i < n; i++) {
        switch (v[i].type) {
        case C10DS_DQ_FLOAT: {
            uint64_t bits;
            memcpy(&bits, &v[i].f, 8);
            put_u64(d, bits);
            break;
        }
        case C10DS_DQ_TEXT:
            if (memchr(v[i].p, 0, v[i].n))
                return wire_error(d, "parameter %u: text with a NUL byte", i + 1);
            put(d, v[i].p, v[i].n);
            put_u8(d, 0);
            pad(d);
            break;
        case C10DS_DQ_BLOB:
            put_u64(d, v[i].n);
            put(d, v[i].p, v[i].n);
            pad(d);
            break;
        case C10DS_DQ_NULL:
            put_u64(d, 0);
            break;
        default: /* INTEGER, BOOLEAN */
            put_u64(d, (uint64_t)v[i].i);
        }
    }
    return 0;
}

/* --- one exchange --- */

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads one response into d->in. */
static int recv_response(c10ds_dq *d)
{
    uint8_t h[8];
    if (read_all(d->fd, h, 8) != 0)
        return wire_error(d, "reading a response: %s", io_why());
    uint64_t len = (uint64_t)get_u32(h) * 8;
    if (len > MAX_BODY)
        return wire_error(d, "a response of %llu bytes: not dqlite's protocol",
                          (unsigned long long)len);
    free(d->in);
    d->in = malloc(len ? len : 1);
    if (!d->in)
        return wire_error(d, "out of memory reading a %llu-byte response",
                          (unsigned long long)len);
    if (read_all(d->fd, d->in, len) != 0)
        return wire_error(d, "reading a response: %s", io_why());
    d->in_len = len;
    d->in_type = h[4];
    return 0;
}

/* A text field at *off of the response: its start, or NULL if it does not
 * end within the body; *off moves past its padding. */
static const char *get_text(const uint8_t *body, size_t len, size_t *off)
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

/* Sends the request built (of type `type`) and reads its response, which
 * must be `want`: a FAILURE is C10DS_DQ_FAILED with its code and message. */
static int roundtrip(c10ds_dq *d, uint8_t type, uint8_t want)
{
    pad(d);
    size_t body = d->out_len - 8;
    if (body == 0) { /* every request has a body: an empty one is a zero word */
        put_u64(d, 0);
        body = 8;
    }
    uint8_t *h = d->out;
    uint32_t words = (uint32_t)(body / 8);
    for (int i = 0; i < 4; i++)
        h[i] = (uint8_t)(words >> (8 * i));
    h[4] = type;
    h[5] = h[6] = h[7] = 0;
    if (write_all(d->fd, d->out, d->out_len) != 0)
        return wire_error(d, "sending a request: %s", io_why());
    if (recv_response(d) != 0)
        return -1;
    if (d->in_type == RES_FAILURE) {
        if (d->in_len < 8)
            return wire_error(d, "a FAILURE response of %zu bytes", d->in_len);
        size_t off = 8;
        const char *m = get_text(d->in, d->in_len, &off);
        d->code = get_u64(d->in);
        snprintf(d->msg, sizeof d->msg, "%s", m ? m : "(no message)");
        return C10DS_DQ_FAILED;
    }
    if (d->in_type != want)
        return wire_error(d, "response type %u to request type %u (wanted %u)", d->in_type, type,
                          want);
    d->code = 0;
    d->msg[0] = '\0';
    return 0;
}

/* --- connecting --- */

/* Bounds every call on fd, connect included (Linux applies SO_SNDTIMEO
 * to a blocking connect): a node on a host that does not answer fails
 * in timeout_ms, not in the kernel's two minutes. */
static void set_timeouts(int fd, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int dial(const char *address, int timeout_ms, char *err, size_t errlen)
{
    int fd;
    if (address[0] == '@') {
        struct sockaddr_un u;
        memset(&u, 0, sizeof u);
        u.sun_family = AF_UNIX;
        size_t n = strlen(address + 1);
        if (n + 1 > sizeof u.sun_path) {
            snprintf(err, errlen, "abstract socket name %s is too long", address);
            return -1;
        }
        memcpy(u.sun_path + 1, address + 1, n); /* sun_path[0] = 0: abstract */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0)
            set_timeouts(fd, timeout_ms);
        if (fd >= 0 &&
            connect(fd, (struct sockaddr *)&u, (socklen_t)(sizeof(sa_family_t) + 1 + n)) == 0)
            return fd;
    } else {
        char host[64];
        const char *colon = strrchr(address, ':');
        struct sockaddr_in in;
        memset(&in, 0, sizeof in);
        in.sin_family = AF_INET;
        if (!colon || (size_t)(colon - address) >= sizeof host) {
            snprintf(err, errlen, "%s: want @name or an IPv4 address:port", address);
            return -1;
        }
        memcpy(host, address, (size_t)(colon - address));
        host[colon - address] = '\0';
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (*end || port <= 0 || port > 65535 || inet_pton(AF_INET, host, &in.sin_addr) != 1) {
            snprintf(err, errlen, "%s: want @name or an IPv4 address:port", address);
            return -1;
        }
        in.sin_port = htons((uint16_t)port);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        /* small requests, answered one by one: no Nagle delay */
        if (fd >= 0) {
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            set_timeouts(fd, timeout_ms);
        }
        if (fd >= 0 && connect(fd, (struct sockaddr *)&in, sizeof in) == 0)
            return fd;
    }
    snprintf(err, errlen, "cannot connect to dqlite node %s: %s", address,
             errno == EAGAIN || errno == EINPROGRESS ? "timed out" : strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

int c10ds_dq_connect(c10ds_dq **out, const char *address, int timeout_ms, char *err,
                     size_t errlen)
{
    *out = NULL;
    /* every call is bounded: a node that stops answering fails it */
    int fd = dial(address, timeout_ms, err, errlen);
    if (fd < 0)
        return -1;
    uint8_t hello[8] = {PROTOCOL_VERSION, 0, 0, 0, 0, 0, 0, 0};
    c10ds_dq *d = calloc(1, sizeof *d);
    if (!d || write_all(fd, hello, sizeof hello) != 0) {
        snprintf(err, errlen, "dqlite node %s: %s", address,
                 d ? strerror(errno) : "out of memory");
        free(d);
        close(fd);
        return -1;
    }
    d->fd = fd;
    *out = d;
    return 0;
}

void c10ds_dq_interrupt(c10ds_dq *d)
{
    if (d)
        shutdown(d->fd, SHUT_RDWR);
}

void c10ds_dq_close(c10ds_dq *d)
{
    if (!d)
        return;
    close(d->fd);
    free(d->out);
    free(d->in);
    free(d);
}

/* --- requests --- */

int c10ds_dq_leader(c10ds_dq *d, uint64_t *id, char *address, size_t len)
{
    if (begin(d, 8) != 0)
        return -1;
    put_u64(d, 0);
    int rv = roundtrip(d, REQ_LEADER, RES_SERVER);
    if (rv != 0)
        return rv;
    size_t off = 8;
    const char *a = d->in_len >= 8 ? get_text(d->in, d->in_len, &off) : NULL;
    if (!a)
        return wire_error(d, "a malformed SERVER response");
    *id = get_u64(d->in);
    snprintf(address, len, "%s", a);
    return 0;
}

int c10ds_dq_open(c10ds_dq *d, const char *name)
{
    if (begin(d, text_size(name) + 8 + 8) != 0)
        return -1;
    put_text(d, name);
    put_u64(d, 0);     /* flags: unused */
    put_text(d, "");   /* vfs: unused */
    int rv = roundtrip(d, REQ_OPEN, RES_DB);
    if (rv == 0 && d->in_len >= 4)
        d->db = get_u32(d->in);
    return rv;
}

int c10ds_dq_prepare(c10ds_dq *d, const char *sql, uint32_t *stmt, uint64_t *nparams)
{
    if (begin(d, 8 + text_size(sql)) != 0)
        return -1;
    put_u64(d, d->db);
    put_text(d, sql);
    int rv = roundtrip(d, REQ_PREPARE, RES_STMT);
    if (rv != 0)
        return rv;
    if (d->in_len < 16)
        return wire_error(d, "a malformed STMT response");
    *stmt = get_u32(d->in + 4);
    if (nparams)
        *nparams = get_u64(d->in + 8);
    return 0;
}

int c10ds_dq_finalize(c10ds_dq *d, uint32_t stmt)
{
    if (begin(d, 8) != 0)
        return -1;
    put_u32(d, d->db);
    put_u32(d, stmt);
    return roundtrip(d, REQ_FINALIZE, RES_EMPTY);
}

static int result(c10ds_dq *d, int rv, uint64_t *last_id, uint64_t *changes)
{
    if (rv != 0)
        return rv;
    if (d->in_len < 16)
        return wire_error(d, "a malformed RESULT response");
    if (last_id)
        *last_id = get_u64(d->in);
    if (changes)
        *changes = get_u64(d->in + 8);
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
    put_u64(d, d->db);
    put_text(d, sql);
    return put_params(d, params, n);
}

int c10ds_dq_exec(c10ds_dq *d, uint32_t stmt, const c10ds_dq_value *params, unsigned n,
                  uint64_t *last_id, uint64_t *changes)
{
    if (build_stmt(d, stmt, params, n) != 0)
        return -1;
    return result(d, roundtrip(d, REQ_EXEC, RES_RESULT), last_id, changes);
}

int c10ds_dq_exec_sql(c10ds_dq *d, const char *sql, const c10ds_dq_value *params, unsigned n,
                      uint64_t *last_id, uint64_t *changes)
{
    if (build_sql(d, sql, params, n) != 0)
        return -1;
    return result(d, roundtrip(d, REQ_EXEC_SQL, RES_RESULT), last_id, changes);
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
            return wire_error(d, "out of memory reading rows");
        m->b = b;
        m->cap = cap;
    }
    uint8_t *body = d->in;
    size_t len = d->in_len;
    m->b[m->n++] = body;
    d->in = NULL; /* now the rows' */
    if (len < 8)
        return wire_error(d, "a malformed ROWS response");
    uint64_t ncols = get_u64(body);
    if (ncols == 0 || ncols > 65536 || (rows->names && ncols != rows->ncols))
        return wire_error(d, "a ROWS response of %llu columns", (unsigned long long)ncols);
    size_t off = 8;
    char **names = rows->names ? NULL : calloc(ncols, sizeof *names);
    if (!rows->names && !names)
        return wire_error(d, "out of memory reading rows");
    for (uint64_t c = 0; c < ncols; c++) {
        const char *name = get_text(body, len, &off);
        if (!name) {
            free(names);
            return wire_error(d, "a malformed ROWS response (column names)");
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
            return wire_error(d, "a ROWS response without its end");
        uint64_t marker = get_u64(body + off);
        if (marker == ROWS_DONE || marker == ROWS_PART)
            return marker == ROWS_PART;
        if (off + header > len)
            return wire_error(d, "a malformed ROWS response (row header)");
        c10ds_dq_value *v = realloc(rows->values, (rows->nrows + 1) * ncols * sizeof *v);
        if (!v)
            return wire_error(d, "out of memory reading rows");
        rows->values = v;
        v += rows->nrows * ncols;
        const uint8_t *types = body + off;
        off += header;
        for (uint64_t c = 0; c < ncols; c++) {
            int type = (types[c / 2] >> (c % 2 ? 4 : 0)) & 0xf;
            memset(&v[c], 0, sizeof v[c]);
            v[c].type = type;
            if (type == C10DS_DQ_TEXT || type == C10DS_DQ_ISO8601) {
                const char *s = get_text(body, len, &off);
                if (!s)
                    return wire_error(d, "a malformed ROWS response (text)");
                v[c].p = s;
                v[c].n = strlen(s);
                continue;
            }
            if (off + 8 > len)
                return wire_error(d, "a malformed ROWS response (value)");
            uint64_t w = get_u64(body + off);
            off += 8;
            if (type == C10DS_DQ_BLOB) {
                if (w > len - off)
                    return wire_error(d, "a malformed ROWS response (blob)");
                v[c].p = body + off;
                v[c].n = (size_t)w;
                off += padded((size_t)w);
            } else if (type == C10DS_DQ_FLOAT) {
                memcpy(&v[c].f, &w, 8);
            } else if (type == C10DS_DQ_INTEGER || type == C10DS_DQ_UNIXTIME ||
                       type == C10DS_DQ_BOOLEAN) {
                v[c].i = (int64_t)w;
            } else if (type != C10DS_DQ_NULL) {
                return wire_error(d, "a ROWS response with a value of type %d", type);
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
        return wire_error(d, "out of memory reading rows");
    /* ROWS messages follow one another unasked until the last */
    while ((rv = take_rows(d, rows)) == 1) {
        if (recv_response(d) != 0)
            return -1;
        if (d->in_type != RES_ROWS)
            return wire_error(d, "response type %u amid a query's rows", d->in_type);
    }
    return rv;
}

int c10ds_dq_query(c10ds_dq *d, uint32_t stmt, const c10ds_dq_value *params, unsigned n,
                   c10ds_dq_rows *rows)
{
    memset(rows, 0, sizeof *rows);
    if (build_stmt(d, stmt, params, n) != 0)
        return -1;
    return read_rows(d, roundtrip(d, REQ_QUERY, RES_ROWS), rows);
}

int c10ds_dq_query_sql(c10ds_dq *d, const char *sql, const c10ds_dq_value *params, unsigned n,
                       c10ds_dq_rows *rows)
{
    memset(rows, 0, sizeof *rows);
    if (build_sql(d, sql, params, n) != 0)
        return -1;
    return read_rows(d, roundtrip(d, REQ_QUERY_SQL, RES_ROWS), rows);
}

/* --- membership --- */

int c10ds_dq_add(c10ds_dq *d, uint64_t id, const char *address)
{
    if (begin(d, 8 + text_size(address)) != 0)
        return -1;
    put_u64(d, id);
    put_text(d, address);
    return roundtrip(d, REQ_ADD, RES_EMPTY);
}

/* REMOVE and TRANSFER: a node's id, answered EMPTY */
static int about_node(c10ds_dq *d, int type, uint64_t id)
{
    if (begin(d, 8) != 0)
        return -1;
    put_u64(d, id);
    return roundtrip(d, type, RES_EMPTY);
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
    put_u64(d, id);
    put_u64(d, role);
    return roundtrip(d, REQ_ASSIGN, RES_EMPTY);
}

int c10ds_dq_cluster(c10ds_dq *d, uint64_t *ids, uint64_t *roles, size_t cap, size_t *n)
{
    if (begin(d, 8) != 0)
        return -1;
    put_u64(d, 1); /* format 1: with roles */
    int rv = roundtrip(d, REQ_CLUSTER, RES_SERVERS);
    if (rv != 0)
        return rv;
    if (d->in_len < 8)
        return wire_error(d, "a malformed SERVERS response");
    uint64_t count = get_u64(d->in);
    size_t off = 8;
    for (uint64_t i = 0; i < count; i++) {
        if (off + 8 > d->in_len)
            return wire_error(d, "a malformed SERVERS response");
        uint64_t id = get_u64(d->in + off);
        off += 8;
        if (!get_text(d->in, d->in_len, &off) || off + 8 > d->in_len)
            return wire_error(d, "a malformed SERVERS response");
        uint64_t role = get_u64(d->in + off);
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
