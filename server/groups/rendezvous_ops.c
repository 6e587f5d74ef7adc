/* Rendezvous on the wire: group_join parks every member's arrival on the
 * group's key until the last member arrives, then answers each with the
 * generation, the group's secret and (peers_on_demand) its own host's
 * endpoints; group_endpoints hands a member the endpoints of the peers it
 * links to when it first needs them. All of it O(N) for N members
 * (docs/process-groups.md, "Scale"). */
#include "config.h"
#include "engine/engine.h"
#include "engine/events.h"
#include "groups/groups.h"
#include "groups/liveness_ops.h"
#include "groups/trust.h"
#include "engine/ops.h"
#include "engine/request.h"
#include "engine/waiters.h"

#include "c10d_time.h"
#include "log.h"

#include <c10d/errors.h>
#include <c10d/pg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENDPOINT_BYTES 4096

/* --- ranks lists, worded --- */

/* "0,1,5" into buf, cut at cap - 1 characters: a refusal quotes both
 * lists, and a list of thousands need not be quoted whole. */
static void csv_ranks(char *buf, size_t cap, const int32_t *r, size_t n)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && off + 1 < cap; i++) {
        int w = snprintf(buf + off, cap - off, i ? ",%d" : "%d", r[i]);
        off = w < 0 || (size_t)w >= cap - off ? cap - 1 : off + (size_t)w;
    }
}

/* Writes "3, 7" (at most 16 listed) into buf. */
static void list_ranks(char *buf, size_t cap, const int *r, int n)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && off < cap; i++) {
        if (i == 16) {
            snprintf(buf + off, cap - off, " and %d more", n - 16);
            return;
        }
        off += (size_t)snprintf(buf + off, cap - off, i ? ", %d" : "%d", r[i]);
    }
}

/* --- group_join --- */

static c10ds_outcome reply_formed(c10ds_engine *e, c10ds_request *r, const char *name,
                                  uint64_t gen, int size, int idx, uint64_t secret)
{
    C10dpb__GroupJoin *m = r->pb->group_join;
    const ProtobufCBinaryData *eps =
        c10ds_groups_formed_endpoints(&e->groups, &e->endpoints, m->job, gen, name, size);
    if (!eps)
        return c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory answering a rendezvous");
    C10dpb__GroupJoinReply gj = C10DPB__GROUP_JOIN_REPLY__INIT;
    gj.has_generation = 1;
    gj.generation = gen;
    gj.has_secret = secret != 0;
    gj.secret = secret;
    int32_t *ranks = NULL;
    ProtobufCBinaryData *mine = NULL;
    if (m->has_peers_on_demand && m->peers_on_demand) {
        const c10ds_endpoints *c = &e->endpoints;
        int n = c->host_to[idx] - c->host_from[idx];
        ranks = malloc((size_t)(n ? n : 1) * sizeof *ranks);
        mine = malloc((size_t)(n ? n : 1) * sizeof *mine);
        if (!ranks || !mine) {
            free(ranks), free(mine);
            return c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory answering a rendezvous");
        }
        n = c10ds_endpoints_host_peers(c, idx, ranks);
        for (int i = 0; i < n; i++)
            mine[i] = eps[ranks[i]];
        gj.n_endpoint_ranks = gj.n_endpoints = (size_t)n;
        gj.endpoint_ranks = ranks;
        gj.endpoints = mine;
    } else {
        gj.n_endpoints = (size_t)size;
        gj.endpoints = (ProtobufCBinaryData *)eps;
    }
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_GROUP_JOIN;
    rep.group_join = &gj;
    c10ds_outcome o = c10ds_reply(r, &rep);
    free(ranks);
    free(mine);
    return o;
}

