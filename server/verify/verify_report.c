/* Verification's findings and how they are worded: a desync, a stall, a
 * member lost before a collective could complete; who is where; each
 * group's health as c10d-ctl desync shows it (coll_status). A finding
 * is recorded once (sticky for the group), written to SQLite, told to
 * every rank (their watches, parked SYNC reports) and to join. */
#include "engine/engine.h"
#include "engine/events.h"
#include "groups/groups.h"
#include "groups/liveness_ops.h"
#include "engine/ops.h"
#include "engine/request.h"
#include "verify/verify.h"
#include "verify/verify_history.h"
#include "engine/waiters.h"

#include "c10d_time.h"
#include "fingerprint.h"
#include "log.h"

#include <c10d/errors.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SYNC reports of a group park on one key, touched whenever every member
 * has entered one more collective (or the group got a finding). */
void c10ds_verify_coll_key(char *buf, size_t cap, const c10ds_vgroup *g)
{
    snprintf(buf, cap, "\x01coll:%s:%llu:%s", g->job, (unsigned long long)g->gen, g->name);
}

const char *c10ds_verify_who(const c10ds_vgroup *g, int idx, char *buf, size_t cap)
{
    if (g->ranks[idx] == idx)
        snprintf(buf, cap, "rank %d", idx);
    else
        snprintf(buf, cap, "rank %d (global %d)", idx, g->ranks[idx]);
    return buf;
}

void c10ds_verify_wake(c10ds_engine *e, const c10ds_vgroup *g)
{
    char key[512];
    c10ds_verify_coll_key(key, sizeof key, g);
    c10ds_waiters_touch(e->waiters, key);
}

/* Records a finding: sticky for the group, written once, told to all. */
void c10ds_verify_finding(c10ds_engine *e, c10ds_vgroup *g, uint64_t seq, int status,
                          const char *report)
{
    if (g->status)
        return;
    g->status = status;
    g->finding_seq = seq;
    snprintf(g->report, sizeof g->report, "%s", report);
    c10ds_warn("job %s generation %llu: %s", g->job, (unsigned long long)g->gen, report);
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_FINDING_PUT);
    sqlite3_bind_text(s, 1, g->job, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)g->gen);
    sqlite3_bind_text(s, 3, g->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, (sqlite3_int64)seq);
    sqlite3_bind_int(s, 5, status);
    sqlite3_bind_text(s, 6, report, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 7, c10d_steady_wall_ms());
    sqlite3_step(s);
    sqlite3_reset(s);
    c10ds_groups_bump(e, g->job, g->gen); /* ASYNC ranks learn it from their watch */
    for (int i = 0; i < g->size; i++) /* rewrite the traces with the failed state */
        g->traces[i].dirty = g->traces[i].count;
    e->verify.next_flush_ms = 0;
    e->verify.flush_all = 1;
    c10ds_verify_wake(e, g);
    c10ds_emit_finding(e, g);
}

/* Group ranks in[0..n) (ascending) as "rank 3" or "ranks 0, 2–5". */
static size_t format_ranks(const c10ds_vgroup *g, const int *in, int n, char *buf, size_t cap)
{
    if (n == 1) {
        c10ds_verify_who(g, in[0], buf, cap);
        return strlen(buf);
    }
    size_t off = (size_t)snprintf(buf, cap, "ranks ");
    for (int i = 0; i < n && off < cap; i++) {
        int j = i;
        while (j + 1 < n && in[j + 1] == in[j] + 1)
            j++;
        off += (size_t)snprintf(buf + off, cap - off, "%s%d", i ? ", " : "", in[i]);
        if (j > i && off < cap)
            off += (size_t)snprintf(buf + off, cap - off, "%s%d", j == i + 1 ? ", " : "–", in[j]);
        i = j;
    }
    return off < cap ? off : cap - 1;
}

/* " (rank 0: host a pid 7; rank 1: host b pid 9)": where to point a
 * debugger, for the first few of the ranks named. */
