/* TCPStore's wire: a query read, the request it becomes, the reply
 * written back (tcpstore_wire.h). */
#include "net/tcpstore_wire.h"

#include "config.h"
#include "failure.h"

#include "c10d_time.h"

#include <c10d/errors.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {
    "VALIDATE", "SET", "COMPARE_SET", "GET", "ADD", "CHECK", "WAIT", "GETNUMKEYS",
    "DELETE_KEY", "APPEND", "MULTI_GET", "MULTI_SET", "CANCEL_WAIT", "PING", "WATCH_KEY", "?"};

/* torch up to 2.1 (TCPStore.cpp's QueryType then: 1.13 stops at
 * DELETE_KEY; 2.0 added the next four) */
static const c10ds_ts_op numbering_v1[] = {
    C10DS_TS_SET,        C10DS_TS_COMPARE_SET, C10DS_TS_GET,       C10DS_TS_ADD,
    C10DS_TS_CHECK,      C10DS_TS_WAIT,        C10DS_TS_NUM_KEYS,  C10DS_TS_WATCH_KEY,
    C10DS_TS_DELETE_KEY, C10DS_TS_APPEND,      C10DS_TS_MULTI_GET, C10DS_TS_MULTI_SET,
    C10DS_TS_CANCEL_WAIT};
/* torch 2.2 on (TCPStoreBackend.hpp) */
static const c10ds_ts_op numbering_v2[] = {
    C10DS_TS_VALIDATE,   C10DS_TS_SET,       C10DS_TS_COMPARE_SET, C10DS_TS_GET,
    C10DS_TS_ADD,        C10DS_TS_CHECK,     C10DS_TS_WAIT,        C10DS_TS_NUM_KEYS,
    C10DS_TS_DELETE_KEY, C10DS_TS_APPEND,    C10DS_TS_MULTI_GET,   C10DS_TS_MULTI_SET,
    C10DS_TS_CANCEL_WAIT, C10DS_TS_PING};

const char *c10ds_ts_op_name(c10ds_ts_op op)
{
    return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "?";
}

/* 2.2 on opens with VALIDATE (0) and the magic number; up to 2.1 a 0 is
 * a SET, whose key length cannot begin with those four bytes (a key of
 * ~1 GB). */
int c10ds_ts_detect(const uint8_t *b, size_t n)
{
    if (n < 1)
        return 0;
    if (b[0] != 0)
        return 1;
    if (n < 5)
        return 0;
    uint32_t magic;
    memcpy(&magic, b + 1, 4);
    return magic == C10DS_TS_MAGIC ? 2 : 1;
}

/* --- reading a query --- */

/* A cursor over the bytes read; short_ = 1 once a field runs past them. */
typedef struct cursor {
    const uint8_t *p;
    size_t len, off;
    int short_;
    size_t want; /* bytes the query needs at least, when short */
} cursor;

static int take(cursor *k, size_t n, const uint8_t **out)
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

static int take_u64(cursor *k, uint64_t *v)
{
    const uint8_t *b;
    if (take(k, 8, &b) != 0)
        return -1;
    memcpy(v, b, 8); /* the host's byte order, as TCPStore sends it */
    return 0;
}

/* A u64 length and its bytes, the length bounded by max. Returns -2 for a
 * length over max. */
static int take_bytes(cursor *k, uint64_t max, const uint8_t **b, size_t *n)
{
    uint64_t len;
    if (take_u64(k, &len) != 0)
        return -1;
    if (len > max)
        return -2;
    *n = (size_t)len;
    return take(k, (size_t)len, b);
}

/* The fields of a query of type f->op. 0: whole; -1: more bytes needed
 * (k->want); -2: malformed or over a limit (recorded). */
