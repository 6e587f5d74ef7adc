/* Operations for operators and the client's handshake: hello, the
 * coordinator's status and the jobs listing that c10d-ctl status shows. */
#include "config.h"
#include "engine/engine.h"
#include "engine/events.h"
#include "groups/groups.h"
#include "engine/ops.h"
#include "engine/request.h"
#include "store/store.h"
#include "engine/waiters.h"

#include "c10d_time.h"
#include "version.h"

#include <c10d/errors.h>
#include <stdlib.h>
#include <string.h>

static c10ds_outcome op_hello(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__Hello *m = r->pb->hello;
    if (m->has_protocol && m->protocol != C10D_PROTOCOL_VERSION)
        return c10ds_fail(r, C10D_EPROTO, "client speaks protocol %u, this coordinator (%s) "
                          "speaks %d; use matching versions", m->protocol, C10D_VERSION_STRING,
                          C10D_PROTOCOL_VERSION);
    C10dpb__HelloReply h = C10DPB__HELLO_REPLY__INIT;
    h.has_protocol = h.has_max_key_bytes = h.has_max_value_bytes = 1;
    h.has_max_multi_keys = h.has_max_message_bytes = 1;
    h.protocol = C10D_PROTOCOL_VERSION;
    h.version = (char *)C10D_VERSION_STRING;
    h.max_key_bytes = e->cfg->max_key_bytes;
    h.max_value_bytes = e->cfg->max_value_bytes;
    h.max_multi_keys = e->cfg->max_multi_keys;
    h.max_message_bytes = e->cfg->max_message_bytes;
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_HELLO;
    rep.hello = &h;
    return c10ds_reply(r, &rep);
}

static c10ds_outcome op_status(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StatusReply s = C10DPB__STATUS_REPLY__INIT;
    s.version = (char *)C10D_VERSION_STRING;
    s.db_path = e->db->path;
    s.listen_url = e->listen_url;
    if (e->tcpstore_url[0])
        s.tcpstore_url = e->tcpstore_url;
    s.has_uptime_ms = s.has_num_keys = s.has_clients = s.has_requests = 1;
    s.has_parked = s.has_schema_version = s.has_replies_waited = s.has_batches = 1;
    s.uptime_ms = c10d_now_ms() - e->start_ms;
    s.num_keys = c10ds_store_count(&e->store, NULL);
    s.clients = atomic_load(&e->clients);
    s.requests = atomic_load(&e->requests);
    s.parked = (int64_t)c10ds_waiters_count(e->waiters);
    s.schema_version = e->db->schema_version;
    s.replies_waited = atomic_load(&e->replies_waited);
    s.batches = atomic_load(&e->batches);
    s.has_polled = 1;
    s.polled = atomic_load(&e->polled);
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_STATUS_INFO;
    rep.status_info = &s;
    return c10ds_reply(r, &rep);
}

/* --- jobs (c10d-ctl status) --- */

static c10ds_outcome op_jobs(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__JobsQuery *q = r->pb->jobs;
    C10dpb__JobsReply jr = C10DPB__JOBS_REPLY__INIT;
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_JOB_LIST);
    if (q->job && *q->job)
        sqlite3_bind_text(s, 1, q->job, -1, SQLITE_STATIC);
    size_t cap = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (jr.n_jobs == cap) {
            cap = cap ? cap * 2 : 4;
            C10dpb__JobInfo **nv = realloc(jr.jobs, cap * sizeof *nv);
            if (!nv)
                break;
            jr.jobs = nv;
        }
        C10dpb__JobInfo *j = calloc(1, sizeof *j);
        if (!j)
            break;
        c10dpb__job_info__init(j);
        j->job = strdup((const char *)sqlite3_column_text(s, 0));
        j->has_generation = j->has_world_size = j->has_formed = 1;
        j->generation = (uint64_t)sqlite3_column_int64(s, 1);
        j->world_size = sqlite3_column_int(s, 2);
        j->formed = sqlite3_column_int(s, 3) != 0;
        jr.jobs[jr.n_jobs++] = j;
    }
    sqlite3_reset(s);
    for (size_t i = 0; i < jr.n_jobs; i++) {
        C10dpb__JobInfo *j = jr.jobs[i];
        j->members = c10ds_members_load(&e->groups, j->job, j->generation, 0, &j->n_members);
        s = c10ds_groups_stmt(&e->groups, GS_GROUPS_OF_GEN);
        sqlite3_bind_text(s, 1, j->job, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, (sqlite3_int64)j->generation);
        size_t gcap = 0;
        while (sqlite3_step(s) == SQLITE_ROW) {
            if (j->n_groups == gcap) {
                gcap = gcap ? gcap * 2 : 4;
                C10dpb__GroupInfo **nv = realloc(j->groups, gcap * sizeof *nv);
                if (!nv)
                    break;
                j->groups = nv;
            }
            C10dpb__GroupInfo *g = calloc(1, sizeof *g);
            if (!g)
                break;
            c10dpb__group_info__init(g);
            g->name = strdup((const char *)sqlite3_column_text(s, 0));
            int size = sqlite3_column_int(s, 1);
            g->ranks = c10ds_groups_ranks(&e->groups, j->job, j->generation, g->name, size);
            g->n_ranks = g->ranks ? (size_t)size : 0;
            g->has_arrived = g->has_formed = 1;
            g->arrived = sqlite3_column_int(s, 2);
            g->formed = sqlite3_column_int(s, 3) != 0;
            j->groups[j->n_groups++] = g;
        }
        sqlite3_reset(s);
        for (size_t k = 0; k < j->n_groups; k++) /* join regions */
            c10ds_emit_group_info(e, j->job, j->generation, j->groups[k]);
    }
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_JOBS;
    rep.jobs = &jr;
    c10ds_outcome o = c10ds_reply(r, &rep);
    for (size_t i = 0; i < jr.n_jobs; i++) {
        C10dpb__JobInfo *j = jr.jobs[i];
        c10ds_groups_lost_free(j->members, j->n_members);
        for (size_t k = 0; k < j->n_groups; k++) {
            c10ds_emit_group_info_done(e, j->groups[k]);
            free(j->groups[k]->name);
            free(j->groups[k]->ranks);
            free(j->groups[k]);
        }
        free(j->groups);
        free(j->job);
        free(j);
    }
    free(jr.jobs);
    return o;
}

const c10ds_op c10ds_admin_ops[] = {
    {C10DPB__REQUEST__OP_HELLO, "hello", op_hello, 0},
    {C10DPB__REQUEST__OP_STATUS, "status", op_status, 0},
    {C10DPB__REQUEST__OP_JOBS, "jobs", op_jobs, 0},
    {0, NULL, NULL, 0},
};