/* A member of the group is no longer alive: the rendezvous cannot finish. */
static int fail_if_member_lost(c10ds_engine *e, c10ds_request *r, uint64_t gen,
                               const c10ds_group *grp)
{
    C10dpb__GroupJoin *m = r->pb->group_join;
    size_t n;
    C10dpb__MemberInfo **lost = c10ds_members_load(&e->groups, m->job, gen, 1, &n);
    if (!n) { /* the common case, once per arrival: no list to read */
        c10ds_groups_lost_free(lost, n);
        return 0;
    }
    int32_t *ranks = c10ds_groups_ranks(&e->groups, m->job, gen, m->name, grp->size);
    int failed = 0;
    for (size_t i = 0; ranks && i < n && !failed; i++)
        for (int j = 0; j < grp->size; j++)
            if (ranks[j] == lost[i]->rank && ranks[j] != m->rank) {
                c10ds_fail(r, C10D_EPEERLOST,
                           "rendezvous of group %s (job %s, generation %llu) "
                           "cannot finish: rank %d (host %s, pid %d) %s (%s)",
                           m->name, m->job, (unsigned long long)gen, lost[i]->rank, lost[i]->host,
                           lost[i]->pid, c10ds_state_word(lost[i]->state), lost[i]->reason);
                failed = 1;
                break;
            }
    free(ranks);
    c10ds_groups_lost_free(lost, n);
    return failed;
}

static c10ds_outcome arrival_timed_out(c10ds_engine *e, c10ds_request *r, uint64_t gen,
                                       const c10ds_group *grp)
{
    C10dpb__GroupJoin *m = r->pb->group_join;
    int32_t *ranks = c10ds_groups_ranks(&e->groups, m->job, gen, m->name, grp->size);
    char *arrived = calloc((size_t)grp->size + 1, 1);
    int *missing = calloc((size_t)grp->size + 1, sizeof *missing), nm = 0;
    if (!ranks || !arrived || !missing) {
        free(ranks), free(arrived), free(missing);
        return c10ds_fail(r, C10D_ETIMEDOUT, "rendezvous of group %s timed out", m->name);
    }
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_GM_LIST);
    sqlite3_bind_text(s, 1, m->job, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    sqlite3_bind_text(s, 3, m->name, -1, SQLITE_STATIC);
    while (sqlite3_step(s) == SQLITE_ROW) {
        int idx = sqlite3_column_int(s, 0);
        if (idx >= 0 && idx < grp->size)
            arrived[idx] = 1;
    }
    sqlite3_reset(s);
    for (int i = 0; i < grp->size; i++)
        if (!arrived[i])
            missing[nm++] = ranks[i];
    char list[256];
    list_ranks(list, sizeof list, missing, nm);
    int64_t waited = c10d_now_ms() - r->received_ms;
    char why[512];
    snprintf(why, sizeof why, "rendezvous of group %s (job %s, generation %llu): waiting for "
             "rank%s %s of %d (%d arrived) after %lld.%lld s", m->name, m->job,
             (unsigned long long)gen, nm == 1 ? "" : "s", list, grp->size, grp->size - nm,
             (long long)(waited / 1000), (long long)(waited % 1000 / 100));
    c10ds_outcome o = c10ds_fail(r, C10D_ETIMEDOUT, "%s", why);
    /* This rank gives up, so the world can no longer form: the others
     * learn it at once, with the cause. */
    if (strcmp(m->name, "world") == 0) {
        char reason[600];
        snprintf(reason, sizeof reason, "gave up: its %s", why);
        c10ds_member_mark(e, m->job, gen, m->rank, C10DPB__MEMBER_STATE__MEMBER_LEFT, reason, NULL,
                          0);
    }
    free(ranks), free(arrived), free(missing);
    return o;
}

/* A member whose list differs from the one the group was created with:
 * refused, quoting both. */
static c10ds_outcome refuse_other_ranks(c10ds_engine *e, c10ds_request *r, uint64_t gen,
                                        const c10ds_group *grp)
{
    C10dpb__GroupJoin *m = r->pb->group_join;
    int32_t *theirs = c10ds_groups_ranks(&e->groups, m->job, gen, m->name, grp->size);
    if (!theirs)
        return c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory");
    char want[201], have[201];
    csv_ranks(want, sizeof want, m->members, m->n_members);
    csv_ranks(have, sizeof have, theirs, (size_t)grp->size);
    free(theirs);
    return c10ds_fail(r, C10D_EINVAL, "group %s of job %s: rank %d asks for ranks [%s], another "
                      "member created it with [%s]; every member must pass the same ranks in the "
                      "same order", m->name, m->job, m->rank, want, have);
}

