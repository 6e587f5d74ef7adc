#include "engine/events.h"

/* In the order they hear things: verification first, so that join sees a
 * group's entries and findings already applied; runs last, so that a run
 * ends after the others have reacted to the change that ended it. */
static const c10ds_event_listener *const listeners[] = {
    &c10ds_verify_listener, &c10ds_join_listener, &c10ds_runs_listener,
    &c10ds_tcpstore_listener};

#define N_LISTENERS (sizeof listeners / sizeof listeners[0])

/* Calls field `fn` of every listener that has one. */
#define EMIT(fn, ...)                                                                              \
    do {                                                                                           \
        for (size_t i_ = 0; i_ < N_LISTENERS; i_++)                                                \
            if (listeners[i_]->fn)                                                                 \
                listeners[i_]->fn(__VA_ARGS__);                                                    \
    } while (0)

void c10ds_emit_membership_changed(c10ds_engine *e, const char *job, uint64_t gen)
{
    EMIT(membership_changed, e, job, gen);
}

void c10ds_emit_generation_started(c10ds_engine *e, const char *job, uint64_t gen)
{
    EMIT(generation_started, e, job, gen);
}

void c10ds_emit_run_ended(c10ds_engine *e, const char *job, uint64_t gen)
{
    EMIT(run_ended, e, job, gen);
}

void c10ds_emit_run_reclaimed(c10ds_engine *e, const char *job, uint64_t gen)
{
    EMIT(run_reclaimed, e, job, gen);
}

void c10ds_emit_watch_request(c10ds_engine *e, const C10dpb__Watch *m)
{
    EMIT(watch_request, e, m);
}

void c10ds_emit_watch_reply(c10ds_engine *e, const char *job, uint64_t gen,
                            C10dpb__WatchReply *w)
{
    EMIT(watch_reply, e, job, gen, w);
}

void c10ds_emit_watch_done(c10ds_engine *e, C10dpb__WatchReply *w)
{
    (void)e;
    EMIT(watch_done, w);
}

void c10ds_emit_group_info(c10ds_engine *e, const char *job, uint64_t gen, C10dpb__GroupInfo *gi)
{
    EMIT(group_info, e, job, gen, gi);
}

void c10ds_emit_group_info_done(c10ds_engine *e, C10dpb__GroupInfo *gi)
{
    (void)e;
    EMIT(group_info_done, gi);
}

void c10ds_emit_entered(c10ds_engine *e, c10ds_vgroup *g, int idx, uint32_t join_known)
{
    EMIT(entered, e, g, idx, join_known);
}

void c10ds_emit_p2p_unmatched(c10ds_engine *e, c10ds_vgroup *g, const c10ds_vp2p *x)
{
    EMIT(p2p_unmatched, e, g, x);
}

void c10ds_emit_finding(c10ds_engine *e, c10ds_vgroup *g)
{
    EMIT(finding, e, g);
}

void c10ds_emit_sweep(c10ds_engine *e)
{
    EMIT(sweep, e);
}
