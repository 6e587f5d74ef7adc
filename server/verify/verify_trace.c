/* Each rank's trace: the collectives it entered, as runs, for its last
 * C10DS_TRACE_SEQS (what c10d-ctl trace shows), kept in memory and written
 * to SQLite in batches (coll_trace reads memory while the run goes on, the
 * table once it ended: verify_history.h; the table outlives a restart). */
#include "engine/engine.h"
#include "groups/groups.h"
#include "engine/ops.h"
#include "engine/request.h"
#include "verify/verify.h"
#include "verify/verify_history.h"

#include "c10d_time.h"
#include "fingerprint.h"

#include <c10d/errors.h>
#include <stdlib.h>
#include <string.h>

static c10ds_tentry *trace_at(c10ds_trace *t, size_t i)
{
    return &t->ring[(t->head + i) % t->cap];
}

/* Keeps what a rank entered, as runs, for its last C10DS_TRACE_SEQS
 * collectives. */
void c10ds_trace_add(c10ds_trace *t, uint64_t first, uint64_t last, const c10dc_fp *fp)
{
    if (t->count) {
        c10ds_tentry *prev = trace_at(t, t->count - 1);
        if (prev->last + 1 == first && !memcmp(&prev->fp, fp, sizeof *fp)) {
            prev->last = last;
            if (!t->dirty)
                t->dirty = 1; /* rewrite the grown row */
            goto prune;
        }
    }
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        c10ds_tentry *nr = malloc(cap * sizeof *nr);
        if (!nr)
            return;
        for (size_t i = 0; i < t->count; i++)
            nr[i] = *trace_at(t, i);
        free(t->ring);
        t->ring = nr;
        t->cap = cap;
        t->head = 0;
    }
    *trace_at(t, t->count++) = (c10ds_tentry){first, last, *fp, c10d_steady_wall_ms()};
    t->dirty++;
prune:
    while (t->count > 1 && t->ring[t->head].last + C10DS_TRACE_SEQS < last) {
        t->head = (t->head + 1) % t->cap;
        t->count--;
        if (t->dirty > t->count)
            t->dirty = t->count;
    }
}

static const char *trace_state(const c10ds_vgroup *g, int idx, const c10ds_tentry *t)
{
    if (g->status && g->finding_seq >= t->first && g->finding_seq <= t->last)
        return "failed";
    if (t->last <= g->completed[idx])
        return "completed";
    if (t->last <= g->min_entered && !g->status)
        return "verified";
    return "entered";
}

static c10ds_outcome no_trace(c10ds_request *r, const char *gname)
{
    C10dpb__CollTrace *q = r->pb->coll_trace;
    return c10ds_fail(r, C10D_ENOTFOUND, "no verified collectives for rank %d in group %s%s%s",
                      q->rank, gname, q->job && *q->job ? " of job " : "", q->job ? q->job : "");
}

/* Memory has nothing of the group in a job's current generation: its run
 * ended, and its trace is the database's (verify_history.h). The first
 * job (by name, or the one asked for) whose current generation holds
 * rows of the rank's. */
static c10ds_outcome trace_from_history(c10ds_engine *e, c10ds_request *r, const char *gname,
                                        size_t limit)
{
    C10dpb__CollTrace *q = r->pb->coll_trace;
    char *job = NULL;
    C10dpb__TraceRow **rows = NULL;
    size_t n = 0;
    int failed = 0;
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_JOB_LIST);
    if (q->job && *q->job)
        sqlite3_bind_text(s, 1, q->job, -1, SQLITE_STATIC);
    char **jobs = NULL;
    uint64_t *gens = NULL;
    size_t nj = 0, cap = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (nj == cap) {
            cap = cap ? cap * 2 : 4;
            char **mj = realloc(jobs, cap * sizeof *mj);
            if (mj)
                jobs = mj;
            uint64_t *mg = mj ? realloc(gens, cap * sizeof *mg) : NULL;
            if (mg)
                gens = mg;
            if (!mj || !mg)
                break;
        }
        if (!(jobs[nj] = strdup((const char *)sqlite3_column_text(s, 0))))
            break;
        gens[nj++] = (uint64_t)sqlite3_column_int64(s, 1);
    }
    sqlite3_reset(s);
    for (size_t j = 0; j < nj && !n && !failed; j++) {
        failed = c10ds_verify_history_trace(e, jobs[j], gens[j], gname, q->rank, limit, &rows,
                                            &n) != 0;
        if (n)
            job = jobs[j];
    }
    c10ds_outcome o;
    if (failed) {
        o = c10ds_fail(r, C10D_ERROR, "database error reading the trace of rank %d in group %s",
                       q->rank, gname);
    } else if (!n) {
        o = no_trace(r, gname);
    } else {
        C10dpb__CollTraceReply tr = C10DPB__COLL_TRACE_REPLY__INIT;
        tr.job = job;
        tr.group = (char *)gname;
        tr.n_rows = n;
        tr.rows = rows;
        C10dpb__Reply rep = C10DPB__REPLY__INIT;
        rep.result_case = C10DPB__REPLY__RESULT_COLL_TRACE;
        rep.coll_trace = &tr;
        o = c10ds_reply(r, &rep);
    }
    c10ds_trace_rows_free(rows, n);
    for (size_t j = 0; j < nj; j++)
        free(jobs[j]);
    free(jobs);
    free(gens);
    return o;
}

