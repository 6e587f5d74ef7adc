/* What a handler answers with: a request made and freed, its reply put in
 * the client's dialect (c10ds_reply, c10ds_fail with a worded detail), parking it on a key
 * until that key is written or its deadline passes, and the checks of a
 * key and a value against the coordinator's limits. The engine sends the
 * replies after its batch commits (engine.c). */
#include "engine/request.h"

#include "config.h"
#include "engine/engine.h"
#include "engine/waiters.h"
#include "store/store.h"

#include "c10d_time.h"

#include <c10d/errors.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How much of a key an error shows. */
#define KEY_SHOWN 64
/* How often a quota near its limit is counted again from the store. */
#define QUOTA_RECOUNT_MS 1000

/* Gives back what r held of its parking budgets: before its slot goes,
 * since the connection's budget lives in it. */
static void park_budgets_release(c10ds_request *r)
{
    if (!r->parked_bytes)
        return;
    for (int i = 0; i < C10DS_PARK_BUDGETS; i++)
        if (r->budgets[i]) {
            atomic_fetch_sub(&r->budgets[i]->bytes, r->parked_bytes);
            atomic_fetch_add(&r->budgets[i]->freed, r->parked_bytes);
        }
    r->parked_bytes = 0;
}

/* Counts r's bytes as sent against each of its budgets, or fails r with
 * the first it would go over (-1). */
static int park_budgets_take(c10ds_engine *e, c10ds_request *r, const char *key)
{
    size_t weight = c10dpb__request__get_packed_size(r->pb);
    r->budgets[0] = &e->parked_budget;
    for (int i = 0; i < C10DS_PARK_BUDGETS; i++) {
        c10ds_budget *b = r->budgets[i];
        size_t held = b ? atomic_load(&b->bytes) : 0;
        if (b && b->limit && held + weight > b->limit) { /* 0: none */
            /* The key last: it may be 4 KB, and the limit must be read. */
            c10ds_fail(r, C10D_ETOOBIG, "%s holds %zu bytes of parked requests, and this wait "
                       "of %zu bytes would pass its limit of %llu (%s); refused (waiting for "
                       "key '%.*s%s')", b->what, held, weight, (unsigned long long)b->limit,
                       b->option, KEY_SHOWN, key, strlen(key) > KEY_SHOWN ? "..." : "");
            return -1;
        }
    }
    for (int i = 0; i < C10DS_PARK_BUDGETS; i++)
        if (r->budgets[i])
            atomic_fetch_add(&r->budgets[i]->bytes, weight);
    r->parked_bytes = weight;
    return 0;
}

c10ds_request *c10ds_request_new(C10dpb__Request *pb, void *slot)
{
    c10ds_request *r = calloc(1, sizeof *r);
    if (r) {
        r->pb = pb;
        r->slot = slot;
        r->received_ms = c10d_now_ms();
        r->received_us = c10d_now_us();
    }
    return r;
}

void c10ds_request_free(c10ds_request *r)
{
    if (!r)
        return;
    if (r->pb)
        c10dpb__request__free_unpacked(r->pb, NULL);
    if (r->sink && r->sink->free)
        r->sink->free(r->sink_arg);
    park_budgets_release(r);
    if (r->release)
        r->release(r->slot);
    free(r->reply);
    free(r->drop_prefix);
    free(r);
}

/* rep as r's client reads it, into r->reply. */
static int encode(c10ds_request *r, const C10dpb__Reply *rep)
{
    free(r->reply);
    r->reply = NULL;
    r->reply_len = 0;
    if (r->sink)
        return r->sink->encode(r->sink_arg, rep, &r->reply, &r->reply_len);
    size_t n = c10dpb__reply__get_packed_size(rep);
    if (!(r->reply = malloc(n ? n : 1)))
        return -1;
    c10dpb__reply__pack(rep, r->reply);
    r->reply_len = n;
    return 0;
}

c10ds_outcome c10ds_reply(c10ds_request *r, C10dpb__Reply *rep)
{
    rep->request_id = r->pb ? r->pb->request_id : 0;
    if (encode(r, rep) != 0) {
        /* Keep an answer even now: one with only the status is a few
         * bytes; if even those cannot be had, the client times out. */
        C10dpb__Reply oom = C10DPB__REPLY__INIT;
        oom.request_id = rep->request_id;
        oom.status = C10D_ENOMEM;
        encode(r, &oom);
    }
    return C10DS_DONE;
}

