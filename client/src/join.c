/* Join for uneven inputs, the rank's side (docs/join.md; the coordinator's
 * side is server/join_ops.c).
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
#include "work.h"

#include "c10d_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOT_JOINED UINT64_MAX

unsigned c10di_join_known(c10d_pg *pg)
{
    return atomic_load_explicit(&pg->join.version, memory_order_acquire);
}

static int reduces(uint32_t kind)
{
    return kind == C10DC_ALL_REDUCE || kind == C10DC_REDUCE || kind == C10DC_REDUCE_SCATTER;
}

static int in_region(c10d_pg *pg)
{
    return atomic_load_explicit(&pg->join.in_region, memory_order_acquire);
}

/* An AVG whose divisor depends on who has joined: it must know before it
 * runs, which only the coordinator's answer guarantees. */
int c10di_join_avg_by_active(c10d_pg *pg, const c10di_coll *c)
{
    return reduces(c->kind) && c->op == C10D_AVG && in_region(pg) &&
           !pg->join.opts.divide_by_initial_world_size;
}

/* Whether a region begun now has its joined ranks shadow in-band: every
 * collective of the group runs on a data plane whose transfers name the
 * collective (the host backend's). CUDA buffers carry no such header, so
 * where NCCL can serve the group the coordinator tells joined ranks what
 * to shadow. */
static int inband_capable(c10d_pg *pg)
{
    /* C10D_JOIN_INBAND=0: through the coordinator anyway (what NCCL groups
     * do; for tests and comparisons). */
    if (c10di_env_long("C10D_JOIN_INBAND", 1) == 0)
        return 0;
    return pg->be && pg->be->peek && pg->be->announce &&
           (pg->backend == C10D_BACKEND_HOST || c10di_nccl_available() != C10D_OK);
}

c10di_report c10di_join_reporting(c10d_pg *pg, const c10di_coll *c)
{
    c10d_verify mode = pg->w->verify;
    int p2p = c->kind == C10DC_SEND || c->kind == C10DC_RECV;
    unsigned known = c10di_join_known(pg);
    int region = in_region(pg), inband = region && pg->join.inband;
    if (!p2p) {
        if (mode == C10D_VERIFY_SYNC || c10di_join_avg_by_active(pg, c))
            return C10DI_REPORT_SYNC;
        /* The coordinator tells the joined ranks what to shadow: it must
         * hear of every collective at once. In-band they read it from the
         * data plane, and the mode stands. */
        if (known && !inband)
            return C10DI_REPORT_SYNC;
        if (mode == C10D_VERIFY_OFF) /* held only where the coordinator may need them */
            return region && !inband ? C10DI_REPORT_QUEUE : C10DI_REPORT_NONE;
        return C10DI_REPORT_QUEUE;
    }
    if (mode == C10D_VERIFY_OFF && !known && !region)
        return C10DI_REPORT_NONE;
    return C10DI_REPORT_QUEUE;
}

static int anyone_joined(c10d_pg *pg)
{
    return c10di_join_known(pg) || atomic_load_explicit(&pg->join.heard, memory_order_acquire);
}

/* Ranks that contribute data to collective seq of pg. */
static int active_at(c10d_pg *pg, uint64_t seq)
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

/* after[] changed (w->mu held): active_at's memo is stale. */
static void joins_changed(c10di_join *j)
{
    atomic_fetch_add_explicit(&j->epoch, 1, memory_order_release);
}

/* In-band, every other member joined before c, and c is one a joined
 * rank only contributes identities to or drops: this rank's result is its
 * own data, and the joined ranks need no more than c's header (docs/join.md,
 * "The last active rank"). after[] says only what was heard of the current
 * region, and a join is never undone within it, so this holds once seen. */
static int runs_alone(c10d_pg *pg, const c10di_coll *c)
{
    if (pg->size < 2 || !in_region(pg) || !pg->join.inband || !anyone_joined(pg) ||
        c->be != &c10di_host_backend)
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
    return active_at(pg, c->seq) == 1;
}

