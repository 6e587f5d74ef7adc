/* A group's health as its calls see it: whether it is still usable (a
 * failure that may have left bytes in flight breaks it), how far its
 * collectives completed, the members the watcher (watch.c) heard were
 * lost and the findings recorded on it (by the watcher, a call's end, the
 * data plane's checks). A call begins and ends here (plan.c): the checks
 * before it runs, and what its end records. Also what this rank is doing,
 * which the heartbeat carries so that a peer's report can say which
 * collective a dead rank was last in. */
#include "group/liveness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void c10di_activity(c10di_world *w, const char *a, const char *b, const char *c, const char *d)
{
    const size_t cap = sizeof w->act_text;
    size_t n = 0;
    atomic_fetch_add_explicit(&w->act_seq, 1, memory_order_relaxed); /* odd: writing */
    atomic_thread_fence(memory_order_release);
    for (const char *parts[4] = {a, b, c, d}, **p = parts; p < parts + 4; p++)
        for (const char *s = *p; s && *s && n + 1 < cap; s++)
            atomic_store_explicit(&w->act_text[n++], (unsigned char)*s, memory_order_relaxed);
    atomic_store_explicit(&w->act_text[n], 0, memory_order_relaxed);
    atomic_store_explicit(&w->act_idle, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->act_seq, 1, memory_order_release); /* even: done */
}

void c10di_activity_done(c10di_world *w)
{
    atomic_store_explicit(&w->act_idle, 1, memory_order_release);
}

void c10di_activity_read(c10di_world *w, char *out, size_t cap)
{
    char text[sizeof w->act_text];
    /* Retry while a write is under way; it is advice, so give up after a
     * few tries rather than wait on a busy writer. */
    for (int tries = 0; tries < 100; tries++) {
        unsigned s1 = atomic_load_explicit(&w->act_seq, memory_order_acquire);
        size_t i = 0;
        for (; i + 1 < sizeof text; i++)
            if (!(text[i] = (char)atomic_load_explicit(&w->act_text[i], memory_order_relaxed)))
                break;
        text[i] = '\0';
        atomic_thread_fence(memory_order_acquire);
        if (!(s1 & 1) && atomic_load_explicit(&w->act_seq, memory_order_relaxed) == s1)
            break;
    }
    snprintf(out, cap, "%s %s",
             atomic_load_explicit(&w->act_idle, memory_order_acquire) ? "idle after" : "in",
             text);
}

void c10di_alerts_free(c10di_world *w)
{
    /* Only once the watcher, which records them, has stopped. */
    for (c10di_alert *a = w->alerts, *n; a; a = n) {
        n = a->next;
        free(a->report);
        free(a);
    }
    w->alerts = NULL;
}

void c10di_record_alert(c10di_world *w, const char *group, c10d_status st, const char *report)
{
    pthread_mutex_lock(&w->mu);
    for (c10di_alert *a = w->alerts; a; a = a->next)
        if (strcmp(a->group, group) == 0) {
            pthread_mutex_unlock(&w->mu);
            return; /* sticky: the first finding stands */
        }
    c10di_alert *a = calloc(1, sizeof *a);
    if (a && (a->report = strdup(report ? report : ""))) {
        snprintf(a->group, sizeof a->group, "%s", group);
        a->status = st;
        a->next = w->alerts;
        w->alerts = a;
        atomic_fetch_add(&w->lost_version, 1);
    } else {
        free(a);
    }
    pthread_mutex_unlock(&w->mu);
}

/* A member that left cleanly had finished every collective it issued; it
 * fails only those of its peers' collectives it never entered. */
static uint64_t final_seq(const c10di_seqs *finals, const char *group)
{
    uint64_t seq = 0;
    return c10di_seqs_get(finals, group, &seq) ? seq : 0;
}

/* The group's failure as this rank knows it (w->mu held): its alert (a
 * finding), else the member heard lost first that matters at collective
 * seq (has_seq 0: any that is lost) — the first heard, not the lowest
 * rank: a rank that fails because another went (a joined rank whose
 * join_end failed, then left) is not the cause. The message goes to msg.
 * *recheck: the first later collective at which a member that left after
 * seq starts to matter (UINT64_MAX: none). */
