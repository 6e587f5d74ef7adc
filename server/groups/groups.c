/* Jobs, members and groups over SQLite (groups.h): the statements, and the
 * reads and writes of each table: a job's generations, a member's state and
 * where it stopped, a group's row, its ranks (rows, compared by hash) and
 * its members' arrivals. */
#include "groups/groups.h"

#include "db/db.h"

#include "c10d_hash.h"
#include "c10d_time.h"
#include "log.h"
#include "member_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static const char *const sql[GS_COUNT] = {
    /* trust.c: is this client a rank of the run; the run's job key */
    [GS_MEMBER_OF_CLIENT] = "SELECT 1 FROM members INDEXED BY members_client WHERE job = ?1 AND "
                            "generation = ?2 AND client_id = ?3 LIMIT 1",
    [GS_RUN_KEY_GET] = "SELECT job_key, coalesce(key_by, '') FROM runs WHERE job = ?1 AND "
                       "generation = ?2",
    [GS_RUN_KEY_PUT] = "UPDATE runs SET job_key = ?3, key_by = ?4 WHERE job = ?1 AND "
                       "generation = ?2",
    [GS_JOB_GET] = "SELECT generation, world_size, formed, version FROM jobs WHERE job = ?1",
    [GS_JOB_PUT] = "INSERT OR REPLACE INTO jobs(job, generation, world_size, formed, version, "
                   "created_ms) VALUES(?1, ?2, ?3, 0, coalesce((SELECT version FROM jobs WHERE "
                   "job = ?1), 0) + 1, ?4)",
    [GS_JOB_FORMED] = "UPDATE jobs SET formed = 1 WHERE job = ?1 AND generation = ?2",
    [GS_JOB_BUMP] = "UPDATE jobs SET version = version + 1 WHERE job = ?1",
    [GS_JOB_LIST] = "SELECT job, generation, world_size, formed FROM jobs WHERE ?1 IS NULL OR "
                    "job = ?1 ORDER BY job",
    /* Endpoints of older generations are of no use to anyone. */
    [GS_JOB_PRUNE_GM] = "DELETE FROM group_members WHERE job = ?1 AND generation < ?2",
    [GS_MEMBER_GET] = "SELECT host, pid, client_id, state, coalesce(reason, ''), "
                      "coalesce(activity, ''), changed_ms, last_seen_ms FROM members WHERE "
                      "job = ?1 AND generation = ?2 AND rank = ?3",
    [GS_MEMBER_PUT] = "INSERT OR REPLACE INTO members(job, generation, rank, host, pid, "
                      "client_id, pipe, state, arrived_ms, changed_ms, last_seen_ms) "
                      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, 'alive', ?8, ?8, ?8)",
    [GS_MEMBER_STATE] = "UPDATE members SET state = ?4, reason = ?5, changed_ms = ?6 WHERE "
                        "job = ?1 AND generation = ?2 AND rank = ?3 AND state = 'alive'",
    [GS_FINALS_PUT] = "INSERT OR REPLACE INTO member_finals(job, generation, rank, grp, seq) "
                      "VALUES(?1, ?2, ?3, ?4, ?5)",
    [GS_FINALS_OF] = "SELECT grp, seq FROM member_finals WHERE job = ?1 AND generation = ?2 AND "
                     "rank = ?3 ORDER BY grp",
    [GS_MEMBER_SEEN] = "UPDATE members SET last_seen_ms = ?4, pipe = ?5, activity = "
                       "coalesce(?6, activity) WHERE job = ?1 AND generation = ?2 AND rank = ?3",
    [GS_MEMBERS_BY_PIPE] = "SELECT job, generation, rank FROM members WHERE pipe = ?1 AND "
                           "state = 'alive'",
    [GS_MEMBERS_STALE] = "SELECT job, generation, rank, last_seen_ms FROM members WHERE "
                         "state = 'alive' AND last_seen_ms < ?1",
    [GS_MEMBERS_OF_GEN] = "SELECT rank, state, host, pid, coalesce(reason, ''), "
                          "coalesce(activity, ''), changed_ms, last_seen_ms FROM members "
                          "WHERE job = ?1 AND generation = ?2 ORDER BY rank",
    /* Once per arrival in a rendezvous: the partial index reads the lost
     * members only (the planner, without statistics, takes the primary
     * key and reads the whole generation, N² rows for a rendezvous). */
    [GS_MEMBERS_LOST] = "SELECT rank, state, host, pid, coalesce(reason, ''), "
                        "coalesce(activity, ''), changed_ms, last_seen_ms "
                        "FROM members INDEXED BY members_lost "
                        "WHERE job = ?1 AND generation = ?2 AND state != 'alive' ORDER BY rank",
    /* Whether a run is over (every leave and death asks): the partial
     * index of schema 10 finds the first alive member, or none, at once. */
    [GS_MEMBERS_ALIVE] = "SELECT rank, host, pid FROM members INDEXED BY members_alive "
                         "WHERE job = ?1 AND generation = ?2 AND state = 'alive' ORDER BY rank",
    [GS_GROUP_GET] = "SELECT ranks_hash, size, arrived, formed, secret FROM groups WHERE job = ?1 "
                     "AND generation = ?2 AND name = ?3",
    [GS_GROUP_PUT] = "INSERT INTO groups(job, generation, name, ranks_hash, size, secret) "
                     "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    /* A group migrated from schema 7 learns its hash at first read. */
    [GS_GROUP_HASH] = "UPDATE groups SET ranks_hash = ?4 WHERE job = ?1 AND generation = ?2 AND "
                      "name = ?3",
    [GS_GRANKS_PUT] = "INSERT INTO group_ranks(job, generation, name, idx, rank) VALUES(?1, ?2, "
                      "?3, ?4, ?5)",
    [GS_GRANKS_LIST] = "SELECT idx, rank FROM group_ranks WHERE job = ?1 AND generation = ?2 AND "
                       "name = ?3 ORDER BY idx",
    [GS_GROUP_ARRIVED] = "UPDATE groups SET arrived = arrived + 1, formed = (arrived + 1 = size) "
                         "WHERE job = ?1 AND generation = ?2 AND name = ?3",
    [GS_GROUPS_OF_GEN] = "SELECT name, size, arrived, formed FROM groups WHERE job = ?1 AND "
                         "generation = ?2 ORDER BY name",
    [GS_GM_PUT] = "INSERT OR IGNORE INTO group_members(job, generation, name, idx, rank, "
                  "endpoint) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [GS_GM_LIST] = "SELECT idx, endpoint FROM group_members WHERE job = ?1 AND generation = ?2 "
                   "AND name = ?3 ORDER BY idx",
    [GS_GM_HOSTS] = "SELECT gm.idx, m.host FROM group_members gm JOIN members m ON m.job = gm.job "
                    "AND m.generation = gm.generation AND m.rank = gm.rank WHERE gm.job = ?1 AND "
                    "gm.generation = ?2 AND gm.name = ?3 ORDER BY m.host, gm.idx",
    [GS_GM_ONE] = "SELECT endpoint FROM group_members WHERE job = ?1 AND generation = ?2 AND "
                  "name = ?3 AND idx = ?4",
    /* At startup: connections belong to the previous process. Members get
     * a heartbeat timeout's grace to reconnect (their watch updates pipe). */
    [GS_RESET_PIPES] = "UPDATE members SET pipe = 0, last_seen_ms = ?1 WHERE state = 'alive'",
    [GS_TRACE_PUT] = "INSERT OR REPLACE INTO coll_trace(job, generation, name, rank, first_seq, "
                     "last_seq, what, state, entered_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                     "?9)",
    /* first_seq <= last_seq: the bound on first_seq (the key's last
     * column) deletes nothing more, and makes this a seek to the rows that
     * go instead of a scan of all the rank's rows. */
    [GS_TRACE_PRUNE] = "DELETE FROM coll_trace WHERE job = ?1 AND generation = ?2 AND name = ?3 "
                       "AND rank = ?4 AND first_seq < ?5 AND last_seq < ?5",
    /* A finished run's post-mortem (verify_history.c): a rank's trace,
     * newest first; the group's finding; where each member stood. */
    [GS_TRACE_OF] = "SELECT first_seq, last_seq, what, state, entered_ms FROM coll_trace WHERE "
                    "job = ?1 AND generation = ?2 AND name = ?3 AND rank = ?4 ORDER BY first_seq "
                    "DESC",
    [GS_FINDING_GET] = "SELECT seq, status, report FROM findings WHERE job = ?1 AND generation = "
                       "?2 AND name = ?3",
    [GS_PROGRESS_PUT] = "INSERT OR REPLACE INTO group_progress(job, generation, name, idx, rank, "
                        "entered, completed, entered_ms, last) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                        "?8, ?9)",
    [GS_PROGRESS_OF] = "SELECT idx, rank, entered, completed, entered_ms, last FROM "
                       "group_progress WHERE job = ?1 AND generation = ?2 AND name = ?3 ORDER BY "
                       "idx",
    [GS_FINDING_PUT] = "INSERT OR IGNORE INTO findings(job, generation, name, seq, status, report, "
                       "at_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
};

