/* c10d_monitored_barrier: a barrier through the coordinator's store, so
 * that rank 0 can say which ranks never arrived (torch's
 * monitored_barrier). Slow by design (a round trip per rank); for
 * debugging hangs, not for every step. */
#include "coll/monitored_barrier.h"
#include "join/join_region.h"

#include "budgets.h"
#include "c10d_time.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Waits until the n keys exist, up to timeout_ms. Inside a join region it
 * waits in slices: a member this rank hears has joined while it waits (on
 * its watch) is told of the barrier between them (c10di_join_check), or it
 * would wait for the joined rank until the timeout. */
static c10d_status wait_keys(c10d_pg *pg, const c10di_coll *c, c10d_store *s,
                             const char *const *keys, size_t n, c10d_ms timeout_ms)
{
    int64_t until = c10d_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = until - c10d_now_ms();
        int region = atomic_load(&pg->join.in_region);
        int slice = left < 1 ? 1 : region && left > 100 ? 100 : (int)left;
        c10d_status st = c10d_store_wait(s, keys, n, slice);
        if (st != C10D_ETIMEDOUT || !region || c10d_now_ms() >= until)
            return st;
        c10di_outcome o;
        C10DI_OUTCOME_EMPTY(&o);
        c10di_join_check(pg, c, &o); /* OK for a barrier: it only announces */
    }
}

static c10d_status rank0(c10d_pg *pg, const c10di_coll *c, c10d_store *s, c10d_ms timeout_ms,
                         int wait_all)
{
    int n = pg->size;
    char **keys = calloc((size_t)n, sizeof *keys);
    c10d_status st = C10D_OK;
    if (!keys)
        return c10di_error(C10D_ENOMEM, "out of memory");
    for (int i = 1; i < n && st == C10D_OK; i++) {
        keys[i] = malloc(32);
        if (!keys[i])
            st = c10di_error(C10D_ENOMEM, "out of memory");
        else
            snprintf(keys[i], 32, "arrived/%d", i);
    }
    if (st == C10D_OK && n > 1)
        st = wait_keys(pg, c, s, (const char *const *)keys + 1, (size_t)n - 1, timeout_ms);
    if (st == C10D_ETIMEDOUT) {
        char msg[1024];
        int off = snprintf(msg, sizeof msg, "monitored_barrier #%d of group %s: rank",
                           pg->monitored, pg->name);
        int missing = 0;
        for (int i = 1; i < n && (wait_all || !missing); i++) {
            int exists = 0;
            if (c10d_store_check(s, (const char *const *)&keys[i], 1, &exists) == C10D_OK &&
                !exists && off < (int)sizeof msg - 16)
                off += snprintf(msg + off, sizeof msg - (size_t)off, "%s %d (global %d)",
                                missing++ ? "," : "", i, pg->ranks[i]);
        }
        snprintf(msg + off, sizeof msg - (size_t)off, " did not arrive within %d ms", timeout_ms);
        c10d_store_set(s, "done", msg, strlen(msg));
        st = c10di_error(C10D_ETIMEDOUT, "%s", msg);
    } else if (st == C10D_OK) {
        st = c10d_store_set(s, "done", "ok", 2);
    }
    for (int i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
    return st;
}

static c10d_status other(c10d_pg *pg, const c10di_coll *c, c10d_store *s, c10d_ms timeout_ms)
{
    char key[32];
    snprintf(key, sizeof key, "arrived/%d", pg->rank);
    c10d_status st = c10d_store_set(s, key, "1", 1);
    void *v = NULL;
    size_t len = 0;
    const char *done = "done";
    /* Rank 0 answers within its own timeout; allow for it being late (in
     * 64 bits: a timeout near INT_MAX must not overflow). */
    int64_t late = 2 * (int64_t)timeout_ms + C10DI_BARRIER_ROOT_SLACK_MS;
    if (st == C10D_OK)
        st = wait_keys(pg, c, s, &done, 1, late > INT_MAX ? INT_MAX : (int)late);
    if (st == C10D_OK && (st = c10d_store_get(s, done, &v, &len, C10D_NO_WAIT)) == C10D_OK) {
        if (len != 2 || memcmp(v, "ok", 2) != 0)
            st = c10di_error(C10D_ETIMEDOUT, "%.*s", (int)len, (const char *)v);
        c10d_free(v);
    }
    return st;
}

c10d_status c10di_monitored_barrier_meet(c10d_pg *pg, const c10di_coll *c, int wait_all_ranks)
{
    /* In the run's store, deleted with it (docs/liveness.md). */
    c10d_store *s;
    c10d_status st = c10di_run_store_over(&s, pg->w->conn, pg->w->job, pg->w->generation,
                                          c->timeout_ms, "c10d/monitored_barrier/%s/%d/",
                                          pg->name, ++pg->monitored);
    if (st != C10D_OK)
        return st;
    st = pg->rank == 0 ? rank0(pg, c, s, c->timeout_ms, wait_all_ranks)
                       : other(pg, c, s, c->timeout_ms);
    c10d_store_close(s);
    return st;
}

/* Its state is the group itself (coll.c). */
static c10d_status monitored_run(void *state, c10di_coll *c)
{
    return c10di_monitored_barrier_meet(state, c, c->wait_all);
}

const c10di_backend_ops c10di_monitored_ops = {
    .name = "monitored barrier (the coordinator's store)",
    .run_call = monitored_run,
};