/* Two jobs nobody named both run as "default" (C10D_JOB's default) and
 * meet in one generation: what to do instead, in every refusal that can
 * come of it. */
#define SIDE_BY_SIDE_HINT                                                                          \
    "to run jobs side by side, name each one: C10D_JOB=NAME, c10d-run --job NAME, "              \
    "init_method coord://HOST:PORT/NAME, or torchrun --rdzv_id NAME"

/* A rank with no holder in a generation that formed and still runs: not a
 * member of it, and starting the next generation would take the job from
 * under its alive ranks (their requests would wait on a generation that is
 * no longer the job's). Refused, naming the running generation. */
/* "rank 0 on host h pid 1, rank 1 on host h pid 2, ..." into who: the
 * first n_some of the alive members, "..." if there are more. */
static void alive_list(char *who, size_t cap, int alive, const c10ds_alive_member *some,
                       int n_some)
{
    size_t off = 0;
    who[0] = '\0';
    for (int i = 0; i < n_some && off < cap; i++)
        off += (size_t)snprintf(who + off, cap - off, "%srank %d on host %s pid %d",
                                i ? ", " : "", some[i].rank, some[i].host, some[i].pid);
    if (alive > n_some && off < cap)
        snprintf(who + off, cap - off, ", ...");
}

static void refuse_running(c10ds_request *r, const c10ds_job *job, int alive,
                           const c10ds_alive_member *some, int n_some)
{
    C10dpb__GroupJoin *m = r->pb->group_join;
    char who[512];
    alive_list(who, sizeof who, alive, some, n_some);
    c10ds_fail(r, C10D_EINVAL, "rank %d of job %s (WORLD_SIZE=%d) cannot join: generation %llu "
               "of job %s formed with world size %d and is running (%d of its ranks alive: %s), "
               "and rank %d is not one of them; if this is another job, %s", m->rank, m->job,
               m->world_size, (unsigned long long)job->generation, m->job, job->world_size, alive,
               who, m->rank, SIDE_BY_SIDE_HINT);
}

/* A rank whose holder in the current generation left or died came back
 * (a restart; a process that initialises again after c10d_destroy) while
 * others there are alive: it waited for them to leave or die, and they did
 * not before its rendezvous timeout. Starting the next generation under
 * them would have taken the job from under its alive ranks. */
static c10ds_outcome refuse_while_alive(c10ds_engine *e, c10ds_request *r)
{
    C10dpb__GroupJoin *m = r->pb->group_join;
    c10ds_job job = {0};
    c10ds_alive_member some[3];
    int alive = 0;
    if (c10ds_groups_job(&e->groups, m->job, &job) == 1)
        alive = c10ds_groups_alive(&e->groups, m->job, job.generation, some, 3);
    if (alive < 0)
        alive = 0;
    char who[512];
    alive_list(who, sizeof who, alive, some, alive < 3 ? alive : 3);
    int64_t waited = c10d_now_ms() - r->received_ms;
    return c10ds_fail(r, C10D_ETIMEDOUT, "rank %d of job %s waited %lld.%lld s for generation "
                      "%llu to end before starting the next, and %d of its ranks are still alive "
                      "(%s): a restart begins once every rank of the old run has exited or "
                      "called c10d_destroy; if this is another job, %s", m->rank, m->job,
                      (long long)(waited / 1000), (long long)(waited % 1000 / 100),
                      (unsigned long long)job.generation, alive, who,
                      SIDE_BY_SIDE_HINT);
}

/* The world's generation this rank arrives in, or 0 after failing r or, with
 * *wait set, when it must wait. A rank starts the next generation when
 * the job is new, or when the current one is over (nobody in it alive:
 * never arrive in a run whose store was deleted; a restart whose holder there
 * left or died waits for that); it arrives in the current one while that
 * forms; it is refused where it would break a running one. */
