/* Collective-sequence verification, the rank's side. Every collective
 * (not send/recv) is reported to the coordinator with its group, sequence
 * number and fingerprint before it runs:
 *
 * - SYNC: one round trip; the coordinator answers once every member entered
 *   the same seq with the same fingerprint, or says why the collective can
 *   never run (a desync, a member lost, a stall). Nothing reaches the data
 *   plane before that, so a mismatch cannot hang it.
 * - ASYNC: the entry is queued and a reporter thread sends the queue in
 *   batches (at most every 10 ms: a round trip per batch costs the rank's
 *   CPU, and a finding only needs to arrive well within 2 s); findings come back on the liveness
 *   watch and fail the collective this rank is blocked in, and every later
 *   one, with the coordinator's report.
 * - OFF: sequence numbers are still counted, nothing is sent; except
 *   inside a join region, where the entries are kept (not sent) until a
 *   rank joins and the coordinator needs them to tell it what to shadow.
 *
 * How each call is reported (SYNC, QUEUE or NONE) is its plan's (plan.c):
 * inside a join region in which someone has joined, every collective is
 * reported as in SYNC, whatever the mode. */
#include "coll/verify.h"

#include "budgets.h"
#include "c10d_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define FLUSH_INTERVAL_US 10000
/* OFF in a join region: entries are held, trimmed when this many are
 * queued, and sent anyway beyond OFF_HELD_MAX (one round trip per that
 * many calls) so memory stays bounded. */
#define OFF_TRIM_AT 64
#define OFF_HELD_MAX 4096

typedef struct c10di_pending {
    char group[32];
    int tag;
    c10dc_fp fp;
    uint64_t seq, completed;
    uint32_t repeat; /* the same call at seq+1 .. seq+repeat too */
    c10d_ms timeout_ms;
    unsigned known; /* joins of its group's region known when queued */
} c10di_pending;

c10d_status c10di_verify_mode(c10d_verify asked, c10d_verify *out)
{
    *out = asked;
    if (asked != C10D_VERIFY_DEFAULT)
        return C10D_OK;
    const char *v = getenv("C10D_VERIFY");
    *out = C10D_VERIFY_SYNC;
    if (!v || !*v || !strcasecmp(v, "sync"))
        return C10D_OK;
    if (!strcasecmp(v, "off"))
        *out = C10D_VERIFY_OFF;
    else if (!strcasecmp(v, "async"))
        *out = C10D_VERIFY_ASYNC;
    else
        return c10di_error(C10D_EINVAL, "C10D_VERIFY=%s: want sync, async or off", v);
    return C10D_OK;
}

static void fill_entry(C10dpb__CollEntry *en, const char *group, const c10dc_fp *fp,
                       uint64_t seq, uint64_t completed, c10d_ms timeout_ms, uint32_t repeat, int tag,
                       unsigned known)
{
    c10dpb__coll_entry__init(en);
    en->group = (char *)group;
    en->seq = seq;
    en->kind = fp->kind;
    en->has_dtype = en->has_count = en->has_root = en->has_op = 1;
    en->has_completed = en->has_timeout_ms = 1;
    en->dtype = fp->dtype;
    en->count = fp->count;
    en->root = fp->root;
    en->op = fp->op;
    en->has_device = fp->device != 0;
    en->device = fp->device;
    en->completed = completed;
    en->timeout_ms = timeout_ms;
    en->has_repeat = repeat != 0;
    en->repeat = repeat;
    en->has_tag = fp->kind == C10DC_SEND || fp->kind == C10DC_RECV;
    en->tag = tag;
    en->has_join_known = known != 0;
    en->join_known = known;
}

/* Sends m, this rank's report (its entries set), to the coordinator; the
 * answer is its status (a SYNC check's verdict). The one way verification
 * reaches the connection: the background batches and SYNC checks alike. */
static c10d_status send_report(c10di_world *w, C10dpb__CollReport *m, c10d_ms server_wait_ms,
                               c10d_ms timeout_ms)
{
    m->job = w->job;
    m->generation = w->generation;
    m->rank = w->rank;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_COLL_REPORT;
    req.coll_report = m;
    return c10di_call_drop(w->conn, &req, server_wait_ms, timeout_ms);
}

static void send_batch(c10di_world *w, c10di_pending *p, size_t n)
{
    C10dpb__CollEntry *entries = calloc(n, sizeof *entries);
    C10dpb__CollEntry **ptrs = calloc(n, sizeof *ptrs);
    if (entries && ptrs) {
        for (size_t i = 0; i < n; i++) {
            fill_entry(&entries[i], p[i].group, &p[i].fp, p[i].seq, p[i].completed,
                       p[i].timeout_ms, p[i].repeat, p[i].tag, p[i].known);
            ptrs[i] = &entries[i];
        }
        C10dpb__CollReport m = C10DPB__COLL_REPORT__INIT;
        m.n_entries = n;
        m.entries = ptrs;
        /* A failure here is a coordinator that is down: the entries are
         * lost to verification, not to the job. */
        (void)send_report(w, &m, 0, C10DI_REPORT_BUDGET_MS);
    }
    free(entries);
    free(ptrs);
}

