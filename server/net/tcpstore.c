/* PyTorch TCPStore's protocol on --tcpstore-listen: each query becomes the
 * request our own clients send for it (a StoreSet for a SET, ...), run by
 * the same engine, durable like every other write; each reply is turned
 * back into the bytes TCPStore answers with, in the order the queries
 * came, except that a parked WAIT holds nothing up (flush_locked).
 * docs/tcpstore.md has the protocol.
 *
 * The wire: no frame; a query is one byte of type, then its fields:
 * strings and byte values as a u64 length and the bytes, key lists as a
 * u64 count and the strings, integers in the host's byte order (little
 * endian everywhere torch runs). Clients split a query across writes, so
 * a query is parsed again from its start until it is whole. Two
 * numberings: torch up to 2.1 (SET 0 ... DELETE_KEY 8, and from 2.0 up to
 * CANCEL_WAIT 12) and torch 2.2 on, whose connections open with VALIDATE
 * (0) and a magic number; the first five bytes of a connection tell which.
 *
 * Keys live under tcpstore/ in the store (c10d-ctl keys tcpstore/), apart
 * from our clients' keys. A query the coordinator refuses (a key over
 * --max-key-bytes, an ADD on text that is no number, a GET of a missing
 * key) cannot be answered with a reason in TCPStore's protocol: the
 * connection is closed and the reason logged, as TCPStore's own server
 * closes it. */
#include "net/listener_internal.h"

#include "config.h"
#include "engine/engine.h"
#include "engine/request.h"

#include "c10d.pb-c.h"
#include "log.h"

#include <c10d/errors.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TS_KEY_PREFIX "tcpstore/"
#define TS_MAGIC 0x3C85F7CEu

/* Operations, whatever their number on the wire. */
typedef enum {
    TS_VALIDATE,
    TS_SET,
    TS_COMPARE_SET,
    TS_GET,
    TS_ADD,
    TS_CHECK,
    TS_WAIT,
    TS_NUM_KEYS,
    TS_DELETE_KEY,
    TS_APPEND,
    TS_MULTI_GET,
    TS_MULTI_SET,
    TS_CANCEL_WAIT,
    TS_PING,
    TS_WATCH_KEY,
    TS_UNKNOWN,
} ts_op;

static const char *const ts_names[] = {
    "VALIDATE", "SET", "COMPARE_SET", "GET", "ADD", "CHECK", "WAIT", "GETNUMKEYS",
    "DELETE_KEY", "APPEND", "MULTI_GET", "MULTI_SET", "CANCEL_WAIT", "PING", "WATCH_KEY", "?"};

/* torch up to 2.1 (TCPStore.cpp's QueryType then: 1.13 stops at
 * DELETE_KEY; 2.0 added the next four) */
static const ts_op ts_v1[] = {TS_SET,        TS_COMPARE_SET, TS_GET,       TS_ADD,
                              TS_CHECK,      TS_WAIT,        TS_NUM_KEYS,  TS_WATCH_KEY,
                              TS_DELETE_KEY, TS_APPEND,      TS_MULTI_GET, TS_MULTI_SET,
                              TS_CANCEL_WAIT};
/* torch 2.2 on (TCPStoreBackend.hpp) */
static const ts_op ts_v2[] = {TS_VALIDATE, TS_SET,        TS_COMPARE_SET, TS_GET,
                              TS_ADD,      TS_CHECK,      TS_WAIT,        TS_NUM_KEYS,
                              TS_DELETE_KEY, TS_APPEND,   TS_MULTI_GET,   TS_MULTI_SET,
                              TS_CANCEL_WAIT, TS_PING};

enum { CHECK_READY = 0, CHECK_NOT_READY = 1 };
enum { WAIT_STOP_WAITING = 0, WAIT_CANCELED = 1 };

/* Most WAITs one connection may have parked. torch 1.13's client gives up
 * on a wait without telling the server, and its WAIT stays parked (as on
 * TCPStore); a client that waits with a timeout in a loop would otherwise
 * fill --max-parked. Past this many the oldest is dropped. */