static uint64_t world_generation(c10ds_engine *e, c10ds_request *r, int *wait)
{
    C10dpb__GroupJoin *m = r->pb->group_join;
    uint64_t client = r->pb->who ? r->pb->who->client_id : 0;
    c10ds_job job;
    c10ds_member mem;
    int have = c10ds_groups_job(&e->groups, m->job, &job);
    if (have < 0) {
        c10ds_fail(r, C10D_ERROR, "database error reading job %s", m->job);
        return 0;
    }
    int held = have ? c10ds_groups_member(&e->groups, m->job, job.generation, m->rank, &mem) : 0;
    if (held < 0) {
        /* Not knowing whether the rank has a holder, never write one: the
         * member row is INSERT OR REPLACE, and would overwrite an alive
         * holder's. */
        c10ds_fail(r, C10D_ERROR, "database error reading rank %d of job %s generation %llu: %s",
                   m->rank, m->job, (unsigned long long)job.generation,
                   sqlite3_errmsg(e->db->h));
        return 0;
    }
    if (held == 1 && mem.state == C10DPB__MEMBER_STATE__MEMBER_ALIVE) {
        if (mem.client_id == client)
            return job.generation; /* this arrival resent */
        c10ds_fail(r, C10D_EINVAL, "rank %d of job %s is already held by host %s pid %d (alive, "
                   "generation %llu): two processes were given the same RANK, or the old job "
                   "is still running; if these are two jobs, %s", m->rank, m->job, mem.host,
                   mem.pid, (unsigned long long)job.generation, SIDE_BY_SIDE_HINT);
        return 0;
    }
    c10ds_alive_member some[3];
    int alive = have ? c10ds_groups_alive(&e->groups, m->job, job.generation, some,
                                          held == 0 && job.formed ? 3 : 0)
                     : 0;
    if (alive < 0) {
        c10ds_fail(r, C10D_ERROR, "database error reading job %s", m->job);
        return 0;
    }
    if (held == 0 && job.formed && alive) {
        refuse_running(r, &job, alive, some, alive < 3 ? alive : 3);
        return 0;
    }
    if (held == 1 && alive) {
        /* Its holder left or died, others live on: never start the next
         * generation under them (their requests would wait on a
         * generation that is no longer the job's). Wait for them. */
        *wait = 1;
        return 0;
    }
    uint64_t gen = have ? job.generation : 0;
    int started = !have || !alive || held == 1;
    if (started) {
        /* A new job, a finished one, or a restarted one: its ranks start
         * a new generation and never meet the old one's. A job with no
         * row (new, or reclaimed) starts above every generation reclaimed
         * on this coordinator: never in a run's store used before. */
        gen = have ? job.generation + 1 : c10ds_runs_first_generation(e);
        if (!gen || c10ds_groups_new_generation(&e->groups, m->job, gen, m->world_size) != 0) {
            c10ds_fail(r, C10D_ERROR, "database error starting job %s", m->job);
            return 0;
        }
        c10ds_info("job %s: generation %llu forming, world size %d (rank %d first)", m->job,
                   (unsigned long long)gen, m->world_size, m->rank);
        c10ds_emit_generation_started(e, m->job, gen);
    } else if (job.world_size != m->world_size) {
        c10ds_fail(r, C10D_EINVAL, "rank %d of job %s says WORLD_SIZE=%d, but generation %llu "
                   "is forming with world size %d; if these are two jobs, %s", m->rank, m->job,
                   m->world_size, (unsigned long long)gen, job.world_size, SIDE_BY_SIDE_HINT);
        return 0;
    }
    /* Before it is a member: a refused arrival takes no slot and learns
     * nothing of the run. */
    if (c10ds_trust_arrival(e, r, gen, started) != 0)
        return 0;
    const char *host = m->host ? m->host : r->pb->who && r->pb->who->host ? r->pb->who->host : "?";
    int pid = m->has_pid ? m->pid : 0;
    if (c10ds_groups_member_put(&e->groups, m->job, gen, m->rank, host, pid, client, r->pipe) !=
        0) {
        c10ds_fail(r, C10D_ERROR, "database error recording rank %d of job %s", m->rank, m->job);
        return 0;
    }
    return gen;
}

