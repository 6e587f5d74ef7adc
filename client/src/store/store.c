/* The public store API: handles and prefix views, argument checks against
 * the coordinator's limits, and the key-value calls, one request each. The
 * operators' calls (list, coord_info) are store_admin.c's. Some 500 lines:
 * thirteen calls of four to twenty lines each over one reply path
 * (call_for), which a further split would only scatter. */
#include "store/store_internal.h"

#include "run_scope.h"

#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct c10d_store {
    c10di_conn *conn;
    char *prefix; /* "" for the root store, else "a/" or "a/b/" */
    c10d_ms timeout_ms;
    int operator_write; /* c10d_store_set_operator: the coordinator logs its writes */
};

static c10d_status store_new(c10d_store **out, c10di_conn *conn, const char *prefix,
                             c10d_ms timeout)
{
    c10d_store *s = calloc(1, sizeof *s);
    if (!s || !(s->prefix = strdup(prefix))) {
        free(s);
        return c10di_error(C10D_ENOMEM, "out of memory");
    }
    s->conn = conn;
    s->timeout_ms = timeout;
    *out = s;
    return C10D_OK;
}

c10di_conn *c10di_store_conn(c10d_store *s)
{
    return s->conn;
}

c10d_status c10di_store_over(c10d_store **out, c10di_conn *conn, const char *prefix,
                             c10d_ms timeout_ms)
{
    c10d_status st = store_new(out, conn, prefix, timeout_ms);
    if (st == C10D_OK)
        c10di_conn_ref(conn);
    return st;
}

c10d_status c10di_run_store_over(c10d_store **out, c10di_conn *conn, const char *job,
                                 uint64_t generation, c10d_ms timeout_ms, const char *fmt, ...)
{
    *out = NULL;
    char prefix[C10D_RUN_SCOPE_BYTES(C10D_MAX_JOB_BYTES) + 256];
    size_t at = c10d_run_scope(prefix, sizeof prefix, job, generation);
    if (!at)
        return c10di_error(C10D_EINVAL, "the run's store prefix of job %.64s%s (generation "
                           "%llu) does not fit in %zu bytes", job, strlen(job) > 64 ? "..." : "",
                           (unsigned long long)generation, sizeof prefix);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix + at, sizeof prefix - at, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof prefix - at)
        return c10di_error(C10D_EINVAL, "a key prefix in the run's store of job %.64s%s does not "
                           "fit in %zu bytes (%s...)", job, strlen(job) > 64 ? "..." : "",
                           sizeof prefix, prefix);
    return c10di_store_over(out, conn, prefix, timeout_ms);
}

c10d_status c10d_store_connect(c10d_store **out, const char *url, const c10d_store_opts *o)
{
    if (!out)
        return c10di_error(C10D_EINVAL, "c10d_store_connect: out is NULL");
    *out = NULL; /* defined on failure: closing it is safe */
    c10d_store_opts opts = C10D_STORE_OPTS_INIT;
    c10d_status est;
    if (o && (est = c10di_opts_version("c10d_store_connect", "c10d_store_opts", o->version,
                                       C10D_STORE_OPTS_VERSION)) != C10D_OK)
        return est;
    /* A version 1 struct ends before tls_cert: only what it has is read. */
    if (o)
        memcpy(&opts, o, o->version >= 2 ? sizeof opts : offsetof(c10d_store_opts, tls_cert));
    long env_timeout = C10D_STORE_TIMEOUT_DEFAULT_MS;
    if (opts.timeout_ms == C10D_TIMEOUT_DEFAULT &&
        (est = c10di_env_int("C10D_TIMEOUT_MS", C10D_STORE_TIMEOUT_DEFAULT_MS, 1, INT_MAX, &env_timeout)))
        return c10di_error(est, "c10d_store_connect: %s", c10d_errmsg());
    c10d_ms timeout, connect_timeout;
    if ((est = c10di_timeout("c10d_store_connect", "opts.timeout_ms", opts.timeout_ms,
                             (int)env_timeout, 0, &timeout)) != C10D_OK ||
        (est = c10di_timeout("c10d_store_connect", "opts.connect_timeout_ms",
                             opts.connect_timeout_ms, timeout, 0, &connect_timeout)) != C10D_OK)
        return est;
    const char *token = opts.token ? opts.token : getenv("C10D_TOKEN");
    c10di_conn *conn;
    c10di_tls_files tls = {opts.tls_ca, opts.tls_cert, opts.tls_key};
    c10d_status st = c10di_conn_open(&conn, url, token, &tls, connect_timeout,
                                     c10di_timeout_from(opts.timeout_ms));
    if (st != C10D_OK)
        return st;
    if ((st = store_new(out, conn, "", timeout)) != C10D_OK)
        c10di_conn_unref(conn);
    return st;
}

