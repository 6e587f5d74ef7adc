/* A group's join region as a call reads it (docs/join.md): whether this
 * rank is in one, the joins it knows of, how many members are active at
 * a collective, and the checks a call passes because of them (a send/recv
 * with a joined peer, a collective a joined rank cannot take part in, an
 * AVG that divides by the active ranks, the last active rank running
 * alone). What is heard of joins is written by join.c. */
#include "join/join_region.h"

#include "join_words.h"

#include <stdio.h>
#include <stdlib.h>

unsigned c10di_join_known(c10d_pg *pg)
{
    return atomic_load_explicit(&pg->join.version, memory_order_acquire);
}

static int reduces(uint32_t kind)
{
    return kind == C10DC_ALL_REDUCE || kind == C10DC_REDUCE || kind == C10DC_REDUCE_SCATTER;
}

int c10di_join_in_region(c10d_pg *pg)
{
    return atomic_load_explicit(&pg->join.in_region, memory_order_acquire);
}

/* An AVG whose divisor depends on who has joined: it must know before it
 * runs, which only the coordinator's answer guarantees. */
int c10di_join_avg_by_active(c10d_pg *pg, const c10di_coll *c)
{
    return reduces(c->kind) && c->op == C10D_AVG && c10di_join_in_region(pg) &&
           !pg->join.opts.divide_by_initial_world_size;
}


static uint64_t peer_after(c10d_pg *pg, const c10di_coll *c)
{
    if (!(c->kind == C10DC_SEND || c->kind == C10DC_RECV) || !c10di_join_known(pg))
        return NOT_JOINED;
    pthread_mutex_lock(&pg->w->mu);
    uint64_t after = c->root >= 0 && c->root < pg->size ? pg->join.after[c->root] : NOT_JOINED;
    pthread_mutex_unlock(&pg->w->mu);
    return after;
}

void c10di_join_plan(c10d_pg *pg, const c10di_coll *c, c10di_plan *p)
{
    p->region = c10di_join_in_region(pg);
    p->inband = p->region && pg->join.inband;
    p->known = c10di_join_known(pg);
    p->avg_by_active = c10di_join_avg_by_active(pg, c);
    p->peer_after = peer_after(pg, c);
}

static int anyone_joined(c10d_pg *pg)
{
    return c10di_join_known(pg) || atomic_load_explicit(&pg->join.heard, memory_order_acquire);
}

/* Ranks that contribute data to collective seq of pg. */
int c10di_join_active_at(c10d_pg *pg, uint64_t seq)
{
    if (!anyone_joined(pg))
        return pg->size;
    c10di_join *j = &pg->join;
    unsigned epoch = atomic_load_explicit(&j->epoch, memory_order_acquire);
    if (epoch == j->stable_epoch && seq >= j->stable_from)
        return j->stable_active; /* every step of a shadowed loop: no lock */
    int active = pg->size;
    uint64_t top = 0;
    pthread_mutex_lock(&pg->w->mu);
    for (int i = 0; i < pg->size; i++) {
        active -= j->after[i] < seq;
        if (j->after[i] != NOT_JOINED && j->after[i] > top)
            top = j->after[i];
    }
    pthread_mutex_unlock(&pg->w->mu);
    if (seq > top) { /* every join known counts from here on */
        j->stable_epoch = epoch;
        j->stable_from = top + 1;
        j->stable_active = active;
    }
    return active;
}

/* In-band, every other member joined before c, and c is one a joined
 * rank only contributes identities to or drops: this rank's result is its
 * own data, and the joined ranks need no more than c's header (docs/join.md,
 * "The last active rank"). after[] says only what was heard of the current
 * region, and a join is never undone within it, so this holds once seen. */
static int runs_alone(c10d_pg *pg, const c10di_coll *c)
{
    if (pg->size < 2 || !c10di_join_in_region(pg) || !pg->join.inband || !anyone_joined(pg) ||
        !c->be->announce)
        return 0;
    switch (c->kind) {
    case C10DC_ALL_REDUCE:
    case C10DC_REDUCE_SCATTER:
    case C10DC_BARRIER: break;
    case C10DC_REDUCE:
    case C10DC_BROADCAST:
        if (c->root != pg->rank)
            return 0;
        break;
    default: return 0;
    }
    return c10di_join_active_at(pg, c->seq) == 1;
}

static c10d_status prepare(c10d_pg *pg, c10di_coll *c, c10di_outcome *o)
{
    if (c->plan.avg_by_active)
        c->divisor = c10di_join_active_at(pg, c->seq);
    c10d_status st = c10di_join_check(pg, c, o);
    c->alone = st == C10D_OK && runs_alone(pg, c);
    return st;
}