c10ds_outcome c10ds_fail(c10ds_request *r, c10d_status st, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.status = st;
    rep.detail = detail;
    return c10ds_reply(r, &rep);
}

c10ds_outcome c10ds_park(c10ds_engine *e, c10ds_request *r, c10ds_phase ph, const char *key,
                         c10d_ms timeout_ms)
{
    if (ph == C10DS_FIRST) {
        /* Only a new one is counted against the limit: a request run again
         * (a key it waited for came, the next is missing) was counted, and
         * refusing it now would fail a wait that is half done. */
        size_t parked = c10ds_waiters_count(e->waiters);
        if (parked >= e->cfg->max_parked)
            return c10ds_fail(r, C10D_ETOOBIG, "the coordinator holds %zu parked requests, its "
                              "limit (--max-parked); this wait for key '%s' was refused",
                              parked, key);
        if (!r->parked_bytes && park_budgets_take(e, r, key) != 0)
            return C10DS_DONE;
        /* A stall while it sat in the queue does not count (stalls.h). */
        r->deadline_ms = r->received_ms + timeout_ms + c10ds_engine_park_credit(e, r);
    }
    if (c10ds_waiters_park(e->waiters, r, key) != 0)
        return c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory parking a wait for key '%s'",
                          key);
    return C10DS_PARKED;
}

int c10ds_check_key(c10ds_engine *e, c10ds_request *r, const char *key)
{
    size_t n = key ? strlen(key) : 0;
    if (n == 0) {
        c10ds_fail(r, C10D_EINVAL, "empty key");
        return -1;
    }
    if (n > e->cfg->max_key_bytes) {
        c10ds_fail(r, C10D_ETOOBIG, "key of %zu bytes exceeds the coordinator's limit of %llu "
                   "(--max-key-bytes)", n, (unsigned long long)e->cfg->max_key_bytes);
        return -1;
    }
    return 0;
}

/* Counts a write of key and len bytes against r's quota, or fails r
 * (-1) when the store's own count says it would pass it. */
static int quota_take(c10ds_engine *e, c10ds_request *r, const char *key, size_t len)
{
    c10ds_quota *q = r->quota;
    size_t add = strlen(key) + len, held = atomic_load(&q->b.bytes);
    if (held + add > q->b.limit) {
        int64_t now = c10d_now_ms();
        if (now - q->counted_ms >= QUOTA_RECOUNT_MS ||
            held - q->counted >= q->b.limit / 4) {
            int64_t n = c10ds_store_bytes(&e->store, q->prefix);
            if (n >= 0)
                atomic_store(&q->b.bytes, held = (size_t)n);
            q->counted_ms = now;
            q->counted = held;
        }
        if (held + add > q->b.limit) {
            c10ds_fail(r, C10D_ETOOBIG, "%s's keys and values hold %zu bytes in the store, and "
                       "this write of %zu would pass its quota of %llu (%s); refused (key "
                       "'%.*s%s')", q->b.what, held, add, (unsigned long long)q->b.limit,
                       q->b.option, KEY_SHOWN, key, strlen(key) > KEY_SHOWN ? "..." : "");
            return -1;
        }
    }
    atomic_fetch_add(&q->b.bytes, add);
    return 0;
}

int c10ds_check_write(c10ds_engine *e, c10ds_request *r, const char *key)
{
    return e->write_guard ? e->write_guard(e, r, key) : 0;
}

int c10ds_check_value(c10ds_engine *e, c10ds_request *r, const char *key, size_t len)
{
    if (len > e->cfg->max_value_bytes) {
        c10ds_fail(r, C10D_ETOOBIG, "value of %zu bytes for key '%s' exceeds the coordinator's "
                   "limit of %llu bytes (--max-value-bytes)", len, key,
                   (unsigned long long)e->cfg->max_value_bytes);
        return -1;
    }
    /* last: a value refused for its size counts for nothing */
    return r->quota ? quota_take(e, r, key, len) : 0;
}