void c10d_store_close(c10d_store *s)
{
    if (!s)
        return;
    c10di_conn_unref(s->conn);
    free(s->prefix);
    free(s);
}

c10d_status c10d_store_prefix(c10d_store **out, c10d_store *parent, const char *prefix)
{
    if (out)
        *out = NULL;
    if (!out || !parent || !prefix || !*prefix)
        return c10di_error(C10D_EINVAL, "c10d_store_prefix needs a store and a non-empty prefix");
    size_t n = strlen(parent->prefix) + strlen(prefix) + 2;
    char *p = malloc(n);
    if (!p)
        return c10di_error(C10D_ENOMEM, "out of memory");
    snprintf(p, n, "%s%s/", parent->prefix, prefix);
    c10d_status st = store_new(out, parent->conn, p, parent->timeout_ms);
    free(p);
    if (st == C10D_OK)
        c10di_conn_ref(parent->conn);
    return st;
}

const char *c10d_store_url(const c10d_store *s)
{
    return s ? c10di_conn_url(s->conn) : NULL;
}

/* --- helpers --- */

/* The key as the coordinator sees it (prefix + key), checked against the
 * limits first so an oversized key fails here with a clear message. */
static c10d_status full_key(const c10d_store *s, const char *key, char **out)
{
    if (!s)
        return c10di_error(C10D_EINVAL, "store is NULL");
    if (!key || !*key)
        return c10di_error(C10D_EINVAL, "key is NULL or empty");
    size_t plen = strlen(s->prefix), klen = strlen(key);
    uint64_t max = c10di_conn_limits(s->conn).max_key_bytes;
    if (max && plen + klen > max)
        return c10di_error(C10D_ETOOBIG, "key of %zu bytes exceeds the coordinator's limit of "
                           "%llu (--max-key-bytes)", plen + klen, (unsigned long long)max);
    char *k = malloc(plen + klen + 1);
    if (!k)
        return c10di_error(C10D_ENOMEM, "out of memory");
    memcpy(k, s->prefix, plen);
    memcpy(k + plen, key, klen + 1);
    *out = k;
    return C10D_OK;
}

static c10d_status check_value(const c10d_store *s, const char *key, const void *val, size_t len)
{
    if (!val && len)
        return c10di_error(C10D_EINVAL, "value for key '%s' is NULL with length %zu", key, len);
    uint64_t max = c10di_conn_limits(s->conn).max_value_bytes;
    if (max && len > max)
        return c10di_error(C10D_ETOOBIG, "value of %zu bytes for key '%s' exceeds the "
                           "coordinator's limit of %llu bytes (--max-value-bytes)", len, key,
                           (unsigned long long)max);
    return C10D_OK;
}

/* Builds an array of prefixed keys. */
static c10d_status full_keys(const c10d_store *s, const char *const *keys, size_t n, char ***out)
{
    if (!keys || n == 0)
        return c10di_error(C10D_EINVAL, "no keys given");
    uint32_t max = c10di_conn_limits(s->conn).max_multi_keys;
    if (max && n > max)
        return c10di_error(C10D_ETOOBIG, "%zu keys in one call exceed the coordinator's limit of "
                           "%u (--max-multi-keys)", n, max);
    char **k = calloc(n, sizeof *k);
    if (!k)
        return c10di_error(C10D_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        c10d_status st = full_key(s, keys[i], &k[i]);
        if (st != C10D_OK) {
            for (size_t j = 0; j < i; j++)
                free(k[j]);
            free(k);
            return st;
        }
    }
    *out = k;
    return C10D_OK;
}

static void free_keys(char **k, size_t n)
{
    if (!k)
        return;
    for (size_t i = 0; i < n; i++)
        free(k[i]);
    free(k);
}

