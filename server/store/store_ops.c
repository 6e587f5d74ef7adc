/* The store's operations on the wire: one handler per Store* message of
 * proto/c10d.proto. Each checks its arguments against the limits, calls
 * store.c, and answers, parks (waiting for a key) or fails. */
#include "config.h"
#include "engine/engine.h"
#include "failure.h"
#include "store/key_set.h"
#include "engine/ops.h"
#include "engine/request.h"
#include "store/store.h"

#include <c10d/errors.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A writer's status answered: its failure with what store.c recorded
 * (on this thread, failure.h). */
static c10ds_outcome answer_status(c10ds_request *r, c10d_status s)
{
    if (s != C10D_OK)
        return c10ds_fail(r, s, "%s", c10ds_failure());
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    return c10ds_reply(r, &rep);
}

static c10ds_outcome op_set(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StoreSet *m = r->pb->set;
    if (c10ds_check_key(e, r, m->key) || c10ds_check_write(e, r, m->key) ||
        c10ds_check_value(e, r, m->key, m->value.len))
        return C10DS_DONE;
    return answer_status(r, c10ds_store_set(&e->store, m->key, m->value.data, m->value.len));
}

/* Formats "key: a" or "keys: a, b, c" for the keys of `keys` still
 * missing (each named once), so a timeout names exactly what it waited
 * for. */
static void missing_keys(c10ds_engine *e, char **keys, size_t n, char *out, size_t outlen)
{
    size_t missing = 0, used = 0;
    char list[768] = "";
    size_t *first = c10ds_key_firsts(keys, n);
    for (size_t i = 0; i < n; i++) {
        if ((first && first[i] != i) || c10ds_store_exists(&e->store, keys[i]) == 1)
            continue;
        if (missing++ < 16 && used < sizeof list - 1)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                                     keys[i]);
    }
    free(first);
    if (missing > 16)
        snprintf(out, outlen, "keys: %s and %zu more", list, missing - 16);
    else
        snprintf(out, outlen, "key%s: %s", missing == 1 ? "" : "s", list);
}

static c10ds_outcome timed_out(c10ds_engine *e, c10ds_request *r, char **keys, size_t n)
{
    char what[1024];
    missing_keys(e, keys, n, what, sizeof what);
    return c10ds_fail(r, C10D_ETIMEDOUT, "timed out after %lld ms waiting for %s",
                      (long long)(r->deadline_ms - r->received_ms), what);
}

/* The shared shape of get, wait and multi_get: find the first missing key;
 * if there is none the caller answers; else park on it, or give up. Each
 * distinct key is looked up once, in the index alone (no value is read).
 * -1: all exist; -2: out of memory. */
static int first_missing(c10ds_engine *e, char **keys, size_t n)
{
    if (n == 1)
        return c10ds_store_exists(&e->store, keys[0]) == 1 ? -1 : 0;
    size_t *first = c10ds_key_firsts(keys, n);
    if (!first)
        return -2;
    int missing = -1;
    for (size_t i = 0; i < n && missing < 0; i++)
        if (first[i] == i && c10ds_store_exists(&e->store, keys[i]) != 1)
            missing = (int)i;
    free(first);
    return missing;
}

