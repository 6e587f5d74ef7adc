/* A finished run's verification, in the database (verify_history.h):
 * written when the run ends, read by coll_status and coll_trace. */
#include "verify/verify_history.h"

#include "engine/engine.h"
#include "groups/groups.h"
#include "verify/verify.h"

#include "fingerprint.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void bind_group(sqlite3_stmt *s, const char *job, uint64_t gen, const char *name)
{
    sqlite3_bind_text(s, 1, job, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_STATIC);
}

static char *dup_col(sqlite3_stmt *s, int col)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    return t ? strdup((const char *)t) : NULL;
}

void c10ds_verify_history_write(c10ds_engine *e, c10ds_vgroup *g)
{
    for (int i = 0; i < g->size; i++) {
        char f[160];
        sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_PROGRESS_PUT);
        bind_group(s, g->job, g->gen, g->name);
        sqlite3_bind_int(s, 4, i);
        sqlite3_bind_int(s, 5, g->ranks[i]);
        sqlite3_bind_int64(s, 6, (sqlite3_int64)g->entered[i]);
        sqlite3_bind_int64(s, 7, (sqlite3_int64)g->completed[i]);
        sqlite3_bind_int64(s, 8, g->entered_ms[i]);
        if (g->entered[i])
            sqlite3_bind_text(s, 9, c10dc_fp_format(&g->last[i], f, sizeof f), -1,
                              SQLITE_TRANSIENT);
        if (sqlite3_step(s) != SQLITE_DONE)
            c10ds_error("job %s generation %llu: group %s's progress not written: %s", g->job,
                        (unsigned long long)g->gen, g->name,
                        sqlite3_errmsg(sqlite3_db_handle(s)));
        sqlite3_reset(s);
    }
}

/* --- health (coll_status) --- */

void c10ds_health_free(C10dpb__GroupHealth *h)
{
    if (!h)
        return;
    for (size_t k = 0; k < h->n_ranks; k++) {
        free(h->ranks[k]->last);
        free(h->ranks[k]);
    }
    free(h->ranks);
    free(h->job);
    free(h->group);
    free(h->report);
    free(h);
}

static C10dpb__GroupHealth *health_new(const char *job, uint64_t gen, const char *name, int size,
                                       int status, const char *report)
{
    C10dpb__GroupHealth *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    c10dpb__group_health__init(h);
    h->has_generation = h->has_size = h->has_status = 1;
    h->generation = gen;
    h->size = size;
    h->status = status;
    h->job = strdup(job);
    h->group = strdup(name);
    h->report = status && report ? strdup(report) : NULL;
    h->ranks = calloc(size > 0 ? (size_t)size : 1, sizeof *h->ranks);
    if (!h->job || !h->group || (status && report && !h->report) || !h->ranks) {
        c10ds_health_free(h);
        return NULL;
    }
    return h;
}

/* Appends a member's progress to h (sized for every member). */
static int add_rank(C10dpb__GroupHealth *h, int idx, int global, uint64_t entered,
                    uint64_t completed, int64_t entered_ms, const char *last)
{
    if (h->n_ranks >= (size_t)h->size)
        return 0;
    C10dpb__RankProgress *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    c10dpb__rank_progress__init(p);
    p->rank = idx;
    p->has_global_rank = p->has_entered = p->has_completed = p->has_entered_ms = 1;
    p->global_rank = global;
    p->entered = entered;
    p->completed = completed;
    p->entered_ms = entered_ms;
    if (last && !(p->last = strdup(last))) {
        free(p);
        return -1;
    }
    h->ranks[h->n_ranks++] = p;
    return 0;
}

C10dpb__GroupHealth *c10ds_health_of(const c10ds_vgroup *g)
{
    C10dpb__GroupHealth *h = health_new(g->job, g->gen, g->name, g->size, g->status, g->report);
    for (int i = 0; h && i < g->size; i++) {
        char f[160];
        if (add_rank(h, i, g->ranks[i], g->entered[i], g->completed[i], g->entered_ms[i],
                     g->entered[i] ? c10dc_fp_format(&g->last[i], f, sizeof f) : NULL) != 0) {
            c10ds_health_free(h);
            return NULL;
        }
    }
    return h;
}

/* The group's finding: 1 (seq, status, report malloc'd), 0 none, -1. */
static int finding_of(c10ds_engine *e, const char *job, uint64_t gen, const char *name,
                      uint64_t *seq, int *status, char **report)
{
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_FINDING_GET);
    bind_group(s, job, gen, name);
    int rc = sqlite3_step(s), found = rc == SQLITE_ROW;
    *report = NULL;
    if (found) {
        *seq = (uint64_t)sqlite3_column_int64(s, 0);
        *status = sqlite3_column_int(s, 1);
        *report = dup_col(s, 2);
    }
    sqlite3_reset(s);
    return found ? (*report ? 1 : -1) : rc == SQLITE_DONE ? 0 : -1;
}