/* How long the coordinator holds a get or wait for a missing key: the
 * API's timeout (c10d/common.h) as a duration (common/c10d_time.h), where
 * C10D_NO_WAIT is C10D_MS_NO_WAIT, which the wire says as 0 too. */
static c10d_status wait_ms(const c10d_store *s, const char *fn, c10d_ms timeout_ms, c10d_ms *out)
{
    return c10di_timeout(fn, "timeout_ms", timeout_ms, s->timeout_ms, 1, out);
}

static void *copy_out(const void *v, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        if (n)
            memcpy(p, v, n);
        p[n] = '\0';
    }
    return p;
}

c10d_status c10di_store_call(c10d_store *s, C10dpb__Request *req, c10d_ms server_wait_ms,
                             C10dpb__Reply **rep)
{
    if (s->operator_write)
        req->has_operator_write = req->operator_write = 1;
    return c10di_call(s->conn, req, server_wait_ms, s->timeout_ms, rep);
}

c10d_status c10d_store_set_operator(c10d_store *s, int on)
{
    if (!s)
        return c10di_error(C10D_EINVAL, "c10d_store_set_operator: s is NULL");
    s->operator_write = on != 0;
    return C10D_OK;
}

const char *c10di_store_prefix(const c10d_store *s)
{
    return s->prefix;
}

/* What a call keeps of its reply: the fields asked for (non-NULL), written
 * only on success. */
typedef struct {
    int64_t *number;
    int *flag;
    void **value; /* a NUL-terminated copy, for c10d_free */
    size_t *value_len;
} reply_out;

/* The one path of the key-value calls: sends req, keeps what out asks
 * for, frees the reply. */
static c10d_status call_for(c10d_store *s, C10dpb__Request *req, c10d_ms server_wait_ms,
                            reply_out out)
{
    C10dpb__Reply *rep = NULL;
    c10d_status st = c10di_store_call(s, req, server_wait_ms, &rep);
    if (st != C10D_OK)
        return st;
    if (out.value) {
        void *p = copy_out(rep->value.data, rep->value.len);
        if (!p)
            st = c10di_error(C10D_ENOMEM, "out of memory for a %zu-byte value", rep->value.len);
        else
            *out.value = p;
    }
    if (st == C10D_OK) {
        if (out.value_len)
            *out.value_len = rep->value.len;
        if (out.number)
            *out.number = rep->number;
        if (out.flag)
            *out.flag = rep->flag ? 1 : 0;
    }
    c10dpb__reply__free_unpacked(rep, NULL);
    return st;
}

/* --- operations --- */

c10d_status c10d_store_set(c10d_store *s, const char *key, const void *val, size_t len)
{
    char *k = NULL;
    c10d_status st = full_key(s, key, &k);
    if (st == C10D_OK && (st = check_value(s, key, val, len)) == C10D_OK) {
        C10dpb__StoreSet m = C10DPB__STORE_SET__INIT;
        m.key = k;
        m.value.data = (uint8_t *)val;
        m.value.len = len;
        C10dpb__Request req = C10DPB__REQUEST__INIT;
        req.op_case = C10DPB__REQUEST__OP_SET;
        req.set = &m;
        st = call_for(s, &req, 0, (reply_out){0});
    }
    free(k);
    return st;
}

c10d_status c10d_store_get(c10d_store *s, const char *key, void **val, size_t *len,
                           int timeout_ms)
{
    if (!val || !len)
        return c10di_error(C10D_EINVAL, "c10d_store_get: val and len must not be NULL");
    *val = NULL; /* defined on failure (a timeout): c10d_free(*val) is safe */
    *len = 0;
    char *k = NULL;
    c10d_ms wait = C10D_MS_NO_WAIT;
    c10d_status st = full_key(s, key, &k);
    if (st == C10D_OK)
        st = wait_ms(s, "c10d_store_get", timeout_ms, &wait);
    if (st != C10D_OK) {
        free(k);
        return st;
    }
    C10dpb__StoreGet m = C10DPB__STORE_GET__INIT;
    m.key = k;
    m.has_timeout_ms = 1;
    m.timeout_ms = wait;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_GET;
    req.get = &m;
    st = call_for(s, &req, m.timeout_ms, (reply_out){.value = val, .value_len = len});
    free(k);
    return st;
}

