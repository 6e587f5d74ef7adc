/* The verification state machine, pure: no engine, no SQLite, no network
 * (tests/unit/server/test_verify_runs.c drives it alone). A group's members
 * enter runs of collectives; the first report of each seq is the
 * reference the others are compared with; what it finds (a desync, the
 * slowest member moving on) goes to the caller's sink, which is where
 * verify_ops.c turns it into findings and woken SYNC reports. */
#include "verify/verify.h"

#include "c10d_time.h"
#include "fingerprint.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

c10ds_vgroup *c10ds_vgroup_new(const char *job, uint64_t gen, const char *name,
                               const int32_t *ranks, int n, int world)
{
    c10ds_vgroup *g = calloc(1, sizeof *g);
    if (g) {
        g->ranks = calloc((size_t)n, sizeof *g->ranks);
        g->index_of = malloc((size_t)world * sizeof *g->index_of);
        g->entered = calloc((size_t)n, sizeof *g->entered);
        g->completed = calloc((size_t)n, sizeof *g->completed);
        g->entered_ms = calloc((size_t)n, sizeof *g->entered_ms);
        g->last = calloc((size_t)n, sizeof *g->last);
        g->traces = calloc((size_t)n, sizeof *g->traces);
    }
    if (!g || !g->ranks || !g->index_of || !g->entered || !g->completed || !g->entered_ms ||
        !g->last || !g->traces) {
        c10ds_vgroup_free(g);
        return NULL;
    }
    snprintf(g->job, sizeof g->job, "%s", job);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->gen = gen;
    g->size = n;
    g->at_min = n; /* everyone at 0 */
    g->world = world;
    for (int i = 0; i < world; i++)
        g->index_of[i] = -1;
    for (int i = 0; i < n; i++) {
        g->ranks[i] = ranks[i];
        if (g->ranks[i] >= 0 && g->ranks[i] < world)
            g->index_of[g->ranks[i]] = i;
        g->last[i].kind = C10DC_KIND_COUNT;
    }
    return g;
}

void c10ds_vgroup_free(c10ds_vgroup *g)
{
    if (!g)
        return;
    free(g->ranks);
    free(g->index_of);
    free(g->entered);
    free(g->completed);
    free(g->entered_ms);
    free(g->last);
    free(g->runs);
    for (int i = 0; g->traces && i < g->size; i++)
        free(g->traces[i].ring);
    for (c10ds_vp2p *x = g->p2p, *n; x; x = n) {
        n = x->next;
        free(x);
    }
    free(g->traces);
    free(g);
}

static c10ds_vrun *run_at(c10ds_vgroup *g, size_t i)
{
    return &g->runs[(g->run_head + i) % g->run_cap];
}

static int push_run(c10ds_vgroup *g, uint64_t start, uint64_t end, const c10dc_fp *fp, int first,
                    int64_t now_ms)
{
    if (g->run_count) {
        c10ds_vrun *last = run_at(g, g->run_count - 1);
        if (last->end + 1 == start && last->first == first && !memcmp(&last->fp, fp, sizeof *fp)) {
            last->end = end;
            return 0;
        }
    }
    if (g->run_count == g->run_cap) {
        size_t cap = g->run_cap ? g->run_cap * 2 : 16;
        c10ds_vrun *nr = malloc(cap * sizeof *nr);
        if (!nr)
            return -1;
        for (size_t i = 0; i < g->run_count; i++)
            nr[i] = *run_at(g, i);
        free(g->runs);
        g->runs = nr;
        g->run_cap = cap;
        g->run_head = 0;
    }
    *run_at(g, g->run_count++) = (c10ds_vrun){start, end, *fp, first, now_ms};
    return 0;
}

/* Member idx has now entered everything up to end. The minimum only moves
 * when the last member at it moves on: count them, and rescan only then
 * (amortised O(1) per entry). */
static void advance(c10ds_vgroup *g, int idx, uint64_t end, const c10ds_vsink *sink)
{
    int was_at_min = g->entered[idx] == g->min_entered;
    g->entered[idx] = end;
    g->entered_ms[idx] = c10d_steady_wall_ms();
    if (!was_at_min || --g->at_min > 0)
        return;
    uint64_t min = UINT64_MAX;
    int at = 0;
    for (int i = 0; i < g->size; i++) {
        if (g->entered[i] < min)
            min = g->entered[i], at = 0;
        at += g->entered[i] == min;
    }
    g->at_min = at;
    if (min > g->min_entered) {
        g->min_entered = min;
        g->min_since_ms = sink->now_ms;
        while (g->run_count && g->runs[g->run_head].end <= min) {
            g->run_head = (g->run_head + 1) % g->run_cap;
            g->run_count--;
        }
        if (g->run_count && g->runs[g->run_head].start <= min)
            g->runs[g->run_head].start = min + 1;
        sink->min_moved(sink->arg, g); /* SYNC reports of seqs up to min can go */
    }
}

void c10ds_vgroup_skip_to(c10ds_vgroup *g, int idx, uint64_t seq, const c10ds_vsink *sink)
{
    if (seq > g->entered[idx])
        advance(g, idx, seq, sink);
}

/* Rank idx entered seqs start..end, all with fp. The part some rank has
 * reported before is compared with that reference; the rest becomes the
 * reference. Runs every member has passed are dropped, so memory follows
 * the distance between the fastest and the slowest rank, not the job's
 * length. */
void c10ds_vgroup_enter(c10ds_vgroup *g, int idx, uint64_t start, uint64_t end,
                        const c10dc_fp *fp, const c10ds_vsink *sink)
{
    if (end <= g->entered[idx])
        return; /* a resend */
    if (start <= g->entered[idx])
        start = g->entered[idx] + 1;
    uint64_t ref_end = g->run_count ? run_at(g, g->run_count - 1)->end : g->min_entered;
    /* Runs are in seq order: find the first that ends at or after start. */
    size_t lo = 0, hi = g->run_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (run_at(g, mid)->end < start)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < g->run_count && !g->status; i++) {
        c10ds_vrun *r = run_at(g, i);
        if (r->start > end)
            break;
        const char *field = c10dc_fp_diff(&r->fp, fp);
        if (field)
            sink->desync(sink->arg, g, start > r->start ? start : r->start, r, idx, fp, field);
    }
    if (end > ref_end &&
        push_run(g, start > ref_end ? start : ref_end + 1, end, fp, idx, sink->now_ms) != 0)
        c10ds_error("out of memory verifying group %s", g->name);
    g->last[idx] = *fp;
    advance(g, idx, end, sink);
}

const c10ds_vrun *c10ds_vgroup_ref(c10ds_vgroup *g, uint64_t seq)
{
    size_t lo = 0, hi = g->run_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (run_at(g, mid)->end < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < g->run_count && run_at(g, lo)->start <= seq ? run_at(g, lo) : NULL;
}
