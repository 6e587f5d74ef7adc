/* The store's calls for operators (c10d-ctl): the keys under a prefix,
 * with their sizes and ages, and what the coordinator says about itself. */
#include "block.h"
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    /* One allocation: the array, then the key strings (prefix stripped). */
    size_t count = rep->keys ? rep->keys->n_keys : 0, bytes = count * sizeof(c10d_key_info);
    for (size_t i = 0; i < count; i++)
        bytes += strlen(rep->keys->keys[i]->key) - plen + 1;
    c10d_key_info *out = malloc(bytes ? bytes : 1);
    if (!out) {
        c10dpb__reply__free_unpacked(rep, NULL);
        return c10di_error(C10D_ENOMEM, "out of memory for %zu keys", count);
    }
    char *strs = (char *)(out + count);
    for (size_t i = 0; i < count; i++) {
        const C10dpb__KeyInfo *ki = rep->keys->keys[i];
        size_t l = strlen(ki->key) - plen;
        memcpy(strs, ki->key + plen, l + 1);
        out[i].key = strs;
        out[i].size = ki->size;
        out[i].updated_ms = ki->updated_ms;
        strs += l + 1;
    }
    if (truncated)
        *truncated = rep->keys && rep->keys->truncated;
    c10dpb__reply__free_unpacked(rep, NULL);
    *keys = out;
    *n = count;
    return C10D_OK;
}

static c10d_coord_info *fill_info(c10di_block *b, const C10dpb__StatusReply *r)
{
    c10d_coord_info *info = c10di_block_take(b, sizeof *info);
    const char *version = c10di_block_str(b, r->version);
    const char *listen_url = c10di_block_str(b, r->listen_url);
    const char *db_path = c10di_block_str(b, r->db_path);
    if (info)
        *info = (c10d_coord_info){version, listen_url, db_path, r->schema_version, r->uptime_ms,
                                  r->num_keys, r->clients, r->requests, r->parked};
    return info;
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
    c10di_block b = {NULL, 0};
    fill_info(&b, r);
    if (!(b.base = malloc(b.used))) {
        c10dpb__reply__free_unpacked(rep, NULL);
        return c10di_error(C10D_ENOMEM, "out of memory");
    }
    b.used = 0;
    *info = fill_info(&b, r);
    c10dpb__reply__free_unpacked(rep, NULL);
    return C10D_OK;
}
