/* Runs (runs.h): started with their generation, over with their last
 * alive member, their store keys deleted then and by the sweep, their
 * records after the retention, a bounded number of rows a sweep. */
#include "groups/runs.h"

#include "config.h"
#include "db/db.h"
#include "engine/engine.h"
#include "engine/events.h"
#include "groups/groups.h"
#include "store/store.h"

#include "c10d_time.h"
#include "log.h"
#include "run_scope.h"

#include <c10d/pg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *table, *key;
} per_run[] = {
#define PER_RUN_ENTRY(t, k) {#t, k},
    C10DS_PER_RUN_TABLES(PER_RUN_ENTRY)
#undef PER_RUN_ENTRY
};
_Static_assert(sizeof per_run / sizeof *per_run == RS_COUNT - RS_TABLES,
               "one bounded delete per table of per-run records");

/* meta's row: the highest generation of any job whose row was reclaimed. */
#define FLOOR_NAME "runs.generation_floor"

static const char *const sql[RS_TABLES] = {
    [RS_START] = "INSERT OR REPLACE INTO runs(job, generation, started_ms, ended_ms, keys_ms) "
                 "VALUES(?1, ?2, ?3, NULL, NULL)",
    [RS_END] = "UPDATE runs SET ended_ms = ?3 WHERE job = ?1 AND generation = ?2 AND "
               "ended_ms IS NULL",
    [RS_OVER] = "SELECT ended_ms IS NOT NULL FROM runs WHERE job = ?1 AND generation = ?2",
    [RS_KEYS_DUE] = "SELECT job, generation FROM runs INDEXED BY runs_keys_left WHERE ended_ms "
                    "IS NOT NULL AND keys_ms IS NULL ORDER BY ended_ms LIMIT ?1",
    [RS_KEYS_DONE] = "UPDATE runs SET keys_ms = ?3 WHERE job = ?1 AND generation = ?2",
    /* Records go once the keys have: the sweep deletes those first. */
    [RS_DUE] = "SELECT job, generation, ended_ms FROM runs INDEXED BY runs_ended WHERE "
               "ended_ms IS NOT NULL AND ended_ms <= ?1 AND keys_ms IS NOT NULL "
               "ORDER BY ended_ms LIMIT ?2",
    [RS_FORGET] = "DELETE FROM runs WHERE job = ?1 AND generation = ?2",
    /* Before the job's row goes (RS_JOB_GONE, the same condition), its
     * generation raises the floor: the name, should it come back, starts
     * above it, and so does every other new name. */
    [RS_FLOOR_RAISE] = "INSERT INTO meta(name, value) SELECT '" FLOOR_NAME "', generation FROM "
                       "jobs WHERE job = ?1 AND NOT EXISTS (SELECT 1 FROM runs WHERE job = ?1) "
                       "ON CONFLICT(name) DO UPDATE SET value = max(CAST(value AS INTEGER), "
                       "CAST(excluded.value AS INTEGER))",
    [RS_FLOOR_GET] = "SELECT CAST(value AS INTEGER) FROM meta WHERE name = '" FLOOR_NAME "'",
    /* The job's row goes with its last run: the job's current generation
     * is over and reclaimed, and no older one (a survivor of a restart)
     * is still running or waiting for its retention. */
    [RS_JOB_GONE] = "DELETE FROM jobs WHERE job = ?1 AND NOT EXISTS (SELECT 1 FROM runs WHERE "
                    "job = ?1)",
};

int c10ds_runs_init(c10ds_runs *r, c10ds_db *db)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < RS_COUNT; i++) {
        char q[512];
        if (i >= RS_TABLES) {
            /* LIMIT on the run's primary-key range, then each row by its
             * key: DELETE ... LIMIT is a compile-time option of SQLite. */
            const char *t = per_run[i - RS_TABLES].table, *k = per_run[i - RS_TABLES].key;
            snprintf(q, sizeof q, "DELETE FROM %s WHERE (job, generation, %s) IN (SELECT job, "
                     "generation, %s FROM %s WHERE job = ?1 AND generation = ?2 LIMIT ?3)",
                     t, k, k, t);
        }
        if (!(r->st[i] = c10ds_db_prepare(db, i < RS_TABLES ? sql[i] : q))) {
            c10ds_runs_fini(r);
            return -1;
        }
    }
    return 0;
}

