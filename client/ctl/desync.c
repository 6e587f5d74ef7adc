/* c10d-ctl desync: per group, the highest collective each rank entered and
 * completed, who lags, the finding (a desync with both calls side by side,
 * a lost member, a stall), and the job's dead and departed ranks. Exit 0
 * when healthy, EXIT_UNHEALTHY (7) when anything is wrong. */
#include "desync.h"
#include "json.h"
#include "output.h"
#include "summary.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void print_json(const c10d_group_health *g, size_t ng, const c10d_job_info *jobs,
                       size_t nj, int healthy, int64_t at_ms)
{
    printf("{\"ok\":true,");
    if (at_ms)
        printf("\"at_ms\":%" PRId64 ",", at_ms);
    printf("\"healthy\":%s,\"groups\":[", healthy ? "true" : "false");
    for (size_t i = 0; i < ng; i++) {
        printf("%s{\"job\":", i ? "," : "");
        json_string(stdout, g[i].job, strlen(g[i].job));
        printf(",\"generation\":%" PRIu64 ",\"group\":", g[i].generation);
        json_string(stdout, g[i].group, strlen(g[i].group));
        printf(",\"size\":%d,\"status\":\"%s\",\"report\":", g[i].size,
               c10d_status_name(g[i].status));
        json_string(stdout, g[i].report, strlen(g[i].report));
        printf(",\"ranks\":[");
        for (size_t k = 0; k < g[i].n_ranks; k++) {
            const c10d_rank_progress *r = &g[i].ranks[k];
            printf("%s{\"rank\":%d,\"global_rank\":%d,\"entered\":%" PRIu64
                   ",\"completed\":%" PRIu64 ",\"entered_ms\":%" PRId64 ",\"last\":",
                   k ? "," : "", r->rank, r->global_rank, r->entered, r->completed,
                   r->entered_ms);
            json_string(stdout, r->last, strlen(r->last));
            printf("}");
        }
        printf("]}");
    }
    printf("],\"lost\":[");
    int first = 1;
    for (size_t j = 0; j < nj; j++)
        for (size_t k = 0; k < jobs[j].n_members; k++) {
            const c10d_member_info *m = &jobs[j].members[k];
            if (m->state == C10D_MEMBER_ALIVE)
                continue;
            printf("%s{\"job\":", first ? "" : ",");
            first = 0;
            json_string(stdout, jobs[j].job, strlen(jobs[j].job));
            printf(",\"rank\":%d,\"state\":\"%s\",\"reason\":", m->rank,
                   c10d_member_state_name(m->state));
            json_string(stdout, m->reason, strlen(m->reason));
            printf("}");
        }
    printf("]}\n");
}

/* Where a big group's ranks are, in a few lines: ranks at the same point
 * (entered, completed, the call) as ranges, biggest first; the ranks
 * behind the front come before the rest of the small states. */
static void print_progress_summary(const c10d_group_health *g, uint64_t top)
{
    ctl_buckets bs = {0};
    for (size_t k = 0; k < g->n_ranks; k++) {
        const c10d_rank_progress *r = &g->ranks[k];
        char key[300];
        snprintf(key, sizeof key, "entered #%" PRIu64 ", completed #%" PRIu64 " %s%s",
                 r->entered, r->completed, r->last, r->entered < top ? "  (behind)" : "");
        if (ctl_bucket_add(&bs, key, r->rank) != 0)
            break;
    }
    ctl_buckets_sort(&bs);
    int rest = 0, rest_states = 0;
    for (int i = 0; i < bs.n; i++) {
        if (i >= 8) {
            rest += bs.b[i].n;
            rest_states++;
            continue;
        }
        printf("  %d ranks %s: ", bs.b[i].n, bs.b[i].key);
        ctl_print_ranges(stdout, bs.b[i].ranks, bs.b[i].n);
        printf("\n");
    }
    if (rest)
        printf("  ... %d more ranks in %d other states (--all lists every rank)\n", rest,
               rest_states);
    ctl_buckets_free(&bs);
}