static int read_fields(cursor *k, c10ds_ts_query *f, const c10ds_config *cfg)
{
    uint64_t max_key = cfg->max_key_bytes, max_val = cfg->max_value_bytes;
    int rc = 0;
    const uint8_t *b;
    switch (f->op) {
    case C10DS_TS_VALIDATE:
    case C10DS_TS_PING:
        if ((rc = take(k, 4, &b)) == 0)
            memcpy(&f->u32, b, 4);
        return rc;
    case C10DS_TS_SET:
    case C10DS_TS_APPEND:
        if ((rc = take_bytes(k, max_key, &f->a, &f->alen)) == 0)
            rc = take_bytes(k, max_val, &f->b, &f->blen);
        break;
    case C10DS_TS_COMPARE_SET:
        if ((rc = take_bytes(k, max_key, &f->a, &f->alen)) == 0 &&
            (rc = take_bytes(k, max_val, &f->b, &f->blen)) == 0)
            rc = take_bytes(k, max_val, &f->c, &f->clen);
        break;
    case C10DS_TS_GET:
    case C10DS_TS_DELETE_KEY:
    case C10DS_TS_WATCH_KEY:
        rc = take_bytes(k, max_key, &f->a, &f->alen);
        break;
    case C10DS_TS_ADD:
        if ((rc = take_bytes(k, max_key, &f->a, &f->alen)) == 0 && (rc = take(k, 8, &b)) == 0)
            memcpy(&f->delta, b, 8);
        break;
    case C10DS_TS_CHECK:
    case C10DS_TS_WAIT:
    case C10DS_TS_MULTI_GET:
    case C10DS_TS_MULTI_SET:
        if ((rc = take_u64(k, &f->n)) != 0)
            return rc;
        if (f->n > cfg->max_multi_keys) {
            c10ds_failed(C10D_ETOOBIG, "%s of %" PRIu64 " keys (the limit is %u, "
                         "--max-multi-keys)", names[f->op], f->n, cfg->max_multi_keys);
            return -2;
        }
        f->list = k->p + k->off;
        for (uint64_t i = 0; i < f->n && rc == 0; i++) {
            const uint8_t *x;
            size_t xn;
            rc = take_bytes(k, max_key, &x, &xn);
            if (rc == 0 && f->op == C10DS_TS_MULTI_SET)
                rc = take_bytes(k, max_val, &x, &xn);
        }
        f->list_len = (size_t)(k->p + k->off - f->list);
        break;
    case C10DS_TS_NUM_KEYS:
    case C10DS_TS_CANCEL_WAIT:
        return 0;
    default:
        return -2;
    }
    if (rc == -2)
        c10ds_failed(C10D_ETOOBIG, "its %s names a key over %llu bytes or a value over "
                     "%llu (--max-key-bytes, --max-value-bytes)", names[f->op],
                     (unsigned long long)max_key, (unsigned long long)max_val);
    return rc;
}

c10ds_ts_read_result c10ds_ts_read(const uint8_t *b, size_t len, int dialect,
                                   const c10ds_config *cfg, c10ds_ts_query *q, size_t *used)
{
    memset(q, 0, sizeof *q);
    *used = 1;
    if (len < 1)
        return C10DS_TS_SHORT;
    uint8_t type = b[0];
    const c10ds_ts_op *numbering = dialect == 2 ? numbering_v2 : numbering_v1;
    size_t count = dialect == 2 ? sizeof numbering_v2 / sizeof numbering_v2[0]
                                : sizeof numbering_v1 / sizeof numbering_v1[0];
    q->op = type < count ? numbering[type] : C10DS_TS_UNKNOWN;
    if (q->op == C10DS_TS_UNKNOWN) {
        c10ds_failed(C10D_EPROTO, "it sent query type %u, which TCPStore (torch %s) does not "
                     "have", type, dialect == 2 ? "2.2 or later" : "2.1 or earlier");
        return C10DS_TS_BAD;
    }
    cursor k = {b, len, 1, 0, 0};
    int got = read_fields(&k, q, cfg);
    if (got == -1) {
        if (k.want > cfg->max_message_bytes) {
            c10ds_failed(C10D_ETOOBIG, "its %s comes to more than %llu bytes "
                         "(--max-message-bytes)", names[q->op],
                         (unsigned long long)cfg->max_message_bytes);
            return C10DS_TS_BAD;
        }
        *used = k.want;
        return C10DS_TS_SHORT;
    }
    if (got != 0)
        return C10DS_TS_BAD;
    *used = k.off;
    return C10DS_TS_WHOLE;
}

int c10ds_ts_client_hello(const uint8_t *b, size_t len, const c10ds_config *cfg)
{
    if (len >= 5 && c10ds_ts_detect(b, len) == 2)
        return 1;
    c10ds_ts_query q;
    size_t used;
    /* a key's length and at least one byte of it: a lone GETNUMKEYS byte
     * could be the first of anything */
    return len >= 10 && c10ds_ts_read(b, len, 1, cfg, &q, &used) == C10DS_TS_WHOLE &&
           used == len && q.alen > 0;
}