static void where_they_run(c10ds_engine *e, const c10ds_vgroup *g, const int *named, int n,
                           char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && i < 4 && off + 1 < cap; i++) {
        c10ds_member m;
        if (c10ds_groups_member(&e->groups, g->job, g->gen, g->ranks[named[i]], &m) != 1)
            continue;
        off += (size_t)snprintf(buf + off, cap - off, "%srank %d: host %s pid %d",
                                off ? "; " : " (", named[i], m.host, m.pid);
    }
    if (off && off + 1 < cap)
        snprintf(buf + off, cap - off, "%s)", n > 4 ? "; ..." : "");
}

void c10ds_verify_desync(c10ds_engine *e, c10ds_vgroup *g, uint64_t seq, const c10ds_vrun *ref,
                   int idx, const c10dc_fp *fp, const char *field)
{
    /* Every rank already past seq called the reference (or its desync
     * would have been found then); idx called fp; the rest are not there. */
    int *same = malloc((size_t)g->size * sizeof *same), n_same = 0, n_behind = 0;
    char a[256], b[64], fa[160], fb[160], where[320], behind[96] = "", hint[256] = "";
    char report[1024];
    if (same) {
        for (int i = 0; i < g->size; i++) {
            if (i != idx && g->entered[i] >= seq)
                same[n_same++] = i;
            else if (i != idx)
                n_behind++;
        }
    }
    if (same && n_same) {
        format_ranks(g, same, n_same, a, sizeof a);
    } else {
        c10ds_verify_who(g, ref->first, a, sizeof a);
    }
    c10ds_verify_who(g, idx, b, sizeof b);
    int named[5] = {idx};
    int n_named = 1;
    for (int i = 0; same && i < n_same && n_named < 5; i++)
        named[n_named++] = same[i];
    where_they_run(e, g, named, n_named, where, sizeof where);
    if (n_behind)
        snprintf(behind, sizeof behind, "; %d other rank%s not there yet", n_behind,
                 n_behind == 1 ? " is" : "s are");
    /* A rank that ran out of data leaves its loop for what follows it (a
     * barrier, an evaluation's gather) while the others are still in the
     * gradient all_reduces of a step: uneven inputs. */
    if (!strcmp(field, "operation") &&
        (ref->fp.kind == C10DC_ALL_REDUCE) != (fp->kind == C10DC_ALL_REDUCE))
        snprintf(hint, sizeof hint, ". If the ranks' inputs are uneven, the one that ran out "
                 "left its training loop early: run the loop under join() (docs/join.md)");
    int len = snprintf(report, sizeof report, "desync in group %s (job %s) at collective #%llu: "
                       "%s called %s, %s called %s (different %s)%s%s%s", g->name, g->job,
                       (unsigned long long)seq, a, c10dc_fp_format(&ref->fp, fa, sizeof fa), b,
                       c10dc_fp_format(fp, fb, sizeof fb), field, behind, where, hint);
    if (len >= (int)sizeof report) /* a report is one finding's line: what fits is said */
        memcpy(report + sizeof report - 4, "...", 4);
    free(same);
    c10ds_verify_finding(e, g, seq, C10D_EDESYNC, report);
}

/* Rank i's state in words, without its time: what ranks sharing it are
 * told apart by. */
static void state_of(const c10ds_vgroup *g, int i, char *buf, size_t cap)
{
    char f[160];
    if (!g->entered[i])
        snprintf(buf, cap, "entered no collective");
    else if (g->completed[i] >= g->entered[i])
        snprintf(buf, cap, "completed #%llu and entered nothing since",
                 (unsigned long long)g->completed[i]);
    else
        snprintf(buf, cap, "in #%llu %s", (unsigned long long)g->entered[i],
                 c10dc_fp_format(&g->last[i], f, sizeof f));
}

/* Who is where, ranks in the same state as ranges: "rank 0 in #6
 * ALL_REDUCE float32[2] SUM for 5.0 s; ranks 1–3 completed #5 and
 * entered nothing since (for 5.1 s)". */