static c10d_status refuse_p2p(c10d_pg *pg, const c10di_coll *c)
{
    uint64_t after = c->plan.peer_after;
    char never[128];
    return c10di_error(C10D_EJOINED, "%s (tag %d) of group %s (rank %d) did not run: rank %d %s",
                       c->what, c->tag, pg->name, pg->rank, c->root,
                       c10dc_join_never_matched(never, sizeof never, after, c->kind == C10DC_SEND));
}

c10d_status c10di_join_enter(c10d_pg *pg, c10di_coll *c, c10di_outcome *o)
{
    if (c->shadow) /* its divisor came with the call */
        return C10D_OK;
    /* A join heard since the plan (the watcher, or a peer's header): the
     * plan's peer is read again, so the call is refused, not run against
     * a joined peer. Its entry went already: the version moved, so
     * verification sent it. */
    if (c->plan.peer_after == NOT_JOINED && c10di_join_known(pg) != c->plan.known)
        c->plan.peer_after = peer_after(pg, c);
    return c->plan.peer_after == NOT_JOINED ? prepare(pg, c, o) : refuse_p2p(pg, c);
}

/* Why collective seq (fp, called by group rank `caller`) cannot run while
 * members have joined, in the coordinator's words, into report; 0 if it
 * can. Reads after[] (w->mu held). */
int c10di_join_unshadowable_report(c10d_pg *pg, uint64_t seq, const c10dc_fp *fp, int caller,
                                   char *report, size_t cap)
{
    int rooted = fp->kind == C10DC_BROADCAST || fp->kind == C10DC_REDUCE;
    int root_joined = rooted && fp->root >= 0 && fp->root < pg->size &&
                      pg->join.after[fp->root] < seq;
    const char *why = c10dc_join_unshadowable(fp, root_joined);
    if (!why)
        return 0;
    /* The members that joined before seq, in rank order. */
    char who[32], joined[512];
    c10dc_join_list l;
    c10dc_join_list_start(&l, joined, sizeof joined);
    for (int i = 0; i < pg->size; i++) {
        if (pg->join.after[i] >= seq)
            continue;
        snprintf(who, sizeof who, "rank %d", i);
        if (!c10dc_join_list_add(&l, who, pg->join.after[i]))
            break;
    }
    snprintf(who, sizeof who, "rank %d", caller);
    c10dc_join_unshadowable_report(report, cap, pg->name, pg->w->job, seq, who, fp, why, joined);
    return 1;
}

c10d_status c10di_join_check(c10d_pg *pg, const c10di_coll *c, c10di_outcome *o)
{
    if (c->shadow || !c10di_join_in_region(pg) || !pg->join.inband || !anyone_joined(pg) ||
        c->kind == C10DC_SEND || c->kind == C10DC_RECV)
        return C10D_OK;
    int meet = c->kind == C10DC_MONITORED_BARRIER;
    if (!meet && !c10dc_join_unshadowable(&c->fp, 1))
        return C10D_OK; /* runs whoever joined (an all_reduce, a barrier) */
    int *tell = malloc((size_t)pg->size * sizeof *tell), n_tell = 0, bad = 0;
    if (!tell)
        return c10di_error(C10D_ENOMEM, "%s of group %s: out of memory checking it against the "
                           "joined ranks", c->what, pg->name);
    pthread_mutex_lock(&pg->w->mu);
    bad = !meet && c10di_join_unshadowable_report(pg, c->seq, &c->fp, pg->rank, o->report,
                                                  sizeof o->report);
    /* A monitored barrier is announced by one rank, the lowest active one
     * this rank knows of: a joined rank takes one header per barrier. */
    int lowest = pg->rank;
    for (int i = 0; i < pg->rank; i++)
        if (pg->join.after[i] >= c->seq) {
            lowest = i;
            break;
        }
    for (int i = 0; i < pg->size && ((meet && lowest == pg->rank) || bad); i++)
        if (pg->join.after[i] < c->seq && pg->join.told[i] < c->seq) {
            pg->join.told[i] = c->seq;
            tell[n_tell++] = i;
        }
    pthread_mutex_unlock(&pg->w->mu);
    /* The joined ranks wait in join_end for a header: this one tells them
     * to meet the barrier, or that the group failed. */
    for (int k = 0; k < n_tell; k++) /* the host backend's links (a monitored barrier has no be) */
        pg->be[C10DI_DEV_CPU].ops->announce(pg->be[C10DI_DEV_CPU].state, c, tell[k]);
    free(tell);
    if (!bad)
        return C10D_OK;
    o->found = C10D_EJOINED; /* the group's finding */
    return c10di_error(C10D_EJOINED, "%s of group %s (rank %d) did not run: %s", c->what,
                       pg->name, pg->rank, o->report);
}

void c10di_join_ran(c10d_pg *pg, const c10di_coll *c)
{
    if (c->kind != C10DC_SEND && c->kind != C10DC_RECV && !c->shadow)
        pg->join.active_last = c10di_join_active_at(pg, c->seq);
}

int c10d_active_ranks(const c10d_pg *pg)
{
    return pg ? pg->join.active_last : -1;
}