/* A big job's members not alive, grouped by state and reason. */
static void print_lost_summary(const c10d_job_info *j)
{
    ctl_buckets bs = {0};
    for (size_t k = 0; k < j->n_members; k++) {
        const c10d_member_info *m = &j->members[k];
        if (m->state == C10D_MEMBER_ALIVE)
            continue;
        char key[600];
        snprintf(key, sizeof key, "%s: %s", c10d_member_state_name(m->state), m->reason);
        if (ctl_bucket_add(&bs, key, m->rank) != 0)
            break;
    }
    ctl_buckets_sort(&bs);
    for (int i = 0; i < bs.n; i++) {
        printf("job %s: %d rank%s ", j->job, bs.b[i].n, bs.b[i].n == 1 ? "" : "s");
        ctl_print_ranges(stdout, bs.b[i].ranks, bs.b[i].n);
        printf(" %s\n", bs.b[i].key);
    }
    ctl_buckets_free(&bs);
}

static void print_text(const c10d_group_health *g, size_t ng, const c10d_job_info *jobs,
                       size_t nj, int healthy)
{
    printf("%s\n", healthy ? "healthy" : "NOT HEALTHY");
    for (size_t i = 0; i < ng; i++) {
        uint64_t top = 0;
        for (size_t k = 0; k < g[i].n_ranks; k++)
            if (g[i].ranks[k].entered > top)
                top = g[i].ranks[k].entered;
        printf("\njob %s generation %" PRIu64 ", group %s (%d ranks): %s\n", g[i].job,
               g[i].generation, g[i].group, g[i].size,
               g[i].status == C10D_OK ? "ok" : c10d_status_name(g[i].status));
        if (*g[i].report)
            printf("  %s\n", g[i].report);
        if (g[i].n_ranks > CTL_LIST_EACH && !ctl_list_all) {
            print_progress_summary(&g[i], top);
            continue;
        }
        for (size_t k = 0; k < g[i].n_ranks; k++) {
            const c10d_rank_progress *r = &g[i].ranks[k];
            printf("  rank %-4d entered #%-8" PRIu64 " completed #%-8" PRIu64 " %s%s\n",
                   r->rank, r->entered, r->completed, r->last,
                   r->entered < top ? "  (behind)" : "");
        }
    }
    for (size_t j = 0; j < nj; j++) {
        if (jobs[j].n_members > CTL_LIST_EACH && !ctl_list_all) {
            print_lost_summary(&jobs[j]);
            continue;
        }
        for (size_t k = 0; k < jobs[j].n_members; k++) {
            const c10d_member_info *m = &jobs[j].members[k];
            if (m->state != C10D_MEMBER_ALIVE)
                printf("job %s: rank %d %s: %s\n", jobs[j].job, m->rank,
                       c10d_member_state_name(m->state), m->reason);
        }
    }
}

/* desync; with --json at_ms (when not 0) says when, for watch. The exit
 * code, or -1 with *err set when the coordinator could not be asked (watch
 * has printed refreshes before it). With must_exist, a --job J the
 * coordinator knows nothing of (no groups, no members) is reported as
 * unknown rather than printed as healthy. */
static int desync_at(c10d_store *s, const ctl_args *a, int64_t at_ms, int must_exist,
                     c10d_status *err)
{
    c10d_group_health *g = NULL;
    c10d_job_info *jobs = NULL;
    size_t ng = 0, nj = 0;
    if ((*err = c10d_store_health(s, a->job, a->group, &g, &ng)) != C10D_OK)
        return -1;
    if ((*err = c10d_store_jobs(s, a->job, &jobs, &nj)) != C10D_OK) {
        c10d_free(g);
        return -1;
    }
    if (must_exist && a->job && !ng && !nj) {
        c10d_free(g);
        c10d_free(jobs);
        return ctl_fail_no_job(a->job);
    }
    int healthy = 1;
    for (size_t i = 0; i < ng; i++)
        healthy &= g[i].status == C10D_OK;
    /* A member that left cleanly is not a problem; one that died is. */
    for (size_t j = 0; j < nj; j++)
        for (size_t k = 0; k < jobs[j].n_members; k++)
            healthy &= jobs[j].members[k].state != C10D_MEMBER_DEAD;
    if (ctl_json)
        print_json(g, ng, jobs, nj, healthy, at_ms);
    else
        print_text(g, ng, jobs, nj, healthy);
    c10d_free(g);
    c10d_free(jobs);
    return healthy ? 0 : EXIT_UNHEALTHY;
}