/* --- the request a query becomes --- */

#define RENDEZVOUS_KEY "torch.rendezvous."

void c10ds_ts_scope(const uint8_t *key, size_t len, const uint8_t **scope, size_t *slen)
{
    const size_t rl = sizeof RENDEZVOUS_KEY - 1;
    *scope = key, *slen = 0;
    if (len && key[0] == '/') /* torch's client puts one before every key */
        key++, len--;
    if (len <= rl || memcmp(key, RENDEZVOUS_KEY, rl) != 0)
        return;
    const uint8_t *slash = memchr(key, '/', len);
    size_t n = slash ? (size_t)(slash - key) : len;
    if (slash) { /* a round's store: "<id>.<round>/" */
        size_t d = n;
        while (d > rl && key[d - 1] >= '0' && key[d - 1] <= '9')
            d--;
        if (d < n && d > rl + 1 && key[d - 1] == '.')
            n = d - 1;
    }
    *scope = key, *slen = n;
}

/* A prefix of the connection's run + key as a C string (malloc'd), or
 * NULL with why: a key holding a NUL byte (our keys are C strings), or
 * out of memory. */
typedef struct key_maker {
    c10ds_ts_prefix_fn prefix;
    void *arg;
} key_maker;

static char *store_key(const key_maker *km, const uint8_t *key, size_t len)
{
    if (memchr(key, 0, len)) {
        c10ds_failed(C10D_EINVAL, "it sent a key holding a NUL byte (keys are C strings on "
                     "c10d-coord)");
        return NULL;
    }
    const char *p = km->prefix ? km->prefix(km->arg, key, len) : C10DS_TS_KEY_PREFIX;
    if (!p)
        return NULL;
    size_t pl = strlen(p);
    char *s = malloc(pl + len + 1);
    if (!s) {
        c10ds_failed(C10D_ENOMEM, "out of memory");
        return NULL;
    }
    memcpy(s, p, pl);
    memcpy(s + pl, key, len);
    s[pl + len] = 0;
    return s;
}

/* A copy of n bytes (data NULL for none, as protobuf-c leaves it). */
static int dup_bytes(ProtobufCBinaryData *d, const uint8_t *b, size_t n)
{
    d->len = n;
    d->data = NULL;
    if (n == 0)
        return 0;
    if (!(d->data = malloc(n)))
        return c10ds_failed(C10D_ENOMEM, "out of memory");
    memcpy(d->data, b, n);
    return 0;
}

/* A submessage, zeroed and initialized (init is its protobuf-c _init). */
#define NEW_SUB(var, type, init)                                                                  \
    ((var) = malloc(sizeof *(var)), (var) ? (init(var), 0) : c10ds_failed(C10D_ENOMEM, "out of memory"))

/* The keys of a list query, and for MULTI_SET its pairs, into rq's op. */
static int read_list(const c10ds_ts_query *q, const key_maker *km, C10dpb__Request *rq)
{
    size_t n = (size_t)q->n;
    char **keys = NULL;
    C10dpb__KeyValue **kvs = NULL;
    if (q->op == C10DS_TS_MULTI_SET)
        kvs = calloc(n, sizeof *kvs);
    else
        keys = calloc(n, sizeof *keys);
    if (!keys && !kvs)
        return c10ds_failed(C10D_ENOMEM, "out of memory");
    /* Hung on rq before it is filled, each count raised as an entry is
     * made: an error half way frees what was made, with rq. */
    size_t *count = NULL;
    switch (q->op) {
    case C10DS_TS_CHECK:
        rq->check->keys = keys;
        count = &rq->check->n_keys;
        break;
    case C10DS_TS_WAIT:
        rq->wait->keys = keys;
        count = &rq->wait->n_keys;
        break;
    case C10DS_TS_MULTI_GET:
        rq->multi_get->keys = keys;
        count = &rq->multi_get->n_keys;
        break;
    default:
        rq->multi_set->kvs = kvs;
        count = &rq->multi_set->n_kvs;
        break;
    }
    cursor k = {q->list, q->list_len, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        /* Bounds checked by c10ds_ts_read; initialized all the same, since
         * GCC 14 (Debian 13) cannot see that take_bytes sets them. */
        const uint8_t *x = NULL;
        size_t xn = 0;
        take_bytes(&k, UINT64_MAX, &x, &xn);
        char *key = store_key(km, x, xn);
        if (!key)
            return -1;
        if (!kvs) {
            keys[(*count)++] = key;
            continue;
        }
        C10dpb__KeyValue *kv;
        if (NEW_SUB(kv, C10dpb__KeyValue, c10dpb__key_value__init) != 0) {
            free(key);
            return -1;
        }
        kv->key = key;
        kvs[(*count)++] = kv;
        take_bytes(&k, UINT64_MAX, &x, &xn);
        if (dup_bytes(&kv->value, x, xn) != 0)
            return -1;
    }
    return 0;
}