void c10ds_verify_whereabouts(const c10ds_vgroup *g, char *buf, size_t cap)
{
    size_t off = 0;
    int64_t now = c10d_steady_wall_ms();
    int shown = 0;
    buf[0] = '\0';
    for (int i = 0; i < g->size && off + 64 < cap; shown++) {
        char st[224], next[224], who[96];
        state_of(g, i, st, sizeof st);
        int j = i + 1;
        for (; j < g->size; j++) {
            state_of(g, j, next, sizeof next);
            if (strcmp(st, next))
                break;
        }
        if (shown == 16) {
            snprintf(buf + off, cap - off, "; and ranks %d–%d elsewhere", i, g->size - 1);
            return;
        }
        if (j - i == 1)
            c10ds_verify_who(g, i, who, sizeof who);
        else
            snprintf(who, sizeof who, "ranks %d–%d", i, j - 1);
        const char *aux = g->entered[i] ? "" : j - i == 1 ? "has " : "have ";
        off += (size_t)snprintf(buf + off, cap - off, "%s%s %s%s", i ? "; " : "", who, aux, st);
        if (g->entered[i] && off + 16 < cap)
            off += (size_t)snprintf(buf + off, cap - off, " (for %.1f s)",
                                    (now - g->entered_ms[i]) / 1000.0);
        i = j;
    }
}

void c10ds_verify_stall(c10ds_engine *e, c10ds_vgroup *g, uint64_t seq)
{
    char where[768], report[1024];
    c10ds_verify_whereabouts(g, where, sizeof where);
    snprintf(report, sizeof report, "stall in group %s (job %s) at collective #%llu: %s",
             g->name, g->job, (unsigned long long)seq, where);
    c10ds_verify_finding(e, g, seq, C10D_ETIMEDOUT, report);
}

/* A member that died, or left before entering seq, means seq can never
 * complete. Returns 1 after recording the finding. */
int c10ds_verify_member_lost(c10ds_engine *e, c10ds_vgroup *g, uint64_t seq, const char *waiter)
{
    size_t n;
    C10dpb__MemberInfo **lost = c10ds_groups_lost(e, g->job, g->gen, &n);
    int found = 0;
    for (size_t i = 0; i < n && !found; i++) {
        C10dpb__MemberInfo *m = lost[i];
        int idx = m->rank >= 0 && m->rank < g->world ? g->index_of[m->rank] : -1;
        if (idx < 0 || g->entered[idx] >= seq)
            continue;
        char a[64], when[96], report[1024];
        int left = m->state == C10DPB__MEMBER_STATE__MEMBER_LEFT;
        if (g->entered[idx])
            snprintf(when, sizeof when, "after collective #%llu",
                     (unsigned long long)g->entered[idx]);
        else if (g->completed[idx]) /* its watch said so (after a coordinator restart) */
            snprintf(when, sizeof when, "after completing collective #%llu",
                     (unsigned long long)g->completed[idx]);
        else
            snprintf(when, sizeof when, "before its first collective");
        snprintf(report, sizeof report, "%s (host %s, pid %d) %s %s of group %s (job %s): %s; "
                 "%s", c10ds_verify_who(g, idx, a, sizeof a), m->host, m->pid,
                 left ? "left" : "died", when, g->name, g->job, m->reason ? m->reason : "",
                 waiter);
        c10ds_verify_finding(e, g, seq, C10D_EPEERLOST, report);
        found = 1;
    }
    c10ds_groups_lost_free(lost, n);
    return found;
}

/* "rank 1 waits in #6 ALL_REDUCE float32[2] SUM" */
int c10ds_verify_waiter_lost(c10ds_engine *e, c10ds_vgroup *g, uint64_t seq, int waiter)
{
    char b[64], f[160], desc[256];
    snprintf(desc, sizeof desc, "%s waits in #%llu %s", c10ds_verify_who(g, waiter, b, sizeof b),
             (unsigned long long)seq, c10dc_fp_format(&g->last[waiter], f, sizeof f));
    return c10ds_verify_member_lost(e, g, seq, desc);
}

/* Appends h (NULL: out of memory, skipped) to out's groups; -1 if it
 * could not (h freed). */
static int add_health(C10dpb__CollStatusReply *out, size_t *cap, C10dpb__GroupHealth *h)
{
    if (!h)
        return 0;
    if (out->n_groups == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        C10dpb__GroupHealth **nv = realloc(out->groups, nc * sizeof *nv);
        if (!nv) {
            c10ds_health_free(h);
            return -1;
        }
        out->groups = nv;
        *cap = nc;
    }
    out->groups[out->n_groups++] = h;
    return 0;
}

