#include "join/join.h"

#include "db/db.h"

#include "c10d_time.h"
#include "join_words.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sql[JS_COUNT] = {
    [JS_REGION_GET] = "SELECT region, throw_early, divide_initial, begun_ms, done_ms IS NOT NULL, "
                      "coalesce(last_joiner, -1), coalesce(final_seq, 0) FROM join_regions "
                      "WHERE job = ?1 AND generation = ?2 AND name = ?3 AND (?4 IS NULL OR "
                      "region = ?4) ORDER BY region DESC LIMIT 1",
    [JS_REGION_PUT] = "INSERT OR IGNORE INTO join_regions(job, generation, name, region, "
                      "throw_early, divide_initial, begun_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [JS_REGION_DONE] = "UPDATE join_regions SET done_ms = ?5, last_joiner = ?6, final_seq = ?7 "
                       "WHERE job = ?1 AND generation = ?2 AND name = ?3 AND region = ?4",
    [JS_MEMBERS_GET] = "SELECT rank, join_order, after_seq, joined_ms FROM join_members WHERE "
                       "job = ?1 AND generation = ?2 AND name = ?3 AND region = ?4",
    [JS_MEMBER_PUT] = "INSERT OR IGNORE INTO join_members(job, generation, name, region, rank, "
                      "global_rank, join_order, after_seq, joined_ms) VALUES(?1, ?2, ?3, ?4, ?5, "
                      "?6, ?7, ?8, ?9)",
};

int c10ds_join_init(c10ds_join *j, c10ds_db *db)
{
    memset(j, 0, sizeof *j);
    j->db = db;
    for (int i = 0; i < JS_COUNT; i++)
        if (!(j->st[i] = c10ds_db_prepare(db, sql[i]))) {
            c10ds_join_fini(j);
            return -1;
        }
    return 0;
}

void c10ds_join_region_free(c10ds_jregion *r)
{
    if (!r)
        return;
    free(r->ranks);
    free(r->m);
    free(r->runs);
    free(r);
}

void c10ds_join_fini(c10ds_join *j)
{
    for (c10ds_jregion *r = j->regions, *n; r; r = n) {
        n = r->next;
        c10ds_join_region_free(r);
    }
    j->regions = NULL;
    for (int i = 0; i < JS_COUNT; i++) {
        if (j->st[i])
            sqlite3_finalize(j->st[i]);
        j->st[i] = NULL;
    }
}

static sqlite3_stmt *stmt(c10ds_join *j, int id, const char *job, uint64_t gen, const char *name)
{
    sqlite3_stmt *s = j->st[id];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_TRANSIENT);
    return s;
}

static c10ds_jregion *region_new(const char *job, uint64_t gen, const char *name, uint32_t region,
                                 int size, const int *ranks)
{
    c10ds_jregion *r = calloc(1, sizeof *r);
    if (!r || !(r->m = calloc((size_t)size, sizeof *r->m)) ||
        !(r->ranks = malloc((size_t)size * sizeof *r->ranks))) {
        c10ds_join_region_free(r);
        return NULL;
    }
    snprintf(r->job, sizeof r->job, "%s", job);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->gen = gen;
    r->region = region;
    r->size = size;
    memcpy(r->ranks, ranks, (size_t)size * sizeof *ranks);
    for (int i = 0; i < size; i++)
        r->m[i].after = C10DS_ACTIVE;
    r->last_joiner = -1;
    r->last_fp.kind = C10DC_KIND_COUNT; /* nothing released yet */
    r->inband = -1;
    return r;
}

/* A region (its members that joined) from the database: after a restart
 * (kept: listed in j), or to show one no longer in memory (not kept). */
static c10ds_jregion *load(c10ds_join *j, const char *job, uint64_t gen, const char *name,
                           int64_t region, int size, const int *ranks, int keep)
{
    sqlite3_stmt *s = stmt(j, JS_REGION_GET, job, gen, name);
    if (region >= 0)
        sqlite3_bind_int64(s, 4, region);
    if (sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_reset(s);
        return NULL;
    }
    c10ds_jregion *r = region_new(job, gen, name, (uint32_t)sqlite3_column_int64(s, 0), size,
                                  ranks);
    if (r) {
        r->throw_early = sqlite3_column_int(s, 1);
        r->divide_initial = sqlite3_column_int(s, 2);
        r->begun_ms = sqlite3_column_int64(s, 3);
        r->done = sqlite3_column_int(s, 4);
        r->last_joiner = sqlite3_column_int(s, 5);
        r->final_seq = (uint64_t)sqlite3_column_int64(s, 6);
        r->restored = 1;
    }
    sqlite3_reset(s);
    if (!r)
        return NULL;
    s = stmt(j, JS_MEMBERS_GET, job, gen, name);
    sqlite3_bind_int64(s, 4, r->region);
    while (sqlite3_step(s) == SQLITE_ROW) {
        int idx = sqlite3_column_int(s, 0);
        if (idx < 0 || idx >= size)
            continue;
        c10ds_jmember *m = &r->m[idx];
        m->order = (uint32_t)sqlite3_column_int(s, 1);
        m->after = m->asked = (uint64_t)sqlite3_column_int64(s, 2);
        m->joined_ms = sqlite3_column_int64(s, 3);
        m->begun = 1;
        if (m->order > r->joins)
            r->joins = m->order;
    }
    sqlite3_reset(s);
    if (!keep)
        return r;
    r->next = j->regions;
    j->regions = r;
    c10ds_info("job %s generation %llu: join region %u of group %s reloaded (%u joined%s)", job,
               (unsigned long long)gen, r->region, name, r->joins, r->done ? ", over" : "");
    return r;
}

