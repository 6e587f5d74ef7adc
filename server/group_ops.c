/* Process groups on the wire: rendezvous (group_join), leave, the liveness
 * watch that doubles as the heartbeat, and the jobs listing c10d-ctl shows.
 *
 * A rendezvous parks every member's join on the group's key until the
 * last member arrives. Liveness: a member is dead when the NNG connection
 * it joined on closes (the listener reports it, see c10ds_groups_pipe_closed)
 * or when it sends no watch for --heartbeat-timeout; either way the job's
 * version is bumped and the watch key touched, so every other rank's
 * parked watch answers at once with who was lost. */
#include "engine.h"
#include "events.h"
#include "groups.h"

#include "c10d_time.h"
#include "log.h"

#include <c10d/pg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENDPOINT_BYTES 4096

static void watch_key(char *buf, size_t cap, const char *job, uint64_t gen)
{
    snprintf(buf, cap, "\x01live:%s:%llu", job, (unsigned long long)gen);
}

static void group_key(char *buf, size_t cap, const char *job, uint64_t gen, const char *name)
{
    snprintf(buf, cap, "\x01group:%s:%llu:%s", job, (unsigned long long)gen, name);
}

/* A member changed state: wake watchers and every group still forming in
 * that generation (its parked joins must learn a member is gone). */
void c10ds_groups_bump(c10ds_engine *e, const char *job, uint64_t gen)
{
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_JOB_BUMP);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    sqlite3_step(s);
    sqlite3_reset(s);
    char key[512];
    watch_key(key, sizeof key, job, gen);
    c10ds_waiters_touch(e->waiters, key);
}

static void membership_changed(c10ds_engine *e, const char *job, uint64_t gen)
{
    char key[512];
    watch_key(key, sizeof key, job, gen);
    c10ds_waiters_touch(e->waiters, key);
    c10ds_emit_membership_changed(e, job, gen);
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_GROUPS_OF_GEN);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (sqlite3_column_int(s, 4))
            continue; /* formed: nobody parked */
        group_key(key, sizeof key, job, gen, (const char *)sqlite3_column_text(s, 0));
        c10ds_waiters_touch(e->waiters, key);
    }
    sqlite3_reset(s);
}

static void mark(c10ds_engine *e, const char *job, uint64_t gen, int rank, const char *state,
                 const char *reason, const char *final_seqs)
{
    if (!c10ds_groups_set_state(&e->groups, job, gen, rank, state, reason, final_seqs))
        return;
    c10ds_info("job %s generation %llu: rank %d %s (%s)", job, (unsigned long long)gen, rank,
               state, reason);
    membership_changed(e, job, gen);
}

/* --- ranks lists: "0,1,5" <-> int arrays --- */

/* "0,1,5"; no list (the whole world, in order) is "", so that the
 * world's rendezvous never writes, reads or compares N numbers per rank. */
static char *ranks_text(const int32_t *r, size_t n)
{
    char *t = malloc(n * 12 + 1), *p = t;
    if (!t)
        return NULL;
    *p = '\0';
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, i ? ",%d" : "%d", r[i]);
    return t;
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

static void fill_member(sqlite3_stmt *s, C10dpb__MemberInfo *m)
{
    c10dpb__member_info__init(m);
    m->rank = sqlite3_column_int(s, 0);
    m->state = strdup((const char *)sqlite3_column_text(s, 1));
    m->host = strdup((const char *)sqlite3_column_text(s, 2));
    m->has_pid = m->has_changed_ms = m->has_last_seen_ms = 1;
    m->pid = sqlite3_column_int(s, 3);
    m->reason = strdup((const char *)sqlite3_column_text(s, 4));
    m->activity = strdup((const char *)sqlite3_column_text(s, 5));
    m->changed_ms = sqlite3_column_int64(s, 6);
    m->last_seen_ms = sqlite3_column_int64(s, 7);
    m->final_seqs = strdup((const char *)sqlite3_column_text(s, 8));
}

/* Members of a generation (all, or only those not alive). */
static C10dpb__MemberInfo **load_members(c10ds_engine *e, const char *job, uint64_t gen,
                                         int lost_only, size_t *n)
{
    sqlite3_stmt *s =
        c10ds_groups_stmt(&e->groups, lost_only ? GS_MEMBERS_LOST : GS_MEMBERS_OF_GEN);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    C10dpb__MemberInfo **v = NULL;
    size_t cap = 0;
    *n = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            C10dpb__MemberInfo **nv = realloc(v, cap * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        if (!(v[*n] = malloc(sizeof **v)))
            break;
        fill_member(s, v[(*n)++]);
    }
    sqlite3_reset(s);
    return v;
}

