/* TCPStore runs' keys, deleted when the run is over and in the sweeps
 * (runs_tcpstore.h). */
#include "groups/runs_tcpstore.h"

#include "engine/engine.h"
#include "engine/events.h"
#include "groups/runs.h"
#include "store/store.h"

#include "log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TS_ROOT "tcpstore/"

void c10ds_ts_keys_init(c10ds_ts_keys *k)
{
    memset(k, 0, sizeof *k);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* The wall clock's milliseconds, 20 bits of runs below them: above
     * every run of a coordinator started before this one. */
    uint64_t ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    k->base = ms << 20;
}

void c10ds_ts_keys_fini(c10ds_ts_keys *k)
{
    for (size_t i = 0; i < k->n_due; i++)
        free(k->due[i]);
    free(k->due);
    memset(k, 0, sizeof *k);
}

void c10ds_ts_run_prefix(char out[C10DS_TS_RUN_PREFIX_BYTES + 1], uint64_t run)
{
    snprintf(out, C10DS_TS_RUN_PREFIX_BYTES + 1, TS_ROOT "%016" PRIx64 "/", run);
}

static void keep_due(c10ds_ts_keys *k, const char *prefix)
{
    if (k->n_due == k->cap_due) {
        size_t cap = k->cap_due ? 2 * k->cap_due : 8;
        char **d = realloc(k->due, cap * sizeof *d);
        if (!d)
            return; /* the restart's sweep deletes them */
        k->due = d, k->cap_due = cap;
    }
    char *p = strdup(prefix);
    if (p)
        k->due[k->n_due++] = p;
}

void c10ds_ts_keys_drop(c10ds_engine *e, const char *prefix)
{
    int64_t n = c10ds_store_delete_prefix(&e->store, prefix, RUNS_END_KEYS);
    if (n < 0 || n == RUNS_END_KEYS) {
        keep_due(&e->ts_keys, prefix);
        c10ds_info("TCPStore run %.*s over (its last connection closed): %lld of its keys "
                   "deleted, the rest go in the sweeps", C10DS_TS_RUN_DIGITS,
                   prefix + sizeof TS_ROOT - 1, (long long)(n < 0 ? 0 : n));
        return;
    }
    c10ds_info("TCPStore run %.*s over (its last connection closed): its %lld key%s deleted",
               C10DS_TS_RUN_DIGITS, prefix + sizeof TS_ROOT - 1, (long long)n,
               n == 1 ? "" : "s");
}

static void first_key(void *arg, const char *key, uint64_t size, int64_t updated_ms)
{
    (void)size, (void)updated_ms;
    *(char **)arg = strdup(key);
}

/* Deletes up to budget keys an earlier coordinator's runs left (they sort
 * below base); 1 in *done once none is left. */
static int64_t sweep_earlier(c10ds_engine *e, int64_t budget, int *done)
{
    char floor[C10DS_TS_RUN_PREFIX_BYTES + 1];
    c10ds_ts_run_prefix(floor, e->ts_keys.base);
    const size_t root = sizeof TS_ROOT - 1, pl = root + C10DS_TS_RUN_DIGITS;
    int64_t gone = 0;
    *done = 0;
    while (gone < budget) {
        char *key = NULL;
        int more;
        if (c10ds_store_list(&e->store, TS_ROOT, 1, first_key, &key, &more) < 0)
            return gone;
        if (!key || strcmp(key, floor) >= 0) {
            free(key);
            *done = 1; /* none left, or this process's own runs */
            return gone;
        }
        /* An earlier run's keys (tcpstore/<run>/...), those of the layout
         * before runs (tcpstore//<key>: torch's client puts a '/' before
         * every key), or a key of its own. */
        int64_t n;
        if (strlen(key) > pl && key[pl] == '/' &&
            strspn(key + root, "0123456789abcdef") == C10DS_TS_RUN_DIGITS) {
            key[pl + 1] = 0;
            n = c10ds_store_delete_prefix(&e->store, key, budget - gone);
        } else if (key[root] == '/') {
            key[root + 1] = 0;
            n = c10ds_store_delete_prefix(&e->store, key, budget - gone);
        } else {
            int deleted = 0;
            n = c10ds_store_delete(&e->store, key, &deleted) == C10D_OK ? deleted : -1;
        }
        free(key);
        if (n <= 0)
            return gone;
        gone += n;
    }
    return gone;
}

int64_t c10ds_ts_keys_sweep(c10ds_engine *e, int64_t budget)
{
    c10ds_ts_keys *k = &e->ts_keys;
    int64_t gone = 0;
    while (k->n_due && gone < budget) {
        char *p = k->due[k->n_due - 1];
        int64_t n = c10ds_store_delete_prefix(&e->store, p, budget - gone);
        if (n < 0)
            return gone;
        gone += n;
        if (gone < budget) { /* fewer than asked: that run's keys are all gone */
            free(p);
            k->n_due--;
        }
    }
    if (!k->earlier_done && gone < budget) {
        int done;
        int64_t n = sweep_earlier(e, budget - gone, &done);
        gone += n;
        if (done) {
            k->earlier_done = 1;
            if (n)
                c10ds_info("the TCPStore keys of an earlier coordinator's runs are deleted");
        }
    }
    return gone;
}

static void on_sweep(c10ds_engine *e)
{
    c10ds_ts_keys_sweep(e, RUNS_RECLAIM_ROWS);
}

const c10ds_event_listener c10ds_tcpstore_listener = {
    .name = "tcpstore",
    .sweep = on_sweep,
};