static int validate_arrival(c10ds_engine *e, c10ds_request *r)
{
    C10dpb__GroupJoin *m = r->pb->group_join;
    if (!*m->job || !*m->name)
        return c10ds_fail(r, C10D_EINVAL, "rendezvous needs a job and a group name"), -1;
    if (strlen(m->job) > C10D_MAX_JOB_BYTES || strlen(m->name) > C10D_MAX_JOB_BYTES)
        return c10ds_fail(r, C10D_EINVAL, "a %s name of %zu bytes: the limit is %d "
                          "(C10D_MAX_JOB_BYTES)", strlen(m->job) > C10D_MAX_JOB_BYTES ? "job" :
                          "group", strlen(strlen(m->job) > C10D_MAX_JOB_BYTES ? m->job : m->name),
                          C10D_MAX_JOB_BYTES), -1;
    if (m->world_size > 0 && (uint32_t)m->world_size > e->cfg->max_world_size)
        return c10ds_fail(r, C10D_ETOOBIG, "world size %d of job %s exceeds the coordinator's "
                          "limit of %u ranks (--max-world-size)", m->world_size, m->job,
                          e->cfg->max_world_size), -1;
    if (m->world_size < 1 || m->rank < 0 || m->rank >= m->world_size)
        return c10ds_fail(r, C10D_EINVAL, "rank %d is out of range for world size %d", m->rank,
                          m->world_size), -1;
    if (m->endpoint.len > MAX_ENDPOINT_BYTES)
        return c10ds_fail(r, C10D_ETOOBIG, "endpoint of %zu bytes (limit %d)", m->endpoint.len,
                          MAX_ENDPOINT_BYTES), -1;
    if (m->n_members > (size_t)m->world_size)
        return c10ds_fail(r, C10D_EINVAL, "group %s names %zu ranks, more than the world of %d",
                          m->name, m->n_members, m->world_size), -1;
    /* No member list: the whole world, the caller included. A list must
     * name the caller (op_group_join finds its index there), each rank of
     * the world at most once: one pass, with a bitmap. */
    if (!m->n_members)
        return 0;
    uint8_t *seen = calloc(((size_t)m->world_size + 7) / 8, 1);
    if (!seen)
        return c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory"), -1;
    int self = 0, bad = 0;
    for (size_t i = 0; i < m->n_members && !bad; i++) {
        int32_t x = m->members[i];
        if ((bad = x < 0 || x >= m->world_size))
            c10ds_fail(r, C10D_EINVAL, "group %s names rank %d, outside the world of %d",
                       m->name, x, m->world_size);
        else if ((bad = (seen[x / 8] & (1u << (x % 8))) != 0))
            c10ds_fail(r, C10D_EINVAL, "group %s names rank %d twice", m->name, x);
        else
            seen[x / 8] |= (uint8_t)(1u << (x % 8));
        self |= x == m->rank;
    }
    free(seen);
    if (bad)
        return -1;
    if (!self)
        return c10ds_fail(r, C10D_EINVAL, "rank %d joins group %s but is not one of its members",
                          m->rank, m->name), -1;
    return 0;
}

