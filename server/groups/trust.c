/* A run's credentials (trust.h): its job key, checked at each world
 * arrival, and the rule that only its ranks write its store. */
#include "groups/trust.h"

#include "engine/engine.h"
#include "engine/request.h"
#include "groups/groups.h"
#include "groups/runs.h"

#include "log.h"
#include "run_scope.h"

#include <c10d/errors.h>
#include <c10d/pg.h>
#include <stdio.h>
#include <string.h>

/* Compared in time that depends on the lengths only, as the token is:
 * the reply must not tell a guesser how much of a key was right. */
static int same_key(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < la && i < lb; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

static void arrival_who(const c10ds_request *r, char *buf, size_t cap)
{
    const C10dpb__GroupJoin *m = r->pb->group_join;
    const char *host = m->host ? m->host : r->pb->who && r->pb->who->host ? r->pb->who->host : "?";
    snprintf(buf, cap, "host %s pid %d", host, m->has_pid ? m->pid : 0);
}

int c10ds_trust_arrival(c10ds_engine *e, c10ds_request *r, uint64_t gen, int started)
{
    const C10dpb__GroupJoin *m = r->pb->group_join;
    const char *key = m->job_key && *m->job_key ? m->job_key : NULL;
    if (key && strlen(key) > C10DS_MAX_JOB_KEY_BYTES)
        return c10ds_fail(r, C10D_EINVAL, "a job key (C10D_JOB_KEY) of %zu bytes: the limit is "
                          "%d", strlen(key), C10DS_MAX_JOB_KEY_BYTES), -1;
    char who[300];
    arrival_who(r, who, sizeof who);
    sqlite3_stmt *s;
    if (started) {
        s = c10ds_groups_stmt(&e->groups, GS_RUN_KEY_PUT);
        sqlite3_bind_text(s, 1, m->job, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
        if (key)
            sqlite3_bind_text(s, 3, key, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(s, 3);
        sqlite3_bind_text(s, 4, who, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        if (rc != SQLITE_DONE)
            return c10ds_fail(r, C10D_ERROR, "database error recording the job key of job %s",
                              m->job), -1;
        return 0;
    }
    s = c10ds_groups_stmt(&e->groups, GS_RUN_KEY_GET);
    sqlite3_bind_text(s, 1, m->job, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    int rc = sqlite3_step(s), ok = 1, had = 0;
    char by[300] = "";
    if (rc == SQLITE_ROW) {
        const char *have = (const char *)sqlite3_column_text(s, 0);
        snprintf(by, sizeof by, "%s", (const char *)sqlite3_column_text(s, 1));
        had = have != NULL;
        ok = have ? key && same_key(have, key) : !key;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return c10ds_fail(r, C10D_ERROR, "database error reading the job key of job %s", m->job),
               -1;
    if (ok)
        return 0;
    const char *why = !had ? "without a job key, and this rank brings one (C10D_JOB_KEY)"
                      : key ? "with another job key than this rank's (C10D_JOB_KEY)"
                            : "with a job key, and this rank has none (C10D_JOB_KEY is not set)";
    c10ds_warn("refused rank %d of job %s generation %llu from %s (client #%08x): the run was "
               "started by %s %s", m->rank, m->job, (unsigned long long)gen, who,
               c10ds_client_tag(r->pb->who ? r->pb->who->client_id : 0), by, why);
    return c10ds_fail(r, C10D_EAUTH, "rank %d of job %s cannot join generation %llu: that run "
                      "was started by %s %s; if that process is not part of this job, someone "
                      "else holds the job's name: stop it or pick another name (C10D_JOB, "
                      "c10d-run --job)", m->rank, m->job, (unsigned long long)gen, by, why), -1;
}

int c10ds_trust_store_write(c10ds_engine *e, c10ds_request *r, const char *key)
{
    char job[C10D_MAX_JOB_BYTES + 2];
    uint64_t gen;
    uint64_t client = r->pb->who ? r->pb->who->client_id : 0;
    /* An operator's write (c10d-ctl --write) is on the record, allowed
     * or not. */
    if (r->pb->has_operator_write && r->pb->operator_write)
        c10ds_info("an operator (c10d-ctl --write, client #%08x) writes key '%s'",
                   c10ds_client_tag(client), key);
    if (!c10d_run_scope_parse(key, job, sizeof job, &gen))
        return 0;
    sqlite3_stmt *s = c10ds_groups_stmt(&e->groups, GS_MEMBER_OF_CLIENT);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)client);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_ROW)
        return 0;
    if (rc != SQLITE_DONE)
        return c10ds_fail(r, C10D_ERROR, "database error checking the writer of key '%s'", key),
               -1;
    /* A generation whose records were reclaimed is no run's, now or
     * later (numbers never repeat): a straggler's late key, or an
     * operator deleting one, harms nobody there. */
    s = c10ds_groups_stmt(&e->groups, GS_RUN_KEY_GET);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    int started = sqlite3_step(s) == SQLITE_ROW;
    sqlite3_reset(s);
    c10ds_job j;
    uint64_t next = c10ds_groups_job(&e->groups, job, &j) == 1 ? j.generation
                                                                : c10ds_runs_first_generation(e);
    if (!started && gen < next)
        return 0;
    /* A store client names no host or pid (its requests carry its id
     * only): the line says what it knows. */
    const C10dpb__Identity *w = r->pb->who;
    char from[300] = "";
    if (w && w->host)
        snprintf(from, sizeof from, " (host %s pid %d)", w->host, w->has_pid ? w->pid : 0);
    c10ds_warn("refused a write of key '%s' from client #%08x%s: it is no rank of job %s "
               "generation %llu", key, c10ds_client_tag(client), from, job,
               (unsigned long long)gen);
    if (!started)
        return c10ds_fail(r, C10D_EAUTH, "key '%s' is in the store of generation %llu of job %s, "
                          "which has not started: nobody writes a run's store before its ranks "
                          "arrive", key, (unsigned long long)gen, job), -1;
    return c10ds_fail(r, C10D_EAUTH, "key '%s' is in the store of job %s generation %llu, which "
                      "only that run's ranks write (this client joined no rank of it)", key, job,
                      (unsigned long long)gen), -1;
}
