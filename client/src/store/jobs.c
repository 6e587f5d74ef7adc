/* c10d_store_jobs, c10d_store_health, c10d_store_trace: what the
 * coordinator knows of jobs, their verification and a rank's recent
 * collectives, for operators. Each result is one allocation (block.h),
 * freed with c10d_free. */
#include "block.h"
#include "budgets.h"
#include "store/store_internal.h"

#include "member_state.h"

#include <stdlib.h>

/* Asks the coordinator; the reply must be of kind `want`. */
static c10d_status ask(c10d_store *s, C10dpb__Request *req, C10dpb__Reply__ResultCase want,
                       const char *what, C10dpb__Reply **rep)
{
    c10d_status st = c10di_call(c10di_store_conn(s), req, 0, C10DI_CONTROL_CALL_BUDGET_MS, rep);
    if (st != C10D_OK)
        return st;
    if ((*rep)->result_case != want) {
        c10dpb__reply__free_unpacked(*rep, NULL);
        return c10di_error(C10D_EPROTO, "the coordinator answered %s with something else", what);
    }
    return C10D_OK;
}

/* The reply's part as one block, or C10D_ENOMEM (the reply freed). */
static c10d_status build(c10di_block_fill fill, const void *part, C10dpb__Reply *rep, void **out)
{
    if (!(*out = c10di_block_build(fill, part))) {
        c10dpb__reply__free_unpacked(rep, NULL);
        return c10di_error(C10D_ENOMEM, "out of memory");
    }
    return C10D_OK;
}

/* --- jobs --- */

_Static_assert((int)C10D_MEMBER_ALIVE == (int)C10DPB__MEMBER_STATE__MEMBER_ALIVE &&
                   (int)C10D_MEMBER_LEFT == (int)C10DPB__MEMBER_STATE__MEMBER_LEFT &&
                   (int)C10D_MEMBER_DEAD == (int)C10DPB__MEMBER_STATE__MEMBER_DEAD &&
                   (int)C10D_MEMBER_ALIVE == C10DC_MEMBER_ALIVE &&
                   (int)C10D_MEMBER_LEFT == C10DC_MEMBER_LEFT &&
                   (int)C10D_MEMBER_DEAD == C10DC_MEMBER_DEAD,
               "c10d_member_state is numbered as the wire's MemberState");

const char *c10d_member_state_name(c10d_member_state state)
{
    return c10dc_member_state_word((int)state);
}

static const c10d_join_info *join_info(c10di_block *b, const C10dpb__JoinState *js)
{
    c10d_join_info *ji = c10di_block_take(b, sizeof *ji);
    c10d_joined_rank *jr = c10di_block_take(b, js->n_joined * sizeof *jr);
    const char *shadowing = c10di_block_str(b, js->shadowing);
    if (!ji)
        return NULL;
    for (size_t i = 0; i < js->n_joined; i++)
        jr[i] = (c10d_joined_rank){js->joined[i]->rank, js->joined[i]->global_rank,
                                   js->joined[i]->after_seq, js->joined[i]->joined_ms};
    *ji = (c10d_join_info){js->region, js->begun, js->throw_on_early_termination,
                           js->divide_by_initial_world_size, js->n_joined, jr, js->released,
                           shadowing, js->caught_up, js->done,
                           js->has_last_joiner ? js->last_joiner : -1};
    return ji;
}

static void fill_jobs(c10di_block *b, const void *arg)
{
    const C10dpb__JobsReply *r = arg;
    c10d_job_info *out = c10di_block_take(b, r->n_jobs * sizeof *out);
    for (size_t i = 0; i < r->n_jobs; i++) {
        const C10dpb__JobInfo *j = r->jobs[i];
        c10d_member_info *m = c10di_block_take(b, j->n_members * sizeof *m);
        c10d_group_info *g = c10di_block_take(b, j->n_groups * sizeof *g);
        const char *job = c10di_block_str(b, j->job);
        for (size_t k = 0; k < j->n_members; k++) {
            const C10dpb__MemberInfo *x = j->members[k];
            c10d_member_state state = (c10d_member_state)x->state;
            const char *host = c10di_block_str(b, x->host);
            const char *reason = c10di_block_str(b, x->reason);
            const char *activity = c10di_block_str(b, x->activity);
            if (m)
                m[k] = (c10d_member_info){x->rank, state, host, x->pid, reason, activity,
                                          x->changed_ms, x->last_seen_ms};
        }
        for (size_t k = 0; k < j->n_groups; k++) {
            const C10dpb__GroupInfo *x = j->groups[k];
            const char *name = c10di_block_str(b, x->name);
            int *ranks = c10di_block_take(b, x->n_ranks * sizeof *ranks);
            const c10d_join_info *join = x->join ? join_info(b, x->join) : NULL;
            if (ranks && x->n_ranks)
                memcpy(ranks, x->ranks, x->n_ranks * sizeof *ranks);
            if (g)
                g[k] = (c10d_group_info){name, (int)x->n_ranks, ranks, x->arrived, x->formed, join};
        }
        if (out)
            out[i] = (c10d_job_info){job, j->generation, j->world_size, j->formed, j->n_members,
                                     m, j->n_groups, g};
    }
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
    c10d_status st = ask(s, &req, C10DPB__REPLY__RESULT_JOBS, "a jobs query", &rep);
    if (st != C10D_OK)
        return st;
    if ((st = build(fill_jobs, rep->jobs, rep, (void **)out)) != C10D_OK)
        return st;
    *n = rep->jobs->n_jobs;
    c10dpb__reply__free_unpacked(rep, NULL);
    return C10D_OK;
}