static c10ds_outcome op_coll_trace(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__CollTrace *q = r->pb->coll_trace;
    const char *gname = q->group && *q->group ? q->group : "world";
    c10ds_vgroup *g = NULL;
    for (c10ds_vgroup *x = e->verify.groups; x; x = x->next) {
        c10ds_job jb;
        if (!strcmp(x->name, gname) && (!q->job || !*q->job || !strcmp(x->job, q->job)) &&
            c10ds_groups_job(&e->groups, x->job, &jb) == 1 && jb.generation == x->gen)
            g = x;
    }
    size_t limit = q->has_limit && q->limit ? q->limit : 50;
    if (!g)
        return trace_from_history(e, r, gname, limit);
    int idx = q->rank >= 0 && q->rank < g->world ? g->index_of[q->rank] : -1;
    if (idx < 0)
        return no_trace(r, gname);
    c10ds_trace *t = &g->traces[idx];
    size_t n = 0, from = 0;
    /* the newest `limit` collectives: count runs back from the end */
    uint64_t seqs = 0;
    for (from = t->count; from > 0 && seqs < limit; from--)
        seqs += trace_at(t, from - 1)->last - trace_at(t, from - 1)->first + 1;
    C10dpb__TraceRow *rows = calloc(t->count - from + 1, sizeof *rows);
    C10dpb__TraceRow **ptrs = calloc(t->count - from + 1, sizeof *ptrs);
    char(*what)[128] = calloc(t->count - from + 1, sizeof *what);
    if (!rows || !ptrs || !what) {
        free(rows), free(ptrs), free(what);
        return c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory");
    }
    for (size_t i = from; i < t->count; i++, n++) {
        const c10ds_tentry *te = trace_at(t, i);
        c10dpb__trace_row__init(&rows[n]);
        rows[n].first_seq = te->first;
        rows[n].last_seq = te->last;
        rows[n].what = c10dc_fp_format(&te->fp, what[n], sizeof what[n]);
        rows[n].state = (char *)trace_state(g, idx, te);
        rows[n].has_entered_ms = 1;
        rows[n].entered_ms = te->entered_ms;
        ptrs[n] = &rows[n];
    }
    C10dpb__CollTraceReply tr = C10DPB__COLL_TRACE_REPLY__INIT;
    tr.job = g->job;
    tr.group = g->name;
    tr.n_rows = n;
    tr.rows = ptrs;
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_COLL_TRACE;
    rep.coll_trace = &tr;
    c10ds_outcome o = c10ds_reply(r, &rep);
    free(rows), free(ptrs), free(what);
    return o;
}

/* Writes the traces' new runs to SQLite every TRACE_FLUSH_MS: batched, so
 * verification never waits for the database. At most TRACE_FLUSH_ROWS
 * runs a rank per flush: under a flood of distinct collectives (hundreds
 * of thousands a second) the database keeps the newest and the memory
 * trace (what c10d-ctl trace shows) stays complete.
 *
 * Past TRACE_FLUSH_RANKS ranks in all, a flush writes a slice of them
 * (up to TRACE_FLUSH_SLICES), the next slice TRACE_FLUSH_MS / slices
 * later, so each rank is still written every TRACE_FLUSH_MS, each pause
 * a slice long. Written all at once, a flood at 4,096 ranks made each
 * flush up to 1M rows (~2 s with the engine held), and the next one came
 * due that much sooner, with fewer rows: the throughput swung with the
 * timer's phase (docs/benchmarks.md). The sweep runs every 0.5 s: four
 * slices at most. */