_Static_assert((int)C10DPB__MEMBER_STATE__MEMBER_ALIVE == (int)C10DC_MEMBER_ALIVE &&
                   (int)C10DPB__MEMBER_STATE__MEMBER_LEFT == (int)C10DC_MEMBER_LEFT &&
                   (int)C10DPB__MEMBER_STATE__MEMBER_DEAD == (int)C10DC_MEMBER_DEAD,
               "proto's MemberState is numbered as common/member_state.h");

C10dpb__MemberState c10ds_state_column(sqlite3_stmt *s, int col)
{
    return (C10dpb__MemberState)c10dc_member_state_of_word(
        (const char *)sqlite3_column_text(s, col));
}

const char *c10ds_state_word(C10dpb__MemberState state)
{
    return c10dc_member_state_word((int)state);
}

int c10ds_groups_init(c10ds_groups *g, c10ds_db *db)
{
    memset(g, 0, sizeof *g);
    g->db = db;
    for (int i = 0; i < GS_COUNT; i++) {
        const char *q = sql[i];
        if (!(g->st[i] = c10ds_db_prepare(db, q))) {
            c10ds_groups_fini(g);
            return -1;
        }
    }
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_RESET_PIPES);
    sqlite3_bind_int64(s, 1, c10d_steady_wall_ms());
    sqlite3_step(s);
    sqlite3_reset(s);
    return 0;
}

