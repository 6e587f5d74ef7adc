/* c10d_store_jobs: the coordinator's jobs, members and groups, for
 * operators. The strings point into the decoded reply, which the result
 * keeps alive until c10d_jobs_free. */
#include "internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    C10dpb__Reply *rep;
    c10d_job_info jobs[];
} jobs_block;

static const char *str(const char *s)
{
    return s ? s : "";
}

void c10d_jobs_free(c10d_job_info *jobs, size_t n)
{
    if (!jobs)
        return;
    jobs_block *b = (jobs_block *)((char *)jobs - offsetof(jobs_block, jobs));
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; jobs[i].groups && k < jobs[i].n_groups; k++)
            if (jobs[i].groups[k].join) {
                free((void *)jobs[i].groups[k].join->joined);
                free((void *)jobs[i].groups[k].join);
            }
        free((void *)jobs[i].members);
        free((void *)jobs[i].groups);
    }
    c10dpb__reply__free_unpacked(b->rep, NULL);
    free(b);
}

static const c10d_join_info *join_info(const C10dpb__JoinState *js)
{
    c10d_join_info *ji = calloc(1, sizeof *ji);
    c10d_joined_rank *jr = calloc(js->n_joined ? js->n_joined : 1, sizeof *jr);
    if (!ji || !jr) {
        free(ji);
        free(jr);
        return NULL;
    }
    for (size_t i = 0; i < js->n_joined; i++)
        jr[i] = (c10d_joined_rank){js->joined[i]->rank, js->joined[i]->global_rank,
                                   js->joined[i]->after_seq, js->joined[i]->joined_ms};
    *ji = (c10d_join_info){js->region, js->begun, js->throw_on_early_termination,
                           js->divide_by_initial_world_size, js->n_joined, jr, js->released,
                           str(js->shadowing), js->caught_up, js->done,
                           js->has_last_joiner ? js->last_joiner : -1};
    return ji;
}

c10d_status c10d_store_jobs(c10d_store *s, const char *job, c10d_job_info **out, size_t *n)
{
    if (!s || !out || !n)
        return c10di_error(C10D_EINVAL, "c10d_store_jobs: store, jobs and n must not be NULL");
    C10dpb__JobsQuery q = C10DPB__JOBS_QUERY__INIT;
    q.job = (char *)job;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_JOBS;
    req.jobs = &q;
    C10dpb__Reply *rep = NULL;
    c10d_status st = c10di_call(c10di_store_conn(s), &req, 0, 30000, &rep);
    if (st != C10D_OK)
        return st;
    if (rep->result_case != C10DPB__REPLY__RESULT_JOBS) {
        c10dpb__reply__free_unpacked(rep, NULL);
        return c10di_error(C10D_EPROTO, "jobs reply without jobs");
    }
    size_t nj = rep->jobs->n_jobs;
    jobs_block *b = calloc(1, sizeof *b + (nj ? nj : 1) * sizeof b->jobs[0]);
    if (!b) {
        c10dpb__reply__free_unpacked(rep, NULL);
        return c10di_error(C10D_ENOMEM, "out of memory");
    }
    b->rep = rep;
    for (size_t i = 0; i < nj; i++) {
        const C10dpb__JobInfo *j = rep->jobs->jobs[i];
        c10d_job_info *o = &b->jobs[i];
        c10d_member_info *m = calloc(j->n_members ? j->n_members : 1, sizeof *m);
        c10d_group_info *g = calloc(j->n_groups ? j->n_groups : 1, sizeof *g);
        o->members = m;
        o->groups = g;
        if (!m || !g) {
            c10d_jobs_free(b->jobs, i + 1);
            return c10di_error(C10D_ENOMEM, "out of memory");
        }
        o->job = str(j->job);
        o->generation = j->generation;
        o->world_size = j->world_size;
        o->formed = j->formed;
        o->n_members = j->n_members;
        for (size_t k = 0; k < j->n_members; k++) {
            const C10dpb__MemberInfo *x = j->members[k];
            m[k] = (c10d_member_info){x->rank, str(x->state), str(x->host), x->pid,
                                      str(x->reason), str(x->activity), x->changed_ms,
                                      x->last_seen_ms};
        }
        o->n_groups = j->n_groups;
        for (size_t k = 0; k < j->n_groups; k++) {
            const C10dpb__GroupInfo *x = j->groups[k];
            g[k] = (c10d_group_info){str(x->name), (int)x->n_ranks, x->ranks, x->joined,
                                     x->formed, NULL};
            if (x->join && !(g[k].join = join_info(x->join))) {
                c10d_jobs_free(b->jobs, i + 1);
                return c10di_error(C10D_ENOMEM, "out of memory");
            }
        }
    }
    *out = b->jobs;
    *n = nj;
    return C10D_OK;
}

