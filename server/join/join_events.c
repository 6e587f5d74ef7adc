/* What join hears from the rest of the coordinator (events.h): collectives
 * entered (verification may let more be released), acknowledgements of
 * join states on heartbeats, sends and recvs no peer matches, findings and
 * members lost (the parked join_shadow requests answer with them), a job's
 * restart, a finished run reclaimed; and what it adds to watch replies and the jobs listing (each
 * region as a JoinState). */
#include "engine/engine.h"
#include "engine/events.h"
#include "join/join.h"
#include "join/join_release.h"
#include "verify/verify.h"

#include "fingerprint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same_group(const c10ds_jregion *jr, const c10ds_vgroup *g)
{
    return jr->gen == g->gen && !strcmp(jr->name, g->name) && !strcmp(jr->job, g->job);
}

static void each_region(c10ds_engine *e, const c10ds_vgroup *g,
                        void (*fn)(c10ds_engine *, c10ds_jregion *, c10ds_vgroup *))
{
    for (c10ds_jregion *jr = e->join.regions, *n; jr; jr = n) {
        n = jr->next;
        if (same_group(jr, g))
            fn(e, jr, (c10ds_vgroup *)g);
    }
}

static void on_entered(c10ds_engine *e, c10ds_vgroup *g, int idx, uint32_t join_known)
{
    for (c10ds_jregion *jr = e->join.regions; jr; jr = jr->next) {
        if (!same_group(jr, g))
            continue;
        if (join_known > jr->m[idx].known)
            jr->m[idx].known = join_known;
        if (jr->joins && !jr->done)
            c10ds_join_apply_release_rule(e, jr, g);
    }
}

/* A heartbeat acknowledges the join states the rank applied. */
static void on_watch_request(c10ds_engine *e, const C10dpb__Watch *m)
{
    for (size_t k = 0; k < m->n_join_known; k++) {
        const C10dpb__JoinKnown *x = m->join_known[k];
        for (c10ds_jregion *jr = e->join.regions; jr; jr = jr->next) {
            if (jr->region != x->region || jr->gen != m->generation || strcmp(jr->name, x->group) ||
                strcmp(jr->job, m->job))
                continue;
            c10ds_vgroup *g = c10ds_verify_group(e, jr->job, jr->gen, jr->name);
            int idx = g && m->rank >= 0 && m->rank < g->world ? g->index_of[m->rank] : -1;
            if (idx < 0 || x->version <= jr->m[idx].known)
                continue;
            jr->m[idx].known = x->version;
            c10ds_join_apply_release_rule(e, jr, g);
        }
    }
}

static void on_p2p_unmatched(c10ds_engine *e, c10ds_vgroup *g, const c10ds_vp2p *x)
{
    for (c10ds_jregion *jr = e->join.regions; jr; jr = jr->next)
        if (same_group(jr, g) && jr->joins && !jr->done)
            c10ds_join_p2p_with_joined(e, jr, g, x);
}

static void wake_cb(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g)
{
    (void)g;
    c10ds_join_wake(e, jr);
}

static void on_finding(c10ds_engine *e, c10ds_vgroup *g)
{
    each_region(e, g, wake_cb);
}

static void on_membership_changed(c10ds_engine *e, const char *job, uint64_t gen)
{
    for (c10ds_jregion *jr = e->join.regions; jr; jr = jr->next)
        if (jr->gen == gen && !strcmp(jr->job, job))
            c10ds_join_wake(e, jr);
}

/* A region as a JoinState message, owning all it points to (the region
 * may be gone before the reply is packed); free with state_free. */