static int check_keys(c10ds_engine *e, c10ds_request *r, char **keys, size_t n)
{
    if (n == 0) {
        c10ds_fail(r, C10D_EINVAL, "no keys given");
        return -1;
    }
    if (n > e->cfg->max_multi_keys) {
        c10ds_fail(r, C10D_ETOOBIG, "%zu keys in one request exceed the coordinator's limit of "
                   "%u (--max-multi-keys)", n, e->cfg->max_multi_keys);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (c10ds_check_key(e, r, keys[i]))
            return -1;
    return 0;
}

/* Returns -1 when the caller should answer now (all keys exist), else the
 * outcome of parking or failing. */
static int wait_for(c10ds_engine *e, c10ds_request *r, c10ds_phase ph, char **keys, size_t n,
                    c10d_ms timeout_ms, c10ds_outcome *out)
{
    int i = first_missing(e, keys, n);
    if (i == -1)
        return -1;
    if (i < 0)
        *out = c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory looking up %zu keys", n);
    else if (ph == C10DS_EXPIRED)
        *out = timed_out(e, r, keys, n);
    else if (ph == C10DS_FIRST && timeout_ms == C10D_MS_NO_WAIT)
        *out = c10ds_fail(r, C10D_ENOTFOUND, "no such key: %s", keys[i]);
    else
        *out = c10ds_park(e, r, ph, keys[i], timeout_ms);
    return 0;
}

static c10ds_outcome op_get(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StoreGet *m = r->pb->get;
    if (ph == C10DS_FIRST && c10ds_check_key(e, r, m->key))
        return C10DS_DONE;
    const void *v;
    size_t n;
    int rc = c10ds_store_get(&e->store, m->key, &v, &n);
    if (rc == 1) {
        C10dpb__Reply rep = C10DPB__REPLY__INIT;
        rep.result_case = C10DPB__REPLY__RESULT_VALUE;
        rep.value.data = (uint8_t *)v;
        rep.value.len = n;
        c10ds_reply(r, &rep);
        c10ds_store_release(&e->store);
        return C10DS_DONE;
    }
    if (rc < 0)
        return c10ds_fail(r, C10D_ERROR, "database error reading key '%s'", m->key);
    c10ds_outcome out;
    wait_for(e, r, ph, &m->key, 1, c10ds_wire_ms(m->has_timeout_ms, m->timeout_ms, C10D_MS_NO_WAIT),
             &out);
    return out;
}


/* multi_get's reply. A small request must not make a huge reply, nor
 * make the engine read much (one large key named many times): the sizes
 * come first, from the rows' headers, and values that would come to more
 * than --max-message-bytes are refused before any is read. Then each
 * distinct key is read once; a key named again shares its copy. */
static c10ds_outcome answer_values(c10ds_engine *e, c10ds_request *r, char **keys, size_t n)
{
    size_t *first = c10ds_key_firsts(keys, n);
    ProtobufCBinaryData *vals = calloc(n, sizeof *vals);
    c10ds_outcome res = C10DS_DONE;
    if (!first || !vals) {
        res = c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory in multi_get");
        goto cleanup;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (first[i] == i && c10ds_store_size(&e->store, keys[i], &vals[i].len) != 1) {
            res = c10ds_fail(r, C10D_ERROR, "could not read key '%s'", keys[i]);
            goto cleanup;
        }
        vals[i].len = vals[first[i]].len;
        total += vals[i].len + 8;
        if (total > e->cfg->max_message_bytes) {
            res = c10ds_fail(r, C10D_ETOOBIG, "the values of these %zu keys come to more than "
                             "the coordinator's %llu-byte message limit (--max-message-bytes; "
                             "over it at key %zu, '%s', of %zu bytes): get them in smaller groups",
                             n, (unsigned long long)e->cfg->max_message_bytes, i, keys[i],
                             vals[i].len);
            goto cleanup;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const void *v;
        size_t len;
        if (first[i] != i) {
            vals[i].data = vals[first[i]].data;
            continue;
        }
        if (c10ds_store_get(&e->store, keys[i], &v, &len) != 1 || len != vals[i].len) {
            c10ds_store_release(&e->store);
            res = c10ds_fail(r, C10D_ERROR, "could not read key '%s'", keys[i]);
            goto cleanup;
        }
        /* Copied out: SQLite's buffer lives only until the next read. */
        if (!(vals[i].data = malloc(len + 1))) {
            c10ds_store_release(&e->store);
            res = c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory in multi_get");
            goto cleanup;
        }
        if (len) /* SQLite gives NULL for an empty BLOB */
            memcpy(vals[i].data, v, len);
        c10ds_store_release(&e->store);
    }
    C10dpb__Values values = C10DPB__VALUES__INIT;
    values.n_values = n;
    values.values = vals;
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_VALUES;
    rep.values = &values;
    res = c10ds_reply(r, &rep);
cleanup:
    for (size_t i = 0; vals && first && i < n; i++)
        if (first[i] == i)
            free(vals[i].data);
    free(vals);
    free(first);
    return res;
}

/* wait and multi_get: the keys checked once, parked until all exist,
 * then answered: with their values (multi_get), or with none (wait). */
static c10ds_outcome wait_all(c10ds_engine *e, c10ds_request *r, c10ds_phase ph, char **keys,
                              size_t n, c10d_ms timeout_ms, int with_values)
{
    if (ph == C10DS_FIRST && check_keys(e, r, keys, n))
        return C10DS_DONE;
    c10ds_outcome out;
    if (wait_for(e, r, ph, keys, n, timeout_ms, &out) == 0)
        return out;
    if (with_values) /* every key exists (we hold the only writer) */
        return answer_values(e, r, keys, n);
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    return c10ds_reply(r, &rep);
}

static c10ds_outcome op_wait(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StoreWait *m = r->pb->wait;
    return wait_all(e, r, ph, m->keys, m->n_keys,
                    c10ds_wire_ms(m->has_timeout_ms, m->timeout_ms, C10D_MS_NO_WAIT), 0);
}

static c10ds_outcome op_multi_get(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StoreMultiGet *m = r->pb->multi_get;
    return wait_all(e, r, ph, m->keys, m->n_keys,
                    c10ds_wire_ms(m->has_timeout_ms, m->timeout_ms, C10D_MS_NO_WAIT), 1);
}

static c10ds_outcome op_multi_set(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StoreMultiSet *m = r->pb->multi_set;
    if (m->n_kvs == 0)
        return c10ds_fail(r, C10D_EINVAL, "multi_set with no keys");
    if (m->n_kvs > e->cfg->max_multi_keys)
        return c10ds_fail(r, C10D_ETOOBIG, "%zu keys in one multi_set exceed the coordinator's "
                          "limit of %u (--max-multi-keys)", m->n_kvs, e->cfg->max_multi_keys);
    for (size_t i = 0; i < m->n_kvs; i++)
        if (c10ds_check_key(e, r, m->kvs[i]->key) || c10ds_check_write(e, r, m->kvs[i]->key) ||
            c10ds_check_value(e, r, m->kvs[i]->key, m->kvs[i]->value.len))
            return C10DS_DONE;
    /* Atomic: a savepoint inside the batch's transaction, so a failure part
     * way leaves none of these keys written. */
    sqlite3_exec(e->db->h, "SAVEPOINT multi_set", NULL, NULL, NULL);
    for (size_t i = 0; i < m->n_kvs; i++) {
        c10d_status s = c10ds_store_set(&e->store, m->kvs[i]->key, m->kvs[i]->value.data,
                                        m->kvs[i]->value.len);
        if (s != C10D_OK) {
            sqlite3_exec(e->db->h, "ROLLBACK TO multi_set; RELEASE multi_set", NULL, NULL, NULL);
            c10ds_store_recount(&e->store);
            return answer_status(r, s);
        }
    }
    sqlite3_exec(e->db->h, "RELEASE multi_set", NULL, NULL, NULL);
    return answer_status(r, C10D_OK);
}

static c10ds_outcome op_add(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StoreAdd *m = r->pb->add;
    if (c10ds_check_key(e, r, m->key) || c10ds_check_write(e, r, m->key))
        return C10DS_DONE;
    int64_t v = 0;
    c10d_status s = c10ds_store_add(&e->store, m->key, m->delta, &v);
    if (s != C10D_OK)
        return answer_status(r, s);
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_NUMBER;
    rep.number = v;
    return c10ds_reply(r, &rep);
}

static c10ds_outcome op_compare_set(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StoreCompareSet *m = r->pb->compare_set;
    if (c10ds_check_key(e, r, m->key) || c10ds_check_write(e, r, m->key) ||
        c10ds_check_value(e, r, m->key, m->desired.len))
        return C10DS_DONE;
    void *cur = NULL;
    size_t clen = 0;
    c10d_status s =
        c10ds_store_compare_set(&e->store, m->key, m->expected.data, m->expected.len,
                                m->desired.data, m->desired.len, &cur, &clen);
    if (s != C10D_OK)
        return answer_status(r, s);
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_VALUE;
    rep.value.data = cur;
    rep.value.len = clen;
    c10ds_reply(r, &rep);
    free(cur);
    return C10DS_DONE;
}

static c10ds_outcome op_append(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StoreAppend *m = r->pb->append;
    if (c10ds_check_key(e, r, m->key) || c10ds_check_write(e, r, m->key) ||
        c10ds_check_value(e, r, m->key, m->value.len))
        return C10DS_DONE;
    return answer_status(r, c10ds_store_append(&e->store, m->key, m->value.data, m->value.len,
                                               e->cfg->max_value_bytes));
}

static c10ds_outcome op_delete(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StoreDelete *m = r->pb->delete_key;
    if (c10ds_check_key(e, r, m->key) || c10ds_check_write(e, r, m->key))
        return C10DS_DONE;
    int deleted = 0;
    c10d_status s = c10ds_store_delete(&e->store, m->key, &deleted);
    if (s != C10D_OK)
        return answer_status(r, s);
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_FLAG;
    rep.flag = deleted;
    return c10ds_reply(r, &rep);
}

static c10ds_outcome op_check(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StoreCheck *m = r->pb->check;
    if (check_keys(e, r, m->keys, m->n_keys))
        return C10DS_DONE;
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_FLAG;
    int missing = first_missing(e, m->keys, m->n_keys);
    if (missing == -2)
        return c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory looking up %zu keys",
                          m->n_keys);
    rep.flag = missing == -1;
    return c10ds_reply(r, &rep);
}

static c10ds_outcome op_num_keys(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    int64_t n = c10ds_store_count(&e->store, r->pb->num_keys->prefix);
    if (n < 0)
        return c10ds_fail(r, C10D_ERROR, "database error counting keys");
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_NUMBER;
    rep.number = n;
    return c10ds_reply(r, &rep);
}

typedef struct list_acc {
    C10dpb__KeyInfo *infos;
    C10dpb__KeyInfo **ptrs;
    size_t n, cap;
    int oom;
} list_acc;

static void list_one(void *arg, const char *key, uint64_t size, int64_t updated_ms)
{
    list_acc *a = arg;
    if (a->oom || a->n == a->cap)
        return;
    C10dpb__KeyInfo *k = &a->infos[a->n];
    c10dpb__key_info__init(k);
    if (!(k->key = strdup(key))) {
        a->oom = 1;
        return;
    }
    k->has_size = k->has_updated_ms = 1;
    k->size = size;
    k->updated_ms = updated_ms;
    a->ptrs[a->n++] = k;
}

static c10ds_outcome op_list(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StoreList *m = r->pb->list;
    uint64_t limit = m->has_limit && m->limit ? m->limit : 10000;
    if (limit > 100000)
        limit = 100000;
    list_acc a = {0};
    a.cap = (size_t)limit;
    int64_t count = c10ds_store_count(&e->store, m->prefix);
    if (count >= 0 && (uint64_t)count < limit)
        a.cap = (size_t)count + 1;
    a.infos = calloc(a.cap, sizeof *a.infos);
    a.ptrs = calloc(a.cap, sizeof *a.ptrs);
    c10ds_outcome res;
    int more = 0;
    if (!a.infos || !a.ptrs) {
        res = c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory listing keys");
        goto cleanup;
    }
    if (c10ds_store_list(&e->store, m->prefix, a.cap < limit ? a.cap : limit, list_one, &a,
                         &more) < 0 || a.oom) {
        res = c10ds_fail(r, C10D_ERROR, "could not list keys");
        goto cleanup;
    }
    C10dpb__KeyList kl = C10DPB__KEY_LIST__INIT;
    kl.n_keys = a.n;
    kl.keys = a.ptrs;
    kl.has_truncated = 1;
    kl.truncated = more;
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_KEYS;
    rep.keys = &kl;
    res = c10ds_reply(r, &rep);
cleanup:
    for (size_t i = 0; i < a.n; i++)
        free(a.infos[i].key);
    free(a.infos);
    free(a.ptrs);
    return res;
}

const c10ds_op c10ds_store_ops[] = {
    {C10DPB__REQUEST__OP_SET, "set", op_set, 0},
    {C10DPB__REQUEST__OP_GET, "get", op_get, C10DS_OP_READS},
    {C10DPB__REQUEST__OP_ADD, "add", op_add, C10DS_OP_DEDUP},
    {C10DPB__REQUEST__OP_COMPARE_SET, "compare_set", op_compare_set, C10DS_OP_DEDUP},
    {C10DPB__REQUEST__OP_WAIT, "wait", op_wait, C10DS_OP_READS},
    {C10DPB__REQUEST__OP_CHECK, "check", op_check, C10DS_OP_READS},
    {C10DPB__REQUEST__OP_NUM_KEYS, "num_keys", op_num_keys, C10DS_OP_READS},
    {C10DPB__REQUEST__OP_DELETE_KEY, "delete_key", op_delete, C10DS_OP_DEDUP},
    {C10DPB__REQUEST__OP_APPEND, "append", op_append, C10DS_OP_DEDUP},
    {C10DPB__REQUEST__OP_MULTI_GET, "multi_get", op_multi_get, C10DS_OP_READS},
    {C10DPB__REQUEST__OP_MULTI_SET, "multi_set", op_multi_set, 0},
    {C10DPB__REQUEST__OP_LIST, "list", op_list, C10DS_OP_READS},
    {0, NULL, NULL, 0},
};