#define TS_WAITS_MAX 16

/* A query on its way: with the engine, or answered and waiting for the
 * queries before it. */
typedef struct ts_query {
    struct ts_query *next;
    uint64_t id;
    ts_op op;
    int answered;  /* out holds its reply (maybe none) */
    int oom;       /* out could not hold the whole reply */
    /* COMPARE_SET: what the client expected. On a missing key TCPStore
     * answers with it, storing nothing; our store refuses instead. */
    uint8_t *expected;
    size_t expected_len;
    uint8_t *out;
    size_t out_len;
} ts_query;

typedef struct c10ds_ts {
    pthread_mutex_t mu; /* the list: the read loop adds, the engine answers */
    int dialect;        /* 0 until the first query; 1 or 2 (the numberings above) */
    uint64_t next_id;
    ts_query *head, *tail; /* in the order they came */
} c10ds_ts;

static void *ts_open(void)
{
    c10ds_ts *ts = calloc(1, sizeof *ts);
    if (ts)
        pthread_mutex_init(&ts->mu, NULL);
    return ts;
}

static void ts_close(void *state)
{
    c10ds_ts *ts = state;
    if (!ts)
        return;
    for (ts_query *q = ts->head, *n; q; q = n) {
        n = q->next;
        free(q->out);
        free(q->expected);
        free(q);
    }
    pthread_mutex_destroy(&ts->mu);
    free(ts);
}

/* --- parsing a query --- */

/* A cursor over the bytes read; short = 1 once a field runs past them. */
typedef struct ts_cursor {
    const uint8_t *p;
    size_t len, off;
    int short_;
    size_t want; /* bytes the query needs at least, when short */
} ts_cursor;

static int take(ts_cursor *k, size_t n, const uint8_t **out)
{
    if (k->short_)
        return -1;
    if (k->len - k->off < n) {
        k->short_ = 1;
        k->want = k->off + n;
        return -1;
    }
    *out = k->p + k->off;
    k->off += n;
    return 0;
}

static int take_u64(ts_cursor *k, uint64_t *v)
{
    const uint8_t *b;
    if (take(k, 8, &b) != 0)
        return -1;
    memcpy(v, b, 8); /* the host's byte order, as TCPStore sends it */
    return 0;
}

/* A u64 length and its bytes, the length bounded by max. Returns -2 for a
 * length over max. */
static int take_bytes(ts_cursor *k, uint64_t max, const uint8_t **b, size_t *n)
{
    uint64_t len;
    if (take_u64(k, &len) != 0)
        return -1;
    if (len > max)
        return -2;
    *n = (size_t)len;
    return take(k, (size_t)len, b);
}

/* One query's fields, pointing into the read buffer. */
typedef struct ts_fields {
    ts_op op;
    uint64_t n; /* keys in a key list, pairs in MULTI_SET */
    const uint8_t *a, *b, *c;
    size_t alen, blen, clen;
    int64_t delta;
    uint32_t u32;
    const uint8_t *list; /* CHECK, WAIT, MULTI_GET, MULTI_SET: the list's bytes */
    size_t list_len;
} ts_fields;

/* Why a query is refused: the connection is closed with it. */
typedef struct ts_err {
    char why[300];
} ts_err;

/* Reads the fields of one query of type op. 0: whole; -1: more bytes
 * needed (k->want); -2: malformed or over a limit (e->why). */