int cmd_desync(c10d_store *s, const ctl_args *a)
{
    c10d_status err;
    int rc = desync_at(s, a, 0, 1, &err);
    return rc < 0 ? ctl_fail_last(err) : rc;
}

int cmd_trace(c10d_store *s, const ctl_args *a)
{
    c10d_trace_row *rows = NULL;
    size_t nr = 0;
    const char *job = NULL;
    c10d_status st = c10d_store_trace_job(s, a->job, a->group, (int)a->rank,
                                          (unsigned)a->limit, &rows, &nr, &job);
    if (st != C10D_OK)
        return ctl_fail_last(st);
    const char *group = a->group ? a->group : "world";
    if (ctl_json) {
        printf("{\"ok\":true,\"job\":");
        json_string(stdout, job, strlen(job));
        printf(",\"group\":");
        json_string(stdout, group, strlen(group));
        printf(",\"rank\":%d,\"rows\":[", (int)a->rank);
        for (size_t i = 0; i < nr; i++) {
            printf("%s{\"first_seq\":%" PRIu64 ",\"last_seq\":%" PRIu64 ",\"what\":",
                   i ? "," : "", rows[i].first_seq, rows[i].last_seq);
            json_string(stdout, rows[i].what, strlen(rows[i].what));
            printf(",\"state\":\"%s\",\"entered_ms\":%" PRId64 "}", rows[i].state,
                   rows[i].entered_ms);
        }
        printf("]}\n");
    } else {
        /* Without --job the coordinator picked one: say which. */
        printf("job %s, group %s, rank %d%s\n", job, group, (int)a->rank,
               a->job ? "" : " (the coordinator's pick: name another with --job J)");
        for (size_t i = 0; i < nr; i++) {
            char seqs[64];
            if (rows[i].first_seq == rows[i].last_seq)
                snprintf(seqs, sizeof seqs, "#%" PRIu64, rows[i].first_seq);
            else
                snprintf(seqs, sizeof seqs, "#%" PRIu64 "-%" PRIu64, rows[i].first_seq,
                         rows[i].last_seq);
            printf("%-20s %-10s %s\n", seqs, rows[i].state, rows[i].what);
        }
    }
    c10d_free(rows);
    return EXIT_OK;
}

int cmd_watch(c10d_store *s, const ctl_args *a)
{
    int json = ctl_json;
    c10d_status err;
    int interval = (int)a->interval, count = (int)a->count, rc = 0;
    /* Escape codes only for a terminal: a pipe or a file gets each refresh
     * after the last (with --json, one object a line). */
    int tty = !json && isatty(STDOUT_FILENO);
    for (int i = 0; count == 0 || i < count; i++) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
        if (!json) {
            char when[64];
            struct tm tm;
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&now.tv_sec, &tm));
            if (tty)
                printf("\033[H\033[2J"); /* home, clear: a refresh in place */
            else if (i)
                printf("\n");
            printf("c10d-ctl watch, every %d ms — %s\n", interval, when);
        }
        /* A job not there yet may be one about to start: watch waits. */
        if ((rc = desync_at(s, a, json ? now_ms : 0, 0, &err)) < 0)
            return ctl_fail_last(err);
        fflush(stdout);
        if (count == 0 || i + 1 < count) {
            struct timespec ts = {interval / 1000, (long)(interval % 1000) * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return rc;
}