C10dpb__MemberInfo **c10ds_groups_lost(c10ds_engine *e, const char *job, uint64_t gen, size_t *n)
{
    return load_members(e, job, gen, 1, n);
}


/* --- group_join --- */

/* The endpoints of a formed group, from the cache or the database. */
static const ProtobufCBinaryData *formed_endpoints(c10ds_engine *e, const char *job, uint64_t gen,
                                                   const char *name, int size)
{
    c10ds_endpoints *c = &e->groups.formed;
    char key[512];
    group_key(key, sizeof key, job, gen, name);
    if (c->eps && c->size == size && strcmp(c->key, key) == 0)
        return c->eps;
    c10ds_endpoints_clear(c);
    if (!(c->eps = calloc((size_t)size, sizeof *c->eps)))
        return NULL;
    c->size = size;
    snprintf(c->key, sizeof c->key, "%s", key);
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_GM_LIST);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_TRANSIENT);
    /* A column's blob is only valid until the next step: copy each. */
    while (sqlite3_step(s) == SQLITE_ROW) {
        int idx = sqlite3_column_int(s, 0);
        size_t len = (size_t)sqlite3_column_bytes(s, 1);
        if (idx < 0 || idx >= size || c->eps[idx].data ||
            !(c->eps[idx].data = malloc(len ? len : 1)))
            continue;
        if (len)
            memcpy(c->eps[idx].data, sqlite3_column_blob(s, 1), len);
        c->eps[idx].len = len;
    }
    sqlite3_reset(s);
    /* Who shares a host: ranks ordered by (host, rank) and, per rank, its
     * host's range in that order. */
    c->by_host = calloc((size_t)size, sizeof *c->by_host);
    c->host_from = calloc((size_t)size, sizeof *c->host_from);
    c->host_to = calloc((size_t)size, sizeof *c->host_to);
    if (!c->by_host || !c->host_from || !c->host_to) {
        c10ds_endpoints_clear(c);
        return NULL;
    }
    s = c10ds_groups_stmt(&e->groups, GS_GM_HOSTS);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_TRANSIENT);
    int n = 0, from = 0;
    char prev[256] = "";
    while (sqlite3_step(s) == SQLITE_ROW && n < size) {
        int idx = sqlite3_column_int(s, 0);
        const char *host = (const char *)sqlite3_column_text(s, 1);
        if (idx < 0 || idx >= size)
            continue;
        if (n == 0 || strcmp(prev, host ? host : "") != 0) {
            for (int k = from; k < n; k++)
                c->host_to[c->by_host[k]] = n;
            from = n;
            snprintf(prev, sizeof prev, "%s", host ? host : "");
        }
        c->by_host[n] = idx;
        c->host_from[idx] = from;
        n++;
    }
    for (int k = from; k < n; k++)
        c->host_to[c->by_host[k]] = n;
    sqlite3_reset(s);
    return c->eps;
}

/* idx's host's members, in rank order (group ranks), from the cache. */
static int host_peers(const c10ds_endpoints *c, int idx, int32_t *out)
{
    int n = 0;
    for (int k = c->host_from[idx]; k < c->host_to[idx]; k++)
        out[n++] = c->by_host[k];
    for (int i = 1; i < n; i++) /* a host holds a few ranks: insertion sort */
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            int32_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

static c10ds_outcome reply_formed(c10ds_engine *e, c10ds_request *r, const char *name,
                                  uint64_t gen, int size, int idx, uint64_t secret)
{
    C10dpb__GroupJoin *m = r->pb->group_join;
    const ProtobufCBinaryData *eps = formed_endpoints(e, m->job, gen, name, size);
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
        const c10ds_endpoints *c = &e->groups.formed;
        int n = c->host_to[idx] - c->host_from[idx];
        ranks = malloc((size_t)(n ? n : 1) * sizeof *ranks);
        mine = malloc((size_t)(n ? n : 1) * sizeof *mine);
        if (!ranks || !mine) {
            free(ranks), free(mine);
            return c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory answering a rendezvous");
        }
        n = host_peers(c, idx, ranks);
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
    C10dpb__MemberInfo **lost = load_members(e, m->job, gen, 1, &n);
    if (!n) { /* the common case, once per arrival: no list to read */
        c10ds_groups_lost_free(lost, n);
        return 0;
    }
    int *ranks = c10ds_ranks_parse(grp->ranks, grp->size), failed = 0;
    for (size_t i = 0; ranks && i < n && !failed; i++)
        for (int j = 0; j < grp->size; j++)
            if (ranks[j] == lost[i]->rank && ranks[j] != m->rank) {
                c10ds_fail(r, C10D_EPEERLOST, "rendezvous of group %s (job %s, generation %llu) "
                           "cannot finish: rank %d (host %s, pid %d) %s (%s)", m->name, m->job,
                           (unsigned long long)gen, lost[i]->rank, lost[i]->host, lost[i]->pid,
                           lost[i]->state, lost[i]->reason);
                failed = 1;
                break;
            }
    free(ranks);
    c10ds_groups_lost_free(lost, n);
    return failed;
}

static c10ds_outcome join_timed_out(c10ds_engine *e, c10ds_request *r, uint64_t gen,
                                    const c10ds_group *grp)
{
    C10dpb__GroupJoin *m = r->pb->group_join;
    int *ranks = c10ds_ranks_parse(grp->ranks, grp->size);
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
        mark(e, m->job, gen, m->rank, "left", reason, NULL);
    }
    free(ranks), free(arrived), free(missing);
    return o;
}

