/* bench_runs: what the end of a run costs the engine, without the network,
 * on a real SQLite file in WAL mode like c10d-coord's.
 *
 *   prefix ops    counting and deleting the 20 keys under a run's prefix
 *                 with 1,000,000 keys after it in the store (a primary-key
 *                 range read only its lower bound once, and scanned to the
 *                 end of the table)
 *   run end       a run of 2 ranks with K keys in its store: the batch of
 *                 the leave that ends it (one transaction, commit included:
 *                 the engine serves nobody else meanwhile), then the sweeps
 *                 that delete what it left, until the prefix is empty
 *                 (how many, the longest)
 *
 *   bench_runs [KEYS_AFTER]   (default 1000000) */
#include "engine/engine.h"
#include "engine_fixture.h"
#include "engine_request.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static uint64_t next_id = 1;

static c10ds_request *join_req(const char *job, int rank)
{
    C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
    m.job = (char *)job;
    m.name = "world";
    m.rank = rank;
    m.world_size = 2;
    m.has_timeout_ms = 1;
    m.timeout_ms = 60000;
    m.host = "node1";
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
    pb.group_join = &m;
    return engine_request(&pb, (uint64_t)rank + 1, next_id++);
}

static c10ds_request *leave_req(const char *job, uint64_t gen, int rank)
{
    return engine_request_leave((uint64_t)rank + 1, next_id++, job, gen, rank);
}

/* n keys "<prefix><i>" in one transaction. */
static void fill(c10ds_db *db, const char *prefix, long n)
{
    char q[512];
    snprintf(q, sizeof q, "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE "
             "i < %ld) INSERT INTO kv(key, value, updated_ms) SELECT '%s' || printf('%%09d', i), "
             "x'00', 0 FROM c",
             n - 1, prefix);
    char *err = NULL;
    if (sqlite3_exec(db->h, q, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "bench_runs: %s\n", err);
        exit(1);
    }
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static long long keys_under(c10ds_engine *e, const char *prefix)
{
    return (long long)c10ds_store_count(&e->store, prefix);
}

int main(int argc, char **argv)
{
    long after = argc > 1 ? atol(argv[1]) : 1000000;
    engine_fixture fx;
    engine_fixture_init(&fx, "bench-runs");
    /* The unit tests' limits fit what the bench sends; its clocks are
     * long: nothing is pruned, declared dead or reclaimed behind it. */
    fx.cfg.dedup_window_s = 600;
    fx.cfg.heartbeat_timeout_ms = 600000;
    fx.cfg.retention_s = 86400; /* records stay: only the keys are timed */
    fx.cfg.listen_url = "bench://";
    fx.manual_sweeps = 1; /* sweeps only where the bench says */
    if (engine_fixture_start(&fx, engine_fixture_drop, NULL) != 0) {
        fprintf(stderr, "bench_runs: %s\n", fx.err);
        return 1;
    }
    c10ds_engine *e = fx.eng;

    /* --- prefix ops: 20 keys under jobs/j/1/, `after` keys after it --- */
    fill(&fx.db, "jobs/j/1/", 20);
    fill(&fx.db, "z/", after);
    c10ds_store_recount(&e->store);
    double best_count = 1e18, best_delete = 1e18;
    for (int round = 0; round < 5; round++) {
        sqlite3_exec(fx.db.h, "BEGIN", NULL, NULL, NULL);
        double t0 = now_us();
        long long n = keys_under(e, "jobs/j/1/");
        double t1 = now_us();
        int64_t gone = c10ds_store_delete_prefix(&e->store, "jobs/j/1/", -1);
        double t2 = now_us();
        sqlite3_exec(fx.db.h, "ROLLBACK", NULL, NULL, NULL);
        if (n != 20 || gone != 20) {
            fprintf(stderr, "bench_runs: counted %lld, deleted %lld, not 20\n", n,
                    (long long)gone);
            return 1;
        }
        best_count = t1 - t0 < best_count ? t1 - t0 : best_count;
        best_delete = t2 - t1 < best_delete ? t2 - t1 : best_delete;
    }
    c10ds_store_recount(&e->store);
    printf("a run's prefix with 20 keys, %ld keys after it (best of 5):\n", after);
    printf("  count the prefix's keys     %10.1f us\n", best_count);
    printf("  delete the prefix's keys    %10.1f us\n", best_delete);
    sqlite3_exec(fx.db.h, "DELETE FROM kv WHERE key >= 'z/' AND key < 'z0'", NULL, NULL, NULL);
    c10ds_store_recount(&e->store);

    /* --- run end: a run of 2 with K keys --- */
    printf("the end of a run of 2 ranks with K store keys:\n");
    printf("  %8s %16s %8s %16s %16s %10s\n", "K", "ending batch", "sweeps", "median sweep",
           "longest sweep", "keys left");
    long ks[] = {1000, 10000, 100000};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
        char job[32], prefix[64];
        snprintf(job, sizeof job, "bench%zu", i);
        c10ds_engine_run_batch(e, join_req(job, 0));
        c10ds_engine_run_batch(e, join_req(job, 1));
        c10ds_job jb;
        if (c10ds_groups_job(&e->groups, job, &jb) != 1) {
            fprintf(stderr, "bench_runs: job %s did not start\n", job);
            return 1;
        }
        snprintf(prefix, sizeof prefix, "jobs/%s/%llu/", job, (unsigned long long)jb.generation);
        fill(&fx.db, prefix, ks[i]);
        c10ds_store_recount(&e->store);
        c10ds_engine_run_batch(e, leave_req(job, jb.generation, 0));
        double t0 = now_us();
        c10ds_engine_run_batch(e, leave_req(job, jb.generation, 1));
        double ending = now_us() - t0, took[1000];
        int sweeps = 0;
        while (keys_under(e, prefix) > 0 && sweeps < 1000) {
            e->next_sweep_ms = 0;
            t0 = now_us();
            c10ds_engine_run_batch(e, NULL);
            took[sweeps++] = now_us() - t0;
        }
        e->next_sweep_ms = INT64_MAX;
        qsort(took, (size_t)sweeps, sizeof *took, by_value);
        printf("  %8ld %13.2f ms %8d %13.2f ms %13.2f ms %10lld\n", ks[i], ending / 1000, sweeps,
               sweeps ? took[sweeps / 2] / 1000 : 0, sweeps ? took[sweeps - 1] / 1000 : 0,
               keys_under(e, prefix));
    }
    engine_fixture_stop(&fx);
    return 0;
}
