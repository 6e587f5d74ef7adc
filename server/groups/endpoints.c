/* The formed group's endpoints, for its members' replies: all of a group's
 * members are answered in one burst when its last one arrives, so its
 * endpoints are read from the database once (group_members) and kept,
 * with an index of its ranks by host, so that a peers_on_demand reply
 * (the caller's host's members only) costs its own size. */
#include "groups/groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void c10ds_endpoints_clear(c10ds_endpoints *c)
{
    for (int i = 0; c->eps && i < c->size; i++)
        free(c->eps[i].data);
    free(c->eps);
    free(c->by_host);
    free(c->host_from);
    free(c->host_to);
    memset(c, 0, sizeof *c);
}

/* The endpoints of a formed group, from the cache or the database. */
const ProtobufCBinaryData *c10ds_groups_formed_endpoints(c10ds_groups *g, c10ds_endpoints *c,
                                                         const char *job, uint64_t gen,
                                                         const char *name, int size)
{
    char key[512];
    c10ds_group_key(key, sizeof key, job, gen, name);
    if (c->eps && c->size == size && strcmp(c->key, key) == 0)
        return c->eps;
    c10ds_endpoints_clear(c);
    if (!(c->eps = calloc((size_t)size, sizeof *c->eps)))
        return NULL;
    c->size = size;
    snprintf(c->key, sizeof c->key, "%s", key);
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_GM_LIST);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_TRANSIENT);
    /* A column's blob is only valid until the next step: copy each. */
    while (sqlite3_step(s) == SQLITE_ROW) {
        int idx = sqlite3_column_int(s, 0);
        size_t len = (size_t)sqlite3_column_bytes(s, 1);
        if (idx < 0 || idx >= size || c->eps[idx].data ||
            !(c->eps[idx].data = malloc(len ? len : 1)))
            continue;
        if (len)
            memcpy(c->eps[idx].data, sqlite3_column_blob(s, 1), len);
        c->eps[idx].len = len;
    }
    sqlite3_reset(s);
    /* Who shares a host: ranks ordered by (host, rank) and, per rank, its
     * host's range in that order. */
    c->by_host = calloc((size_t)size, sizeof *c->by_host);
    c->host_from = calloc((size_t)size, sizeof *c->host_from);
    c->host_to = calloc((size_t)size, sizeof *c->host_to);
    if (!c->by_host || !c->host_from || !c->host_to) {
        c10ds_endpoints_clear(c);
        return NULL;
    }
    s = c10ds_groups_stmt(g, GS_GM_HOSTS);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_TRANSIENT);
    int n = 0, from = 0;
    char prev[256] = "";
    while (sqlite3_step(s) == SQLITE_ROW && n < size) {
        int idx = sqlite3_column_int(s, 0);
        const char *host = (const char *)sqlite3_column_text(s, 1);
        if (idx < 0 || idx >= size)
            continue;
        if (n == 0 || strcmp(prev, host ? host : "") != 0) {
            for (int k = from; k < n; k++)
                c->host_to[c->by_host[k]] = n;
            from = n;
            snprintf(prev, sizeof prev, "%s", host ? host : "");
        }
        c->by_host[n] = idx;
        c->host_from[idx] = from;
        n++;
    }
    for (int k = from; k < n; k++)
        c->host_to[c->by_host[k]] = n;
    sqlite3_reset(s);
    return c->eps;
}

/* idx's host's members, in rank order (group ranks), from the cache. */
int c10ds_endpoints_host_peers(const c10ds_endpoints *c, int idx, int32_t *out)
{
    int n = 0;
    for (int k = c->host_from[idx]; k < c->host_to[idx]; k++)
        out[n++] = c->by_host[k];
    for (int i = 1; i < n; i++) /* a host holds a few ranks: insertion sort */
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            int32_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}