static int read_fields(ts_cursor *k, ts_fields *f, const c10ds_config *cfg, ts_err *e)
{
    uint64_t max_key = cfg->max_key_bytes, max_val = cfg->max_value_bytes;
    int rc = 0;
    const uint8_t *b;
    switch (f->op) {
    case TS_VALIDATE:
    case TS_PING:
        if ((rc = take(k, 4, &b)) == 0)
            memcpy(&f->u32, b, 4);
        return rc;
    case TS_SET:
    case TS_APPEND:
        if ((rc = take_bytes(k, max_key, &f->a, &f->alen)) == 0)
            rc = take_bytes(k, max_val, &f->b, &f->blen);
        break;
    case TS_COMPARE_SET:
        if ((rc = take_bytes(k, max_key, &f->a, &f->alen)) == 0 &&
            (rc = take_bytes(k, max_val, &f->b, &f->blen)) == 0)
            rc = take_bytes(k, max_val, &f->c, &f->clen);
        break;
    case TS_GET:
    case TS_DELETE_KEY:
    case TS_WATCH_KEY:
        rc = take_bytes(k, max_key, &f->a, &f->alen);
        break;
    case TS_ADD:
        if ((rc = take_bytes(k, max_key, &f->a, &f->alen)) == 0 && (rc = take(k, 8, &b)) == 0)
            memcpy(&f->delta, b, 8);
        break;
    case TS_CHECK:
    case TS_WAIT:
    case TS_MULTI_GET:
    case TS_MULTI_SET:
        if ((rc = take_u64(k, &f->n)) != 0)
            return rc;
        if (f->n > cfg->max_multi_keys) {
            snprintf(e->why, sizeof e->why, "%s of %" PRIu64 " keys (the limit is %u, "
                     "--max-multi-keys)", ts_names[f->op], f->n, cfg->max_multi_keys);
            return -2;
        }
        f->list = k->p + k->off;
        for (uint64_t i = 0; i < f->n && rc == 0; i++) {
            const uint8_t *x;
            size_t xn;
            rc = take_bytes(k, max_key, &x, &xn);
            if (rc == 0 && f->op == TS_MULTI_SET)
                rc = take_bytes(k, max_val, &x, &xn);
        }
        f->list_len = (size_t)(k->p + k->off - f->list);
        break;
    case TS_NUM_KEYS:
    case TS_CANCEL_WAIT:
        return 0;
    default:
        return -2;
    }
    if (rc == -2)
        snprintf(e->why, sizeof e->why, "its %s names a key over %llu bytes or a value over "
                 "%llu (--max-key-bytes, --max-value-bytes)", ts_names[f->op],
                 (unsigned long long)max_key, (unsigned long long)max_val);
    return rc;
}

/* --- the request a query becomes --- */

/* "tcpstore/" + key as a C string (malloc'd), or NULL with why: a key
 * holding a NUL byte (our keys are C strings), or out of memory. */
static char *store_key(const uint8_t *key, size_t len, ts_err *e)
{
    if (memchr(key, 0, len)) {
        snprintf(e->why, sizeof e->why, "it sent a key holding a NUL byte (keys are C "
                 "strings on c10d-coord)");
        return NULL;
    }
    size_t pl = sizeof TS_KEY_PREFIX - 1;
    char *s = malloc(pl + len + 1);
    if (!s) {
        snprintf(e->why, sizeof e->why, "out of memory");
        return NULL;
    }
    memcpy(s, TS_KEY_PREFIX, pl);
    memcpy(s + pl, key, len);
    s[pl + len] = 0;
    return s;
}

/* The keys (and for MULTI_SET the values) of a list query. */
typedef struct ts_list {
    char **keys;
    ProtobufCBinaryData *vals;
    C10dpb__KeyValue *kv;
    C10dpb__KeyValue **kvp;
    size_t n;
} ts_list;

static void list_free(ts_list *l)
{
    for (size_t i = 0; l->keys && i < l->n; i++)
        free(l->keys[i]);
    free(l->keys);
    free(l->vals);
    free(l->kv);
    free(l->kvp);
}