C10dpb__GroupHealth *c10ds_verify_history_health(c10ds_engine *e, const char *job, uint64_t gen,
                                                 const char *name, int size)
{
    uint64_t seq = 0;
    int status = 0;
    char *report;
    int found = finding_of(e, job, gen, name, &seq, &status, &report);
    if (found < 0)
        return NULL;
    C10dpb__GroupHealth *h = health_new(job, gen, name, size, found ? status : 0, report);
    free(report);
    if (!h)
        return NULL;
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_PROGRESS_OF);
    bind_group(s, job, gen, name);
    int rc, failed = 0;
    while (!failed && (rc = sqlite3_step(s)) == SQLITE_ROW)
        failed = add_rank(h, sqlite3_column_int(s, 0), sqlite3_column_int(s, 1),
                          (uint64_t)sqlite3_column_int64(s, 2),
                          (uint64_t)sqlite3_column_int64(s, 3), sqlite3_column_int64(s, 4),
                          (const char *)sqlite3_column_text(s, 5)) != 0;
    sqlite3_reset(s);
    if (failed || (!found && h->n_ranks == 0)) { /* nothing of it was verified */
        c10ds_health_free(h);
        return NULL;
    }
    return h;
}

/* --- traces (coll_trace) --- */

void c10ds_trace_rows_free(C10dpb__TraceRow **rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i]->what);
        free(rows[i]);
    }
    free(rows);
}

/* Where the run ended, for a trace row's state: as verify_trace.c's
 * trace_state would have said then. */
typedef struct {
    int known;            /* group_progress has the group */
    uint64_t completed;   /* the rank's */
    uint64_t min_entered; /* every member's */
    int status;
    uint64_t finding_seq;
} run_end;

static int end_of(c10ds_engine *e, const char *job, uint64_t gen, const char *name, int rank,
                  run_end *out)
{
    memset(out, 0, sizeof *out);
    char *report;
    int found = finding_of(e, job, gen, name, &out->finding_seq, &out->status, &report);
    free(report);
    if (found < 0)
        return -1;
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_PROGRESS_OF);
    bind_group(s, job, gen, name);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        uint64_t entered = (uint64_t)sqlite3_column_int64(s, 2);
        if (!out->known || entered < out->min_entered)
            out->min_entered = entered;
        if (sqlite3_column_int(s, 1) == rank)
            out->completed = (uint64_t)sqlite3_column_int64(s, 3);
        out->known = 1;
    }
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* One of the four states, as a string that lives on (a row's text does
 * not, past the next step). */
static const char *state_named(const unsigned char *t)
{
    static const char *const states[] = {"entered", "verified", "completed", "failed"};
    for (size_t i = 0; t && i < sizeof states / sizeof *states; i++)
        if (!strcmp((const char *)t, states[i]))
            return states[i];
    return states[0];
}

static const char *state_at_end(const run_end *x, uint64_t first, uint64_t last,
                                const unsigned char *stored)
{
    if (!x->known)
        return state_named(stored); /* as last written (the run ended before schema 12) */
    if (x->status && x->finding_seq >= first && x->finding_seq <= last)
        return "failed";
    if (last <= x->completed)
        return "completed";
    if (last <= x->min_entered && !x->status)
        return "verified";
    return "entered";
}

int c10ds_verify_history_trace(c10ds_engine *e, const char *job, uint64_t gen, const char *name,
                               int rank, size_t limit, C10dpb__TraceRow ***rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    run_end x;
    if (end_of(e, job, gen, name, rank, &x) != 0)
        return -1;
    size_t cap = 0;
    uint64_t seqs = 0;
    int rc = SQLITE_DONE, failed = 0;
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_TRACE_OF);
    bind_group(s, job, gen, name);
    sqlite3_bind_int(s, 4, rank);
    while (!failed && seqs < limit && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            C10dpb__TraceRow **nv = realloc(*rows, cap * sizeof *nv);
            if (!nv) {
                failed = 1;
                break;
            }
            *rows = nv;
        }
        C10dpb__TraceRow *t = calloc(1, sizeof *t);
        if (!t) {
            failed = 1;
            break;
        }
        c10dpb__trace_row__init(t);
        t->first_seq = (uint64_t)sqlite3_column_int64(s, 0);
        t->last_seq = (uint64_t)sqlite3_column_int64(s, 1);
        t->what = dup_col(s, 2);
        t->state = (char *)state_at_end(&x, t->first_seq, t->last_seq,
                                        sqlite3_column_text(s, 3));
        t->has_entered_ms = 1;
        t->entered_ms = sqlite3_column_int64(s, 4);
        (*rows)[(*n)++] = t;
        failed = !t->what;
        seqs += t->last_seq - t->first_seq + 1;
    }
    sqlite3_reset(s);
    if (failed || (rc != SQLITE_ROW && rc != SQLITE_DONE && seqs < limit)) {
        c10ds_trace_rows_free(*rows, *n);
        *rows = NULL;
        *n = 0;
        return -1;
    }
    for (size_t i = 0; i < *n / 2; i++) { /* newest first: turned round */
        C10dpb__TraceRow *t = (*rows)[i];
        (*rows)[i] = (*rows)[*n - 1 - i];
        (*rows)[*n - 1 - i] = t;
    }
    return 0;
}