static C10dpb__JoinState *state_of(const c10ds_jregion *jr)
{
    C10dpb__JoinState *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    c10dpb__join_state__init(s);
    if (!(s->group = strdup(jr->name))) {
        free(s);
        return NULL;
    }
    s->region = jr->region;
    s->has_version = s->has_throw_on_early_termination = s->has_divide_by_initial_world_size = 1;
    s->has_begun = s->has_released = s->has_done = 1;
    s->version = jr->joins;
    s->throw_on_early_termination = jr->throw_early;
    s->divide_by_initial_world_size = jr->divide_initial;
    s->released = jr->released;
    s->done = jr->done;
    if (jr->done) {
        s->has_last_joiner = s->has_final_seq = 1;
        s->last_joiner = jr->last_joiner;
        s->final_seq = jr->final_seq;
    }
    for (int i = 0; i < jr->size; i++)
        s->begun += jr->m[i].begun;
    if (jr->joins && (s->joined = calloc(jr->joins, sizeof *s->joined))) {
        for (uint32_t o = 1; o <= jr->joins; o++)
            for (int i = 0; i < jr->size; i++) {
                if (jr->m[i].order != o)
                    continue;
                C10dpb__JoinedRank *x = calloc(1, sizeof *x);
                if (!x)
                    break;
                c10dpb__joined_rank__init(x);
                x->rank = i;
                x->has_global_rank = x->has_joined_ms = 1;
                x->global_rank = jr->ranks[i];
                x->after_seq = jr->m[i].after;
                x->joined_ms = jr->m[i].joined_ms;
                s->joined[s->n_joined++] = x;
            }
    }
    s->has_caught_up = 1;
    s->caught_up = jr->run_count == 0;
    if (jr->last_fp.kind < C10DC_KIND_COUNT) {
        char f[160], buf[256];
        snprintf(buf, sizeof buf, "#%llu %s", (unsigned long long)jr->released,
                 c10dc_fp_format(&jr->last_fp, f, sizeof f));
        s->shadowing = strdup(buf);
    }
    return s;
}

static void state_free(C10dpb__JoinState *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_joined; i++)
        free(s->joined[i]);
    free(s->joined);
    free(s->shadowing);
    free(s->group);
    free(s);
}

/* The active ranks learn of joins on their watch (and acknowledge them on
 * the next one); ranks that shadow in-band learn there that the region is
 * over (kept until every member was told). */
static int announced(const c10ds_jregion *jr, const char *job, uint64_t gen)
{
    /* Not a region that was over before a restart: its members returned
     * already and will never say they heard it. */
    return jr->gen == gen && jr->joins && !(jr->done && jr->restored) && !strcmp(jr->job, job);
}

static void on_watch_reply(c10ds_engine *e, const char *job, uint64_t gen, C10dpb__WatchReply *w)
{
    size_t n = 0;
    for (c10ds_jregion *jr = e->join.regions; jr; jr = jr->next)
        n += announced(jr, job, gen);
    if (!n || !(w->joins = calloc(n, sizeof *w->joins)))
        return;
    for (c10ds_jregion *jr = e->join.regions; jr; jr = jr->next)
        if (announced(jr, job, gen) && (w->joins[w->n_joins] = state_of(jr)))
            w->n_joins++;
}

static void on_watch_done(C10dpb__WatchReply *w)
{
    for (size_t i = 0; i < w->n_joins; i++)
        state_free(w->joins[i]);
    free(w->joins);
    w->joins = NULL;
    w->n_joins = 0;
}

static void on_group_info(c10ds_engine *e, const char *job, uint64_t gen, C10dpb__GroupInfo *gi)
{
    if (!gi->n_ranks)
        return;
    int loaned;
    c10ds_jregion *jr = c10ds_join_latest(&e->join, job, gen, gi->name, (int)gi->n_ranks,
                                          gi->ranks, &loaned);
    if (jr)
        gi->join = state_of(jr);
    if (loaned)
        c10ds_join_region_free(jr);
}

static void on_group_info_done(C10dpb__GroupInfo *gi)
{
    state_free(gi->join);
    gi->join = NULL;
}

static void on_generation_started(c10ds_engine *e, const char *job, uint64_t gen)
{
    c10ds_join_prune(&e->join, job, gen);
}

/* The run is over: its regions leave memory (the jobs listing loads a
 * region from the database when memory has none: c10ds_join_latest). */
static void on_run_ended(c10ds_engine *e, const char *job, uint64_t gen)
{
    c10ds_join_forget(&e->join, job, gen);
}

static void on_run_reclaimed(c10ds_engine *e, const char *job, uint64_t gen)
{
    c10ds_join_forget(&e->join, job, gen);
}

const c10ds_event_listener c10ds_join_listener = {
    .name = "join",
    .generation_started = on_generation_started,
    .run_ended = on_run_ended,
    .run_reclaimed = on_run_reclaimed,
    .membership_changed = on_membership_changed,
    .watch_request = on_watch_request,
    .watch_reply = on_watch_reply,
    .watch_done = on_watch_done,
    .group_info = on_group_info,
    .group_info_done = on_group_info_done,
    .entered = on_entered,
    .p2p_unmatched = on_p2p_unmatched,
    .finding = on_finding,
};