static int list_read(const ts_fields *f, ts_list *l, ts_err *e)
{
    memset(l, 0, sizeof *l);
    size_t n = (size_t)f->n ? (size_t)f->n : 1;
    l->keys = calloc(n, sizeof *l->keys);
    l->vals = calloc(n, sizeof *l->vals);
    l->kv = calloc(n, sizeof *l->kv);
    l->kvp = calloc(n, sizeof *l->kvp);
    if (!l->keys || !l->vals || !l->kv || !l->kvp) {
        snprintf(e->why, sizeof e->why, "out of memory");
        return -1;
    }
    ts_cursor k = {f->list, f->list_len, 0, 0, 0};
    for (size_t i = 0; i < (size_t)f->n; i++, l->n++) {
        /* Bounds checked by read_fields; initialized all the same, since
         * GCC 14 (Debian 13) cannot see that take_bytes sets them. */
        const uint8_t *x = NULL;
        size_t xn = 0;
        take_bytes(&k, UINT64_MAX, &x, &xn);
        if (!(l->keys[i] = store_key(x, xn, e)))
            return -1;
        if (f->op == TS_MULTI_SET) {
            take_bytes(&k, UINT64_MAX, &x, &xn);
            l->vals[i] = (ProtobufCBinaryData){xn, (uint8_t *)x};
            c10dpb__key_value__init(&l->kv[i]);
            l->kv[i].key = l->keys[i];
            l->kv[i].value = l->vals[i];
            l->kvp[i] = &l->kv[i];
        }
    }
    return 0;
}

/* Packs rq and hands it to the engine as request id. */
static int submit(c10ds_conn *c, C10dpb__Request *rq, uint64_t id, ts_err *e)
{
    rq->token = c->l->cfg->token; /* TCPStore has none: the port is open by choice (docs) */
    size_t n = c10dpb__request__get_packed_size(rq);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        snprintf(e->why, sizeof e->why, "out of memory");
        return -1;
    }
    c10dpb__request__pack(rq, buf);
    c10ds_conn_submit(c, id, buf, n);
    free(buf);
    return 0;
}

