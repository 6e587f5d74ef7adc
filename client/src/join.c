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

c10di_report c10di_join_reporting(c10d_pg *pg, const c10di_coll *c)
{
    c10d_verify mode = pg->w->verify;
    int p2p = c->kind == C10DC_SEND || c->kind == C10DC_RECV;
    unsigned known = c10di_join_known(pg);
    if (!p2p && (mode == C10D_VERIFY_SYNC || known || c10di_join_avg_by_active(pg, c)))
        return C10DI_REPORT_SYNC;
    if (mode == C10D_VERIFY_OFF && !known && !in_region(pg))
        return C10DI_REPORT_NONE;
    return C10DI_REPORT_QUEUE;
}

/* Ranks that contribute data to collective seq of pg. */
static int active_at(c10d_pg *pg, uint64_t seq)
{
    if (!c10di_join_known(pg))
        return pg->size;
    int active = pg->size;
    pthread_mutex_lock(&pg->w->mu);
    for (int i = 0; i < pg->size; i++)
        active -= pg->join.after[i] < seq;
    pthread_mutex_unlock(&pg->w->mu);
    return active;
}

c10d_status c10di_join_prepare(c10d_pg *pg, c10di_coll *c)
{
    if (c->shadow) /* its divisor came from the coordinator with the call */
        return C10D_OK;
    if (!c10di_join_known(pg) || !(c->kind == C10DC_SEND || c->kind == C10DC_RECV)) {
        if (c10di_join_avg_by_active(pg, c))
            c->divisor = active_at(pg, c->seq);
        return C10D_OK;
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
        /* A region this rank already ended, an older one, or nothing new. */
        if (js->region <= j->ended || js->region < j->state_region ||
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
    if (o)
        opts = *o;
    c10di_world *w = pg->w;
    C10dpb__JoinBegin m = C10DPB__JOIN_BEGIN__INIT;
    m.job = w->job;
    m.generation = w->generation;
    m.group = pg->name;
    m.rank = w->rank;
    m.region = j->region + 1;
    m.has_throw_on_early_termination = m.has_divide_by_initial_world_size = 1;
    m.throw_on_early_termination = opts.throw_on_early_termination != 0;
    m.divide_by_initial_world_size = opts.divide_by_initial_world_size != 0;
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
    }
    pthread_mutex_unlock(&pg->w->mu);
}

/* Collective seq, as the others called it, with this rank's identities. */
static c10d_status shadow(c10d_pg *pg, uint64_t seq, const C10dpb__CollEntry *call, int active)
{
    c10di_coll c;
    memset(&c, 0, sizeof c);
    c.kind = (c10dc_kind)call->kind;
    c.dtype = (c10d_dtype)call->dtype;
    c.op = (c10d_reduce_op)call->op;
    c.root = call->root;
    c.seq = seq;
    c.fp = (c10dc_fp){call->kind, call->dtype, call->count, call->root, call->op, call->device, 0};
    c.shadow = 1;
    c.divisor = pg->join.opts.divide_by_initial_world_size ? 0 : active;
    c.timeout_ms = pg->timeout_ms;
    c.deadline_ms = c10d_now_ms() + c.timeout_ms;
    char f[128];
    snprintf(c.what, sizeof c.what, "#%llu %s (shadowed: this rank joined)",
             (unsigned long long)seq, c10dc_fp_format(&c.fp, f, sizeof f));
    int data = c.kind != C10DC_BARRIER && c.kind != C10DC_MONITORED_BARRIER;
    if (call->kind >= C10DC_KIND_COUNT || call->count < 0 ||
        (data && c10d_dtype_size(c.dtype) == 0))
        return c10di_error(C10D_EPROTO, "join_end of group %s: the coordinator asked to shadow "
                           "%s, which this library does not know", pg->name, c.what);
    c.count = (size_t)call->count;
    c10d_status st;
    pg->seq = seq; /* the group's numbering goes on as if this rank had called it */
    if (c.kind == C10DC_MONITORED_BARRIER) {
        st = c10di_monitored_barrier_meet(pg, &c, 1);
        if (st == C10D_OK)
            c10di_pg_completed(pg, seq);
    } else {
        st = c10di_route(pg, &c, call->device == C10DC_DEV_CUDA ? C10DI_ANY_CUDA : C10D_CPU,
                         "join_end");
        if (st == C10D_OK && c.be->prepare)
            st = c.be->prepare(pg, c.be_state, &c);
        if (st == C10D_OK)
            st = c10di_execute(pg, &c);
        if (c.be && c.be->forget)
            c.be->forget(&c);
    }
    pg->join.active_last = active;
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
    uint64_t next = pg->seq + 1;
    for (int first = 1;; first = 0) {
        C10dpb__JoinShadow m = C10DPB__JOIN_SHADOW__INIT;
        m.job = w->job;
        m.generation = w->generation;
        m.group = pg->name;
        m.rank = w->rank;
        m.region = j->region;
        m.next_seq = next;
        m.has_first = m.has_timeout_ms = 1;
        m.first = first;
        m.timeout_ms = pg->timeout_ms;
        m.has_throw_on_early_termination = m.has_divide_by_initial_world_size = 1;
        m.throw_on_early_termination = j->opts.throw_on_early_termination != 0;
        m.divide_by_initial_world_size = j->opts.divide_by_initial_world_size != 0;
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
            for (uint64_t s = next; st == C10D_OK && s <= x->last_seq; s++, next++)
                st = shadow(pg, s, x->call, x->active);
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
out:
    c10di_activity_done(w);
    leave_region(pg);
    return st;
}