void c10ds_groups_fini(c10ds_groups *g)
{
    for (int i = 0; i < GS_COUNT; i++)
        sqlite3_finalize(g->st[i]);
    memset(g, 0, sizeof *g);
}

static void bind_jg(sqlite3_stmt *s, const char *job, uint64_t gen)
{
    sqlite3_bind_text(s, 1, job, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
}

static void copy_col(sqlite3_stmt *s, int col, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static int step_done(sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        c10ds_error("database: %s", sqlite3_errmsg(sqlite3_db_handle(s)));
        return -1;
    }
    return 0;
}

int c10ds_groups_job(c10ds_groups *g, const char *job, c10ds_job *out)
{
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_JOB_GET);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s), found = rc == SQLITE_ROW;
    if (found) {
        out->generation = (uint64_t)sqlite3_column_int64(s, 0);
        out->world_size = sqlite3_column_int(s, 1);
        out->formed = sqlite3_column_int(s, 2);
        out->version = (uint64_t)sqlite3_column_int64(s, 3);
    }
    sqlite3_reset(s);
    return found ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

int c10ds_groups_new_generation(c10ds_groups *g, const char *job, uint64_t gen, int world_size)
{
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_JOB_PUT);
    bind_jg(s, job, gen);
    sqlite3_bind_int(s, 3, world_size);
    sqlite3_bind_int64(s, 4, c10d_steady_wall_ms());
    if (step_done(s) != 0)
        return -1;
    s = c10ds_groups_stmt(g, GS_JOB_PRUNE_GM);
    bind_jg(s, job, gen);
    return step_done(s);
}

int c10ds_groups_member(c10ds_groups *g, const char *job, uint64_t gen, int rank,
                        c10ds_member *out)
{
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_MEMBER_GET);
    bind_jg(s, job, gen);
    sqlite3_bind_int(s, 3, rank);
    int rc = sqlite3_step(s), found = rc == SQLITE_ROW;
    if (found) {
        copy_col(s, 0, out->host, sizeof out->host);
        out->pid = sqlite3_column_int(s, 1);
        out->client_id = (uint64_t)sqlite3_column_int64(s, 2);
        out->state = c10ds_state_column(s, 3);
        copy_col(s, 4, out->reason, sizeof out->reason);
        copy_col(s, 5, out->activity, sizeof out->activity);
        out->changed_ms = sqlite3_column_int64(s, 6);
        out->last_seen_ms = sqlite3_column_int64(s, 7);
    }
    sqlite3_reset(s);
    return found ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

