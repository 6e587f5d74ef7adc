/* What c10d-run asks the coordinator when ranks fail: which went first,
 * and what verification found. Each asks on a connection of its own, with
 * a short timeout: a coordinator gone leaves the launcher its own view. */
#include "findings.h"

#include <c10d/c10d.h>

#include <stdio.h>

/* Of the ranks in failed[] (n_failed of them), the one the coordinator
 * saw go first (dead or left, earliest), or -1 if it cannot say. */
int run_first_to_go(const char *coord, const char *job, const int *failed, int n_failed,
                    char *why, size_t cap)
{
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 2000;
    if (c10d_store_connect(&s, coord, &o) != C10D_OK)
        return -1;
    c10d_job_info *jobs = NULL;
    size_t nj = 0;
    int best = -1;
    int64_t best_ms = 0;
    if (c10d_store_jobs(s, job, &jobs, &nj) == C10D_OK) {
        for (size_t j = 0; j < nj; j++)
            for (size_t m = 0; m < jobs[j].n_members; m++) {
                const c10d_member_info *mi = &jobs[j].members[m];
                int was_failed = 0;
                for (int k = 0; k < n_failed; k++)
                    was_failed |= failed[k] == mi->rank;
                if (!was_failed || (mi->state != C10D_MEMBER_LEFT && mi->state != C10D_MEMBER_DEAD))
                    continue;
                if (best < 0 || mi->changed_ms < best_ms) {
                    best = mi->rank;
                    best_ms = mi->changed_ms;
                    snprintf(why, cap, "%s: %s", c10d_member_state_name(mi->state),
                             mi->reason ? mi->reason : "");
                }
            }
        c10d_free(jobs);
    }
    c10d_store_close(s);
    return best;
}

/* What the coordinator found wrong with the job's groups, in a
 * generation after `after` (an earlier attempt's finding is not this
 * one's): a desync before anything else (it names who called what; the
 * lost members and timeouts that follow from it do not). 1 with *gen and
 * out set, else 0. */
int run_coord_finding(const char *coord, const char *job, uint64_t after, uint64_t *gen,
                      char *out, size_t cap)
{
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 2000;
    if (c10d_store_connect(&s, coord, &o) != C10D_OK)
        return 0;
    c10d_group_health *g = NULL;
    size_t ng = 0;
    int found = 0;
    if (c10d_store_health(s, job, NULL, &g, &ng) == C10D_OK) {
        const c10d_group_health *best = NULL;
        for (size_t i = 0; i < ng; i++)
            if (g[i].status != C10D_OK && *g[i].report && g[i].generation > after &&
                (!best || (g[i].status == C10D_EDESYNC && best->status != C10D_EDESYNC)))
                best = &g[i];
        if (best) {
            snprintf(out, cap, "(%s): %s", c10d_status_name(best->status), best->report);
            *gen = best->generation;
            found = 1;
        }
        c10d_free(g);
    }
    c10d_store_close(s);
    return found;
}