/* Takes the queue and sends it. *spare is an empty array to put in its
 * place; on return it holds the sent one (emptied), for next time. Holding
 * flush_mu also waits out a batch another thread is sending, so whatever
 * this thread sends next reaches the coordinator after it. */
static void flush(c10di_world *w, c10di_pending **spare, size_t *spare_cap)
{
    pthread_mutex_lock(&w->flush_mu);
    pthread_spin_lock(&w->rmu);
    c10di_pending *p = w->pending;
    size_t n = w->n_pending, cap = w->cap_pending;
    if (n) {
        w->pending = *spare;
        w->cap_pending = *spare_cap;
        w->n_pending = 0;
    }
    pthread_spin_unlock(&w->rmu);
    if (n) {
        send_batch(w, p, n);
        *spare = p;
        *spare_cap = cap;
    }
    pthread_mutex_unlock(&w->flush_mu);
}

void c10di_verify_flush(c10di_world *w)
{
    c10di_pending *spare = NULL;
    size_t cap = 0;
    flush(w, &spare, &cap);
    free(spare);
}

/* Every FLUSH_INTERVAL: take the queue, send it. Polls rather than waits
 * on a condition: the producer must not pay for a wake-up per call. */
static void *reporter_main(void *arg)
{
    c10di_world *w = arg;
    c10di_pending *spare = NULL;
    size_t spare_cap = 0;
    for (;;) {
        int stopping = atomic_load(&w->stopping);
        flush(w, &spare, &spare_cap);
        if (stopping)
            break; /* the queue was sent after stopping was seen */
        struct timespec ts = {0, FLUSH_INTERVAL_US * 1000};
        nanosleep(&ts, NULL);
    }
    free(spare);
    return NULL;
}

c10d_status c10di_verify_start(c10di_world *w)
{
    if (w->verify == C10D_VERIFY_OFF)
        return C10D_OK; /* SYNC too: its send/recv are reported in the background */
    if (pthread_create(&w->reporter, NULL, reporter_main, w) != 0)
        return c10di_error(C10D_ENOMEM, "cannot start the verification reporter thread");
    w->reporter_on = 1;
    return C10D_OK;
}

void c10di_verify_stop(c10di_world *w)
{
    if (w->reporter_on) {
        atomic_store(&w->stopping, 1);
        pthread_join(w->reporter, NULL); /* sends what was queued first */
        w->reporter_on = 0;
    }
    /* The watcher may still flush (it hears of joins): under both locks. */
    pthread_mutex_lock(&w->flush_mu);
    pthread_spin_lock(&w->rmu);
    free(w->pending);
    w->pending = NULL;
    w->n_pending = w->cap_pending = 0;
    pthread_spin_unlock(&w->rmu);
    pthread_mutex_unlock(&w->flush_mu);
}

static c10d_status enter_sync(c10d_pg *pg, const c10di_coll *c, int wait, c10di_outcome *o)
{
    c10di_world *w = pg->w;
    C10dpb__CollEntry en;
    C10dpb__CollEntry *ptr = &en;
    fill_entry(&en, pg->name, &c->fp, c->seq, pg->completed, c->timeout_ms, 0, c->tag,
               c->plan.known);
    C10dpb__CollReport m = C10DPB__COLL_REPORT__INIT;
    m.n_entries = 1;
    m.entries = &ptr;
    m.has_sync = 1;
    m.sync = wait != 0;
    int64_t left = c->deadline_ms - c10d_now_ms();
    c10d_status st = send_report(w, &m, left > 0 ? (int)left : 1, C10DI_CONTROL_CALL_BUDGET_MS);
    if (st == C10D_OK) {
        /* The watch passes this on: a coordinator that restarts while this
         * rank is in the data plane learns the check passed. */
        if (wait && c->seq > atomic_load(&pg->verified))
            atomic_store(&pg->verified, c->seq);
        return C10D_OK;
    }
    if (st == C10D_EDESYNC || st == C10D_EPEERLOST || st == C10D_ETIMEDOUT) {
        /* The coordinator's verdict on the group: the call's end records it. */
        o->found = st;
        snprintf(o->report, sizeof o->report, "%s", c10d_errmsg());
        return c10di_error(st, "%s of group %s (rank %d) did not run: %s", c->what, pg->name,
                           pg->rank, o->report);
    }
    return st;
}

static int full_dependency(uint32_t kind)
{
    return kind == C10DC_ALL_REDUCE || kind == C10DC_ALL_GATHER ||
           kind == C10DC_REDUCE_SCATTER || kind == C10DC_ALL_TO_ALL || kind == C10DC_BARRIER ||
           kind == C10DC_MONITORED_BARRIER;
}

/* OFF in a join region (rmu held): drops pg's held entries that no rank
 * can need any more. A collective that completed here and that needs
 * every member to complete (an all_reduce, a barrier, ...) was entered by
 * every member, so whoever joins later joins after it: nobody will shadow
 * it or anything before it. */