static int in_memory(c10ds_engine *e, const char *job, uint64_t gen, const char *name)
{
    for (c10ds_vgroup *g = e->verify.groups; g; g = g->next)
        if (g->gen == gen && !strcmp(g->name, name) && !strcmp(g->job, job))
            return 1;
    return 0;
}

/* The groups of the jobs' current generations that memory has nothing of
 * (their run ended: verify_history.h), from the database. */
static void add_from_history(c10ds_engine *e, const C10dpb__CollStatus *q,
                             C10dpb__CollStatusReply *out, size_t *cap)
{
    typedef struct {
        char *name;
        uint64_t gen;
        int size;
    } item;
    item *jobs = NULL, *groups = NULL;
    size_t nj = 0, ng = 0, jcap = 0, gcap = 0;
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_JOB_LIST);
    if (q->job && *q->job)
        sqlite3_bind_text(s, 1, q->job, -1, SQLITE_STATIC);
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (nj == jcap) {
            item *nv = realloc(jobs, (jcap = jcap ? jcap * 2 : 4) * sizeof *nv);
            if (!nv)
                break;
            jobs = nv;
        }
        if (!(jobs[nj].name = strdup((const char *)sqlite3_column_text(s, 0))))
            break;
        jobs[nj++].gen = (uint64_t)sqlite3_column_int64(s, 1);
    }
    sqlite3_reset(s);
    for (size_t j = 0; j < nj; j++) {
        s = c10ds_groups_stmt(&e->groups, GS_GROUPS_OF_GEN);
        sqlite3_bind_text(s, 1, jobs[j].name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, (sqlite3_int64)jobs[j].gen);
        while (sqlite3_step(s) == SQLITE_ROW) {
            const char *name = (const char *)sqlite3_column_text(s, 0);
            if (!sqlite3_column_int(s, 3) || (q->group && *q->group && strcmp(q->group, name)) ||
                in_memory(e, jobs[j].name, jobs[j].gen, name))
                continue; /* not formed (never verified), not asked for, or in memory */
            if (ng == gcap) {
                item *nv = realloc(groups, (gcap = gcap ? gcap * 2 : 4) * sizeof *nv);
                if (!nv)
                    break;
                groups = nv;
            }
            if (!(groups[ng].name = strdup(name)))
                break;
            groups[ng++].size = sqlite3_column_int(s, 1);
        }
        sqlite3_reset(s);
        for (size_t k = 0; k < ng; k++) {
            add_health(out, cap, c10ds_verify_history_health(e, jobs[j].name, jobs[j].gen,
                                                             groups[k].name, groups[k].size));
            free(groups[k].name);
        }
        ng = 0;
    }
    for (size_t j = 0; j < nj; j++)
        free(jobs[j].name);
    free(jobs);
    free(groups);
}

/* coll_status: what c10d-ctl desync shows, per group of the jobs' current
 * generations: from memory while their run goes on, from the database once
 * it ended. */
static c10ds_outcome op_coll_status(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    (void)ph;
    C10dpb__CollStatus *q = r->pb->coll_status;
    C10dpb__CollStatusReply out = C10DPB__COLL_STATUS_REPLY__INIT;
    size_t cap = 0;
    for (c10ds_vgroup *g = e->verify.groups; g; g = g->next) {
        if ((q->job && *q->job && strcmp(q->job, g->job)) ||
            (q->group && *q->group && strcmp(q->group, g->name)))
            continue;
        c10ds_job jb;
        if (c10ds_groups_job(&e->groups, g->job, &jb) != 1 || jb.generation != g->gen)
            continue; /* an older generation */
        add_health(&out, &cap, c10ds_health_of(g));
    }
    add_from_history(e, q, &out, &cap);
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_COLL_STATUS;
    rep.coll_status = &out;
    c10ds_outcome o = c10ds_reply(r, &rep);
    for (size_t i = 0; i < out.n_groups; i++)
        c10ds_health_free(out.groups[i]);
    free(out.groups);
    return o;
}

const c10ds_op c10ds_health_ops[] = {
    {C10DPB__REQUEST__OP_COLL_STATUS, "coll_status", op_coll_status, 0},
    {0, NULL, NULL, 0},
};
