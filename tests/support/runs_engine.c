/* What the runs suites share; see runs_engine.h. */
#include "runs_engine.h"

#include "engine/engine.h"
#include "engine_request.h"
#include "store/store.h"

#include "c10d_time.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

engine_fixture fx;

static void setup(void)
{
    engine_fixture_init(&fx, "runs");
    fx.cfg.retention_s = 0; /* a run's records are due when it ends; cases raise it */
    /* The cases reclaim by hand (c10ds_runs_reclaim), each step checked:
     * no sweep of the engine's own does it behind their back. */
    fx.manual_sweeps = 1;
    ck_assert_msg(engine_fixture_start(&fx, NULL, NULL) == 0, "%s", fx.err);
}

static void teardown(void)
{
    engine_fixture_stop(&fx);
}

TCase *runs_tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, teardown);
    return tc;
}

void reopen(void)
{
    ck_assert_msg(engine_fixture_restart(&fx) == 0, "%s", fx.err);
}

C10dpb__Reply *run1(c10ds_request *r)
{
    int before = fx.nreplies;
    r->next = NULL;
    c10ds_engine_run_batch(fx.eng, r);
    return fx.nreplies > before ? fx.replies[fx.nreplies - 1] : NULL;
}

C10dpb__Reply *await_reply(void)
{
    int before = fx.nreplies;
    long long until = c10d_now_ms() + 5000;
    while (fx.nreplies == before && c10d_now_ms() < until) {
        usleep(5000);
        c10ds_engine_run_batch(fx.eng, NULL);
    }
    ck_assert_msg(fx.nreplies > before, "no parked request was answered in 5 s");
    return fx.replies[fx.nreplies - 1];
}

c10ds_request *join_req(uint64_t client, const char *job, int rank, int world)
{
    C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
    m.job = (char *)job;
    m.name = "world";
    m.rank = rank;
    m.world_size = world;
    m.has_timeout_ms = 1;
    m.timeout_ms = 50;
    m.host = "node1";
    m.has_pid = 1;
    m.pid = 1000 + rank;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
    pb.group_join = &m;
    c10ds_request *r = engine_request(&pb, client, client * 1000 + (uint64_t)fx.nreplies);
    r->pipe = (uint32_t)client; /* each client its own connection */
    return r;
}

c10ds_request *closed_req(uint64_t client)
{
    c10ds_request *r = c10ds_request_new(NULL, NULL);
    r->event = C10DS_EV_PIPE_CLOSED;
    r->pipe = (uint32_t)client;
    return r;
}

c10ds_request *leave_req(uint64_t client, const char *job, uint64_t gen, int rank)
{
    return engine_request_leave(client, client * 1000 + 500 + (uint64_t)fx.nreplies, job, gen,
                                rank);
}

c10ds_request *report_req(uint64_t client, const char *job, uint64_t gen, int rank, uint64_t seq,
                          uint32_t kind)
{
    return engine_request_report(client, client * 1000 + 800 + (uint64_t)fx.nreplies, job, gen,
                                 rank, seq, kind);
}

c10ds_request *status_req(const char *job)
{
    C10dpb__CollStatus m = C10DPB__COLL_STATUS__INIT;
    m.job = (char *)job;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_COLL_STATUS;
    pb.coll_status = &m;
    return engine_request(&pb, 99, 99000 + (uint64_t)fx.nreplies);
}

c10ds_request *trace_req(const char *job, int rank)
{
    C10dpb__CollTrace m = C10DPB__COLL_TRACE__INIT;
    m.job = (char *)job;
    m.rank = rank;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_COLL_TRACE;
    pb.coll_trace = &m;
    return engine_request(&pb, 99, 99500 + (uint64_t)fx.nreplies);
}

long long scalar(const char *fmt, const char *arg)
{
    char q[512];
    snprintf(q, sizeof q, fmt, arg);
    sqlite3_stmt *s;
    ck_assert_msg(sqlite3_prepare_v2(fx.db.h, q, -1, &s, NULL) == SQLITE_OK, "%s: %s", q,
                  sqlite3_errmsg(fx.db.h));
    long long v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    return v;
}

void put_many(const char *prefix, int n)
{
    char q[512];
    snprintf(q, sizeof q, "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE "
             "i < %d) INSERT INTO kv(key, value, updated_ms) SELECT '%s' || 'k' || i, x'00', 0 "
             "FROM c", n - 1, prefix);
    ck_assert_int_eq(sqlite3_exec(fx.db.h, q, NULL, NULL, NULL), SQLITE_OK);
    c10ds_store_recount(&fx.eng->store);
}

void put(const char *key)
{
    ck_assert_int_eq(c10ds_store_set(&fx.eng->store, key, "v", 1), C10D_OK);
}

int has(const char *key)
{
    return c10ds_store_exists(&fx.eng->store, key);
}

uint64_t form(const char *job, int n)
{
    C10dpb__Reply *rep = NULL;
    for (int r = 0; r < n; r++)
        rep = run1(join_req((uint64_t)r + 1, job, r, n));
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->status == C10D_OK, "%s", rep->detail);
    return rep->group_join->generation;
}

#define TABLE_NAME(t, k) #t,
const char *const per_run_tables[] = {C10DS_PER_RUN_TABLES(TABLE_NAME) "runs"};
#undef TABLE_NAME

long long rows_of(const char *job)
{
    long long n = scalar("SELECT count(*) FROM jobs WHERE job = '%s'", job);
    for (size_t i = 0; i < sizeof per_run_tables / sizeof *per_run_tables; i++) {
        char q[256];
        snprintf(q, sizeof q, "SELECT count(*) FROM %s WHERE job = '%%s'", per_run_tables[i]);
        n += scalar(q, job);
    }
    return n;
}
