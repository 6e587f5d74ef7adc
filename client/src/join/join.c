/* Join for uneven inputs, the rank's side (docs/join.md; the coordinator's
 * side is server/join/join_ops.c).
 *
 * c10d_join_begin tells the coordinator; nothing changes while nobody has
 * joined (OFF only keeps its entries, unsent, in case a join needs them).
 * c10d_join_end asks the coordinator, again and again, what the others
 * called (join_shadow), and runs each of those collectives as a *shadow*:
 * through the same backend, with identity buffers the backend provides.
 *
 * The others learn of a join from their watch (JoinState) and acknowledge
 * it on the next one; from then on every collective of theirs in the group
 * is reported as in SYNC, so the coordinator can hand it to the joined
 * ranks at once, and a collective they cannot take part in fails on every
 * rank before anyone is stuck in the data plane. */
#include "join/join_internal.h"
#include "backend/backends.h"
#include "join/join_region.h"
#include "coll/lane.h"

#include "budgets.h"
#include "c10d_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Whether a region begun now has its joined ranks shadow in-band: every
 * collective of the group runs on a data plane whose transfers name the
 * collective (a backend with peek and announce: the host backend). CUDA
 * buffers carry no such header, so where NCCL can serve the group the
 * coordinator tells joined ranks what to shadow. */
static int inband_capable(c10d_pg *pg)
{
    /* C10D_JOIN_INBAND=0: through the coordinator anyway (what NCCL groups
     * do; for tests and comparisons). */
    if (c10di_env_long("C10D_JOIN_INBAND", 1) == 0)
        return 0;
    if (pg->program) /* the program's data plane: its transfers are not ours to read */
        return 0;
    unsigned serves = c10di_backend_serves(pg->backend);
    for (int k = 0; k < C10DI_DEV_KINDS; k++) {
        const c10di_be_slot *s = &pg->be[k];
        int serving = s->state && serves & 1u << k &&
                      c10di_backend_available((c10di_dev_kind)k) == C10D_OK;
        if (serving && !(s->ops->peek && s->ops->announce))
            return 0;
    }
    /* A joined rank reads the headers on the host data plane's links. */
    const c10di_be_slot *cpu = &pg->be[C10DI_DEV_CPU];
    return cpu->state && cpu->ops->peek && cpu->ops->announce;
}

/* after[] changed (w->mu held): active_at's memo is stale. */
void c10di_joins_changed(c10di_join *j)
{
    atomic_fetch_add_explicit(&j->epoch, 1, memory_order_release);
}

/* Group rank idx joined this region after collective `after`, as this
 * rank saw for itself (w->mu held). */
void c10di_join_note(c10d_pg *pg, int idx, uint64_t after)
{
    c10di_join *j = &pg->join;
    /* It describes this region: a JoinState of it from the watch, perhaps
     * older than what was seen, adds to it and never wipes it. */
    if (j->state_region < j->region) {
        for (int i = 0; i < pg->size; i++)
            j->after[i] = NOT_JOINED;
        j->state_region = j->region;
        atomic_store(&j->version, 0);
    }
    if (j->after[idx] == NOT_JOINED) {
        j->after[idx] = after;
        c10di_joins_changed(j);
    }
    atomic_store_explicit(&j->heard, 1, memory_order_release);
}

void c10di_join_heard(c10d_pg *pg, int peer, uint64_t after)
{
    if (peer < 0 || peer >= pg->size || !c10di_join_in_region(pg))
        return;
    pthread_mutex_lock(&pg->w->mu);
    c10di_join_note(pg, peer, after);
    pthread_mutex_unlock(&pg->w->mu);
}

/* --- what the watcher hears --- */

