/* Members as messages (MemberInfo) for watch replies and the jobs listing:
 * a generation's members, or those not alive, with where each that left
 * stopped in its groups (member_finals); and freeing them, and the lost
 * members' cache liveness_ops.c keeps for watch replies (one read per
 * membership version, not per watcher). */
#include "groups/groups.h"

#include <stdlib.h>
#include <string.h>

void c10ds_groups_lost_free(C10dpb__MemberInfo **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i]->host);
        free(v[i]->reason);
        free(v[i]->activity);
        for (size_t k = 0; k < v[i]->n_finals; k++) {
            free(v[i]->finals[k]->group);
            free(v[i]->finals[k]);
        }
        free(v[i]->finals);
        free(v[i]);
    }
    free(v);
}

void c10ds_lost_cache_clear(c10ds_lost_cache *c)
{
    c10ds_groups_lost_free(c->v, c->n);
    free(c->detail);
    for (size_t i = 0; i < c->n_ranges; i++) {
        free(c->ranges[i]->reason);
        free(c->ranges[i]);
    }
    free(c->ranges);
    memset(c, 0, sizeof *c);
}

static void fill_member(sqlite3_stmt *s, C10dpb__MemberInfo *m)
{
    c10dpb__member_info__init(m);
    m->rank = sqlite3_column_int(s, 0);
    m->has_state = 1;
    m->state = c10ds_state_column(s, 1);
    m->host = strdup((const char *)sqlite3_column_text(s, 2));
    m->has_pid = m->has_changed_ms = m->has_last_seen_ms = 1;
    m->pid = sqlite3_column_int(s, 3);
    m->reason = strdup((const char *)sqlite3_column_text(s, 4));
    m->activity = strdup((const char *)sqlite3_column_text(s, 5));
    m->changed_ms = sqlite3_column_int64(s, 6);
    m->last_seen_ms = sqlite3_column_int64(s, 7);
}

/* Where a member that left stopped in each of its groups (none for one
 * that died: it stopped wherever it was). Out of memory, fewer are named:
 * a peer then fails a collective the rank had finished, never the other
 * way round. */
static void load_finals(c10ds_groups *g, const char *job, uint64_t gen, C10dpb__MemberInfo *m)
{
    if (m->state != C10DPB__MEMBER_STATE__MEMBER_LEFT)
        return;
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_FINALS_OF);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    sqlite3_bind_int(s, 3, m->rank);
    size_t cap = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (m->n_finals == cap) {
            size_t ncap = cap ? cap * 2 : 4;
            C10dpb__GroupSeq **nv = realloc(m->finals, ncap * sizeof *nv);
            if (!nv)
                break;
            m->finals = nv, cap = ncap;
        }
        C10dpb__GroupSeq *f = malloc(sizeof *f);
        if (!f)
            break;
        c10dpb__group_seq__init(f);
        f->group = strdup((const char *)sqlite3_column_text(s, 0));
        f->seq = (uint64_t)sqlite3_column_int64(s, 1);
        if (!f->group) {
            free(f);
            break;
        }
        m->finals[m->n_finals++] = f;
    }
    sqlite3_reset(s);
}

/* Members of a generation (all, or only those not alive). */
C10dpb__MemberInfo **c10ds_members_load(c10ds_groups *g, const char *job, uint64_t gen,
                                        int lost_only, size_t *n)
{
    sqlite3_stmt *s =
        c10ds_groups_stmt(g, lost_only ? GS_MEMBERS_LOST : GS_MEMBERS_OF_GEN);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    C10dpb__MemberInfo **v = NULL;
    size_t cap = 0;
    *n = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            C10dpb__MemberInfo **nv = realloc(v, cap * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        if (!(v[*n] = malloc(sizeof **v)))
            break;
        fill_member(s, v[(*n)++]);
    }
    sqlite3_reset(s);
    for (size_t i = 0; i < *n; i++)
        load_finals(g, job, gen, v[i]);
    return v;
}