typedef struct {
    C10dpb__Reply *rep;
    c10d_group_health groups[];
} health_block;

void c10d_health_free(c10d_group_health *groups, size_t n)
{
    if (!groups)
        return;
    health_block *b = (health_block *)((char *)groups - offsetof(health_block, groups));
    for (size_t i = 0; i < n; i++)
        free((void *)groups[i].ranks);
    c10dpb__reply__free_unpacked(b->rep, NULL);
    free(b);
}

c10d_status c10d_store_health(c10d_store *s, const char *job, const char *group,
                              c10d_group_health **out, size_t *n)
{
    if (!s || !out || !n)
        return c10di_error(C10D_EINVAL, "c10d_store_health: store, groups and n must not be NULL");
    C10dpb__CollStatus q = C10DPB__COLL_STATUS__INIT;
    q.job = (char *)job;
    q.group = (char *)group;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_COLL_STATUS;
    req.coll_status = &q;
    C10dpb__Reply *rep = NULL;
    c10d_status st = c10di_call(c10di_store_conn(s), &req, 0, 30000, &rep);
    if (st != C10D_OK)
        return st;
    if (rep->result_case != C10DPB__REPLY__RESULT_COLL_STATUS) {
        c10dpb__reply__free_unpacked(rep, NULL);
        return c10di_error(C10D_EPROTO, "coll_status reply without groups");
    }
    size_t ng = rep->coll_status->n_groups;
    health_block *b = calloc(1, sizeof *b + (ng ? ng : 1) * sizeof b->groups[0]);
    if (!b) {
        c10dpb__reply__free_unpacked(rep, NULL);
        return c10di_error(C10D_ENOMEM, "out of memory");
    }
    b->rep = rep;
    for (size_t i = 0; i < ng; i++) {
        const C10dpb__GroupHealth *h = rep->coll_status->groups[i];
        c10d_group_health *o = &b->groups[i];
        c10d_rank_progress *r = calloc(h->n_ranks ? h->n_ranks : 1, sizeof *r);
        if (!r) {
            c10d_health_free(b->groups, i);
            return c10di_error(C10D_ENOMEM, "out of memory");
        }
        *o = (c10d_group_health){str(h->job), h->generation, str(h->group), h->size,
                                 (c10d_status)h->status, str(h->report), h->n_ranks, r};
        for (size_t k = 0; k < h->n_ranks; k++) {
            const C10dpb__RankProgress *p = h->ranks[k];
            r[k] = (c10d_rank_progress){p->rank, p->global_rank, p->entered, p->completed,
                                        p->entered_ms, str(p->last)};
        }
    }
    *out = b->groups;
    *n = ng;
    return C10D_OK;
}

typedef struct {
    C10dpb__Reply *rep;
    c10d_trace_row rows[];
} trace_block;

void c10d_trace_free(c10d_trace_row *rows, size_t n)
{
    (void)n;
    if (!rows)
        return;
    trace_block *b = (trace_block *)((char *)rows - offsetof(trace_block, rows));
    c10dpb__reply__free_unpacked(b->rep, NULL);
    free(b);
}

c10d_status c10d_store_trace(c10d_store *s, const char *job, const char *group, int rank,
                             unsigned limit, c10d_trace_row **out, size_t *n)
{
    if (!s || !out || !n)
        return c10di_error(C10D_EINVAL, "c10d_store_trace: store, rows and n must not be NULL");
    C10dpb__CollTrace q = C10DPB__COLL_TRACE__INIT;
    q.job = (char *)job;
    q.group = (char *)group;
    q.rank = rank;
    q.has_limit = limit != 0;
    q.limit = limit;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_COLL_TRACE;
    req.coll_trace = &q;
    C10dpb__Reply *rep = NULL;
    c10d_status st = c10di_call(c10di_store_conn(s), &req, 0, 30000, &rep);
    if (st != C10D_OK)
        return st;
    if (rep->result_case != C10DPB__REPLY__RESULT_COLL_TRACE) {
        c10dpb__reply__free_unpacked(rep, NULL);
        return c10di_error(C10D_EPROTO, "coll_trace reply without rows");
    }
    size_t nr = rep->coll_trace->n_rows;
    trace_block *b = calloc(1, sizeof *b + (nr ? nr : 1) * sizeof b->rows[0]);
    if (!b) {
        c10dpb__reply__free_unpacked(rep, NULL);
        return c10di_error(C10D_ENOMEM, "out of memory");
    }
    b->rep = rep;
    for (size_t i = 0; i < nr; i++) {
        const C10dpb__TraceRow *r = rep->coll_trace->rows[i];
        b->rows[i] = (c10d_trace_row){r->first_seq, r->last_seq, str(r->what), str(r->state),
                                      r->entered_ms};
    }
    *out = b->rows;
    *n = nr;
    return C10D_OK;
}