void c10ds_runs_fini(c10ds_runs *r)
{
    for (int i = 0; i < RS_COUNT; i++)
        sqlite3_finalize(r->st[i]);
    memset(r, 0, sizeof *r);
}

static sqlite3_stmt *stmt(c10ds_runs *r, int id, const char *job, uint64_t gen)
{
    sqlite3_stmt *s = r->st[id];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (job) {
        sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(s, 2, (sqlite3_int64)gen);
    }
    return s;
}

/* Runs s to completion; the rows it changed, or -1 (logged). */
static int64_t run_stmt(sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        c10ds_error("runs: %s", sqlite3_errmsg(sqlite3_db_handle(s)));
        return -1;
    }
    return sqlite3_changes64(sqlite3_db_handle(s));
}

/* --- the end of a run --- */

/* The run's store, "jobs/<job>/<generation>/", into scope (a name too
 * long for one is one the coordinator never accepted): 0 if none. */
static size_t run_scope(char scope[C10D_RUN_SCOPE_BYTES(C10D_MAX_JOB_BYTES)], const char *job,
                        uint64_t gen)
{
    return c10d_run_scope(scope, C10D_RUN_SCOPE_BYTES(C10D_MAX_JOB_BYTES), job, gen);
}

/* The run's store keys are all gone: recorded, so the sweep stops
 * looking and the records may go after the retention. */
static int keys_done(c10ds_engine *e, const char *job, uint64_t gen)
{
    sqlite3_stmt *s = stmt(&e->runs, RS_KEYS_DONE, job, gen);
    sqlite3_bind_int64(s, 3, c10d_steady_wall_ms());
    return run_stmt(s) < 0 ? -1 : 0;
}

/* If no member of (job, gen) is alive, the run is over: its end is
 * recorded, the other modules let go of it, and its first RUNS_END_KEYS
 * store keys go (the rest in the sweeps), once. */
static void end_if_over(c10ds_engine *e, const char *job, uint64_t gen)
{
    if (c10ds_groups_alive(&e->groups, job, gen, NULL, 0) != 0)
        return; /* someone is alive (or the database failed: try at the next change) */
    sqlite3_stmt *s = stmt(&e->runs, RS_END, job, gen);
    sqlite3_bind_int64(s, 3, c10d_steady_wall_ms());
    if (run_stmt(s) != 1)
        return; /* over already, or no such run */
    c10ds_emit_run_ended(e, job, gen);
    char scope[C10D_RUN_SCOPE_BYTES(C10D_MAX_JOB_BYTES)] = "";
    int64_t keys = run_scope(scope, job, gen)
                       ? c10ds_store_delete_prefix(&e->store, scope, RUNS_END_KEYS)
                       : 0;
    if (keys < 0)
        return; /* logged; the sweep deletes them */
    if (keys < RUNS_END_KEYS && keys_done(e, job, gen) == 0) {
        c10ds_info("job %s generation %llu: run over (no member alive); %lld store key%s under "
                   "%s deleted", job, (unsigned long long)gen, (long long)keys,
                   keys == 1 ? "" : "s", scope);
        return;
    }
    c10ds_info("job %s generation %llu: run over (no member alive); %lld store keys under %s "
               "deleted, the rest go in the sweeps", job, (unsigned long long)gen,
               (long long)keys, scope);
}

static void on_membership_changed(c10ds_engine *e, const char *job, uint64_t gen)
{
    end_if_over(e, job, gen);
}

static void on_generation_started(c10ds_engine *e, const char *job, uint64_t gen)
{
    sqlite3_stmt *s = stmt(&e->runs, RS_START, job, gen);
    sqlite3_bind_int64(s, 3, c10d_steady_wall_ms());
    run_stmt(s);
    /* The generation before is over if nobody in it is alive: it started
     * again because of that (or its first arrival was never recorded, and
     * no member will ever end it). */
    if (gen > 1)
        end_if_over(e, job, gen - 1);
}

/* --- reclaiming --- */

/* What the engine keeps in memory for (job, gen) goes first: the
 * listeners' state (verification's groups and their traces, join
 * regions), and the groups' caches, keyed by the run. */