/* Turns a whole query into a request to the engine. */
static int query_to_request(c10ds_conn *c, const ts_fields *f, uint64_t id, ts_err *e)
{
    C10dpb__Request rq = C10DPB__REQUEST__INIT;
    C10dpb__StoreSet set = C10DPB__STORE_SET__INIT;
    C10dpb__StoreGet get = C10DPB__STORE_GET__INIT;
    C10dpb__StoreAdd add = C10DPB__STORE_ADD__INIT;
    C10dpb__StoreCompareSet cas = C10DPB__STORE_COMPARE_SET__INIT;
    C10dpb__StoreDelete del = C10DPB__STORE_DELETE__INIT;
    C10dpb__StoreAppend app = C10DPB__STORE_APPEND__INIT;
    C10dpb__StoreCheck chk = C10DPB__STORE_CHECK__INIT;
    C10dpb__StoreWait wait = C10DPB__STORE_WAIT__INIT;
    C10dpb__StoreMultiGet mget = C10DPB__STORE_MULTI_GET__INIT;
    C10dpb__StoreMultiSet mset = C10DPB__STORE_MULTI_SET__INIT;
    C10dpb__StoreNumKeys nk = C10DPB__STORE_NUM_KEYS__INIT;
    char *key = NULL;
    ts_list l = {0};
    int rc = -1;
    if (f->a && !(key = store_key(f->a, f->alen, e)))
        return -1;
    switch (f->op) {
    case TS_SET:
        set.key = key;
        set.value = (ProtobufCBinaryData){f->blen, (uint8_t *)f->b};
        rq.op_case = C10DPB__REQUEST__OP_SET;
        rq.set = &set;
        break;
    case TS_GET:
        get.key = key;
        rq.op_case = C10DPB__REQUEST__OP_GET;
        rq.get = &get;
        break;
    case TS_ADD:
        add.key = key;
        add.delta = f->delta;
        rq.op_case = C10DPB__REQUEST__OP_ADD;
        rq.add = &add;
        break;
    case TS_COMPARE_SET:
        cas.key = key;
        cas.expected = (ProtobufCBinaryData){f->blen, (uint8_t *)f->b};
        cas.desired = (ProtobufCBinaryData){f->clen, (uint8_t *)f->c};
        rq.op_case = C10DPB__REQUEST__OP_COMPARE_SET;
        rq.compare_set = &cas;
        break;
    case TS_DELETE_KEY:
        del.key = key;
        rq.op_case = C10DPB__REQUEST__OP_DELETE_KEY;
        rq.delete_key = &del;
        break;
    case TS_APPEND:
        app.key = key;
        app.value = (ProtobufCBinaryData){f->blen, (uint8_t *)f->b};
        rq.op_case = C10DPB__REQUEST__OP_APPEND;
        rq.append = &app;
        break;
    case TS_NUM_KEYS:
        nk.prefix = (char *)TS_KEY_PREFIX;
        rq.op_case = C10DPB__REQUEST__OP_NUM_KEYS;
        rq.num_keys = &nk;
        break;
    case TS_CHECK:
    case TS_WAIT:
    case TS_MULTI_GET:
    case TS_MULTI_SET:
        if (list_read(f, &l, e) != 0)
            goto out;
        if (f->op == TS_CHECK) {
            chk.n_keys = l.n;
            chk.keys = l.keys;
            rq.op_case = C10DPB__REQUEST__OP_CHECK;
            rq.check = &chk;
        } else if (f->op == TS_WAIT) {
            /* TCPStore's WAIT carries no timeout: its client gives up with
             * CANCEL_WAIT, or hangs up. */
            wait.n_keys = l.n;
            wait.keys = l.keys;
            wait.has_timeout_ms = 1;
            wait.timeout_ms = C10D_MS_FOREVER;
            rq.op_case = C10DPB__REQUEST__OP_WAIT;
            rq.wait = &wait;
        } else if (f->op == TS_MULTI_GET) {
            mget.n_keys = l.n;
            mget.keys = l.keys;
            rq.op_case = C10DPB__REQUEST__OP_MULTI_GET;
            rq.multi_get = &mget;
        } else {
            mset.n_kvs = l.n;
            mset.kvs = l.kvp;
            rq.op_case = C10DPB__REQUEST__OP_MULTI_SET;
            rq.multi_set = &mset;
        }
        break;
    default:
        snprintf(e->why, sizeof e->why, "%s is not supported", ts_names[f->op]);
        goto out;
    }
    rc = submit(c, &rq, id, e);
out:
    free(key);
    list_free(&l);
    return rc;
}

/* --- the queries with the engine, and their replies --- */

static void append_out(ts_query *q, const void *b, size_t n)
{
    if (n == 0) /* an empty value's bytes (b may be NULL) */
        return;
    uint8_t *nb = q->oom ? NULL : realloc(q->out, q->out_len + n);
    if (!nb) {
        q->oom = 1; /* translate() says so, and the connection is closed */
        return;
    }
    memcpy(nb + q->out_len, b, n);
    q->out = nb;
    q->out_len += n;
}

static void append_value(ts_query *q, const void *b, size_t n)
{
    uint64_t len = n;
    append_out(q, &len, 8);
    append_out(q, b, n);
}

/* Takes q out of the list (ts->mu held) and frees it. */
static void unlink_locked(c10ds_ts *ts, ts_query *q)
{
    ts_query **pp = &ts->head, *prev = NULL;
    while (*pp && *pp != q)
        prev = *pp, pp = &(*pp)->next;
    if (!*pp)
        return;
    *pp = q->next;
    if (ts->tail == q)
        ts->tail = prev;
    free(q->out);
    free(q->expected);
    free(q);
}

static ts_query *enqueue_locked(c10ds_ts *ts, ts_op op)
{
    ts_query *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->id = ++ts->next_id;
    q->op = op;
    if (ts->tail)
        ts->tail->next = q;
    else
        ts->head = q;
    ts->tail = q;
    return q;
}
/* The engine's answer in TCPStore's words, appended to q->out; -1 when
 * it refused the request (why). */