C10dpb__Request *c10ds_ts_request(const c10ds_ts_query *q, uint64_t id, c10ds_ts_prefix_fn prefix,
                                  void *arg)
{
    const key_maker km = {prefix, arg};
    C10dpb__Request *rq;
    if (NEW_SUB(rq, C10dpb__Request, c10dpb__request__init) != 0)
        return NULL;
    rq->request_id = id;
    char *key = NULL;
    if (q->a && !(key = store_key(&km, q->a, q->alen)))
        goto fail;
    int rc = 0;
    switch (q->op) {
    case C10DS_TS_SET:
        rq->op_case = C10DPB__REQUEST__OP_SET;
        if ((rc = NEW_SUB(rq->set, C10dpb__StoreSet, c10dpb__store_set__init)) == 0) {
            rq->set->key = key, key = NULL;
            rc = dup_bytes(&rq->set->value, q->b, q->blen);
        }
        break;
    case C10DS_TS_GET:
        rq->op_case = C10DPB__REQUEST__OP_GET;
        if ((rc = NEW_SUB(rq->get, C10dpb__StoreGet, c10dpb__store_get__init)) == 0)
            rq->get->key = key, key = NULL;
        break;
    case C10DS_TS_ADD:
        rq->op_case = C10DPB__REQUEST__OP_ADD;
        if ((rc = NEW_SUB(rq->add, C10dpb__StoreAdd, c10dpb__store_add__init)) == 0) {
            rq->add->key = key, key = NULL;
            rq->add->delta = q->delta;
        }
        break;
    case C10DS_TS_COMPARE_SET:
        rq->op_case = C10DPB__REQUEST__OP_COMPARE_SET;
        if ((rc = NEW_SUB(rq->compare_set, C10dpb__StoreCompareSet,
                          c10dpb__store_compare_set__init)) == 0) {
            rq->compare_set->key = key, key = NULL;
            if ((rc = dup_bytes(&rq->compare_set->expected, q->b, q->blen)) == 0)
                rc = dup_bytes(&rq->compare_set->desired, q->c, q->clen);
        }
        break;
    case C10DS_TS_DELETE_KEY:
        rq->op_case = C10DPB__REQUEST__OP_DELETE_KEY;
        if ((rc = NEW_SUB(rq->delete_key, C10dpb__StoreDelete, c10dpb__store_delete__init)) == 0)
            rq->delete_key->key = key, key = NULL;
        break;
    case C10DS_TS_APPEND:
        rq->op_case = C10DPB__REQUEST__OP_APPEND;
        if ((rc = NEW_SUB(rq->append, C10dpb__StoreAppend, c10dpb__store_append__init)) == 0) {
            rq->append->key = key, key = NULL;
            rc = dup_bytes(&rq->append->value, q->b, q->blen);
        }
        break;
    case C10DS_TS_NUM_KEYS:
        rq->op_case = C10DPB__REQUEST__OP_NUM_KEYS;
        if ((rc = NEW_SUB(rq->num_keys, C10dpb__StoreNumKeys, c10dpb__store_num_keys__init)) ==
                0 &&
            !(rq->num_keys->prefix = store_key(&km, (const uint8_t *)"", 0)))
            rc = -1;
        break;
    case C10DS_TS_CHECK:
        rq->op_case = C10DPB__REQUEST__OP_CHECK;
        if ((rc = NEW_SUB(rq->check, C10dpb__StoreCheck, c10dpb__store_check__init)) == 0)
            rc = read_list(q, &km, rq);
        break;
    case C10DS_TS_WAIT:
        rq->op_case = C10DPB__REQUEST__OP_WAIT;
        if ((rc = NEW_SUB(rq->wait, C10dpb__StoreWait, c10dpb__store_wait__init)) == 0) {
            /* TCPStore's WAIT carries no timeout: its client gives up with
             * CANCEL_WAIT, or hangs up. */
            rq->wait->has_timeout_ms = 1;
            rq->wait->timeout_ms = C10D_MS_FOREVER;
            rc = read_list(q, &km, rq);
        }
        break;
    case C10DS_TS_MULTI_GET:
        rq->op_case = C10DPB__REQUEST__OP_MULTI_GET;
        if ((rc = NEW_SUB(rq->multi_get, C10dpb__StoreMultiGet, c10dpb__store_multi_get__init)) ==
            0)
            rc = read_list(q, &km, rq);
        break;
    case C10DS_TS_MULTI_SET:
        rq->op_case = C10DPB__REQUEST__OP_MULTI_SET;
        if ((rc = NEW_SUB(rq->multi_set, C10dpb__StoreMultiSet, c10dpb__store_multi_set__init)) ==
            0)
            rc = read_list(q, &km, rq);
        break;
    default:
        rc = c10ds_failed(C10D_EPROTO, "%s is not supported", c10ds_ts_op_name(q->op));
        break;
    }
    if (rc == 0)
        return rq;
fail:
    free(key);
    c10dpb__request__free_unpacked(rq, NULL);
    return NULL;
}