/* The world's generation this rank joins, or 0 after failing r. */
static uint64_t world_generation(c10ds_engine *e, c10ds_request *r)
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
    if (held == 1 && strcmp(mem.state, "alive") == 0) {
        if (mem.client_id == client)
            return job.generation; /* this join resent */
        c10ds_fail(r, C10D_EINVAL, "rank %d of job %s is already held by host %s pid %d (alive, "
                   "generation %llu): two processes were given the same RANK, or the old job "
                   "is still running", m->rank, m->job, mem.host, mem.pid,
                   (unsigned long long)job.generation);
        return 0;
    }
    uint64_t gen = have ? job.generation : 0;
    if (!have || job.formed || held == 1) {
        /* A new job, or a restarted one: its ranks start a new generation
         * and never meet the old one's. */
        gen++;
        if (c10ds_groups_new_generation(&e->groups, m->job, gen, m->world_size) != 0) {
            c10ds_fail(r, C10D_ERROR, "database error starting job %s", m->job);
            return 0;
        }
        c10ds_info("job %s: generation %llu forming, world size %d (rank %d first)", m->job,
                   (unsigned long long)gen, m->world_size, m->rank);
        c10ds_emit_generation_started(e, m->job, gen);
    } else if (job.world_size != m->world_size) {
        c10ds_fail(r, C10D_EINVAL, "rank %d of job %s says WORLD_SIZE=%d, but generation %llu "
                   "is forming with world size %d", m->rank, m->job, m->world_size,
                   (unsigned long long)gen, job.world_size);
        return 0;
    }
    const char *host = m->host ? m->host : r->pb->who && r->pb->who->host ? r->pb->who->host : "?";
    int pid = m->has_pid ? m->pid : 0;
    if (c10ds_groups_member_put(&e->groups, m->job, gen, m->rank, host, pid, client, r->pipe) !=
        0) {
        c10ds_fail(r, C10D_ERROR, "database error recording rank %d of job %s", m->rank, m->job);
        return 0;
    }
    return gen;
}