c10d_status c10di_join_prepare(c10d_pg *pg, c10di_coll *c)
{
    if (c->shadow) /* its divisor came with the call */
        return C10D_OK;
    if (!c10di_join_known(pg) || !(c->kind == C10DC_SEND || c->kind == C10DC_RECV)) {
        if (c10di_join_avg_by_active(pg, c))
            c->divisor = active_at(pg, c->seq);
        c10d_status st = c10di_join_check(pg, c);
        c->alone = st == C10D_OK && runs_alone(pg, c);
        return st;
    }
    pthread_mutex_lock(&pg->w->mu);
    uint64_t after = c->root >= 0 && c->root < pg->size ? pg->join.after[c->root] : NOT_JOINED;
    pthread_mutex_unlock(&pg->w->mu);
    if (after == NOT_JOINED)
        return C10D_OK;
    /* The coordinator records it as the group's finding (the entry was
     * just queued), so every rank hears of it. */
    c10di_verify_flush(pg->w);
    int send = c->kind == C10DC_SEND;
    return c10di_error(C10D_EJOINED, "%s (tag %d) of group %s (rank %d) did not run: rank %d "
                       "joined after collective #%llu (out of inputs) and will never %s it",
                       c->what, c->tag, pg->name, pg->rank, c->root, (unsigned long long)after,
                       send ? "receive" : "send");
}

/* "rank 0 joined after collective #5, rank 2 after #7" (at most 8 named):
 * the members that joined before collective seq (w->mu held). */
static void joined_list(c10d_pg *pg, uint64_t seq, char *buf, size_t cap)
{
    size_t off = 0;
    int named = 0;
    buf[0] = '\0';
    for (int i = 0; i < pg->size && off + 64 < cap; i++) {
        if (pg->join.after[i] >= seq)
            continue;
        if (named++ == 8) {
            snprintf(buf + off, cap - off, " and others");
            return;
        }
        off += (size_t)snprintf(buf + off, cap - off, "%srank %d joined after %s#%llu",
                                named > 1 ? ", " : "", i, named > 1 ? "" : "collective ",
                                (unsigned long long)pg->join.after[i]);
    }
}

/* Why collective seq (fp, called by group rank `caller`) cannot run while
 * members have joined, in the coordinator's words, into report; 0 if it
 * can. Reads after[] (w->mu held). */
static int unshadowable_report(c10d_pg *pg, uint64_t seq, const c10dc_fp *fp, int caller,
                               char *report, size_t cap)
{
    int rooted = fp->kind == C10DC_BROADCAST || fp->kind == C10DC_REDUCE;
    int root_joined = rooted && fp->root >= 0 && fp->root < pg->size &&
                      pg->join.after[fp->root] < seq;
    const char *why = c10dc_join_unshadowable(fp, root_joined);
    if (!why)
        return 0;
    char f[160], joined[512];
    joined_list(pg, seq, joined, sizeof joined);
    snprintf(report, cap, "join in group %s (job %s) at collective #%llu: rank %d called %s, "
             "which %s; %s (out of inputs). Only all_reduce, reduce, reduce_scatter, barrier and "
             "broadcast from an active rank can run while a member has joined", pg->name,
             pg->w->job, (unsigned long long)seq, caller, c10dc_fp_format(fp, f, sizeof f), why,
             joined);
    return 1;
}

