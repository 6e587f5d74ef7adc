/* The metrics as Prometheus' text format 0.0.4 (metrics.h): each family
 * a # HELP and a # TYPE line, then its samples. Names carry their unit
 * (_seconds) and counters end in _total, as Prometheus' naming asks. */
#include "metrics/metrics.h"

#include "engine/engine.h"
#include "engine/ops.h"
#include "metrics/counters.h"

#include "c10d_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static long long get(atomic_llong *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

static void requests(FILE *f, c10ds_engine *e)
{
    c10ds_counters *c = &e->counters;
    family(f, "c10d_requests_total", "counter",
           "Requests answered, by operation (unknown: an operation this coordinator lacks).");
    for (int oc = 0; oc < C10DS_COUNTED_OPS; oc++) {
        /* every known operation, 0 included, so a rate() has a series from the start */
        const c10ds_op *op = oc && oc < (int)(sizeof e->ops / sizeof e->ops[0]) ? e->ops[oc] : NULL;
        if (oc == 0 || op)
            fprintf(f, "c10d_requests_total{op=\"%s\"} %lld\n", op ? op->name : "unknown",
                    get(&c->served[oc]));
    }
    family(f, "c10d_request_duration_seconds", "histogram",
           "From a request's arrival to its reply (its commit, and any wait parked for a key "
           "or a group, included).");
    long long cum = 0;
    for (int b = 0; b <= C10DS_LATENCY_BUCKETS; b++) {
        cum += get(&c->latency[b]);
        if (b < C10DS_LATENCY_BUCKETS)
            fprintf(f, "c10d_request_duration_seconds_bucket{le=\"%g\"} %lld\n",
                    c10ds_latency_bounds_s[b], cum);
        else
            fprintf(f, "c10d_request_duration_seconds_bucket{le=\"+Inf\"} %lld\n", cum);
    }
    fprintf(f, "c10d_request_duration_seconds_sum %.6f\n", (double)get(&c->latency_sum_us) / 1e6);
    fprintf(f, "c10d_request_duration_seconds_count %lld\n", cum);
}

static void gauges(FILE *f, c10ds_engine *e, const char *role)
{
    c10ds_counters *c = &e->counters;
    /* The database's gauges wait for the engine's first reading (within
     * a second of the first scrape): absent until then, rather than a
     * false 0. */
    if (atomic_load_explicit(&c->refreshed, memory_order_acquire)) {
        family(f, "c10d_jobs_live", "gauge", "Runs (a job's generation) with a rank alive.");
        fprintf(f, "c10d_jobs_live %lld\n", get(&c->jobs_live));
        family(f, "c10d_ranks_alive", "gauge", "Ranks alive, all jobs together.");
        fprintf(f, "c10d_ranks_alive %lld\n", get(&c->ranks_alive));
        family(f, "c10d_findings", "gauge",
               "Findings kept (until --retention reclaims their run), by kind.");
        for (int k = 0; k < C10DS_FINDING_KINDS; k++)
            fprintf(f, "c10d_findings{kind=\"%s\"} %lld\n", c10ds_finding_kinds[k],
                    get(&c->findings[k]));
    }
    family(f, "c10d_replica_role", "gauge",
           "1 for this coordinator's role: single (one node), leader or follower (a replica).");
    static const char *const roles[] = {"single", "leader", "follower"};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        fprintf(f, "c10d_replica_role{role=\"%s\"} %d\n", roles[i], !strcmp(roles[i], role));
    family(f, "c10d_connections_open", "gauge", "Client connections open, all listeners.");
    fprintf(f, "c10d_connections_open %lld\n", get(&e->clients));
    family(f, "c10d_parked_requests", "gauge", "Requests parked waiting for a key or a group.");
    fprintf(f, "c10d_parked_requests %lld\n", get(&e->parked));
    family(f, "c10d_batches_total", "counter", "Batches run, one transaction each.");
    fprintf(f, "c10d_batches_total %lld\n", get(&e->batches));
    family(f, "c10d_uptime_seconds", "gauge", "Seconds since this coordinator started.");
    fprintf(f, "c10d_uptime_seconds %.3f\n", (double)(c10d_now_ms() - e->start_ms) / 1e3);
}

char *c10ds_metrics_render(c10ds_engine *e, const char *role, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f)
        return NULL;
    requests(f, e);
    gauges(f, e, role);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