static int validate_join(c10ds_engine *e, c10ds_request *r)
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
    if (ph == C10DS_FIRST) {
        if (validate_join(e, r) != 0)
            return C10DS_DONE;
        if (world) {
            if (!(gen = world_generation(e, r)))
                return C10DS_DONE;
        } else {
            c10ds_member mem;
            gen = m->generation;
            if (c10ds_groups_member(&e->groups, m->job, gen, m->rank, &mem) != 1)
                return c10ds_fail(r, C10D_ENOTFOUND, "rank %d is not a member of job %s "
                                  "generation %llu (call c10d_init first)", m->rank, m->job,
                                  (unsigned long long)gen);
            /* Only the client that joined the world as this rank may
             * arrive for it (and learn the group's data-plane secret). */
            if (c10ds_check_member_caller(e, r, m->job, gen, m->rank) != 0)
                return C10DS_DONE;
        }
        r->generation = gen;
    }
    c10ds_group grp = {0};
    int have = c10ds_groups_group(&e->groups, m->job, gen, m->name, &grp);
    int idx = 0; /* the caller's group rank (validate_join: it is listed) */
    if (m->n_members)
        while (m->members[idx] != m->rank)
            idx++;
    else
        idx = m->rank;
    if (ph == C10DS_FIRST) {
        char *want = ranks_text(m->members, m->n_members);
        int size = m->n_members ? (int)m->n_members : m->world_size;
        if (!want)
            return c10ds_fail(r, C10D_ENOMEM, "coordinator out of memory");
        /* Without a list the group is the world in order (its size was
         * checked against the job's); a row written before "" meant that
         * holds the same ranks spelled out. */
        if (have == 1 && m->n_members && strcmp(grp.ranks, want) != 0) {
            c10ds_outcome o = c10ds_fail(
                r, C10D_EINVAL, "group %s of job %s: rank %d asks for ranks [%.200s], another "
                "member created it with [%.200s]; every member must pass the same ranks in the "
                "same order", m->name, m->job, m->rank, want, grp.ranks);
            free(want);
            c10ds_groups_group_free(&grp);
            return o;
        }
        if (have != 1) {
            uint64_t secret;
            if (c10ds_groups_group_put(&e->groups, m->job, gen, m->name, want, size, &secret) !=
                0) {
                free(want);
                return c10ds_fail(r, C10D_ERROR, "database error creating group %s", m->name);
            }
            grp.ranks = want, grp.size = size, grp.joined = 0, grp.formed = 0;
            grp.secret = secret;
        } else {
            free(want);
        }
        if (c10ds_groups_arrive(&e->groups, m->job, gen, m->name, idx, m->rank, m->endpoint.data,
                                m->endpoint.len) == 1) {
            grp.joined++;
            if (grp.joined == grp.size) {
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
                group_key(key, sizeof key, m->job, gen, m->name);
                c10ds_waiters_touch(e->waiters, key);
            }
        }
    } else if (have != 1) {
        return c10ds_fail(r, C10D_ERROR, "group %s of job %s vanished", m->name, m->job);
    }
    c10ds_outcome o;
    if (grp.formed)
        o = reply_formed(e, r, m->name, gen, grp.size, idx, grp.secret);
    else if (fail_if_member_lost(e, r, gen, &grp))
        o = C10DS_DONE;
    else if (ph == C10DS_EXPIRED)
        o = join_timed_out(e, r, gen, &grp);
    else {
        group_key(key, sizeof key, m->job, gen, m->name);
        o = c10ds_park(e, r, ph, key, m->has_timeout_ms ? m->timeout_ms : 300000);
    }
    c10ds_groups_group_free(&grp);
    return o;
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
    c10ds_groups_group_free(&grp);
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

int c10ds_check_member_caller(c10ds_engine *e, c10ds_request *r, const char *job, uint64_t gen,
                              int rank)
{
    c10ds_member mem;
    uint64_t client = r->pb->who ? r->pb->who->client_id : 0;
    if (c10ds_groups_member(&e->groups, job, gen, rank, &mem) != 1 || mem.client_id == client)
        return 0;
    c10ds_warn("refused a request for rank %d of job %s from client %016llx: the rank was "
               "joined by client %016llx (host %s pid %d)", rank, job,
               (unsigned long long)client, (unsigned long long)mem.client_id, mem.host, mem.pid);
    c10ds_fail(r, C10D_EAUTH, "rank %d of job %s generation %llu was joined by another client "
               "(host %s pid %d); only that client may speak for it", rank, job,
               (unsigned long long)gen, mem.host, mem.pid);
    return -1;
}

/* --- leave, watch --- */

static c10ds_outcome op_group_leave(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__GroupLeave *m = r->pb->group_leave;
    if (c10ds_check_member_caller(e, r, m->job, m->generation, m->rank) != 0)
        return C10DS_DONE;
    if (m->activity)
        c10ds_groups_seen(&e->groups, m->job, m->generation, m->rank, r->pipe, m->activity);
    mark(e, m->job, m->generation, m->rank, "left", "called c10d_destroy", m->final_seqs);
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    return c10ds_reply(r, &rep);
}

static int died_before(const C10dpb__MemberInfo *a, const C10dpb__MemberInfo *b)
{
    return a->changed_ms < b->changed_ms || (a->changed_ms == b->changed_ms && a->rank < b->rank);
}