static int translate(ts_query *q, const C10dpb__Reply *rep, ts_err *e)
{
    if (q->op == TS_COMPARE_SET && rep->status == C10D_ENOTFOUND) {
        append_value(q, q->expected, q->expected_len);
        return q->oom ? -1 : 0;
    }
    if (rep->status != C10D_OK) {
        snprintf(e->why, sizeof e->why, "its %s was refused: %s", ts_names[q->op],
                 rep->detail ? rep->detail : "no reason given");
        return -1;
    }
    int64_t v;
    uint8_t byte;
    switch (q->op) {
    case TS_SET:
    case TS_APPEND:
    case TS_MULTI_SET:
        return 0; /* TCPStore answers nothing */
    case TS_GET:
    case TS_COMPARE_SET:
        append_value(q, rep->value.data, rep->value.len);
        break;
    case TS_ADD:
    case TS_NUM_KEYS:
        v = rep->number;
        append_out(q, &v, 8);
        break;
    case TS_DELETE_KEY:
        v = rep->flag ? 1 : 0;
        append_out(q, &v, 8);
        break;
    case TS_CHECK:
        byte = rep->flag ? CHECK_READY : CHECK_NOT_READY;
        append_out(q, &byte, 1);
        break;
    case TS_WAIT:
        byte = WAIT_STOP_WAITING;
        append_out(q, &byte, 1);
        break;
    case TS_MULTI_GET:
        for (size_t i = 0; rep->values && i < rep->values->n_values; i++)
            append_value(q, rep->values->values[i].data, rep->values->values[i].len);
        break;
    default:
        break;
    }
    if (q->oom) {
        snprintf(e->why, sizeof e->why, "out of memory for the reply to its %s",
                 ts_names[q->op]);
        return -1;
    }
    return 0;
}

/* Sends the replies that are due (ts->mu held): in the order the queries
 * came, as TCPStore's server answers a client that sends several at once;
 * but a parked WAIT holds nothing up, as there: torch 1.13's client gives
 * up on a wait without a word and goes on with its next query. */
static void flush_locked(c10ds_conn *c, c10ds_ts *ts)
{
    for (ts_query *q = ts->head, *n; q; q = n) {
        n = q->next;
        if (q->answered) {
            if (q->out_len)
                c10ds_conn_queue_raw(c, q->out, q->out_len);
            unlink_locked(ts, q);
        } else if (q->op != TS_WAIT) {
            break;
        }
    }
}

/* Answers a query here, not through the engine (PING, an empty list,
 * CANCEL_WAIT): in its turn. */
static int answer_here(c10ds_conn *c, ts_op op, const void *b, size_t n, ts_err *e)
{
    c10ds_ts *ts = c->codec_state;
    pthread_mutex_lock(&ts->mu);
    ts_query *q = enqueue_locked(ts, op);
    int ok = 0;
    if (q) {
        append_out(q, b, n);
        ok = !q->oom;
        q->answered = ok; /* else the connection is closed: it never goes */
        flush_locked(c, ts); /* may free q */
    }
    pthread_mutex_unlock(&ts->mu);
    if (!ok)
        snprintf(e->why, sizeof e->why, "out of memory");
    return ok ? 0 : -1;
}

static void ts_reply(c10ds_conn *c, uint64_t request_id, const void *body, size_t len)
{
    c10ds_ts *ts = c->codec_state;
    C10dpb__Reply *rep = c10dpb__reply__unpack(NULL, len, body);
    ts_err e = {""};
    int close_it = 0;
    pthread_mutex_lock(&ts->mu);
    ts_query *q = ts->head;
    while (q && q->id != request_id)
        q = q->next;
    if (q) { /* not found: a WAIT cancelled meanwhile, whose answer is dropped */
        if (!rep)
            snprintf(e.why, sizeof e.why, "out of memory for a reply");
        close_it = !rep || translate(q, rep, &e) != 0;
        q->answered = 1;
        if (!close_it)
            flush_locked(c, ts);
    }
    pthread_mutex_unlock(&ts->mu);
    if (rep)
        c10dpb__reply__free_unpacked(rep, NULL);
    if (close_it) {
        char why[sizeof c->peer + sizeof e.why + 32];
        snprintf(why, sizeof why, "TCPStore client %s: %s", c->peer, e.why);
        c10ds_conn_close(c, why);
    }
}