c10d_status c10di_join_check(c10d_pg *pg, const c10di_coll *c)
{
    if (c->shadow || !in_region(pg) || !pg->join.inband || !anyone_joined(pg) ||
        c->kind == C10DC_SEND || c->kind == C10DC_RECV)
        return C10D_OK;
    int meet = c->kind == C10DC_MONITORED_BARRIER;
    if (!meet && !c10dc_join_unshadowable(&c->fp, 1))
        return C10D_OK; /* runs whoever joined (an all_reduce, a barrier) */
    char report[1024];
    int *tell = malloc((size_t)pg->size * sizeof *tell), n_tell = 0, bad = 0;
    if (!tell)
        return c10di_error(C10D_ENOMEM, "%s of group %s: out of memory checking it against the "
                           "joined ranks", c->what, pg->name);
    pthread_mutex_lock(&pg->w->mu);
    bad = !meet && unshadowable_report(pg, c->seq, &c->fp, pg->rank, report, sizeof report);
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
        pg->be->announce(pg, pg->be_state, c, tell[k]);
    free(tell);
    if (!bad)
        return C10D_OK;
    c10di_record_alert(pg->w, pg->name, C10D_EJOINED, report);
    return c10di_error(C10D_EJOINED, "%s of group %s (rank %d) did not run: %s", c->what,
                       pg->name, pg->rank, report);
}

/* Group rank idx joined this region after collective `after`, as this
 * rank saw for itself (w->mu held). */
static void note_join(c10d_pg *pg, int idx, uint64_t after)
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
        joins_changed(j);
    }
    atomic_store_explicit(&j->heard, 1, memory_order_release);
}

void c10di_join_heard(c10d_pg *pg, int peer, uint64_t after)
{
    if (peer < 0 || peer >= pg->size || !in_region(pg))
        return;
    pthread_mutex_lock(&pg->w->mu);
    note_join(pg, peer, after);
    pthread_mutex_unlock(&pg->w->mu);
}

void c10di_join_ran(c10d_pg *pg, const c10di_coll *c)
{
    if (c->kind != C10DC_SEND && c->kind != C10DC_RECV && !c->shadow)
        pg->join.active_last = active_at(pg, c->seq);
}