static void trim_held(c10di_world *w, c10d_pg *pg)
{
    uint64_t done = atomic_load(&pg->completed), upto = 0;
    for (size_t i = 0; i < w->n_pending; i++) {
        c10di_pending *p = &w->pending[i];
        if (!strcmp(p->group, pg->name) && full_dependency(p->fp.kind) && p->seq <= done) {
            uint64_t last = p->seq + p->repeat < done ? p->seq + p->repeat : done;
            if (last > upto)
                upto = last;
        }
    }
    if (!upto)
        return;
    size_t k = 0;
    for (size_t i = 0; i < w->n_pending; i++) {
        c10di_pending p = w->pending[i];
        int coll = p.fp.kind != C10DC_SEND && p.fp.kind != C10DC_RECV;
        if (coll && !strcmp(p.group, pg->name)) {
            if (p.seq + p.repeat <= upto)
                continue;
            if (p.seq <= upto) {
                p.repeat -= (uint32_t)(upto + 1 - p.seq);
                p.seq = upto + 1;
            }
        }
        w->pending[k++] = p;
    }
    w->n_pending = k;
}

/* Queues c's entry (rmu held); 0, or -1 when out of memory. */
static int queue_entry(c10di_world *w, c10d_pg *pg, const c10di_coll *c, int p2p, unsigned known)
{
    /* A loop repeats the same call: send it once with a count (the
     * coordinator then verifies the run without decoding each entry). */
    c10di_pending *last = w->n_pending ? &w->pending[w->n_pending - 1] : NULL;
    if (!p2p && last && last->seq + last->repeat + 1 == c->seq && last->repeat < UINT32_MAX &&
        last->known == known && !strcmp(last->group, pg->name) &&
        !memcmp(&last->fp, &c->fp, sizeof c->fp)) {
        last->repeat++;
        last->completed = pg->completed;
        return 0;
    }
    if (w->n_pending == w->cap_pending) {
        size_t cap = w->cap_pending ? w->cap_pending * 2 : 256;
        c10di_pending *np = realloc(w->pending, cap * sizeof *np);
        if (!np)
            return -1;
        w->pending = np;
        w->cap_pending = cap;
    }
    c10di_pending *p = &w->pending[w->n_pending++];
    memcpy(p->group, pg->name, sizeof p->group);
    p->fp = c->fp;
    p->seq = c->seq;
    p->completed = pg->completed;
    p->repeat = 0;
    p->tag = c->tag;
    p->timeout_ms = c->timeout_ms;
    p->known = known;
    return 0;
}

/* REPORT_SYNC: this rank's earlier entries, queued or being sent, go
 * first: the coordinator must see a rank's collectives in order (an entry
 * older than what a rank entered is taken for a resend). Only ASYNC and
 * OFF queue collectives. A monitored barrier reports without waiting: it
 * must itself name the ranks that do not arrive. */
static c10d_status sync_stage(c10d_pg *pg, const c10di_coll *c, c10di_outcome *o)
{
    if (c->plan.mode != C10D_VERIFY_SYNC)
        c10di_verify_flush(pg->w);
    return enter_sync(pg, c, c->kind != C10DC_MONITORED_BARRIER, o);
}

/* REPORT_QUEUE: c's entry goes in the background (under OFF, held until
 * a join needs it). Send/recv go through the queue in every mode (see
 * server/verify/verify_ops.c, enter_p2p). */
static c10d_status queue_stage(c10d_pg *pg, const c10di_coll *c)
{
    c10di_world *w = pg->w;
    int p2p = c->kind == C10DC_SEND || c->kind == C10DC_RECV;
    unsigned known = c->plan.known;
    pthread_spin_lock(&w->rmu);
    if (queue_entry(w, pg, c, p2p, known) != 0) {
        pthread_spin_unlock(&w->rmu);
        return C10D_OK; /* unverified, not failed */
    }
    size_t held = 0;
    if (!w->reporter_on) { /* OFF in a join region: held, not sent */
        if (w->n_pending % OFF_TRIM_AT == 0)
            trim_held(w, pg);
        held = w->n_pending;
    }
    pthread_spin_unlock(&w->rmu);
    /* The watcher flushes the queue when it learns of a join (and bumps
     * the region's version, group.h); if it did between this call's plan
     * and its queueing, this entry missed that flush and goes now. A
     * send/recv whose peer joined goes now too, with what else was
     * queued: join's stage refuses it next, and the coordinator records
     * it as the group's finding, so that every rank hears of it. */
    if (held >= OFF_HELD_MAX || c->plan.peer_after != C10DI_NOT_JOINED ||
        atomic_load_explicit(&pg->join.version, memory_order_acquire) != known)
        c10di_verify_flush(w);
    return C10D_OK;
}

c10d_status c10di_verify_enter(c10d_pg *pg, const c10di_coll *c, c10di_outcome *o)
{
    switch (c->plan.reporting) {
    case C10DI_REPORT_NONE: return C10D_OK;
    case C10DI_REPORT_QUEUE: return queue_stage(pg, c);
    case C10DI_REPORT_SYNC: break;
    }
    return sync_stage(pg, c, o);
}