static void forget_in_memory(c10ds_engine *e, const char *job, uint64_t gen)
{
    c10ds_emit_run_reclaimed(e, job, gen);
    char key[512];
    c10ds_watch_key(key, sizeof key, job, gen);
    if (!strcmp(e->lost_cache.key, key))
        c10ds_lost_cache_clear(&e->lost_cache);
    c10ds_group_key(key, sizeof key, job, gen, "");
    if (!strncmp(e->endpoints.key, key, strlen(key)))
        c10ds_endpoints_clear(&e->endpoints);
}

/* Deletes up to budget rows of (job, gen); *done once nothing of it is
 * left (its row and, with its last run, the job's row go then). Returns
 * the rows deleted, or -1. */
static int64_t reclaim_run(c10ds_engine *e, const char *job, uint64_t gen, int64_t budget,
                           int *done)
{
    c10ds_runs *rs = &e->runs;
    int64_t used = 0, n;
    *done = 0;
    forget_in_memory(e, job, gen);
    for (int t = RS_TABLES; t < RS_COUNT; t++) {
        sqlite3_stmt *s = stmt(rs, t, job, gen);
        sqlite3_bind_int64(s, 3, budget - used);
        if ((n = run_stmt(s)) < 0)
            return -1;
        if ((used += n) >= budget)
            return used;
    }
    /* The keys went after the run ended; these were written since (a rank
     * that left and wrote on, a resent write). */
    char scope[C10D_RUN_SCOPE_BYTES(C10D_MAX_JOB_BYTES)];
    if (run_scope(scope, job, gen)) {
        if ((n = c10ds_store_delete_prefix(&e->store, scope, budget - used)) < 0)
            return -1;
        if ((used += n) >= budget)
            return used;
    }
    if (run_stmt(stmt(rs, RS_FORGET, job, gen)) < 0)
        return -1;
    sqlite3_stmt *s = stmt(rs, RS_FLOOR_RAISE, NULL, 0);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    if (run_stmt(s) < 0)
        return -1;
    s = stmt(rs, RS_JOB_GONE, NULL, 0);
    sqlite3_bind_text(s, 1, job, -1, SQLITE_TRANSIENT);
    if ((n = run_stmt(s)) < 0)
        return -1;
    *done = 1 + (n > 0); /* 2: the job's row went too */
    return used;
}

/* Deletes up to budget store keys of the runs over whose keys are not all
 * gone yet, the longest over first. Returns the keys deleted, or -1. */
static int64_t delete_keys(c10ds_engine *e, int64_t budget)
{
    c10ds_runs *rs = &e->runs;
    struct {
        char job[C10D_MAX_JOB_BYTES + 1];
        uint64_t gen;
    } due[RUNS_RECLAIM_RUNS];
    int n_due = 0, rc;
    sqlite3_stmt *s = stmt(rs, RS_KEYS_DUE, NULL, 0);
    sqlite3_bind_int(s, 1, RUNS_RECLAIM_RUNS);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && n_due < RUNS_RECLAIM_RUNS) {
        const unsigned char *j = sqlite3_column_text(s, 0);
        snprintf(due[n_due].job, sizeof due[n_due].job, "%.*s", C10D_MAX_JOB_BYTES,
                 j ? (const char *)j : "");
        due[n_due++].gen = (uint64_t)sqlite3_column_int64(s, 1);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return -1;
    int64_t total = 0;
    for (int i = 0; i < n_due && total < budget; i++) {
        if (strcmp(rs->keys_job, due[i].job) || rs->keys_gen != due[i].gen) {
            memcpy(rs->keys_job, due[i].job, sizeof rs->keys_job);
            rs->keys_gen = due[i].gen;
            rs->keys = 0; /* a new one: count afresh */
        }
        char scope[C10D_RUN_SCOPE_BYTES(C10D_MAX_JOB_BYTES)] = "";
        int64_t want = budget - total, n = 0;
        if (run_scope(scope, due[i].job, due[i].gen) &&
            (n = c10ds_store_delete_prefix(&e->store, scope, want)) < 0)
            return -1;
        total += n;
        rs->keys += n;
        if (n == want)
            break; /* perhaps more: the next sweep goes on */
        if (keys_done(e, due[i].job, due[i].gen) != 0)
            return -1;
        c10ds_info("job %s generation %llu: %lld more store key%s under %s deleted; none is left",
                   due[i].job, (unsigned long long)due[i].gen, (long long)rs->keys,
                   rs->keys == 1 ? "" : "s", scope);
        rs->keys_job[0] = '\0';
        rs->keys = 0;
    }
    return total;
}