/* --- verification state --- */

static void fill_health(c10di_block *b, const void *arg)
{
    const C10dpb__CollStatusReply *r = arg;
    c10d_group_health *out = c10di_block_take(b, r->n_groups * sizeof *out);
    for (size_t i = 0; i < r->n_groups; i++) {
        const C10dpb__GroupHealth *h = r->groups[i];
        c10d_rank_progress *rk = c10di_block_take(b, h->n_ranks * sizeof *rk);
        const char *job = c10di_block_str(b, h->job), *group = c10di_block_str(b, h->group);
        const char *report = c10di_block_str(b, h->report);
        for (size_t k = 0; k < h->n_ranks; k++) {
            const C10dpb__RankProgress *p = h->ranks[k];
            const char *last = c10di_block_str(b, p->last);
            if (rk)
                rk[k] = (c10d_rank_progress){p->rank, p->global_rank, p->entered, p->completed,
                                             p->entered_ms, last};
        }
        if (out)
            out[i] = (c10d_group_health){job, h->generation, group, h->size,
                                         (c10d_status)h->status, report, h->n_ranks, rk};
    }
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
    c10d_status st = ask(s, &req, C10DPB__REPLY__RESULT_COLL_STATUS, "a coll_status query",
                         &rep);
    if (st != C10D_OK)
        return st;
    if ((st = build(fill_health, rep->coll_status, rep, (void **)out)) != C10D_OK)
        return st;
    *n = rep->coll_status->n_groups;
    c10dpb__reply__free_unpacked(rep, NULL);
    return C10D_OK;
}

/* --- a rank's trace --- */

/* The reply, and where to put the job's name (the last string in). */
typedef struct {
    const C10dpb__CollTraceReply *r;
    const char **job;
} trace_part;

static void fill_trace(c10di_block *b, const void *arg)
{
    const trace_part *p = arg;
    const C10dpb__CollTraceReply *r = p->r;
    c10d_trace_row *out = c10di_block_take(b, r->n_rows * sizeof *out);
    for (size_t i = 0; i < r->n_rows; i++) {
        const C10dpb__TraceRow *x = r->rows[i];
        const char *what = c10di_block_str(b, x->what), *state = c10di_block_str(b, x->state);
        if (out)
            out[i] = (c10d_trace_row){x->first_seq, x->last_seq, what, state, x->entered_ms};
    }
    const char *job = c10di_block_str(b, r->job);
    if (p->job)
        *p->job = job;
}

c10d_status c10d_store_trace_job(c10d_store *s, const char *job, const char *group, int rank,
                                 unsigned limit, c10d_trace_row **out, size_t *n,
                                 const char **job_out)
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
    c10d_status st = ask(s, &req, C10DPB__REPLY__RESULT_COLL_TRACE, "a coll_trace query", &rep);
    if (st != C10D_OK)
        return st;
    trace_part part = {rep->coll_trace, job_out};
    if ((st = build(fill_trace, &part, rep, (void **)out)) != C10D_OK)
        return st;
    *n = rep->coll_trace->n_rows;
    c10dpb__reply__free_unpacked(rep, NULL);
    return C10D_OK;
}

c10d_status c10d_store_trace(c10d_store *s, const char *job, const char *group, int rank,
                             unsigned limit, c10d_trace_row **out, size_t *n)
{
    return c10d_store_trace_job(s, job, group, rank, limit, out, n, NULL);
}
