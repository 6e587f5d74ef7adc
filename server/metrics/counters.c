/* The counters (counters.h): updated with relaxed atomics, since each
 * number stands alone, and the database gauges read by the engine, whose
 * thread alone touches the database. */
#include "metrics/counters.h"

#include "c10d_time.h"

#include <c10d/errors.h>

/* From a cached get (tens of us) to a long wait parked for a key. */
const double c10ds_latency_bounds_s[C10DS_LATENCY_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1, 10, 60,
};

const char *const c10ds_finding_kinds[C10DS_FINDING_KINDS] = {"desync", "lost_rank", "stall"};

/* How often the gauges are read again: a scrape every 10-60 s needs no
 * more, and each reading is three COUNTs. */
#define REFRESH_INTERVAL_MS 1000

void c10ds_counters_served(c10ds_counters *c, int op_case, int64_t latency_us)
{
    if (op_case <= 0 || op_case >= C10DS_COUNTED_OPS)
        op_case = 0;
    atomic_fetch_add_explicit(&c->served[op_case], 1, memory_order_relaxed);
    if (latency_us < 0)
        latency_us = 0;
    int b = 0;
    while (b < C10DS_LATENCY_BUCKETS && (double)latency_us > c10ds_latency_bounds_s[b] * 1e6)
        b++;
    atomic_fetch_add_explicit(&c->latency[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->latency_sum_us, latency_us, memory_order_relaxed);
}

static long long count_of(sqlite3_stmt *s)
{
    long long n = s && sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    if (s)
        sqlite3_reset(s);
    return n;
}

void c10ds_counters_refresh(c10ds_counters *c, c10ds_db *db)
{
    if (!atomic_load_explicit(&c->wanted, memory_order_relaxed) ||
        c10d_now_ms() < c->next_refresh_ms)
        return;
    c->next_refresh_ms = c10d_now_ms() + REFRESH_INTERVAL_MS;
    if (!c->q_jobs) { /* prepared on first use: most coordinators never scrape */
        c->q_jobs = c10ds_db_prepare(db, "SELECT count(*) FROM runs WHERE ended_ms IS NULL");
        c->q_ranks = c10ds_db_prepare(db, "SELECT count(*) FROM members WHERE state = 'alive'");
        c->q_findings = c10ds_db_prepare(db, "SELECT status, count(*) FROM findings "
                                             "GROUP BY status");
        if (!c->q_jobs || !c->q_ranks || !c->q_findings) {
            c10ds_counters_fini(c);
            atomic_store(&c->wanted, 0); /* logged by the prepare; no more tries */
            return;
        }
    }
    atomic_store_explicit(&c->jobs_live, count_of(c->q_jobs), memory_order_relaxed);
    atomic_store_explicit(&c->ranks_alive, count_of(c->q_ranks), memory_order_relaxed);
    long long kinds[C10DS_FINDING_KINDS] = {0};
    while (sqlite3_step(c->q_findings) == SQLITE_ROW) {
        int st = sqlite3_column_int(c->q_findings, 0);
        long long n = sqlite3_column_int64(c->q_findings, 1);
        if (st == C10D_EDESYNC)
            kinds[C10DS_FINDING_DESYNC] += n;
        else if (st == C10D_EPEERLOST)
            kinds[C10DS_FINDING_LOST_RANK] += n;
        else if (st == C10D_ETIMEDOUT)
            kinds[C10DS_FINDING_STALL] += n;
    }
    sqlite3_reset(c->q_findings);
    for (int k = 0; k < C10DS_FINDING_KINDS; k++)
        atomic_store_explicit(&c->findings[k], kinds[k], memory_order_relaxed);
    atomic_store_explicit(&c->refreshed, 1, memory_order_release);
}

void c10ds_counters_fini(c10ds_counters *c)
{
    sqlite3_finalize(c->q_jobs);
    sqlite3_finalize(c->q_ranks);
    sqlite3_finalize(c->q_findings);
    c->q_jobs = c->q_ranks = c->q_findings = NULL;
}