typedef struct {
    char job[C10D_MAX_JOB_BYTES + 1];
    uint64_t gen;
    int64_t ended_ms;
} due_run;

int64_t c10ds_runs_reclaim(c10ds_engine *e, int64_t now_ms, int64_t budget)
{
    c10ds_runs *rs = &e->runs;
    int64_t total = delete_keys(e, budget);
    if (total < 0)
        return -1;
    if (total >= budget)
        return total;
    int64_t retention_ms = e->cfg->retention_s * 1000;
    /* Runs in batches of RUNS_RECLAIM_RUNS until the sweep's rows are
     * spent: the rows bound the engine's time, not the runs (2,000 short
     * jobs, a few rows each, waited 16 runs a sweep). Each batch is read
     * first: the deletes change the table being read. */
    for (int batch = 0; batch < RUNS_RECLAIM_BATCHES && total < budget; batch++) {
        due_run due[RUNS_RECLAIM_RUNS];
        int n_due = 0, rc, all_done = 1;
        sqlite3_stmt *s = stmt(rs, RS_DUE, NULL, 0);
        sqlite3_bind_int64(s, 1, now_ms - retention_ms);
        sqlite3_bind_int(s, 2, RUNS_RECLAIM_RUNS);
        while ((rc = sqlite3_step(s)) == SQLITE_ROW && n_due < RUNS_RECLAIM_RUNS) {
            const unsigned char *j = sqlite3_column_text(s, 0);
            snprintf(due[n_due].job, sizeof due[n_due].job, "%.*s", C10D_MAX_JOB_BYTES,
                     j ? (const char *)j : "");
            due[n_due].gen = (uint64_t)sqlite3_column_int64(s, 1);
            due[n_due].ended_ms = sqlite3_column_int64(s, 2);
            n_due++;
        }
        sqlite3_reset(s);
        if (rc != SQLITE_DONE && rc != SQLITE_ROW)
            return -1;
        for (int i = 0; i < n_due && total < budget; i++) {
            due_run *d = &due[i];
            if (strcmp(rs->job, d->job) || rs->gen != d->gen) /* a new one: count afresh */
                rs->rows = 0;
            memcpy(rs->job, d->job, sizeof rs->job);
            rs->gen = d->gen;
            int done;
            int64_t n = reclaim_run(e, rs->job, rs->gen, budget - total, &done);
            if (n < 0)
                return -1;
            total += n;
            rs->rows += n;
            if (!done) {
                all_done = 0;
                break;
            }
            c10ds_info("job %s generation %llu: records reclaimed (%lld rows), over for %lld s "
                       "(--retention %lld s)%s", rs->job, (unsigned long long)rs->gen,
                       (long long)rs->rows, (long long)((now_ms - d->ended_ms) / 1000),
                       (long long)e->cfg->retention_s,
                       done == 2 ? "; nothing of the job is left" : "");
            rs->job[0] = '\0';
            rs->rows = 0;
        }
        if (!all_done || n_due < RUNS_RECLAIM_RUNS)
            break; /* the budget ran out in a run, or no run is due any more */
    }
    return total;
}

int c10ds_run_over(c10ds_engine *e, const char *job, uint64_t gen)
{
    sqlite3_stmt *s = stmt(&e->runs, RS_OVER, job, gen);
    int rc = sqlite3_step(s), over = rc == SQLITE_ROW && sqlite3_column_int(s, 0);
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? over : -1;
}

uint64_t c10ds_runs_first_generation(c10ds_engine *e)
{
    sqlite3_stmt *s = stmt(&e->runs, RS_FLOOR_GET, NULL, 0);
    int rc = sqlite3_step(s);
    int64_t floor = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        c10ds_error("runs: %s", sqlite3_errmsg(sqlite3_db_handle(s)));
        return 0;
    }
    return (uint64_t)(floor > 0 ? floor : 0) + 1;
}

static void on_sweep(c10ds_engine *e)
{
    c10ds_runs_reclaim(e, c10d_steady_wall_ms(), RUNS_RECLAIM_ROWS);
}

const c10ds_event_listener c10ds_runs_listener = {
    .name = "runs",
    .membership_changed = on_membership_changed,
    .generation_started = on_generation_started,
    .sweep = on_sweep,
};