static int same_str(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* The cache's compact form, made once per version: every member that
 * left (a peer needs its final collectives), the first C10DS_LOST_DETAIL
 * that died in full, and the others that died as runs of consecutive
 * ranks with one state and reason. 0, or -1 out of memory. */
static void compact_clear(c10ds_lost_cache *lc)
{
    free(lc->detail);
    for (size_t i = 0; i < lc->n_ranges; i++) {
        free(lc->ranges[i]->state);
        free(lc->ranges[i]->reason);
        free(lc->ranges[i]);
    }
    free(lc->ranges);
    lc->detail = NULL, lc->ranges = NULL;
    lc->n_detail = lc->n_ranges = 0;
}

static int lost_compact(c10ds_lost_cache *lc)
{
    if (lc->compact)
        return 0;
    compact_clear(lc); /* what a failed attempt left */
    size_t n = lc->n;
    lc->detail = calloc(n ? n : 1, sizeof *lc->detail);
    lc->ranges = calloc(n ? n : 1, sizeof *lc->ranges);
    char *in_detail = calloc(n ? n : 1, 1);
    if (!lc->detail || !lc->ranges || !in_detail) {
        free(in_detail);
        compact_clear(lc);
        return -1;
    }
    /* The earliest deaths, by an insertion into a short sorted list. */
    size_t first[C10DS_LOST_DETAIL], nf = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(lc->v[i]->state, "dead") != 0)
            continue;
        size_t j = nf < C10DS_LOST_DETAIL ? nf++ : C10DS_LOST_DETAIL;
        if (j == C10DS_LOST_DETAIL && !died_before(lc->v[i], lc->v[first[j - 1]]))
            continue;
        if (j == C10DS_LOST_DETAIL)
            j--;
        for (; j > 0 && died_before(lc->v[i], lc->v[first[j - 1]]); j--)
            first[j] = first[j - 1];
        first[j] = i;
    }
    for (size_t k = 0; k < nf; k++)
        in_detail[first[k]] = 1;
    for (size_t i = 0; i < n; i++) { /* v is in rank order */
        C10dpb__MemberInfo *m = lc->v[i];
        if (strcmp(m->state, "dead") != 0 || in_detail[i]) {
            lc->detail[lc->n_detail++] = m;
            continue;
        }
        C10dpb__LostRange *last = lc->n_ranges ? lc->ranges[lc->n_ranges - 1] : NULL;
        if (last && last->last + 1 == m->rank && same_str(last->state, m->state) &&
            same_str(last->reason, m->reason)) {
            last->last = m->rank;
            continue;
        }
        C10dpb__LostRange *x = malloc(sizeof *x);
        if (!x) {
            free(in_detail);
            compact_clear(lc);
            return -1;
        }
        c10dpb__lost_range__init(x);
        x->first = x->last = m->rank;
        x->state = strdup(m->state ? m->state : "");
        x->reason = strdup(m->reason ? m->reason : "");
        x->has_changed_ms = 1;
        x->changed_ms = m->changed_ms;
        lc->ranges[lc->n_ranges++] = x;
        if (!x->state || !x->reason) {
            free(in_detail);
            compact_clear(lc);
            return -1;
        }
    }
    free(in_detail);
    lc->compact = 1;
    return 0;
}

static c10ds_outcome reply_watch(c10ds_engine *e, c10ds_request *r, uint64_t version)
{
    C10dpb__Watch *m = r->pb->watch;
    C10dpb__WatchReply w = C10DPB__WATCH_REPLY__INIT;
    w.has_version = 1;
    w.version = version;
    /* Every watcher woken by one change gets the same list: read it once
     * per membership version, not once per watcher (a host's death wakes
     * N watches). */
    c10ds_lost_cache *lc = &e->groups.lost;
    char key[512];
    watch_key(key, sizeof key, m->job, m->generation);
    if (!lc->valid || lc->version != version || strcmp(lc->key, key) != 0) {
        c10ds_lost_cache_clear(lc);
        lc->v = load_members(e, m->job, m->generation, 1, &lc->n);
        lc->version = version;
        lc->valid = 1;
        snprintf(lc->key, sizeof lc->key, "%s", key);
    }
    if (m->has_lost_ranges_ok && m->lost_ranges_ok && lost_compact(lc) == 0) {
        w.lost = lc->detail;
        w.n_lost = lc->n_detail;
        w.lost_ranges = lc->ranges;
        w.n_lost_ranges = lc->n_ranges;
    } else {
        w.lost = lc->v;
        w.n_lost = lc->n;
    }
    c10ds_emit_watch_reply(e, m->job, m->generation, &w); /* findings, joins */
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_WATCH;
    rep.watch = &w;
    c10ds_outcome o = c10ds_reply(r, &rep);
    c10ds_emit_watch_done(e, &w);
    return o;
}

