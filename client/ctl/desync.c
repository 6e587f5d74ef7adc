/* c10d-ctl desync: per group, the highest collective each rank entered and
 * completed, who lags, the finding (a desync with both calls side by side,
 * a lost member, a stall), and the job's dead and departed ranks; a job
 * still forming, how many of its ranks joined. Of the live runs (a health
 * check), the finished ones too with --finished or --job. Exit 0 when
 * healthy, EXIT_UNHEALTHY (7) when anything shown is wrong. */
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

/* Where a job's current run is: still forming (its rendezvous not
 * complete), live, or over (no member alive: every one left or died).
 * c10d-ctl desync is a health check of the live runs; the runs that are
 * over stay on the coordinator for its --retention, and one that failed
 * yesterday is no reason for today's check to fail. */
typedef enum { RUN_FORMING, RUN_LIVE, RUN_FINISHED } run_state;

static const char *const run_names[] = {"forming", "live", "finished"};

static run_state run_of(const c10d_job_info *j)
{
    for (size_t k = 0; k < j->n_members; k++)
        if (j->members[k].state == C10D_MEMBER_ALIVE)
            return j->formed ? RUN_LIVE : RUN_FORMING;
    return j->n_members || j->formed ? RUN_FINISHED : RUN_FORMING;
}

static int alive_members(const c10d_job_info *j)
{
    int n = 0;
    for (size_t k = 0; k < j->n_members; k++)
        n += j->members[k].state == C10D_MEMBER_ALIVE;
    return n;
}

/* The run group g belongs to (a group of a job the listing does not name,
 * which the two answers coming apart can make, counts as live). */
static run_state run_of_group(const c10d_group_health *g, const c10d_job_info *jobs, size_t nj)
{
    for (size_t j = 0; j < nj; j++)
        if (!strcmp(jobs[j].job, g->job) && jobs[j].generation == g->generation)
            return run_of(&jobs[j]);
    return RUN_LIVE;
}

/* What one desync shows: the groups and jobs of the runs asked about. */
typedef struct {
    const c10d_group_health *g;
    size_t ng;
    const c10d_job_info *jobs;
    size_t nj;
    unsigned char *g_shown, *j_shown; /* per group, per job */
    int hidden;                       /* finished runs not shown */
    int healthy;
} view;

static uint64_t top_entered(const c10d_group_health *g)
{
    uint64_t top = 0;
    for (size_t k = 0; k < g->n_ranks; k++)
        if (g->ranks[k].entered > top)
            top = g->ranks[k].entered;
    return top;
}