int c10ds_groups_member_put(c10ds_groups *g, const char *job, uint64_t gen, int rank,
                            const char *host, int pid, uint64_t client_id, uint32_t pipe)
{
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_MEMBER_PUT);
    bind_jg(s, job, gen);
    sqlite3_bind_int(s, 3, rank);
    sqlite3_bind_text(s, 4, host ? host : "?", -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 5, pid);
    sqlite3_bind_int64(s, 6, (sqlite3_int64)client_id);
    sqlite3_bind_int64(s, 7, pipe);
    sqlite3_bind_int64(s, 8, c10d_steady_wall_ms());
    if (step_done(s) != 0)
        return -1;
    s = c10ds_groups_stmt(g, GS_JOB_BUMP);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_STATIC);
    return step_done(s);
}

int c10ds_groups_set_state(c10ds_groups *g, const char *job, uint64_t gen, int rank,
                           C10dpb__MemberState state, const char *reason,
                           C10dpb__GroupSeq *const *finals, size_t n_finals)
{
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_MEMBER_STATE);
    bind_jg(s, job, gen);
    sqlite3_bind_int(s, 3, rank);
    sqlite3_bind_text(s, 4, c10ds_state_word(state), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, reason, -1, SQLITE_STATIC);
    /* Strictly after the previous change, even within a millisecond: the
     * order of the stamps is the order the coordinator saw ranks go, which
     * is how c10d-run (and an operator) tells a rank that failed from the
     * peers that failed because of it a few hundred microseconds later. */
    int64_t now = c10d_steady_wall_ms();
    if (now <= g->last_change_ms)
        now = g->last_change_ms + 1;
    g->last_change_ms = now;
    sqlite3_bind_int64(s, 6, now);
    if (step_done(s) != 0 || sqlite3_changes(g->db->h) != 1)
        return 0;
    for (size_t i = 0; i < n_finals; i++) {
        if (!finals[i]->group)
            continue;
        s = c10ds_groups_stmt(g, GS_FINALS_PUT);
        bind_jg(s, job, gen);
        sqlite3_bind_int(s, 3, rank);
        sqlite3_bind_text(s, 4, finals[i]->group, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 5, (sqlite3_int64)finals[i]->seq);
        step_done(s);
    }
    s = c10ds_groups_stmt(g, GS_JOB_BUMP);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_STATIC);
    step_done(s);
    return 1;
}

int c10ds_groups_alive(c10ds_groups *g, const char *job, uint64_t gen, c10ds_alive_member *out,
                       int max)
{
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_MEMBERS_ALIVE);
    bind_jg(s, job, gen);
    int n = 0, rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n < max) {
            out[n].rank = sqlite3_column_int(s, 0);
            copy_col(s, 1, out[n].host, sizeof out[n].host);
            out[n].pid = sqlite3_column_int(s, 2);
        }
        n++;
        if (max == 0)
            break; /* whether any is: the first answers it */
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? n : -1;
}

void c10ds_groups_seen(c10ds_groups *g, const char *job, uint64_t gen, int rank, uint32_t pipe,
                       const char *activity)
{
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_MEMBER_SEEN);
    bind_jg(s, job, gen);
    sqlite3_bind_int(s, 3, rank);
    sqlite3_bind_int64(s, 4, c10d_steady_wall_ms());
    sqlite3_bind_int64(s, 5, pipe);
    if (activity)
        sqlite3_bind_text(s, 6, activity, -1, SQLITE_STATIC);
    step_done(s);
}

