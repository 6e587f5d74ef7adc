/* What a handler answers with: a request made and freed, its reply put in
 * the client's dialect (c10ds_reply, c10ds_fail with a worded detail), parking it on a key
 * until that key is written or its deadline passes, and the checks of a
 * key and a value against the coordinator's limits. The engine sends the
 * replies after its batch commits (engine.c). */
#include "engine/request.h"

#include "config.h"
#include "engine/engine.h"
#include "engine/waiters.h"

#include "c10d_time.h"

#include <c10d/errors.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    return 0;
}
