#include "state_wait.h"

#include "coord_proc.h"

#include <c10d/c10d.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int member_in(c10d_store *s, const char *job, int rank, const char *state)
{
    c10d_job_info *jobs = NULL;
    size_t nj = 0;
    int found = 0;
    if (c10d_store_jobs(s, job, &jobs, &nj) != C10D_OK)
        return 0;
    for (size_t j = 0; j < nj && !found; j++)
        for (size_t k = 0; k < jobs[j].n_members && !found; k++)
            found = jobs[j].members[k].rank == rank &&
                    strcmp(c10d_member_state_name(jobs[j].members[k].state), state) == 0;
    c10d_free(jobs);
    return found;
}

int wait_member(const char *url, const char *job, int rank, const char *state, int timeout_ms)
{
    c10d_store *s = NULL;
    if (c10d_store_connect(&s, url, NULL) != C10D_OK)
        return 0;
    long long until = test_now_ms() + timeout_ms;
    int ok;
    while (!(ok = member_in(s, job, rank, state)) && test_now_ms() < until)
        usleep(1000);
    c10d_store_close(s);
    return ok;
}

static int all_entered(c10d_store *s, const char *job, const char *group, const int *ranks, int n,
                       unsigned long long seq)
{
    c10d_group_health *g = NULL;
    size_t ng = 0;
    if (c10d_store_health(s, job, group, &g, &ng) != C10D_OK)
        return 0;
    int in = 0;
    for (size_t i = 0; i < ng; i++)
        for (size_t k = 0; k < g[i].n_ranks; k++)
            for (int r = 0; r < n; r++)
                in += g[i].ranks[k].rank == ranks[r] && g[i].ranks[k].entered >= seq;
    c10d_free(g);
    return in == n;
}

int wait_entered(const char *url, const char *job, const char *group, const int *ranks, int n,
                 unsigned long long seq, int timeout_ms)
{
    c10d_store *s = NULL;
    if (c10d_store_connect(&s, url, NULL) != C10D_OK)
        return 0;
    long long until = test_now_ms() + timeout_ms;
    int ok;
    while (!(ok = all_entered(s, job, group, ranks, n, seq)) && test_now_ms() < until)
        usleep(1000);
    c10d_store_close(s);
    return ok;
}

static int finding_of(c10d_store *s, const char *job, const char *group, char *report, size_t cap)
{
    c10d_group_health *g = NULL;
    size_t ng = 0;
    int found = 0;
    if (c10d_store_health(s, job, group, &g, &ng) != C10D_OK)
        return 0;
    for (size_t i = 0; i < ng && !found; i++)
        if ((found = g[i].status != C10D_OK))
            snprintf(report, cap, "%s", g[i].report);
    c10d_free(g);
    return found;
}

int wait_finding(const char *url, const char *job, const char *group, char *report, size_t cap,
                 int timeout_ms)
{
    c10d_store *s = NULL;
    if (cap)
        report[0] = '\0';
    if (c10d_store_connect(&s, url, NULL) != C10D_OK)
        return 0;
    long long until = test_now_ms() + timeout_ms;
    int ok;
    while (!(ok = finding_of(s, job, group, report, cap)) && test_now_ms() < until)
        usleep(1000);
    c10d_store_close(s);
    return ok;
}

int wait_parked(const char *url, long long want, int timeout_ms, long long *seen)
{
    c10d_store *s = NULL;
    if (seen)
        *seen = -1;
    if (c10d_store_connect(&s, url, NULL) != C10D_OK)
        return 0;
    long long until = test_now_ms() + timeout_ms;
    int ok = 0;
    for (;;) {
        c10d_coord_info *info = NULL;
        if (c10d_store_coord_info(s, &info) == C10D_OK) {
            if (seen)
                *seen = info->parked;
            ok = info->parked == want;
            c10d_free(info);
            if (ok || test_now_ms() >= until)
                break;
        } else if (test_now_ms() >= until) {
            break;
        }
        usleep(1000);
    }
    c10d_store_close(s);
    return ok;
}

int wait_shared(const volatile int *v, int want, int timeout_ms)
{
    long long until = test_now_ms() + timeout_ms;
    while (*v < want && test_now_ms() < until)
        usleep(1000);
    return *v >= want;
}
