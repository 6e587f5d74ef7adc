/* The front end's side of backend.h: which backend serves which kind of
 * device, a group's backends opened, connected, split and closed, and the
 * hooks through which a backend asks about the group it serves. This is
 * the one file that knows both a process group and the backends' table;
 * the backends themselves see only their context. */
#include "backend/backend_ctx.h"
#include "backend/backends.h"
#include "budgets.h"
#include "join/join_internal.h"
#include "join/join_region.h"
#include "coll/lane.h"
#include "group/liveness.h"
#include "coll/plan.h"
#include "coll/work.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the table, by kind of device --- */

/* The endpoints of group ranks[0..n) from the coordinator (a formed
 * group's; any number, fetched in requests of at most 1024). eps[i].data
 * is malloc'd: the caller frees each. */
static c10d_status fetch_endpoints(c10d_pg *pg, const int *ranks, size_t n,
                                   ProtobufCBinaryData *eps, c10d_ms timeout_ms)
{
    c10di_world *w = pg->w;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 1024 ? n - done : 1024;
        C10dpb__GroupEndpoints m = C10DPB__GROUP_ENDPOINTS__INIT;
        m.job = w->job;
        m.generation = w->generation;
        m.name = pg->name;
        m.rank = w->rank;
        m.n_ranks = k;
        m.ranks = (int32_t *)(ranks + done);
        C10dpb__Request req = C10DPB__REQUEST__INIT;
        req.op_case = C10DPB__REQUEST__OP_GROUP_ENDPOINTS;
        req.group_endpoints = &m;
        C10dpb__Reply *rep = NULL;
        c10d_status st = c10di_call(w->conn, &req, timeout_ms, C10DI_CONTROL_CALL_BUDGET_MS, &rep);
        if (st != C10D_OK)
            return st;
        C10dpb__GroupJoinReply *gj = rep->result_case == C10DPB__REPLY__RESULT_GROUP_ENDPOINTS
                                         ? rep->group_endpoints : NULL;
        if (!gj || gj->n_endpoints != k) {
            c10dpb__reply__free_unpacked(rep, NULL);
            return c10di_error(C10D_EPROTO, "the coordinator answered a request for endpoints "
                               "of group %s with something else", pg->name);
        }
        for (size_t i = 0; i < k; i++) {
            ProtobufCBinaryData *d = &eps[done + i];
            d->len = gj->endpoints[i].len;
            if (!(d->data = malloc(d->len ? d->len : 1))) {
                c10dpb__reply__free_unpacked(rep, NULL);
                return c10di_error(C10D_ENOMEM, "out of memory");
            }
            memcpy(d->data, gj->endpoints[i].data, d->len);
        }
        c10dpb__reply__free_unpacked(rep, NULL);
        done += k;
    }
    return C10D_OK;
}

/* --- the hooks --- */

static c10d_status hook_check(const c10di_be_ctx *x, const c10di_coll *c, int waiting_for)
{
    return c10di_pg_check(x->pg, c, waiting_for);
}

static c10d_status hook_failure(const c10di_be_ctx *x, uint64_t seq, char *msg, size_t cap)
{
    return c10di_pg_failure(x->pg, seq, msg, cap);
}

static c10d_status hook_fetch(const c10di_be_ctx *x, const int *ranks, size_t n,
                              ProtobufCBinaryData *eps, c10d_ms timeout_ms)
{
    return fetch_endpoints(x->pg, ranks, n, eps, timeout_ms);
}

static void hook_alert(const c10di_be_ctx *x, c10d_status st, const char *report)
{
    c10di_record_alert(x->pg->w, x->pg->name, st, report);
}

static void hook_completed(const c10di_be_ctx *x, uint64_t seq)
{
    c10di_pg_completed(x->pg, seq);
}

static uint64_t hook_issued(const c10di_be_ctx *x)
{
    return x->pg->seq;
}

static void hook_drain(const c10di_be_ctx *x)
{
    c10di_lane_drain(x->pg->lane);
}

static void hook_join_mark(const c10di_be_ctx *x, uint64_t *joined_after1, uint32_t *region)
{
    const c10di_join *j = &x->pg->join;
    *joined_after1 = j->shadow_after1;
    *region = atomic_load_explicit(&j->in_region, memory_order_acquire) ? j->region : 0;
}

