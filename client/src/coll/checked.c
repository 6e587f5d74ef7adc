/* Checked calls: collectives and transfers that the program's own data
 * plane moves (c10d/checked.h). Each is described, numbered and passed
 * through the same stages as the library's own calls (plan.c: liveness,
 * join, verification) before the program runs it, and ended by the
 * program, from whichever thread learns that its data plane finished. */
#include "coll/program_plane.h"

#include "backend/backends.h"
#include "coll/lane.h"
#include "group/liveness.h"
#include "coll/plan.h"

#include "budgets.h"
#include "c10d_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct c10d_checked {
    c10d_pg *pg;
    c10di_coll c;
    struct c10d_checked *prev, *next; /* the group's open calls (program_plane.h) */
};

static int is_p2p(c10d_coll_kind k)
{
    return k == C10D_COLL_SEND || k == C10D_COLL_RECV;
}

/* o's arguments, before anything is numbered. */
static c10d_status check_args(const c10d_pg *pg, const c10d_check_opts *o)
{
    const char *fn = "c10d_check_begin";
    c10d_coll_kind k = o->kind;
    if ((unsigned)k > C10D_COLL_MONITORED_BARRIER)
        return c10di_error(C10D_EINVAL, "%s: unknown kind %d", fn, (int)k);
    const char *name = c10dc_kind_name((uint32_t)k);
    int no_data = k == C10D_COLL_BARRIER || k == C10D_COLL_MONITORED_BARRIER;
    if (!no_data && c10d_dtype_size(o->dtype) == 0)
        return c10di_error(C10D_EINVAL, "%s: %s with unknown dtype %d", fn, name, (int)o->dtype);
    if (o->count < 0)
        return c10di_error(C10D_EINVAL, "%s: %s of %lld elements", fn, name,
                           (long long)o->count);
    if (o->device < C10D_CPU)
        return c10di_error(C10D_EINVAL, "%s: device %d (C10D_CPU, or a CUDA device index)", fn,
                           o->device);
    int rooted = k == C10D_COLL_BROADCAST || k == C10D_COLL_REDUCE || k == C10D_COLL_GATHER ||
                 k == C10D_COLL_SCATTER;
    if ((rooted || is_p2p(k)) && (o->root < 0 || o->root >= pg->size))
        return c10di_error(C10D_EINVAL, "%s: %s %s %d is out of range for group %s of size %d",
                           fn, name, is_p2p(k) ? "peer" : "root", o->root, pg->name, pg->size);
    if (is_p2p(k) && o->root == pg->rank)
        return c10di_error(C10D_EINVAL, "%s: rank %d cannot %s itself", fn, o->root,
                           k == C10D_COLL_SEND ? "send to" : "receive from");
    int reduces = k == C10D_COLL_ALL_REDUCE || k == C10D_COLL_REDUCE ||
                  k == C10D_COLL_REDUCE_SCATTER;
    if (reduces && strcmp(c10d_reduce_op_name(o->op), "?") == 0)
        return c10di_error(C10D_EINVAL, "%s: %s with unknown reduce op %d", fn, name, (int)o->op);
    c10di_dev_kind dk = o->device == C10D_CPU ? C10DI_DEV_CPU : C10DI_DEV_CUDA;
    if (!c10di_program_serves(pg, dk))
        return c10di_error(C10D_EINVAL, "%s: group %s has no data plane of the program's for "
                           "%s buffers; set one with c10d_data_plane_set (devices %s) first",
                           fn, pg->name, dk == C10DI_DEV_CPU ? "CPU" : "CUDA",
                           dk == C10DI_DEV_CPU ? "C10D_DATA_PLANE_CPU" : "C10D_DATA_PLANE_CUDA");
    return C10D_OK;
}