static void print_json(const view *v, int64_t at_ms)
{
    const c10d_group_health *g = v->g;
    const c10d_job_info *jobs = v->jobs;
    printf("{\"ok\":true,");
    if (at_ms)
        printf("\"at_ms\":%" PRId64 ",", at_ms);
    printf("\"healthy\":%s,\"finished_not_shown\":%d,\"runs\":[", v->healthy ? "true" : "false",
           v->hidden);
    int first = 1;
    for (size_t j = 0; j < v->nj; j++) {
        if (!v->j_shown[j])
            continue;
        printf("%s{\"job\":", first ? "" : ",");
        first = 0;
        json_string(stdout, jobs[j].job, strlen(jobs[j].job));
        printf(",\"generation\":%" PRIu64 ",\"run\":\"%s\",\"world_size\":%d,\"members\":%zu,"
               "\"alive\":%d}", jobs[j].generation, run_names[run_of(&jobs[j])],
               jobs[j].world_size, jobs[j].n_members, alive_members(&jobs[j]));
    }
    printf("],\"groups\":[");
    first = 1;
    for (size_t i = 0; i < v->ng; i++) {
        if (!v->g_shown[i])
            continue;
        printf("%s{\"job\":", first ? "" : ",");
        first = 0;
        json_string(stdout, g[i].job, strlen(g[i].job));
        printf(",\"generation\":%" PRIu64 ",\"group\":", g[i].generation);
        json_string(stdout, g[i].group, strlen(g[i].group));
        run_state run = run_of_group(&g[i], jobs, v->nj);
        printf(",\"run\":\"%s\",\"collectives\":%" PRIu64 ",\"size\":%d,\"status\":\"%s\","
               "\"report\":", run_names[run], top_entered(&g[i]), g[i].size,
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
    first = 1;
    for (size_t j = 0; j < v->nj; j++)
        for (size_t k = 0; v->j_shown[j] && k < jobs[j].n_members; k++) {
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
 * behind the front (top; 0 for a finished run, where nobody is) come
 * before the rest of the small states. */
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

static void print_text(const view *v)
{
    const c10d_group_health *g = v->g;
    const c10d_job_info *jobs = v->jobs;
    printf("%s", v->healthy ? "healthy" : "NOT HEALTHY");
    if (v->hidden)
        printf(" (%d finished run%s not shown: --finished shows %s)", v->hidden,
               v->hidden == 1 ? "" : "s", v->hidden == 1 ? "it" : "them");
    printf("\n");
    for (size_t j = 0; j < v->nj; j++)
        if (v->j_shown[j] && run_of(&jobs[j]) == RUN_FORMING)
            printf("\njob %s generation %" PRIu64 ": forming: %d of %d ranks joined\n",
                   jobs[j].job, jobs[j].generation, alive_members(&jobs[j]),
                   jobs[j].world_size);
    for (size_t i = 0; i < v->ng; i++) {
        if (!v->g_shown[i])
            continue;
        int finished = run_of_group(&g[i], jobs, v->nj) == RUN_FINISHED;
        uint64_t top = top_entered(&g[i]);
        printf("\njob %s generation %" PRIu64 ", group %s (%d ranks): ", g[i].job,
               g[i].generation, g[i].group, g[i].size);
        if (finished) /* "EDESYNC; finished, 12 collectives": the failure first */
            printf("%s%sfinished, %" PRIu64 " collective%s\n",
                   g[i].status == C10D_OK ? "" : c10d_status_name(g[i].status),
                   g[i].status == C10D_OK ? "" : "; ", top, top == 1 ? "" : "s");
        else
            printf("%s\n", g[i].status == C10D_OK ? "ok" : c10d_status_name(g[i].status));
        if (*g[i].report)
            printf("  %s\n", g[i].report);
        /* In a finished run nobody is behind: each stopped where its
         * program ended (a failure above says why if it was early). */
        if (finished)
            top = 0;
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
    for (size_t j = 0; j < v->nj; j++) {
        if (!v->j_shown[j])
            continue;
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
 * has printed refreshes before it). A --job J the coordinator knows
 * nothing of (no groups, no members) is EXIT_NOTFOUND: desync reports it
 * as the failure it is; watch (waiting) says so and goes on. */
static int desync_at(c10d_store *s, const ctl_args *a, int64_t at_ms, int waiting,
                     c10d_status *err)
{
    c10d_group_health *g = NULL;
    c10d_job_info *jobs = NULL;
    size_t ng = 0, nj = 0;
    int rc;
    if ((*err = c10d_store_health(s, a->job, a->group, &g, &ng)) != C10D_OK)
        return -1;
    if ((*err = c10d_store_jobs(s, a->job, &jobs, &nj)) != C10D_OK) {
        c10d_free(g);
        return -1;
    }
    if (a->job && !ng && !nj) {
        c10d_free(g);
        c10d_free(jobs);
        if (!waiting)
            return ctl_fail_no_job(a->job);
        char msg[512];
        snprintf(msg, sizeof msg, "no job %s on this coordinator yet: waiting for it", a->job);
        if (ctl_json) {
            printf("{\"ok\":false,\"at_ms\":%" PRId64 ",\"status\":\"ENOTFOUND\",\"error\":",
                   at_ms);
            json_string(stdout, msg, strlen(msg));
            printf("}\n");
        } else {
            printf("%s\n", msg);
        }
        return EXIT_NOTFOUND;
    }
    view v = {g, ng, jobs, nj, calloc(ng + 1, 1), calloc(nj + 1, 1), 0, 1};
    if (!v.g_shown || !v.j_shown) {
        *err = C10D_ENOMEM;
        rc = -1;
        goto cleanup;
    }
    /* --job J: J's current run whatever its state; --finished: every
     * run; otherwise the live and forming ones. */
    int all = a->finished || a->job;
    for (size_t j = 0; j < nj; j++) {
        v.j_shown[j] = all || run_of(&jobs[j]) != RUN_FINISHED;
        v.hidden += !v.j_shown[j];
    }
    for (size_t i = 0; i < ng; i++)
        v.g_shown[i] = all || run_of_group(&g[i], jobs, nj) != RUN_FINISHED;
    for (size_t i = 0; i < ng; i++)
        v.healthy &= !v.g_shown[i] || g[i].status == C10D_OK;
    /* A member that left cleanly is not a problem; one that died is. */
    for (size_t j = 0; j < nj; j++)
        for (size_t k = 0; v.j_shown[j] && k < jobs[j].n_members; k++)
            v.healthy &= jobs[j].members[k].state != C10D_MEMBER_DEAD;
    if (ctl_json)
        print_json(&v, at_ms);
    else
        print_text(&v);
    rc = v.healthy ? 0 : EXIT_UNHEALTHY;
cleanup:
    free(v.g_shown);
    free(v.j_shown);
    c10d_free(g);
    c10d_free(jobs);
    return rc;
}

int cmd_desync(c10d_store *s, const ctl_args *a)
{
    c10d_status err;
    int rc = desync_at(s, a, 0, 0, &err);
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
        /* A job not there yet may be one about to start: watch waits
         * (and exits 3 if the last refresh still found none). */
        if ((rc = desync_at(s, a, json ? now_ms : 0, 1, &err)) < 0)
            return ctl_fail_last(err);
        fflush(stdout);
        if (count == 0 || i + 1 < count) {
            struct timespec ts = {interval / 1000, (long)(interval % 1000) * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return rc;
}