static c10ds_outcome op_watch(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__Watch *m = r->pb->watch;
    c10ds_job job;
    if (c10ds_groups_job(&e->groups, m->job, &job) != 1)
        return c10ds_fail(r, C10D_ENOTFOUND, "no job %s on this coordinator", m->job);
    if (ph == C10DS_FIRST) {
        c10ds_member mem;
        if (c10ds_groups_member(&e->groups, m->job, m->generation, m->rank, &mem) != 1)
            return c10ds_fail(r, C10D_ENOTFOUND, "rank %d is not a member of job %s generation "
                              "%llu", m->rank, m->job, (unsigned long long)m->generation);
        if (c10ds_check_member_caller(e, r, m->job, m->generation, m->rank) != 0)
            return C10DS_DONE;
        c10ds_groups_seen(&e->groups, m->job, m->generation, m->rank, r->pipe, m->activity);
        c10ds_emit_watch_request(e, m); /* progress, join acknowledgements */
        if (job.version <= m->known_version && m->wait_ms > 0) {
            char key[512];
            watch_key(key, sizeof key, m->job, m->generation);
            return c10ds_park(e, r, ph, key, m->wait_ms < 60000 ? m->wait_ms : 60000);
        }
    }
    return reply_watch(e, r, job.version);
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
        j->members = load_members(e, j->job, j->generation, 0, &j->n_members);
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
            int size = sqlite3_column_int(s, 2);
            g->ranks = c10ds_ranks_parse((const char *)sqlite3_column_text(s, 1), size);
            g->n_ranks = g->ranks ? (size_t)size : 0;
            g->has_joined = g->has_formed = 1;
            g->joined = sqlite3_column_int(s, 3);
            g->formed = sqlite3_column_int(s, 4) != 0;
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

/* --- liveness events --- */

typedef struct {
    char job[256];
    uint64_t gen;
    int rank;
    int64_t seen;
} member_ref;

/* Collects (job, generation, rank[, last_seen]) rows first: marking a
 * member writes to the table the statement is reading. */
static member_ref *collect(sqlite3_stmt *s, size_t *n)
{
    member_ref *v = NULL;
    size_t cap = 0;
    *n = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 4;
            member_ref *nv = realloc(v, cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
        }
        member_ref *m = &v[(*n)++];
        snprintf(m->job, sizeof m->job, "%s", (const char *)sqlite3_column_text(s, 0));
        m->gen = (uint64_t)sqlite3_column_int64(s, 1);
        m->rank = sqlite3_column_int(s, 2);
        m->seen = sqlite3_column_count(s) > 3 ? sqlite3_column_int64(s, 3) : 0;
    }
    sqlite3_reset(s);
    return v;
}

void c10ds_groups_pipe_closed(c10ds_engine *e, uint32_t pipe)
{
    size_t n;
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_MEMBERS_BY_PIPE);
    sqlite3_bind_int64(s, 1, pipe);
    member_ref *v = collect(s, &n);
    for (size_t i = 0; i < n; i++)
        mark(e, v[i].job, v[i].gen, v[i].rank, "dead",
             "its connection to the coordinator closed: the process exited or was killed", NULL);
    free(v);
}

void c10ds_groups_sweep(c10ds_engine *e, int64_t now_ms)
{
    int timeout = e->cfg->heartbeat_timeout_ms;
    size_t n;
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_MEMBERS_STALE);
    sqlite3_bind_int64(s, 1, now_ms - timeout);
    member_ref *v = collect(s, &n);
    for (size_t i = 0; i < n; i++) {
        char why[128];
        snprintf(why, sizeof why, "no heartbeat for %lld ms (--heartbeat-timeout %d ms)",
                 (long long)(now_ms - v[i].seen), timeout);
        mark(e, v[i].job, v[i].gen, v[i].rank, "dead", why, NULL);
    }
    free(v);
}

const c10ds_op c10ds_group_ops[] = {
    {C10DPB__REQUEST__OP_GROUP_JOIN, "group_join", op_group_join, 0},
    {C10DPB__REQUEST__OP_GROUP_LEAVE, "group_leave", op_group_leave, 0},
    {C10DPB__REQUEST__OP_WATCH, "watch", op_watch, 0},
    {C10DPB__REQUEST__OP_JOBS, "jobs", op_jobs, 0},
    {C10DPB__REQUEST__OP_GROUP_ENDPOINTS, "group_endpoints", op_group_endpoints, 0},
    {0, NULL, NULL, 0},
};