c10ds_jregion *c10ds_join_region(c10ds_join *j, const char *job, uint64_t gen, const char *name,
                                 uint32_t region, int size, const int *ranks, int create,
                                 int throw_early, int divide_initial)
{
    for (c10ds_jregion *r = j->regions; r; r = r->next)
        if (r->region == region && r->gen == gen && !strcmp(r->name, name) && !strcmp(r->job, job))
            return r;
    c10ds_jregion *r = load(j, job, gen, name, region, size, ranks, 1);
    if (r || !create)
        return r;
    if (!(r = region_new(job, gen, name, region, size, ranks)))
        return NULL;
    r->throw_early = throw_early;
    r->divide_initial = divide_initial;
    r->begun_ms = c10d_steady_wall_ms();
    sqlite3_stmt *s = stmt(j, JS_REGION_PUT, job, gen, name);
    sqlite3_bind_int64(s, 4, region);
    sqlite3_bind_int(s, 5, throw_early);
    sqlite3_bind_int(s, 6, divide_initial);
    sqlite3_bind_int64(s, 7, r->begun_ms);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        c10ds_error("cannot record join region %u of group %s: %s", region, name,
                    sqlite3_errmsg(j->db->h));
        c10ds_join_region_free(r);
        return NULL;
    }
    r->next = j->regions;
    j->regions = r;
    return r;
}

c10ds_jregion *c10ds_join_latest(c10ds_join *j, const char *job, uint64_t gen, const char *name,
                                 int size, const int *ranks, int *loaned)
{
    *loaned = 0;
    c10ds_jregion *best = NULL;
    for (c10ds_jregion *r = j->regions; r; r = r->next)
        if (r->gen == gen && !strcmp(r->name, name) && !strcmp(r->job, job) &&
            (!best || r->region > best->region))
            best = r;
    if (best)
        return best;
    best = load(j, job, gen, name, -1, size, ranks, 0);
    *loaned = best != NULL;
    return best;
}

int c10ds_join_last_joiner(const c10ds_jregion *r)
{
    int best = -1;
    for (int i = 0; i < r->size; i++)
        if (r->m[i].order && (best < 0 || r->m[i].after >= r->m[best].after))
            best = i;
    return best;
}

int c10ds_join_record(c10ds_join *j, c10ds_jregion *r, int idx, uint64_t after)
{
    c10ds_jmember *m = &r->m[idx];
    if (m->order)
        return 0; /* a resent join */
    m->after = m->asked = after;
    m->order = ++r->joins;
    m->joined_ms = c10d_steady_wall_ms();
    m->begun = 1;
    /* The joined ranks shadow from the lowest `after` + 1 on. Usually the
     * first to join stopped earliest; but a rank whose collectives complete
     * later (NCCL, async work) may join after #5 before a slower one joins
     * after #3. Nothing past the lower one was released: that rank, active
     * until it joined, never entered it. */
    if (r->joins == 1 || after < r->released)
        r->released = after;
    sqlite3_stmt *s = stmt(j, JS_MEMBER_PUT, r->job, r->gen, r->name);
    sqlite3_bind_int64(s, 4, r->region);
    sqlite3_bind_int(s, 5, idx);
    sqlite3_bind_int(s, 6, r->ranks[idx]);
    sqlite3_bind_int(s, 7, (int)m->order);
    sqlite3_bind_int64(s, 8, (sqlite3_int64)after);
    sqlite3_bind_int64(s, 9, m->joined_ms);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        c10ds_error("cannot record the join of rank %d in group %s: %s", idx, r->name,
                    sqlite3_errmsg(j->db->h));
    if (r->joins < (uint32_t)r->size)
        return 0;
    r->done = 1;
    r->last_joiner = c10ds_join_last_joiner(r);
    r->final_seq = r->m[r->last_joiner].after;
    s = stmt(j, JS_REGION_DONE, r->job, r->gen, r->name);
    sqlite3_bind_int64(s, 4, r->region);
    sqlite3_bind_int64(s, 5, c10d_steady_wall_ms());
    sqlite3_bind_int(s, 6, r->last_joiner);
    sqlite3_bind_int64(s, 7, (sqlite3_int64)r->final_seq);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        c10ds_error("cannot record the end of join region %u of group %s: %s", r->region,
                    r->name, sqlite3_errmsg(j->db->h));
    return 0;
}