int c10di_join_apply(c10di_world *w, const C10dpb__JoinState *js)
{
    int news = 0;
    pthread_mutex_lock(&w->mu);
    for (c10d_pg *pg = w->groups; pg; pg = pg->next_in_world) {
        if (strcmp(pg->name, js->group) != 0)
            continue;
        c10di_join *j = &pg->join;
        unsigned version = atomic_load(&j->version);
        if (js->region <= j->ended)
            break; /* a region this rank already ended */
        /* The end of the region this rank is in (not ended, over: it
         * joined it), for its in-band shadowing. Even when the same reply
         * carries the next region too, which a rank that returned from
         * this one at once may have joined already. */
        if (js->has_done && js->done && js->has_final_seq &&
            atomic_load(&j->done_region) != js->region) {
            j->done_final = js->final_seq;
            atomic_store_explicit(&j->done_region, js->region, memory_order_release);
            news = 1;
        }
        /* An older region than the one described, or nothing new. */
        if (js->region < j->state_region ||
            (js->region == j->state_region && js->version <= version))
            break;
        if (js->region != j->state_region)
            for (int i = 0; i < pg->size; i++)
                j->after[i] = NOT_JOINED;
        j->state_region = js->region;
        for (size_t k = 0; k < js->n_joined; k++) {
            int r = js->joined[k]->rank;
            if (r >= 0 && r < pg->size)
                j->after[r] = js->joined[k]->after_seq;
        }
        c10di_joins_changed(j);
        atomic_store_explicit(&j->version, js->version, memory_order_release);
        news = 1;
        break;
    }
    pthread_mutex_unlock(&w->mu);
    return news;
}

size_t c10di_join_acks(c10di_world *w, C10dpb__JoinKnown ***acks)
{
    size_t n = 0, cap = 0;
    *acks = NULL;
    pthread_mutex_lock(&w->mu);
    for (c10d_pg *pg = w->groups; pg; pg = pg->next_in_world) {
        unsigned version = atomic_load(&pg->join.version);
        if (!version)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 4;
            C10dpb__JoinKnown **nv = realloc(*acks, cap * sizeof *nv);
            if (!nv)
                break;
            *acks = nv;
        }
        C10dpb__JoinKnown *k = malloc(sizeof *k);
        if (k)
            c10dpb__join_known__init(k);
        if (!k || !(k->group = strdup(pg->name))) {
            free(k);
            break;
        }
        k->region = pg->join.state_region;
        k->version = version;
        (*acks)[n++] = k;
    }
    pthread_mutex_unlock(&w->mu);
    return n;
}

void c10di_join_acks_free(C10dpb__JoinKnown **acks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(acks[i]->group);
        free(acks[i]);
    }
    free(acks);
}

/* --- c10d_join_begin / c10d_join_end --- */

c10d_status c10d_join_begin(c10d_pg *pg, const c10d_join_opts *o)
{
    if (!pg)
        return c10di_error(C10D_EINVAL, "join_begin: NULL process group");
    c10di_join *j = &pg->join;
    if (c10di_join_in_region(pg))
        return c10di_error(C10D_EINVAL, "join_begin: group %s is in join region %u already "
                           "(call c10d_join_end first)", pg->name, j->region);
    c10d_join_opts opts = C10D_JOIN_OPTS_INIT;
    c10d_status vst;
    if (o && (vst = c10di_opts_version("join_begin", "c10d_join_opts", o->version,
                                       C10D_JOIN_OPTS_VERSION)) != C10D_OK)
        return vst;
    if (o)
        opts = *o;
    c10di_world *w = pg->w;
    /* Async calls made before the region run outside it: their transfer
     * headers name no region (a joined rank must not take them for one of
     * its own), and the lane never sees the region number change. */
    c10di_lane_drain(pg->lane);
    C10dpb__JoinBegin m = C10DPB__JOIN_BEGIN__INIT;
    m.job = w->job;
    m.generation = w->generation;
    m.group = pg->name;
    m.rank = w->rank;
    m.region = j->region + 1;
    m.has_throw_on_early_termination = m.has_divide_by_initial_world_size = 1;
    m.throw_on_early_termination = opts.throw_on_early_termination != 0;
    m.divide_by_initial_world_size = opts.divide_by_initial_world_size != 0;
    int inband = inband_capable(pg);
    m.has_inband = 1;
    m.inband = inband; /* the coordinator checks that every member agrees */
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_JOIN_BEGIN;
    req.join_begin = &m;
    C10dpb__Reply *rep = NULL;
    c10d_status st = c10di_call(w->conn, &req, 0, C10DI_CONTROL_CALL_BUDGET_MS, &rep);
    if (st != C10D_OK)
        return c10di_error(st, "join_begin of group %s: %s", pg->name, c10d_errmsg());
    c10dpb__reply__free_unpacked(rep, NULL);
    j->region++;
    j->opts = opts;
    j->inband = inband;
    atomic_store_explicit(&j->in_region, 1, memory_order_release);
    return C10D_OK;
}

/* The region is over (or failed): nothing of it applies any more. */