static void hook_join_heard(const c10di_be_ctx *x, int peer, uint64_t after)
{
    c10di_join_heard(x->pg, peer, after);
}

static int hook_avg_by_active(const c10di_be_ctx *x, const c10di_coll *c)
{
    return c10di_join_avg_by_active(x->pg, c);
}

static void hook_recv_done(const c10di_be_ctx *x, c10di_recv *r)
{
    c10di_work_recv_done(x->pg, r);
}

static const c10di_be_hooks hooks = {
    .check = hook_check,
    .failure = hook_failure,
    .fetch_endpoints = hook_fetch,
    .alert = hook_alert,
    .completed = hook_completed,
    .issued = hook_issued,
    .drain = hook_drain,
    .join_mark = hook_join_mark,
    .join_heard = hook_join_heard,
    .avg_by_active = hook_avg_by_active,
    .recv_done = hook_recv_done,
};

/* --- a group's backends --- */

c10d_status c10di_backends_open(c10d_pg *pg, int subgroup, char *buf, size_t cap, size_t *len)
{
    c10di_world *w = pg->w;
    unsigned serves = c10di_backend_serves(pg->backend);
    *len = 0;
    for (int k = 0; k < C10DI_DEV_KINDS; k++) {
        c10di_be_slot *s = &pg->be[k];
        const c10di_backend_ops *ops = c10di_backend_of((c10di_dev_kind)k);
        /* The host backend is opened under C10D_BACKEND_NCCL too: the
         * rendezvous publishes its endpoint, and a joined rank's in-band
         * shadows and the data plane's checks need its links. */
        if (!ops->open || !(serves & 1u << k || k == C10DI_DEV_CPU))
            continue;
        s->ops = ops;
        s->ctx = (c10di_be_ctx){
            .job = w->job,
            .group = pg->name,
            .host = w->host,
            .coord_url = c10di_conn_url(w->conn),
            .rank = pg->rank,
            .size = pg->size,
            .world_rank = w->rank,
            .device = w->device,
            .timeout_ms = pg->timeout_ms,
            .primary = (int)c10di_backend_home(pg->backend) == k && serves == 1u << k,
            .subgroup = subgroup,
            .verify_off = w->verify == C10D_VERIFY_OFF,
            .hooks = &hooks,
            .pg = pg,
        };
        size_t n = 0;
        c10d_status st = ops->open(&s->ctx, &s->state, buf + *len, cap - *len, &n);
        if (st != C10D_OK)
            return st;
        *len += n;
    }
    return C10D_OK;
}

c10d_status c10di_backends_connect(c10d_pg *pg, const c10di_peers *peers)
{
    c10di_world *w = pg->w;
    for (int k = 0; k < C10DI_DEV_KINDS; k++) {
        c10di_be_slot *s = &pg->be[k];
        if (!s->state)
            continue;
        s->ctx.generation = w->generation;
        s->ctx.secret = pg->secret;
        /* In the run's store: the coordinator deletes it when the run is
         * over (docs/store.md), so a communicator id never outlives it. */
        c10d_status st = c10di_run_store_over(&s->ctx.store, w->conn, w->job, w->generation,
                                              pg->timeout_ms, "c10d/%s/%s/", s->ops->name,
                                              pg->name);
        if (st == C10D_OK)
            st = s->ops->connect(s->state, peers);
        if (st != C10D_OK)
            return st;
    }
    atomic_store(&pg->data_ready, 1);
    return C10D_OK;
}

c10d_status c10di_backends_split(c10d_pg *parent, c10d_pg *child)
{
    for (int k = 0; k < C10DI_DEV_KINDS; k++) {
        c10di_be_slot *p = &parent->be[k];
        if (!p->state || !p->ops->split)
            continue;
        c10d_status st = p->ops->split(p->state, child ? child->be[k].state : NULL);
        if (st != C10D_OK)
            return st;
    }
    return C10D_OK;
}

void c10di_backends_close(c10d_pg *pg)
{
    /* In the reverse order of opening. */
    for (int k = C10DI_DEV_KINDS - 1; k >= 0; k--) {
        c10di_be_slot *s = &pg->be[k];
        if (s->state)
            s->ops->close(s->state);
        if (s->ctx.store)
            c10d_store_close(s->ctx.store);
        memset(s, 0, sizeof *s);
    }
}