c10d_status c10d_store_add(c10d_store *s, const char *key, int64_t delta, int64_t *result)
{
    char *k = NULL;
    c10d_status st = full_key(s, key, &k);
    if (st != C10D_OK)
        return st;
    C10dpb__StoreAdd m = C10DPB__STORE_ADD__INIT;
    m.key = k;
    m.delta = delta;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_ADD;
    req.add = &m;
    st = call_for(s, &req, 0, (reply_out){.number = result});
    free(k);
    return st;
}

c10d_status c10d_store_compare_set(c10d_store *s, const char *key, const void *expected,
                                   size_t elen, const void *desired, size_t dlen, void **cur,
                                   size_t *clen)
{
    if (cur)
        *cur = NULL;
    if (clen)
        *clen = 0;
    char *k = NULL;
    c10d_status st = full_key(s, key, &k);
    if (st != C10D_OK)
        return st;
    if ((st = check_value(s, key, desired, dlen)) != C10D_OK ||
        (!expected && elen)) {
        free(k);
        return st != C10D_OK ? st : c10di_error(C10D_EINVAL, "expected is NULL with length %zu",
                                                elen);
    }
    C10dpb__StoreCompareSet m = C10DPB__STORE_COMPARE_SET__INIT;
    m.key = k;
    m.expected.data = (uint8_t *)expected;
    m.expected.len = elen;
    m.desired.data = (uint8_t *)desired;
    m.desired.len = dlen;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_COMPARE_SET;
    req.compare_set = &m;
    st = call_for(s, &req, 0, (reply_out){.value = cur, .value_len = clen});
    free(k);
    return st;
}

c10d_status c10d_store_wait(c10d_store *s, const char *const *keys, size_t n, int timeout_ms)
{
    char **k = NULL;
    c10d_ms wait = C10D_MS_NO_WAIT;
    c10d_status st = s ? wait_ms(s, "c10d_store_wait", timeout_ms, &wait)
                       : c10di_error(C10D_EINVAL, "store is NULL");
    if (st == C10D_OK)
        st = full_keys(s, keys, n, &k);
    if (st != C10D_OK)
        return st;
    C10dpb__StoreWait m = C10DPB__STORE_WAIT__INIT;
    m.keys = k;
    m.n_keys = n;
    m.has_timeout_ms = 1;
    m.timeout_ms = wait;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_WAIT;
    req.wait = &m;
    st = call_for(s, &req, m.timeout_ms, (reply_out){0});
    free_keys(k, n);
    return st;
}

c10d_status c10d_store_check(c10d_store *s, const char *const *keys, size_t n, int *all_exist)
{
    char **k = NULL;
    c10d_status st = s ? full_keys(s, keys, n, &k) : c10di_error(C10D_EINVAL, "store is NULL");
    if (st != C10D_OK)
        return st;
    C10dpb__StoreCheck m = C10DPB__STORE_CHECK__INIT;
    m.keys = k;
    m.n_keys = n;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_CHECK;
    req.check = &m;
    st = call_for(s, &req, 0, (reply_out){.flag = all_exist});
    free_keys(k, n);
    return st;
}

c10d_status c10d_store_num_keys(c10d_store *s, int64_t *n)
{
    if (!s || !n)
        return c10di_error(C10D_EINVAL, "c10d_store_num_keys: store and n must not be NULL");
    C10dpb__StoreNumKeys m = C10DPB__STORE_NUM_KEYS__INIT;
    m.prefix = s->prefix;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_NUM_KEYS;
    req.num_keys = &m;
    return call_for(s, &req, 0, (reply_out){.number = n});
}

c10d_status c10d_store_delete_key(c10d_store *s, const char *key, int *deleted)
{
    char *k = NULL;
    c10d_status st = full_key(s, key, &k);
    if (st != C10D_OK)
        return st;
    C10dpb__StoreDelete m = C10DPB__STORE_DELETE__INIT;
    m.key = k;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_DELETE_KEY;
    req.delete_key = &m;
    st = call_for(s, &req, 0, (reply_out){.flag = deleted});
    free(k);
    return st;
}