/* Drops parked WAITs (ts->mu held): off the list, and an event for each
 * that tells the engine to let go of it, chained on *cancels for the
 * caller to submit once the lock is let go (the engine may run it on the
 * caller's thread, and answer this connection). All of them, or the
 * oldest beyond keep. */
static void drop_waits_locked(c10ds_conn *c, c10ds_ts *ts, int keep, c10ds_request **cancels)
{
    int parked = 0;
    for (ts_query *q = ts->head; q; q = q->next)
        parked += q->op == TS_WAIT && !q->answered;
    for (ts_query *q = ts->head, *n; q && parked > keep; q = n) {
        n = q->next;
        if (q->op != TS_WAIT || q->answered)
            continue;
        c10ds_request *r = c10ds_request_new(NULL, NULL);
        if (r) {
            r->event = C10DS_EV_CANCEL;
            r->pipe = c->id;
            r->cancel_id = q->id;
            r->next = *cancels;
            *cancels = r;
        }
        unlink_locked(ts, q);
        parked--;
    }
}

static void submit_cancels(c10ds_conn *c, c10ds_request *cancels)
{
    for (c10ds_request *r = cancels, *n; r; r = n) {
        n = r->next;
        if (c10ds_engine_submit(c->l->engine, r) != 0)
            c10ds_request_free(r);
    }
}

/* CANCEL_WAIT: the client's WAIT is given up. If the engine answered it
 * already, its STOP_WAITING goes first; if not, it is dropped (and the
 * engine told to let go of it). Either way WAIT_CANCELED follows. */
static int cancel_wait(c10ds_conn *c, ts_err *e)
{
    c10ds_ts *ts = c->codec_state;
    c10ds_request *cancels = NULL;
    uint8_t byte = WAIT_CANCELED;
    pthread_mutex_lock(&ts->mu);
    drop_waits_locked(c, ts, 0, &cancels);
    pthread_mutex_unlock(&ts->mu);
    int rc = answer_here(c, TS_CANCEL_WAIT, &byte, 1, e);
    submit_cancels(c, cancels);
    return rc;
}

static int run_query(c10ds_conn *c, const ts_fields *f, ts_err *e)
{
    c10ds_ts *ts = c->codec_state;
    switch (f->op) {
    case TS_VALIDATE:
        if (f->u32 != TS_MAGIC) {
            snprintf(e->why, sizeof e->why, "its VALIDATE carried 0x%08x, not TCPStore's magic "
                     "number", f->u32);
            return -1;
        }
        return 0;
    case TS_PING:
        return answer_here(c, TS_PING, &f->u32, 4, e);
    case TS_CANCEL_WAIT:
        return cancel_wait(c, e);
    case TS_WATCH_KEY:
        snprintf(e->why, sizeof e->why, "it asked to watch a key (torch 1.13's watch_key); the "
                 "coordinator's TCPStore port does not support watches");
        return -1;
    case TS_CHECK:
    case TS_WAIT:
    case TS_MULTI_GET:
    case TS_MULTI_SET:
        if (f->n == 0) {
            /* TCPStore: no keys are all there at once (our store refuses
             * an empty list) */
            uint8_t byte = f->op == TS_CHECK ? CHECK_READY : WAIT_STOP_WAITING;
            int says = f->op == TS_CHECK || f->op == TS_WAIT;
            return answer_here(c, f->op, &byte, says ? 1 : 0, e);
        }
        break;
    default:
        break;
    }
    uint8_t *expected = NULL;
    if (f->op == TS_COMPARE_SET && !(expected = malloc(f->blen ? f->blen : 1))) {
        snprintf(e->why, sizeof e->why, "out of memory");
        return -1;
    }
    if (expected && f->blen)
        memcpy(expected, f->b, f->blen);
    c10ds_request *cancels = NULL;
    pthread_mutex_lock(&ts->mu);
    if (f->op == TS_WAIT)
        drop_waits_locked(c, ts, TS_WAITS_MAX - 1, &cancels);
    ts_query *q = enqueue_locked(ts, f->op);
    uint64_t id = 0;
    if (q) {
        id = q->id;
        q->expected = expected;
        q->expected_len = f->blen;
    }
    pthread_mutex_unlock(&ts->mu);
    submit_cancels(c, cancels);
    if (!q) {
        free(expected);
        snprintf(e->why, sizeof e->why, "out of memory");
        return -1;
    }
    return query_to_request(c, f, id, e);
}