static void open_link(c10di_program *p, c10d_checked *h)
{
    pthread_mutex_lock(&p->mu);
    h->prev = p->open_tail;
    h->next = NULL;
    if (p->open_tail)
        p->open_tail->next = h;
    else
        p->open = h;
    p->open_tail = h;
    pthread_mutex_unlock(&p->mu);
}

static void open_unlink(c10di_program *p, c10d_checked *h)
{
    pthread_mutex_lock(&p->mu);
    if (h->prev)
        h->prev->next = h->next;
    else
        p->open = h->next;
    if (h->next)
        h->next->prev = h->prev;
    else
        p->open_tail = h->prev;
    pthread_mutex_unlock(&p->mu);
}

c10d_status c10d_check_begin(c10d_pg *pg, const c10d_check_opts *o, c10d_checked **out)
{
    if (out)
        *out = NULL;
    if (!pg || !o || !out)
        return c10di_error(C10D_EINVAL, "c10d_check_begin: %s is NULL",
                           !pg ? "pg" : !o ? "o" : "out");
    c10d_status st = c10di_opts_version("c10d_check_begin", "c10d_check_opts", o->version,
                                        C10D_CHECK_OPTS_VERSION);
    if (st != C10D_OK || (st = check_args(pg, o)) != C10D_OK)
        return st;
    c10d_checked *h = calloc(1, sizeof *h);
    if (!h)
        return c10di_error(C10D_ENOMEM, "out of memory");
    h->pg = pg;
    c10di_coll *c = &h->c;
    c->kind = (c10dc_kind)o->kind;
    int no_data = o->kind == C10D_COLL_BARRIER || o->kind == C10D_COLL_MONITORED_BARRIER;
    c->dtype = no_data ? C10D_UINT8 : o->dtype;
    c->count = no_data ? 0 : (size_t)o->count;
    c->op = o->op;
    c->root = o->root;
    c->tag = o->tag;
    c->device = o->device;
    c->be = &c10di_external_backend;
    c->be_state = &pg->program->ext;
    if ((st = c10di_timeout("c10d_check_begin", "opts.timeout_ms", o->timeout_ms, pg->timeout_ms,
                            0, &c->timeout_ms)) != C10D_OK) {
        free(h);
        return st;
    }
    /* The library's own calls queued on the group (a monitored barrier,
     * calls on the group's other device) come first, as they were called. */
    if (c10di_lane_busy(pg->lane))
        c10di_lane_drain(pg->lane);
    uint64_t *count = is_p2p(o->kind) ? &pg->p2p_seq : &pg->seq;
    c->seq = ++*count;
    c10di_describe(c, (int64_t)c->count);
    c->deadline_ms = c10d_now_ms() + c->timeout_ms;
    c10di_program *p = pg->program;
    if (!is_p2p(o->kind))
        atomic_store(&p->last_begun, c->seq);
    c10di_outcome oc;
    C10DI_OUTCOME_EMPTY(&oc);
    if ((st = c10di_call_open(pg, c, &oc)) != C10D_OK) {
        c10di_call_end(pg, c, st, &oc); /* its finding recorded, the group broken */
        free(h);
        return st;
    }
    open_link(p, h);
    *out = h;
    return C10D_OK;
}

/* Why h can never complete: what is known against its group, and (with
 * `deadline`) its timeout passed. */
static c10d_status failure(const c10d_checked *h, int deadline, char *msg, size_t cap)
{
    c10d_pg *pg = h->pg;
    const c10di_coll *c = &h->c;
    char why[1024];
    /* A send/recv has its own count: any member lost may be its peer. */
    c10d_status st = c10di_pg_failure(pg, is_p2p((c10d_coll_kind)c->kind) ? UINT64_MAX : c->seq,
                                      why, sizeof why);
    if (st != C10D_OK) {
        snprintf(msg, cap, "%s of group %s (rank %d) cannot complete: %s", c->what, pg->name,
                 pg->rank, why);
        return st;
    }
    if (deadline && c10d_now_ms() > c->deadline_ms) {
        snprintf(msg, cap, "%s of group %s (rank %d) timed out after %d ms on the program's "
                 "data plane", c->what, pg->name, pg->rank, c->timeout_ms);
        return C10D_ETIMEDOUT;
    }
    msg[0] = '\0';
    return C10D_OK;
}