static c10ds_outcome op_group_join(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__GroupJoin *m = r->pb->group_join;
    int world = strcmp(m->name, "world") == 0;
    uint64_t gen = r->generation;
    char key[512];
    /* arriving: first seen, or done waiting for the last generation to end */
    int arriving = ph == C10DS_FIRST || (world && !gen);
    if (arriving) {
        if (ph == C10DS_FIRST && validate_arrival(e, r) != 0)
            return C10DS_DONE;
        if (world) {
            int wait = 0;
            if (!(gen = world_generation(e, r, &wait)) && !wait)
                return C10DS_DONE;
            if (wait && ph == C10DS_EXPIRED)
                return refuse_while_alive(e, r);
            if (wait) { /* woken by every change of the generation's members */
                c10ds_job job;
                if (c10ds_groups_job(&e->groups, m->job, &job) != 1)
                    return c10ds_fail(r, C10D_ERROR, "database error reading job %s", m->job);
                if (ph == C10DS_FIRST)
                    c10ds_info("job %s: rank %d waits for generation %llu to end (its holder "
                               "there is gone, other ranks are alive)", m->job, m->rank,
                               (unsigned long long)job.generation);
                c10ds_watch_key(key, sizeof key, m->job, job.generation);
                return c10ds_park(e, r, ph, key, c10ds_wire_ms(m->has_timeout_ms, m->timeout_ms,
                                                                C10D_GROUP_JOIN_WAIT_DEFAULT_MS));
            }
        } else {
            c10ds_member mem;
            gen = m->generation;
            if (c10ds_groups_member(&e->groups, m->job, gen, m->rank, &mem) != 1)
                return c10ds_fail(r, C10D_ENOTFOUND, "rank %d is not a member of job %s "
                                  "generation %llu (call c10d_init first)", m->rank, m->job,
                                  (unsigned long long)gen);
            /* Only the client that arrived in the world as this rank may
             * arrive for it (and learn the group's data-plane secret). */
            if (c10ds_check_member_caller(e, r, m->job, gen, m->rank) != 0)
                return C10DS_DONE;
        }
        r->generation = gen;
    }
    c10ds_group grp = {0};
    int have = c10ds_groups_group(&e->groups, m->job, gen, m->name, &grp);
    int idx = 0; /* the caller's group rank (validate_arrival: it is listed) */
    if (m->n_members)
        while (m->members[idx] != m->rank)
            idx++;
    else
        idx = m->rank;
    if (arriving) {
        int size = m->n_members ? (int)m->n_members : m->world_size;
        /* Without a list the group is the world in order (its size was
         * checked against the job's). A list is compared by its hash, one
         * pass over the request's own ranks: the creator's are read only
         * to word the refusal. */
        if (have == 1 && m->n_members &&
            (grp.size != size || grp.ranks_hash != c10ds_ranks_hash(m->members, m->n_members)))
            return refuse_other_ranks(e, r, gen, &grp);
        if (have != 1) {
            if (c10ds_groups_group_put(&e->groups, m->job, gen, m->name, m->members, m->n_members,
                                       size, &grp.ranks_hash, &grp.secret) != 0)
                return c10ds_fail(r, C10D_ERROR, "database error creating group %s", m->name);
            grp.size = size, grp.arrived = 0, grp.formed = 0;
        }
        if (c10ds_groups_arrive(&e->groups, m->job, gen, m->name, idx, m->rank, m->endpoint.data,
                                m->endpoint.len) == 1) {
            grp.arrived++;
            if (grp.arrived == grp.size) {
                grp.formed = 1;
                if (world) {
                    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_JOB_FORMED);
                    sqlite3_bind_text(s, 1, m->job, -1, SQLITE_STATIC);
                    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
                    sqlite3_step(s);
                    sqlite3_reset(s);
                }
                c10ds_info("job %s generation %llu: group %s formed (%d ranks)", m->job,
                           (unsigned long long)gen, m->name, grp.size);
                c10ds_group_key(key, sizeof key, m->job, gen, m->name);
                c10ds_waiters_touch(e->waiters, key);
            }
        }
    } else if (have != 1) {
        return c10ds_fail(r, C10D_ERROR, "group %s of job %s vanished", m->name, m->job);
    }
    if (grp.formed)
        return reply_formed(e, r, m->name, gen, grp.size, idx, grp.secret);
    if (fail_if_member_lost(e, r, gen, &grp))
        return C10DS_DONE;
    if (ph == C10DS_EXPIRED)
        return arrival_timed_out(e, r, gen, &grp);
    c10ds_group_key(key, sizeof key, m->job, gen, m->name);
    return c10ds_park(e, r, ph, key, c10ds_wire_ms(m->has_timeout_ms, m->timeout_ms,
                                                                C10D_GROUP_JOIN_WAIT_DEFAULT_MS));
}