/* Which numbering the connection speaks, from its first bytes: 2.2 on
 * opens with VALIDATE (0) and the magic number; up to 2.1 a 0 is a SET,
 * whose key length cannot begin with those four bytes (a key of ~1 GB).
 * 0: not enough bytes yet. */
static int detect(const uint8_t *b, size_t n)
{
    if (n < 1)
        return 0;
    if (b[0] != 0)
        return 1;
    if (n < 5)
        return 0;
    uint32_t magic;
    memcpy(&magic, b + 1, 4);
    return magic == TS_MAGIC ? 2 : 1;
}

static int ts_parse(c10ds_conn *c)
{
    c10ds_ts *ts = c->codec_state;
    const c10ds_config *cfg = c->l->cfg;
    size_t off = 0, want = 0;
    int rc = 0;
    ts_err e = {""};
    if (!ts->dialect && !(ts->dialect = detect(c->rbuf, c->rlen)))
        return 0;
    while (off < c->rlen) {
        if (c10ds_readiness_turn_over(c)) {
            rc = 2;
            break;
        }
        if (c10ds_conn_closed(c))
            return -1; /* closed already: nothing more to say */
        if (c10ds_conn_backlogged(c)) {
            rc = 1;
            break;
        }
        ts_cursor k = {c->rbuf + off, c->rlen - off, 1, 0, 0};
        uint8_t type = c->rbuf[off];
        ts_fields f = {0};
        f.op = ts->dialect == 2 ? (type < sizeof ts_v2 / sizeof ts_v2[0] ? ts_v2[type] : TS_UNKNOWN)
                                : (type < sizeof ts_v1 / sizeof ts_v1[0] ? ts_v1[type] : TS_UNKNOWN);
        if (f.op == TS_UNKNOWN) {
            snprintf(e.why, sizeof e.why, "it sent query type %u, which TCPStore (torch %s) "
                     "does not have", type, ts->dialect == 2 ? "2.2 or later" : "2.1 or earlier");
            rc = -1;
            break;
        }
        int got = read_fields(&k, &f, cfg, &e);
        if (got == -1) {
            want = k.want;
            if (want > cfg->max_message_bytes) {
                snprintf(e.why, sizeof e.why, "its %s comes to more than %llu bytes "
                         "(--max-message-bytes)", ts_names[f.op],
                         (unsigned long long)cfg->max_message_bytes);
                rc = -1;
            }
            break;
        }
        if (got != 0 || run_query(c, &f, &e) != 0) {
            rc = -1;
            break;
        }
        off += k.off;
    }
    if (rc < 0) {
        char why[sizeof c->peer + sizeof e.why + 32];
        snprintf(why, sizeof why, "TCPStore client %s: %s", c->peer, e.why);
        c10ds_conn_close(c, why);
        return -1;
    }
    c10ds_conn_consumed(c, off);
    if (want && c10ds_conn_room_for(c, want) != 0) {
        c10ds_conn_close(c, "out of memory for a TCPStore query");
        return -1;
    }
    return rc;
}

const c10ds_codec c10ds_codec_tcpstore = {
    .name = "tcpstore",
    .open = ts_open,
    .close = ts_close,
    .parse = ts_parse,
    .reply = ts_reply,
};