/* --- the reply --- */

/* What a reply is written into: grown as it goes; oom once it could not. */
typedef struct out_buf {
    uint8_t *p;
    size_t len, cap;
    int oom;
} out_buf;

static void put(out_buf *o, const void *b, size_t n)
{
    if (n == 0 || o->oom) /* an empty value's bytes (b may be NULL) */
        return;
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 64;
        while (cap < o->len + n)
            cap *= 2;
        uint8_t *nb = realloc(o->p, cap);
        if (!nb) {
            o->oom = 1;
            return;
        }
        o->p = nb;
        o->cap = cap;
    }
    memcpy(o->p + o->len, b, n);
    o->len += n;
}

static void put_value(out_buf *o, const void *b, size_t n)
{
    uint64_t len = n;
    put(o, &len, 8);
    put(o, b, n);
}

static void put_text(out_buf *o, const char *s)
{
    put(o, s, strlen(s));
}

int c10ds_ts_encode(c10ds_ts_op op, const uint8_t *expected, size_t expected_len,
                    const C10dpb__Reply *rep, void **out, size_t *len)
{
    out_buf o = {0};
    uint8_t verdict = C10DS_TS_ANSWER, byte;
    int64_t v;
    if (op == C10DS_TS_COMPARE_SET && rep->status == C10D_ENOTFOUND) {
        put(&o, &verdict, 1);
        put_value(&o, expected, expected_len);
    } else if (rep->status != C10D_OK) {
        verdict = C10DS_TS_REFUSED;
        put(&o, &verdict, 1);
        put_text(&o, "its ");
        put_text(&o, c10ds_ts_op_name(op));
        put_text(&o, " was refused: ");
        put_text(&o, rep->detail ? rep->detail : "no reason given");
    } else {
        put(&o, &verdict, 1);
        switch (op) {
        case C10DS_TS_GET:
        case C10DS_TS_COMPARE_SET:
            put_value(&o, rep->value.data, rep->value.len);
            break;
        case C10DS_TS_ADD:
        case C10DS_TS_NUM_KEYS:
            v = rep->number;
            put(&o, &v, 8);
            break;
        case C10DS_TS_DELETE_KEY:
            v = rep->flag ? 1 : 0;
            put(&o, &v, 8);
            break;
        case C10DS_TS_CHECK:
            byte = rep->flag ? C10DS_TS_CHECK_READY : C10DS_TS_CHECK_NOT_READY;
            put(&o, &byte, 1);
            break;
        case C10DS_TS_WAIT:
            byte = C10DS_TS_WAIT_STOP_WAITING;
            put(&o, &byte, 1);
            break;
        case C10DS_TS_MULTI_GET:
            for (size_t i = 0; rep->values && i < rep->values->n_values; i++)
                put_value(&o, rep->values->values[i].data, rep->values->values[i].len);
            break;
        default:
            break; /* SET, APPEND, MULTI_SET: TCPStore answers nothing */
        }
    }
    if (o.oom) {
        free(o.p);
        return -1;
    }
    *out = o.p;
    *len = o.len;
    return 0;
}
