/* The store's calls for operators (c10d-ctl): the keys under a prefix,
 * with their sizes and ages, and what the coordinator says about itself. */
#include "block.h"
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys of a list reply, their store's prefix (plen bytes) stripped. */
typedef struct {
    const C10dpb__KeyList *keys;
    size_t plen;
} key_list;

static void fill_keys(c10di_block *b, const void *arg)
{
    const key_list *kl = arg;
    c10d_key_info *out = c10di_block_take(b, kl->keys->n_keys * sizeof *out);
    for (size_t i = 0; i < kl->keys->n_keys; i++) {
        const C10dpb__KeyInfo *ki = kl->keys->keys[i];
        const char *key = c10di_block_str(b, ki->key + kl->plen);
        if (out)
            out[i] = (c10d_key_info){key, ki->size, ki->updated_ms};
    }
}

c10d_status c10d_store_list(c10d_store *s, const char *prefix, size_t limit,
                            c10d_key_info **keys, size_t *n, int *truncated)
{
    if (!s || !keys || !n)
        return c10di_error(C10D_EINVAL, "c10d_store_list: store, keys and n must not be NULL");
    const char *sp = c10di_store_prefix(s);
    size_t plen = strlen(sp);
    size_t qlen = plen + (prefix ? strlen(prefix) : 0);
    char *q = malloc(qlen + 1);
    if (!q)
        return c10di_error(C10D_ENOMEM, "out of memory");
    snprintf(q, qlen + 1, "%s%s", sp, prefix ? prefix : "");
    C10dpb__StoreList m = C10DPB__STORE_LIST__INIT;
    m.prefix = q;
    m.has_limit = 1;
    m.limit = (uint32_t)(limit ? (limit > 100000 ? 100000 : limit) : 10000);
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_LIST;
    req.list = &m;
    C10dpb__Reply *rep = NULL;
    c10d_status st = c10di_store_call(s, &req, 0, &rep);
    free(q);
    if (st != C10D_OK)
        return st;
    size_t count = rep->keys ? rep->keys->n_keys : 0;
    key_list kl = {rep->keys, plen};
    c10d_key_info *out = count ? c10di_block_build(fill_keys, &kl) : malloc(1);
    if (!out) {
        c10dpb__reply__free_unpacked(rep, NULL);
        return c10di_error(C10D_ENOMEM, "out of memory for %zu keys", count);
    }
    if (truncated)
        *truncated = rep->keys && rep->keys->truncated;
    c10dpb__reply__free_unpacked(rep, NULL);
    *keys = out;
    *n = count;
    return C10D_OK;
}

static void fill_info(c10di_block *b, const void *arg)
{
    const C10dpb__StatusReply *r = arg;
    c10d_coord_info *info = c10di_block_take(b, sizeof *info);
    const char *version = c10di_block_str(b, r->version);
    const char *listen_url = c10di_block_str(b, r->listen_url);
    const char *db_path = c10di_block_str(b, r->db_path);
    const char *tcpstore_url = r->tcpstore_url ? c10di_block_str(b, r->tcpstore_url) : NULL;
    if (info)
        *info = (c10d_coord_info){version, listen_url, db_path, r->schema_version, r->uptime_ms,
                                  r->num_keys, r->clients, r->requests, r->parked,
                                  r->replies_waited, tcpstore_url, r->batches, r->polled};
}

c10d_status c10d_store_coord_info(c10d_store *s, c10d_coord_info **info)
{
    if (info)
        *info = NULL;
    if (!s || !info)
        return c10di_error(C10D_EINVAL, "c10d_store_coord_info: store and info must not be NULL");
    C10dpb__CoordStatus m = C10DPB__COORD_STATUS__INIT;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_STATUS;
    req.status = &m;
    C10dpb__Reply *rep = NULL;
    c10d_status st = c10di_store_call(s, &req, 0, &rep);
    if (st != C10D_OK)
        return st;
    const C10dpb__StatusReply *r = rep->status_info;
    if (!r) {
        c10dpb__reply__free_unpacked(rep, NULL);
        return c10di_error(C10D_EPROTO, "status reply without status");
    }
    *info = c10di_block_build(fill_info, r);
    c10dpb__reply__free_unpacked(rep, NULL);
    if (!*info)
        return c10di_error(C10D_ENOMEM, "out of memory");
    return C10D_OK;
}