#define TRACE_FLUSH_MS 2000
#define TRACE_FLUSH_RANKS 1024
#define TRACE_FLUSH_SLICES 4
#define TRACE_FLUSH_ROWS 256

/* The text of a row's call, formatted once per distinct call in a row of
 * rows: a rank's runs are mostly a few calls in turn (a flood of distinct
 * collectives alternates), and formatting was a tenth of a flush. */
typedef struct {
    c10dc_fp fp[2];
    char what[2][128];
    int n, next;
} what_memo;

static const char *what_of(what_memo *m, const c10dc_fp *fp)
{
    for (int k = 0; k < m->n; k++)
        if (!memcmp(&m->fp[k], fp, sizeof *fp))
            return m->what[k];
    int k = m->next;
    m->next = (k + 1) % 2;
    if (m->n < 2)
        m->n++;
    m->fp[k] = *fp;
    return c10dc_fp_format(fp, m->what[k], sizeof m->what[k]);
}

/* The group ranks i with i % slices == slice. */
static void flush_slice(c10ds_engine *e, c10ds_vgroup *g, int slice, int slices)
{
    what_memo memo = {.n = 0};
    for (int i = slice; i < g->size; i += slices) {
        c10ds_trace *t = &g->traces[i];
        if (!t->dirty)
            continue;
        size_t rows = t->dirty < TRACE_FLUSH_ROWS ? t->dirty : TRACE_FLUSH_ROWS;
        for (size_t k = t->count - rows; k < t->count; k++) {
            const c10ds_tentry *te = trace_at(t, k);
            sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_TRACE_PUT);
            sqlite3_bind_text(s, 1, g->job, -1, SQLITE_STATIC);
            sqlite3_bind_int64(s, 2, (sqlite3_int64)g->gen);
            sqlite3_bind_text(s, 3, g->name, -1, SQLITE_STATIC);
            sqlite3_bind_int(s, 4, g->ranks[i]);
            sqlite3_bind_int64(s, 5, (sqlite3_int64)te->first);
            sqlite3_bind_int64(s, 6, (sqlite3_int64)te->last);
            sqlite3_bind_text(s, 7, what_of(&memo, &te->fp), -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(s, 8, trace_state(g, i, te), -1, SQLITE_STATIC);
            sqlite3_bind_int64(s, 9, te->entered_ms);
            sqlite3_step(s);
            sqlite3_reset(s);
        }
        t->dirty = 0;
        sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_TRACE_PRUNE);
        sqlite3_bind_text(s, 1, g->job, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, (sqlite3_int64)g->gen);
        sqlite3_bind_text(s, 3, g->name, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 4, g->ranks[i]);
        sqlite3_bind_int64(s, 5, (sqlite3_int64)(t->count ? t->ring[t->head].first : 0));
        sqlite3_step(s);
        sqlite3_reset(s);
    }
}

void c10ds_traces_flush_group(c10ds_engine *e, c10ds_vgroup *g)
{
    flush_slice(e, g, 0, 1);
}

void c10ds_traces_flush(c10ds_engine *e)
{
    int64_t now = c10d_now_ms();
    if (now < e->verify.next_flush_ms)
        return;
    c10ds_verify *v = &e->verify;
    if (v->flush_all || v->flush_slice >= v->flush_slices) { /* a new round */
        long ranks = 0;
        for (c10ds_vgroup *g = v->groups; g; g = g->next)
            ranks += g->size;
        long n = (ranks + TRACE_FLUSH_RANKS - 1) / TRACE_FLUSH_RANKS;
        v->flush_slices = n < 1 ? 1 : n > TRACE_FLUSH_SLICES ? TRACE_FLUSH_SLICES : (int)n;
        v->flush_slice = 0;
    }
    int slice = v->flush_all ? 0 : v->flush_slice, slices = v->flush_all ? 1 : v->flush_slices;
    v->flush_slice = v->flush_all ? v->flush_slices : v->flush_slice + 1;
    v->flush_all = 0;
    v->next_flush_ms = now + TRACE_FLUSH_MS / v->flush_slices;
    for (c10ds_vgroup *g = v->groups; g; g = g->next)
        flush_slice(e, g, slice, slices);
}

const c10ds_op c10ds_trace_ops[] = {
    {C10DPB__REQUEST__OP_COLL_TRACE, "coll_trace", op_coll_trace, 0},
    {0, NULL, NULL, 0},
};