c10d_status c10d_store_append(c10d_store *s, const char *key, const void *val, size_t len)
{
    char *k = NULL;
    c10d_status st = full_key(s, key, &k);
    if (st == C10D_OK && (st = check_value(s, key, val, len)) == C10D_OK) {
        C10dpb__StoreAppend m = C10DPB__STORE_APPEND__INIT;
        m.key = k;
        m.value.data = (uint8_t *)val;
        m.value.len = len;
        C10dpb__Request req = C10DPB__REQUEST__INIT;
        req.op_case = C10DPB__REQUEST__OP_APPEND;
        req.append = &m;
        st = call_for(s, &req, 0, (reply_out){0});
    }
    free(k);
    return st;
}

c10d_status c10d_store_multi_get(c10d_store *s, const char *const *keys, size_t n, void **vals,
                                 size_t *lens, int timeout_ms)
{
    if (!vals || !lens)
        return c10di_error(C10D_EINVAL, "c10d_store_multi_get: vals and lens must not be NULL");
    for (size_t i = 0; keys && i < n; i++)
        vals[i] = NULL, lens[i] = 0;
    char **k = NULL;
    c10d_ms wait = C10D_MS_NO_WAIT;
    c10d_status st = s ? wait_ms(s, "c10d_store_multi_get", timeout_ms, &wait)
                       : c10di_error(C10D_EINVAL, "store is NULL");
    if (st == C10D_OK)
        st = full_keys(s, keys, n, &k);
    if (st != C10D_OK)
        return st;
    C10dpb__StoreMultiGet m = C10DPB__STORE_MULTI_GET__INIT;
    m.keys = k;
    m.n_keys = n;
    m.has_timeout_ms = 1;
    m.timeout_ms = wait;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_MULTI_GET;
    req.multi_get = &m;
    C10dpb__Reply *rep = NULL;
    if ((st = c10di_store_call(s, &req, m.timeout_ms, &rep)) == C10D_OK) {
        if (!rep->values || rep->values->n_values != n) {
            st = c10di_error(C10D_EPROTO, "multi_get of %zu keys answered with %zu values", n,
                             rep->values ? rep->values->n_values : 0);
        } else {
            size_t i;
            for (i = 0; i < n; i++) {
                if (!(vals[i] = copy_out(rep->values->values[i].data, rep->values->values[i].len)))
                    break;
                lens[i] = rep->values->values[i].len;
            }
            if (i < n) { /* out-parameters are written only on success */
                while (i--)
                    free(vals[i]);
                st = c10di_error(C10D_ENOMEM, "out of memory copying %zu values", n);
            }
        }
        c10dpb__reply__free_unpacked(rep, NULL);
    }
    free_keys(k, n);
    return st;
}

c10d_status c10d_store_multi_set(c10d_store *s, const char *const *keys, const void *const *vals,
                                 const size_t *lens, size_t n)
{
    if (!vals || !lens)
        return c10di_error(C10D_EINVAL, "c10d_store_multi_set: vals and lens must not be NULL");
    char **k = NULL;
    c10d_status st = s ? full_keys(s, keys, n, &k) : c10di_error(C10D_EINVAL, "store is NULL");
    if (st != C10D_OK)
        return st;
    C10dpb__KeyValue *kvs = calloc(n, sizeof *kvs);
    C10dpb__KeyValue **ptrs = calloc(n, sizeof *ptrs);
    if (!kvs || !ptrs) {
        st = c10di_error(C10D_ENOMEM, "out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) {
        if ((st = check_value(s, keys[i], vals[i], lens[i])) != C10D_OK)
            goto cleanup;
        c10dpb__key_value__init(&kvs[i]);
        kvs[i].key = k[i];
        kvs[i].value.data = (uint8_t *)vals[i];
        kvs[i].value.len = lens[i];
        ptrs[i] = &kvs[i];
    }
    C10dpb__StoreMultiSet m = C10DPB__STORE_MULTI_SET__INIT;
    m.kvs = ptrs;
    m.n_kvs = n;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_MULTI_SET;
    req.multi_set = &m;
    st = call_for(s, &req, 0, (reply_out){0});
cleanup:
    free(kvs);
    free(ptrs);
    free_keys(k, n);
    return st;
}