static c10d_status failure_locked(c10d_pg *pg, int has_seq, uint64_t seq, char *msg, size_t cap,
                                  uint64_t *recheck)
{
    c10di_world *w = pg->w;
    msg[0] = '\0';
    *recheck = UINT64_MAX;
    for (c10di_alert *a = w->alerts; a; a = a->next)
        if (strcmp(a->group, pg->name) == 0) {
            snprintf(msg, cap, "%s", a->report);
            return a->status;
        }
    int first = -1;
    for (int i = 0; i < pg->size; i++) {
        int g = pg->ranks[i];
        if (!w->lost[g])
            continue;
        uint64_t last = has_seq ? final_seq(&w->lost_finals[g], pg->name) : 0;
        if (!(has_seq && last >= seq)) { /* had not finished seq */
            if (first < 0 || w->lost_order[g] < w->lost_order[first])
                first = g;
        } else if (last + 1 < *recheck) { /* left after seq: matters from its next collective */
            *recheck = last + 1;
        }
    }
    if (first < 0)
        return C10D_OK;
    snprintf(msg, cap, "%s", w->lost[first]);
    return C10D_EPEERLOST;
}

c10d_status c10di_pg_failure(c10d_pg *pg, uint64_t seq, char *msg, size_t cap)
{
    c10di_world *w = pg->w;
    msg[0] = '\0';
    if (!atomic_load(&w->lost_version))
        return C10D_OK;
    uint64_t recheck;
    pthread_mutex_lock(&w->mu);
    c10d_status st = failure_locked(pg, 1, seq, msg, cap, &recheck);
    pthread_mutex_unlock(&w->mu);
    return st;
}

c10d_status c10di_pg_lost(c10d_pg *pg, const c10di_coll *c)
{
    c10di_world *w = pg->w;
    unsigned version = atomic_load(&w->lost_version);
    if (version && !(version == pg->lost_seen && c && c->seq < pg->recheck_seq)) {
        char msg[1024];
        uint64_t recheck;
        pthread_mutex_lock(&w->mu);
        c10d_status st = failure_locked(pg, c != NULL, c ? c->seq : 0, msg, sizeof msg, &recheck);
        if (st == C10D_OK && c) { /* nothing matters to calls before recheck */
            pg->lost_seen = version;
            pg->recheck_seq = recheck;
        }
        pthread_mutex_unlock(&w->mu);
        if (st != C10D_OK)
            return c10di_error(st, "%s of group %s (rank %d) failed: %s",
                               c ? c->what : "setup", pg->name, pg->rank, msg);
    }
    return C10D_OK;
}

/* --- a call's beginning and end --- */

void c10di_pg_completed(c10d_pg *pg, uint64_t seq)
{
    uint64_t cur = atomic_load(&pg->completed);
    while (cur < seq && !atomic_compare_exchange_weak(&pg->completed, &cur, seq))
        ;
}

void c10di_pg_break(c10d_pg *pg, c10d_status st, const char *msg)
{
    int unclaimed = 0;
    if (!atomic_compare_exchange_strong(&pg->broken_claimed, &unclaimed, 1))
        return; /* the first failure stands */
    snprintf(pg->broken_msg, sizeof pg->broken_msg, "%s", msg);
    atomic_store(&pg->broken, st);
}

/* C10D_EABORTED, with the message set, if pg is broken. */
static c10d_status usable(c10d_pg *pg, const c10di_coll *c)
{
    if (!atomic_load(&pg->broken))
        return C10D_OK;
    return c10di_error(C10D_EABORTED, "%s of group %s: the group is unusable after an earlier "
                       "failure: %s", c->what, pg->name, pg->broken_msg);
}

c10d_status c10di_call_begin(c10d_pg *pg, const c10di_coll *c, int announce, int check,
                             c10di_outcome *o)
{
    c10d_status st = usable(pg, c);
    if (st != C10D_OK)
        return st;
    if (announce) {
        c10di_activity(pg->w, "collective ", c->what, " of group ", pg->name);
        o->announced = 1;
    }
    return check ? c10di_pg_lost(pg, c) : C10D_OK;
}

void c10di_call_end(c10d_pg *pg, const c10di_coll *c, c10d_status st, const c10di_outcome *o)
{
    if (o->found != C10D_OK)
        c10di_record_alert(pg->w, pg->name, o->found, o->report);
    if (st == C10D_OK && c->kind != C10DC_SEND && c->kind != C10DC_RECV && !c->completes_later)
        c10di_pg_completed(pg, c->seq);
    if (st != C10D_OK && st != C10D_EINVAL && c->kind != C10DC_MONITORED_BARRIER)
        /* The links may hold half a message: nothing after this is safe.
         * (A monitored barrier met through the store: the links are as
         * they were, and a late rank still meets it under its number.) */
        c10di_pg_break(pg, st, c10d_errmsg());
    if (o->announced)
        c10di_activity_done(pg->w);
}