uint64_t c10ds_ranks_hash(const int32_t *ranks, size_t n)
{
    /* c10d_hash.h's FNV-1a, over each rank's four bytes (low first), so
     * that the hash is the same whatever the host's byte order. */
    uint64_t h = C10D_FNV64_BASIS;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = ranks ? (uint32_t)ranks[i] : (uint32_t)i;
        for (int b = 0; b < 4; b++)
            h = (h ^ ((r >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    }
    return h;
}

int32_t *c10ds_groups_ranks(c10ds_groups *g, const char *job, uint64_t gen, const char *name,
                            int size)
{
    int32_t *r = malloc((size_t)(size > 0 ? size : 1) * sizeof *r);
    if (!r)
        return NULL;
    for (int i = 0; i < size; i++)
        r[i] = i; /* no rows: the world in order */
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_GRANKS_LIST);
    bind_jg(s, job, gen);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_TRANSIENT);
    while (sqlite3_step(s) == SQLITE_ROW) {
        int idx = sqlite3_column_int(s, 0);
        if (idx >= 0 && idx < size)
            r[idx] = sqlite3_column_int(s, 1);
    }
    sqlite3_reset(s);
    return r;
}

/* The hash of a group whose row has none (migrated from schema 7), from
 * its rows, written back so that it is computed once. */
static int fill_ranks_hash(c10ds_groups *g, const char *job, uint64_t gen, const char *name,
                           c10ds_group *out)
{
    int32_t *r = c10ds_groups_ranks(g, job, gen, name, out->size);
    if (!r)
        return -1;
    out->ranks_hash = c10ds_ranks_hash(r, (size_t)out->size);
    free(r);
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_GROUP_HASH);
    bind_jg(s, job, gen);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, (sqlite3_int64)out->ranks_hash);
    return step_done(s);
}

int c10ds_groups_group(c10ds_groups *g, const char *job, uint64_t gen, const char *name,
                       c10ds_group *out)
{
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_GROUP_GET);
    bind_jg(s, job, gen);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s), found = rc == SQLITE_ROW, hashed = 1;
    if (found) {
        hashed = sqlite3_column_type(s, 0) != SQLITE_NULL;
        out->ranks_hash = (uint64_t)sqlite3_column_int64(s, 0);
        out->size = sqlite3_column_int(s, 1);
        out->arrived = sqlite3_column_int(s, 2);
        out->formed = sqlite3_column_int(s, 3);
        out->secret = (uint64_t)sqlite3_column_int64(s, 4);
    }
    sqlite3_reset(s);
    if (!hashed && fill_ranks_hash(g, job, gen, name, out) != 0)
        return -1;
    return found ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

int c10ds_groups_group_put(c10ds_groups *g, const char *job, uint64_t gen, const char *name,
                           const int32_t *ranks, size_t n_ranks, int size, uint64_t *ranks_hash,
                           uint64_t *secret)
{
    /* The group's data-plane secret: random, never 0 (0 means "none"). */
    *secret = 0;
    while (*secret == 0)
        if (getrandom(secret, sizeof *secret, 0) != (ssize_t)sizeof *secret)
            return -1;
    *ranks_hash = n_ranks ? c10ds_ranks_hash(ranks, n_ranks) : c10ds_ranks_hash(NULL, (size_t)size);
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_GROUP_PUT);
    bind_jg(s, job, gen);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, (sqlite3_int64)*ranks_hash);
    sqlite3_bind_int(s, 5, size);
    sqlite3_bind_int64(s, 6, (sqlite3_int64)*secret);
    if (step_done(s) != 0)
        return -1;
    s = g->st[GS_GRANKS_PUT];
    for (size_t i = 0; i < n_ranks; i++) { /* once per group: its members' arrivals read none */
        sqlite3_reset(s);
        bind_jg(s, job, gen);
        sqlite3_bind_text(s, 3, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, (sqlite3_int64)i);
        sqlite3_bind_int(s, 5, ranks[i]);
        if (step_done(s) != 0)
            return -1;
    }
    return 0;
}

int c10ds_groups_arrive(c10ds_groups *g, const char *job, uint64_t gen, const char *name, int idx,
                        int rank, const void *endpoint, size_t len)
{
    sqlite3_stmt *s = c10ds_groups_stmt(g, GS_GM_PUT);
    bind_jg(s, job, gen);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 4, idx);
    sqlite3_bind_int(s, 5, rank);
    sqlite3_bind_blob(s, 6, len ? endpoint : "", (int)len, SQLITE_STATIC);
    if (step_done(s) != 0 || sqlite3_changes(g->db->h) != 1)
        return 0;
    s = c10ds_groups_stmt(g, GS_GROUP_ARRIVED);
    bind_jg(s, job, gen);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_STATIC);
    step_done(s);
    return 1;
}