/* The most endpoints one group_endpoints request may ask for: with
 * endpoints of up to MAX_ENDPOINT_BYTES the reply stays under 4 MiB. */
#define MAX_ENDPOINTS_PER_REQUEST 1024

/* --- group_endpoints: a member fetches the endpoints of the peers it
 * links to, when it first needs them (peers_on_demand) --- */
static c10ds_outcome op_group_endpoints(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    (void)ph;
    C10dpb__GroupEndpoints *m = r->pb->group_endpoints;
    if (m->n_ranks > MAX_ENDPOINTS_PER_REQUEST)
        return c10ds_fail(r, C10D_ETOOBIG, "%zu endpoints asked for in one request (limit %d)",
                          m->n_ranks, MAX_ENDPOINTS_PER_REQUEST);
    if (c10ds_check_member_caller(e, r, m->job, m->generation, m->rank) != 0)
        return C10DS_DONE;
    c10ds_group grp = {0};
    int have = c10ds_groups_group(&e->groups, m->job, m->generation, m->name, &grp);
    int formed = have == 1 && grp.formed, size = grp.size;
    if (!formed)
        return c10ds_fail(r, C10D_ENOTFOUND, "group %s of job %s generation %llu has not formed",
                          m->name, m->job, (unsigned long long)m->generation);
    ProtobufCBinaryData *eps = calloc(m->n_ranks ? m->n_ranks : 1, sizeof *eps);
    if (!eps)
        return c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory");
    c10ds_outcome o = C10DS_DONE;
    int failed = 0;
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_GM_ONE);
    for (size_t i = 0; i < m->n_ranks && !failed; i++) {
        int idx = m->ranks[i];
        if (idx < 0 || idx >= size) {
            o = c10ds_fail(r, C10D_EINVAL, "group %s has no rank %d (size %d)", m->name, idx,
                           size);
            failed = 1;
            break;
        }
        sqlite3_reset(s);
        sqlite3_bind_text(s, 1, m->job, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, (sqlite3_int64)m->generation);
        sqlite3_bind_text(s, 3, m->name, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 4, idx);
        if (sqlite3_step(s) != SQLITE_ROW) {
            o = c10ds_fail(r, C10D_ERROR, "rank %d of group %s has no endpoint stored", idx,
                           m->name);
            failed = 1;
            break;
        }
        size_t len = (size_t)sqlite3_column_bytes(s, 0);
        if (!(eps[i].data = malloc(len ? len : 1))) {
            o = c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory");
            failed = 1;
            break;
        }
        if (len)
            memcpy(eps[i].data, sqlite3_column_blob(s, 0), len);
        eps[i].len = len;
    }
    sqlite3_reset(s);
    if (!failed) {
        C10dpb__GroupJoinReply gj = C10DPB__GROUP_JOIN_REPLY__INIT;
        gj.has_generation = 1;
        gj.generation = m->generation;
        gj.n_endpoints = gj.n_endpoint_ranks = m->n_ranks;
        gj.endpoints = eps;
        gj.endpoint_ranks = m->ranks;
        C10dpb__Reply rep = C10DPB__REPLY__INIT;
        rep.result_case = C10DPB__REPLY__RESULT_GROUP_ENDPOINTS;
        rep.group_endpoints = &gj;
        o = c10ds_reply(r, &rep);
    }
    for (size_t i = 0; i < m->n_ranks; i++)
        free(eps[i].data);
    free(eps);
    return o;
}

const c10ds_op c10ds_rendezvous_ops[] = {
    {C10DPB__REQUEST__OP_GROUP_JOIN, "group_join", op_group_join, 0},
    {C10DPB__REQUEST__OP_GROUP_ENDPOINTS, "group_endpoints", op_group_endpoints, 0},
    {0, NULL, NULL, 0},
};