void c10ds_join_prune(c10ds_join *j, const char *job, uint64_t current_gen)
{
    for (c10ds_jregion **pp = &j->regions; *pp;) {
        c10ds_jregion *r = *pp;
        int told = 1;
        for (int i = 0; i < r->size && told; i++)
            told = r->m[i].told_done;
        if (!strcmp(r->job, job) && (r->gen != current_gen || (r->done && told))) {
            *pp = r->next;
            c10ds_join_region_free(r);
        } else {
            pp = &r->next;
        }
    }
}

void c10ds_join_forget(c10ds_join *j, const char *job, uint64_t gen)
{
    for (c10ds_jregion **pp = &j->regions; *pp;) {
        c10ds_jregion *r = *pp;
        if (r->gen == gen && !strcmp(r->job, job)) {
            *pp = r->next;
            c10ds_join_region_free(r);
        } else {
            pp = &r->next;
        }
    }
}

/* --- the release rule --- */

int c10ds_join_shadows(const c10ds_jregion *r, int idx, uint64_t s)
{
    return r->m[idx].order && r->m[idx].after < s;
}

int c10ds_join_active_at(const c10ds_jregion *r, uint64_t s)
{
    int active = r->size;
    for (int i = 0; i < r->size; i++)
        active -= c10ds_join_shadows(r, i, s);
    return active;
}

void c10ds_join_unknown_after(const c10ds_jregion *r, uint64_t *out)
{
    for (uint32_t k = 0; k <= r->joins; k++)
        out[k] = UINT64_MAX;
    for (int i = 0; i < r->size; i++) /* the join of order o is unknown to k < o */
        if (r->m[i].order && r->m[i].after < out[r->m[i].order - 1])
            out[r->m[i].order - 1] = r->m[i].after;
    for (uint32_t k = r->joins; k-- > 0;)
        if (out[k + 1] < out[k])
            out[k] = out[k + 1];
}

uint64_t c10ds_join_member_limit(const c10ds_jregion *r, int idx, uint64_t s, uint64_t entered,
                                 const uint64_t *unknown_after)
{
    const c10ds_jmember *m = &r->m[idx];
    uint64_t lim = entered;
    /* It knows the first m->known joins. A join it does not know of,
     * after collective a, matters from a+1 on: stop at a. Not for a rank
     * that has joined since: it issued everything up to its own join
     * already (an AVG that needed the count was reported in SYNC), and it
     * acknowledges nothing any more. */
    uint32_t k = m->known < r->joins ? m->known : r->joins;
    if (!m->order && unknown_after[k] < lim)
        lim = unknown_after[k];
    /* From its own join on it is shadowed, no longer a constraint, but the
     * active count changes: the run of released collectives ends there. */
    if (m->order && m->after >= s && m->after < lim)
        lim = m->after;
    return lim;
}

const char *c10ds_join_unshadowable(const c10ds_jregion *r, const c10dc_fp *fp, uint64_t s,
                                    int *culprit)
{
    *culprit = -1;
    for (int i = 0; i < r->size && *culprit < 0; i++)
        if (c10ds_join_shadows(r, i, s))
            *culprit = i;
    if (*culprit < 0)
        return NULL;
    int root_joined = (fp->kind == C10DC_BROADCAST || fp->kind == C10DC_REDUCE) &&
                      fp->root >= 0 && fp->root < r->size && c10ds_join_shadows(r, fp->root, s);
    if (root_joined)
        *culprit = fp->root;
    return c10dc_join_unshadowable(fp, root_joined);
}

/* --- released runs --- */

const c10ds_jrun *c10ds_join_run(const c10ds_jregion *r, size_t i)
{
    return &r->runs[(r->run_head + i) % r->run_cap];
}

int c10ds_join_log(c10ds_jregion *r, uint64_t first, uint64_t last, const c10dc_fp *fp,
                   int active)
{
    if (r->run_count) {
        c10ds_jrun *p = &r->runs[(r->run_head + r->run_count - 1) % r->run_cap];
        if (p->last + 1 == first && p->active == active && !memcmp(&p->fp, fp, sizeof *fp)) {
            p->last = last;
            return 0;
        }
    }
    if (r->run_count == r->run_cap) {
        size_t cap = r->run_cap ? r->run_cap * 2 : 16;
        c10ds_jrun *nr = malloc(cap * sizeof *nr);
        if (!nr)
            return -1;
        for (size_t i = 0; i < r->run_count; i++)
            nr[i] = *c10ds_join_run(r, i);
        free(r->runs);
        r->runs = nr;
        r->run_cap = cap;
        r->run_head = 0;
    }
    r->runs[(r->run_head + r->run_count++) % r->run_cap] = (c10ds_jrun){first, last, *fp, active};
    return 0;
}

void c10ds_join_trim(c10ds_jregion *r)
{
    uint64_t min = UINT64_MAX;
    for (int i = 0; i < r->size; i++)
        if (r->m[i].order && !r->m[i].inband && r->m[i].asked < min)
            min = r->m[i].asked;
    while (r->run_count && r->runs[r->run_head].last <= min) {
        r->run_head = (r->run_head + 1) % r->run_cap;
        r->run_count--;
    }
}