c10d_status c10di_checked_failure(const c10d_checked *h, char *msg, size_t cap)
{
    return failure(h, 1, msg, cap);
}

c10d_status c10d_check_state(const c10d_checked *h)
{
    if (!h)
        return c10di_error(C10D_EINVAL, "c10d_check_state: NULL handle");
    char msg[1200];
    c10d_status st = c10di_checked_failure(h, msg, sizeof msg);
    return st == C10D_OK ? C10D_OK : c10di_error(st, "%s", msg);
}

/* A data plane's failure whose cause the coordinator may yet name: not a
 * refusal (C10D_EINVAL), nor one of the coordinator's own verdicts, which
 * the program passes on when it aborted because of one (on_alert). */
static int waits_for_why(c10d_status outcome)
{
    switch (outcome) {
    case C10D_OK:
    case C10D_EINVAL:
    case C10D_EDESYNC:
    case C10D_EPEERLOST:
    case C10D_ETIMEDOUT:
    case C10D_EJOINED:
    case C10D_EABORTED: return 0;
    default: return 1;
    }
}

c10d_status c10d_check_end(c10d_checked *h, c10d_status outcome, const char *why)
{
    if (!h)
        return c10di_error(C10D_EINVAL, "c10d_check_end: NULL handle");
    c10d_pg *pg = h->pg;
    c10di_coll *c = &h->c;
    c10di_program *p = pg->program;
    open_unlink(p, h);
    char msg[1200];
    /* Finished late is finished: only what is known against the group counts now. */
    c10d_status found = failure(h, 0, msg, sizeof msg);
    for (int64_t until = c10d_now_ms() + C10DI_CHECKED_FINDING_GRACE_MS;
         found == C10D_OK && waits_for_why(outcome) && c10d_now_ms() < until;) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL); /* the coordinator may yet say why it failed */
        found = failure(h, 0, msg, sizeof msg);
    }
    c10d_status st = found != C10D_OK ? found : outcome;
    if (found != C10D_OK)
        c10di_error(found, "%s", msg);
    else if (outcome != C10D_OK)
        c10di_error(outcome, "%s of group %s (rank %d) failed on the program's data plane: %s",
                    c->what, pg->name, pg->rank, why && *why ? why : c10d_status_name(outcome));
    c10di_outcome oc;
    C10DI_OUTCOME_EMPTY(&oc);
    /* The heartbeat's activity is this call's only if no later call began. */
    oc.announced = !is_p2p((c10d_coll_kind)c->kind) && atomic_load(&p->last_begun) == c->seq;
    c10di_call_end(pg, c, st, &oc); /* completed, or the group broken with the message */
    free(h);
    return st;
}

uint64_t c10d_check_seq(const c10d_checked *h)
{
    return h ? h->c.seq : 0;
}

c10d_status c10d_identity_fill(void *buf, int64_t count, c10d_dtype dtype, c10d_reduce_op op)
{
    if (count < 0 || (!buf && count > 0))
        return c10di_error(C10D_EINVAL, "c10d_identity_fill: %s",
                           count < 0 ? "count is negative" : "buf is NULL");
    if (strcmp(c10d_reduce_op_name(op), "?") == 0)
        return c10di_error(C10D_EINVAL, "c10d_identity_fill: unknown reduce op %d", (int)op);
    unsigned char elem[8];
    size_t es = c10di_identity_element(dtype, op, elem);
    if (!es)
        return c10di_error(C10D_EINVAL, "c10d_identity_fill: unknown dtype %d", (int)dtype);
    c10di_fill_pattern(buf, (size_t)count * es, elem, es);
    return C10D_OK;
}