int c10d_active_ranks(const c10d_pg *pg)
{
    return pg ? pg->join.active_last : -1;
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
        joins_changed(j);
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

/* --- identities --- */

size_t c10di_identity_element(c10d_dtype dtype, c10d_reduce_op op, void *out)
{
    union {
        float f;
        double d;
        int8_t i8;
        uint8_t u8;
        int32_t i32;
        int64_t i64;
        uint16_t h;
        unsigned char b[8];
    } v;
    memset(&v, 0, sizeof v);
    size_t es = c10d_dtype_size(dtype);
    int hi = op == C10D_MIN; /* MIN's identity is the largest value */
    int lo = op == C10D_MAX;
    int one = op == C10D_PROD;
    switch (dtype) {
    case C10D_FLOAT32: v.f = hi ? __builtin_inff() : lo ? -__builtin_inff() : one ? 1.0f : 0.0f; break;
    case C10D_FLOAT64: v.d = hi ? __builtin_inf() : lo ? -__builtin_inf() : one ? 1.0 : 0.0; break;
    /* IEEE half: +inf 0x7c00, -inf 0xfc00, 1.0 0x3c00; bfloat16: 0x7f80, 0xff80, 0x3f80 */
    case C10D_FLOAT16: v.h = hi ? 0x7c00 : lo ? 0xfc00 : one ? 0x3c00 : 0; break;
    case C10D_BFLOAT16: v.h = hi ? 0x7f80 : lo ? 0xff80 : one ? 0x3f80 : 0; break;
    case C10D_INT8: v.i8 = hi ? INT8_MAX : lo ? INT8_MIN : one ? 1 : 0; break;
    case C10D_UINT8: v.u8 = hi ? UINT8_MAX : lo ? 0 : one ? 1 : 0; break;
    case C10D_INT32: v.i32 = hi ? INT32_MAX : lo ? INT32_MIN : one ? 1 : 0; break;
    case C10D_INT64: v.i64 = hi ? INT64_MAX : lo ? INT64_MIN : one ? 1 : 0; break;
    default: return 0;
    }
    memcpy(out, v.b, es);
    return es;
}

void c10di_fill_pattern(void *buf, size_t bytes, const void *elem, size_t esize)
{
    uint8_t *b = buf;
    int zero = 1;
    for (size_t i = 0; i < esize; i++)
        zero &= ((const uint8_t *)elem)[i] == 0;
    if (zero || !esize) {
        memset(b, 0, bytes);
        return;
    }
    size_t done = esize < bytes ? esize : bytes;
    memcpy(b, elem, done);
    while (done < bytes) { /* doubling copies */
        size_t k = done < bytes - done ? done : bytes - done;
        memcpy(b + done, b, k);
        done += k;
    }
}

/* --- c10d_join_begin / c10d_join_end --- */

c10d_status c10d_join_begin(c10d_pg *pg, const c10d_join_opts *o)
{
    if (!pg)
        return c10di_error(C10D_EINVAL, "join_begin: NULL process group");
    c10di_join *j = &pg->join;
    if (in_region(pg))
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
    c10di_lane_drain(pg);
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
    c10d_status st = c10di_call(w->conn, &req, 0, 30000, &rep);
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
static void leave_region(c10d_pg *pg)
{
    c10di_join *j = &pg->join;
    atomic_store_explicit(&j->in_region, 0, memory_order_release);
    pthread_mutex_lock(&pg->w->mu);
    j->ended = j->region;
    /* The watcher may have applied the next region's joins already (a
     * rank that joined it at once): those stay. */
    if (j->state_region <= j->region) {
        atomic_store(&j->version, 0);
        for (int i = 0; i < pg->size; i++)
            j->after[i] = NOT_JOINED;
        joins_changed(j);
    }
    atomic_store(&j->heard, 0);
    for (int i = 0; i < pg->size; i++)
        j->told[i] = 0;
    pthread_mutex_unlock(&pg->w->mu);
}

/* "#7 ALL_REDUCE float32[4] SUM (shadowed: this rank joined)". A joined
 * rank reacts to a peer's header and the peer waits meanwhile, so a
 * repeated call reuses the text of its description. */
static void describe_shadow(c10d_pg *pg, c10di_coll *c)
{
    c10di_join *j = &pg->join;
    if (!j->fp_text[0] || memcmp(&j->fp_last, &c->fp, sizeof c->fp) != 0) {
        c10dc_fp_format(&c->fp, j->fp_text, sizeof j->fp_text);
        j->fp_last = c->fp;
    }
    char num[24];
    size_t n = 0;
    uint64_t v = c->seq;
    do
        num[sizeof num - 1 - n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < sizeof num - 1);
    static const char tail[] = " (shadowed: this rank joined)";
    size_t tl = strlen(j->fp_text), at = 0, cap = sizeof c->what;
    c->what[at++] = '#';
    memcpy(c->what + at, num + sizeof num - n, n);
    at += n;
    c->what[at++] = ' ';
    if (at + tl + sizeof tail <= cap) {
        memcpy(c->what + at, j->fp_text, tl);
        memcpy(c->what + at + tl, tail, sizeof tail);
    } else {
        c->what[at] = '\0';
    }
}

/* Collective seq, as the others called it (fp), with this rank's
 * identities; an AVG divides by divisor (0: the group's size). alone_from:
 * the last active rank, which ran it by itself and sent its header alone
 * (-1: the group runs it as usual). */
static c10d_status shadow(c10d_pg *pg, uint64_t seq, const c10dc_fp *fp, int divisor,
                          int alone_from)
{
    c10di_coll c;
    memset(&c, 0, sizeof c);
    c.kind = (c10dc_kind)fp->kind;
    c.dtype = (c10d_dtype)fp->dtype;
    c.op = (c10d_reduce_op)fp->op;
    c.root = fp->root;
    c.seq = seq;
    c.fp = *fp;
    c.fp.spare = 0;
    c.shadow = 1;
    c.divisor = divisor;
    c.alone = alone_from >= 0;
    c.alone_from = alone_from;
    c.timeout_ms = pg->timeout_ms;
    c.deadline_ms = c10d_now_ms() + c.timeout_ms;
    describe_shadow(pg, &c);
    int data = c.kind != C10DC_BARRIER && c.kind != C10DC_MONITORED_BARRIER;
    if (fp->kind >= C10DC_KIND_COUNT || fp->count < 0 ||
        (data && c10d_dtype_size(c.dtype) == 0))
        return c10di_error(C10D_EPROTO, "join_end of group %s: asked to shadow %s, which this "
                           "library does not know", pg->name, c.what);
    c.count = (size_t)fp->count;
    c10d_status st;
    pg->seq = seq; /* the group's numbering goes on as if this rank had called it */
    if (c.kind == C10DC_MONITORED_BARRIER) {
        st = c10di_monitored_barrier_meet(pg, &c, 1);
        if (st == C10D_OK)
            c10di_pg_completed(pg, seq);
    } else {
        st = c10di_route(pg, &c, fp->device == C10DC_DEV_CUDA ? C10DI_ANY_CUDA : C10D_CPU,
                         "join_end");
        if (st == C10D_OK && c.be->prepare)
            st = c.be->prepare(pg, c.be_state, &c);
        if (st == C10D_OK)
            st = c10di_execute(pg, &c);
        if (c.be && c.be->forget)
            c.be->forget(&c);
    }
    return st;
}

/* This rank could not shadow collective seq: the coordinator makes it the
 * group's finding, so the others fail at once instead of waiting for it.
 * Best effort: the original error stands either way. */
static void report_failure(c10d_pg *pg, uint64_t seq, c10d_status st)
{
    c10di_world *w = pg->w;
    char why[1024];
    snprintf(why, sizeof why, "%s", c10d_errmsg());
    C10dpb__JoinShadow m = C10DPB__JOIN_SHADOW__INIT;
    m.job = w->job;
    m.generation = w->generation;
    m.group = pg->name;
    m.rank = w->rank;
    m.region = pg->join.region;
    m.next_seq = seq;
    m.has_failed = 1;
    m.failed = st;
    m.failure = why;
    m.has_timeout_ms = 1;
    m.timeout_ms = 1; /* not to wait for anything */
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_JOIN_SHADOW;
    req.join_shadow = &m;
    C10dpb__Reply *rep = NULL;
    if (c10di_call(w->conn, &req, 1, 2000, &rep) == C10D_OK)
        c10dpb__reply__free_unpacked(rep, NULL);
    c10di_error(st, "%s", why);
}

static void shadow_request(c10d_pg *pg, C10dpb__JoinShadow *m, uint64_t next, int first)
{
    c10di_join *j = &pg->join;
    c10dpb__join_shadow__init(m);
    m->job = pg->w->job;
    m->generation = pg->w->generation;
    m->group = pg->name;
    m->rank = pg->w->rank;
    m->region = j->region;
    m->next_seq = next;
    m->has_first = m->has_timeout_ms = 1;
    m->first = first;
    m->timeout_ms = pg->timeout_ms;
    m->has_throw_on_early_termination = m->has_divide_by_initial_world_size = 1;
    m->throw_on_early_termination = j->opts.throw_on_early_termination != 0;
    m->divide_by_initial_world_size = j->opts.divide_by_initial_world_size != 0;
}

/* The coordinator tells this rank, one reply at a time, what the others
 * called (join_shadow, parked until something is released). */
static c10d_status shadow_by_coordinator(c10d_pg *pg, int *last_joiner)
{
    c10di_world *w = pg->w;
    c10di_join *j = &pg->join;
    c10d_status st = C10D_OK;
    uint64_t next = pg->seq + 1;
    for (int first = 1;; first = 0) {
        C10dpb__JoinShadow m;
        shadow_request(pg, &m, next, first);
        C10dpb__Request req = C10DPB__REQUEST__INIT;
        req.op_case = C10DPB__REQUEST__OP_JOIN_SHADOW;
        req.join_shadow = &m;
        C10dpb__Reply *rep = NULL;
        if ((st = c10di_call(w->conn, &req, pg->timeout_ms + 1000, 30000, &rep)) != C10D_OK) {
            char report[1024];
            snprintf(report, sizeof report, "%s", c10d_errmsg());
            if (st == C10D_EJOINED || st == C10D_EDESYNC || st == C10D_EPEERLOST ||
                st == C10D_ETIMEDOUT || st == C10D_EABORTED)
                c10di_record_alert(w, pg->name, st, report);
            st = c10di_error(st, "join_end of group %s (rank %d, joined after #%llu): %s",
                             pg->name, pg->rank, (unsigned long long)(next - 1), report);
            break;
        }
        const C10dpb__JoinShadowReply *r =
            rep->result_case == C10DPB__REPLY__RESULT_JOIN_SHADOW ? rep->join_shadow : NULL;
        if (!r)
            st = c10di_error(C10D_EPROTO, "join_end of group %s: the coordinator answered "
                             "with something else", pg->name);
        for (size_t i = 0; r && st == C10D_OK && i < r->n_runs; i++) {
            const C10dpb__ShadowRun *x = r->runs[i];
            if (x->first_seq != next || x->last_seq < x->first_seq)
                st = c10di_error(C10D_EPROTO, "join_end of group %s: asked for #%llu, told to "
                                 "shadow #%llu..#%llu", pg->name, (unsigned long long)next,
                                 (unsigned long long)x->first_seq,
                                 (unsigned long long)x->last_seq);
            const C10dpb__CollEntry *call = x->call;
            c10dc_fp fp = {call->kind, call->dtype, call->count, call->root, call->op,
                           call->device, 0};
            int divisor = j->opts.divide_by_initial_world_size ? 0 : x->active;
            for (uint64_t s = next; st == C10D_OK && s <= x->last_seq; s++, next++)
                st = shadow(pg, s, &fp, divisor, -1);
            j->active_last = x->active;
        }
        int done = st == C10D_OK && r && r->done;
        if (done && last_joiner)
            *last_joiner = r->last_joiner;
        c10dpb__reply__free_unpacked(rep, NULL);
        if (st != C10D_OK)
            report_failure(pg, next, st);
        if (done || st != C10D_OK)
            break;
    }
    return st;
}

/* In-band: tells the coordinator that this rank shadows from next on
 * (first: it joined), or that it failed to (failed, failure); the answer
 * comes at once: *done and *last once the region is over and this rank
 * has shadowed all of it. */
static c10d_status ask_inband(c10d_pg *pg, uint64_t next, int first, c10d_status failed,
                              const char *failure, int *done, int *last)
{
    c10di_world *w = pg->w;
    C10dpb__JoinShadow m;
    shadow_request(pg, &m, next, first);
    m.has_inband = m.inband = 1;
    if (failed != C10D_OK) {
        m.has_failed = 1;
        m.failed = failed;
        m.failure = (char *)failure;
    }
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_JOIN_SHADOW;
    req.join_shadow = &m;
    C10dpb__Reply *rep = NULL;
    c10d_status st = c10di_call(w->conn, &req, 0, 30000, &rep);
    if (st != C10D_OK) {
        char report[1024];
        snprintf(report, sizeof report, "%s", c10d_errmsg());
        if (st == C10D_EJOINED || st == C10D_EDESYNC || st == C10D_EPEERLOST ||
            st == C10D_ETIMEDOUT || st == C10D_EABORTED)
            c10di_record_alert(w, pg->name, st, report);
        return c10di_error(st, "join_end of group %s (rank %d, joined after #%llu): %s",
                           pg->name, pg->rank, (unsigned long long)(pg->join.shadow_after1 - 1),
                           report);
    }
    const C10dpb__JoinShadowReply *r =
        rep->result_case == C10DPB__REPLY__RESULT_JOIN_SHADOW ? rep->join_shadow : NULL;
    if (!r)
        st = c10di_error(C10D_EPROTO, "join_end of group %s: the coordinator answered with "
                         "something else", pg->name);
    else if (r->done) {
        *done = 1;
        *last = r->last_joiner;
    }
    c10dpb__reply__free_unpacked(rep, NULL);
    return st;
}

/* Collective seq, as peer `from` began it: shadowed, unless a joined rank
 * cannot take part in it; then every rank must fail rather than wait. */
static c10d_status shadow_peeked(c10d_pg *pg, uint64_t seq, const c10di_peeked *pk)
{
    const c10dc_fp *fp = &pk->fp;
    int from = pk->from, alone_from = pk->alone ? pk->from : -1;
    if (!c10dc_join_unshadowable(fp, 1)) /* an all_reduce, a barrier: whoever joined */
        return shadow(pg, seq, fp, pk->divisor, alone_from);
    char report[1024];
    pthread_mutex_lock(&pg->w->mu);
    int bad = unshadowable_report(pg, seq, fp, from, report, sizeof report);
    pthread_mutex_unlock(&pg->w->mu);
    if (!bad)
        return shadow(pg, seq, fp, pk->divisor, alone_from);
    int done = 0, last;
    /* The coordinator makes it the group's finding: the others hear of it
     * on their watch, whatever they are waiting in. */
    ask_inband(pg, seq, 0, C10D_EJOINED, report, &done, &last);
    c10di_record_alert(pg->w, pg->name, C10D_EJOINED, report);
    return c10di_error(C10D_EJOINED, "join_end of group %s (rank %d): %s", pg->name, pg->rank,
                       report);
}

static uint64_t conn_epoch(c10di_conn *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t e = c->epoch;
    pthread_mutex_unlock(&c->mu);
    return e;
}

/* A failure while waiting to shadow next: the last joiner may be gone
 * already, the region over before this rank's watch said so. The
 * coordinator knows; the failure's message stands otherwise. */
static int over_after_all(c10d_pg *pg, uint64_t next, int *done, int *last)
{
    char why[1024];
    snprintf(why, sizeof why, "%s", c10d_errmsg());
    if (ask_inband(pg, next, 0, C10D_OK, NULL, done, last) == C10D_OK && *done)
        return 1;
    c10di_error(C10D_ERROR, "%s", why); /* the message of the failure, kept */
    return 0;
}

/* In-band (docs/join.md): the next collective to shadow is read from the
 * header a peer's transfer of it starts with, on the data plane itself, so
 * a shadowed step costs what a normal one does and the others keep their
 * verification mode. The coordinator records the join, and its watch says
 * when the region is over. Waiting spins, yields, then sleeps, as the
 * data plane does, and looks for a finding or a lost member meanwhile. */
static c10d_status shadow_inband(c10d_pg *pg, int *last_joiner)
{
    c10di_join *j = &pg->join;
    uint64_t next = pg->seq + 1;
    int done = 0, last = -1;
    c10d_status st = ask_inband(pg, next, 1, C10D_OK, NULL, &done, &last);
    c10di_coll probe;
    memset(&probe, 0, sizeof probe);
    probe.deadline_ms = INT64_MAX;
    int64_t since = c10d_now_ms(), asked_done = 0;
    unsigned idle = 0;
    int over = 0;
    uint64_t asked_epoch = conn_epoch(pg->w->conn);
    while (st == C10D_OK && !done) {
        if (atomic_load_explicit(&j->done_region, memory_order_acquire) == j->region &&
            next > j->done_final && c10d_now_ms() - asked_done > 100) {
            asked_done = c10d_now_ms(); /* over, and all of it shadowed */
            st = ask_inband(pg, next, 0, C10D_OK, NULL, &done, &last);
            continue;
        }
        int found = 0;
        c10di_peeked pk;
        if (!over && (st = pg->be->peek(pg, pg->be_state, next, &found, &pk)) != C10D_OK) {
            /* A peer gone: perhaps the last joiner, the region over. */
            if (st == C10D_EPEERLOST && over_after_all(pg, next, &done, &last))
                st = C10D_OK;
            break;
        }
        /* A peer out of this region (the last joiner, already on to what
         * follows it): the region is over, its end on the way. */
        if (found && pk.region != j->region)
            over = 1;
        else if (found) {
            if ((st = shadow_peeked(pg, next, &pk)) != C10D_OK)
                break;
            next++;
            idle = 0;
            continue;
        }
        if (!idle)
            since = c10d_now_ms(); /* not on every step: the peer waits for this one */
        if (!c10di_idle_wait(idle++))
            continue;
        probe.seq = next;
        snprintf(probe.what, sizeof probe.what, "join_end (waiting to shadow #%llu)",
                 (unsigned long long)next);
        if ((st = c10di_pg_check(pg, &probe, -1)) != C10D_OK) {
            if (over_after_all(pg, next, &done, &last))
                st = C10D_OK;
            break;
        }
        uint64_t epoch = conn_epoch(pg->w->conn);
        if (epoch != asked_epoch) {
            /* A new connection, perhaps a restarted coordinator: it learns
             * of this join again (from its database) and that this rank
             * shadows in-band. */
            asked_epoch = epoch;
            if ((st = ask_inband(pg, next, 0, C10D_OK, NULL, &done, &last)) != C10D_OK)
                break;
        }
        if (c10d_now_ms() - since > pg->timeout_ms) {
            char why[256];
            snprintf(why, sizeof why, "waited %d ms to shadow #%llu", pg->timeout_ms,
                     (unsigned long long)next);
            st = ask_inband(pg, next, 0, C10D_ETIMEDOUT, why, &done, &last);
            if (st == C10D_OK) /* the coordinator is out of reach: say it here */
                st = c10di_error(C10D_ETIMEDOUT, "join_end of group %s (rank %d): %s, and no "
                                 "other rank began it", pg->name, pg->rank, why);
        }
    }
    if (st != C10D_OK && st != C10D_EJOINED && st != C10D_ETIMEDOUT && st != C10D_EPEERLOST) {
        /* The others may wait for this rank's part: the coordinator tells
         * them (a lost member it tells them of itself, as that). */
        char why[1024];
        snprintf(why, sizeof why, "%s", c10d_errmsg());
        int d = 0, l;
        ask_inband(pg, next, 0, st, why, &d, &l);
        c10di_error(st, "%s", why);
    }
    if (st == C10D_OK && last_joiner)
        *last_joiner = last;
    j->active_last = active_at(pg, next - 1);
    return st;
}

c10d_status c10d_join_end(c10d_pg *pg, int *last_joiner)
{
    if (!pg)
        return c10di_error(C10D_EINVAL, "join_end: NULL process group");
    c10di_join *j = &pg->join;
    if (!in_region(pg))
        return c10di_error(C10D_EINVAL, "join_end: group %s is not in a join region (call "
                           "c10d_join_begin on every rank first)", pg->name);
    c10di_world *w = pg->w;
    /* This rank's own collectives run first, and the coordinator hears of
     * every one it queued: it joins after the last of them. */
    c10di_lane_drain(pg);
    c10di_verify_flush(w);
    c10d_status st = C10D_OK;
    if (pg->broken) {
        st = c10di_error(C10D_EABORTED, "join_end of group %s: the group is unusable after an "
                         "earlier failure: %s", pg->name, pg->broken_msg);
        goto out;
    }
    char after[32];
    snprintf(after, sizeof after, " after #%llu", (unsigned long long)pg->seq);
    c10di_activity(w, "join_end of group ", pg->name, after, " (shadowing)");
    pthread_mutex_lock(&w->mu);
    note_join(pg, pg->rank, pg->seq);
    pthread_mutex_unlock(&w->mu);
    /* What this rank sends from now on says it joined. */
    j->shadow_after1 = pg->seq + 1;
    st = j->inband ? shadow_inband(pg, last_joiner) : shadow_by_coordinator(pg, last_joiner);
    j->shadow_after1 = 0;
out:
    c10di_activity_done(w);
    leave_region(pg);
    return st;
}
