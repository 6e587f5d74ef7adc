/* c10d-ctl trace --format chrome: every rank's collectives in one group of
 * a job, as a Chrome Trace Event Format file (the JSON object form:
 * {"traceEvents": [...], "displayTimeUnit": "ms"}) that ui.perfetto.dev
 * and chrome://tracing open: which rank was in which collective when.
 *
 * One process (pid 1) for the group, one thread (tid: the global rank) per
 * rank, named by metadata events ("M", thread_name "rank N"); a complete
 * event ("X") per trace row. A row is what the coordinator keeps (trace's
 * rows): a run of the same call, first_seq..last_seq, with the wall clock
 * of its first entry. The coordinator records no completion times, so a
 * row lasts until the rank's next row began; the last row until the
 * rank's last entry when it completed, else (entered, verified, failed:
 * still open) until now for a live rank or the time it left or died. */
#include "desync.h"
#include "json.h"
#include "output.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Trace rows for each rank of the group, and the member each is. */
typedef struct {
    c10d_trace_row *rows;
    size_t n;
    const c10d_rank_progress *p;
    const c10d_member_info *m; /* NULL if the listing has none */
} rank_rows;

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static const c10d_member_info *member_of(const c10d_job_info *jobs, size_t nj,
                                         const c10d_group_health *g, int global)
{
    for (size_t j = 0; j < nj; j++) {
        if (strcmp(jobs[j].job, g->job) || jobs[j].generation != g->generation)
            continue;
        for (size_t k = 0; k < jobs[j].n_members; k++)
            if (jobs[j].members[k].rank == global)
                return &jobs[j].members[k];
    }
    return NULL;
}

/* When rank r's last row stops: its last entry if it completed it, else
 * still open: now while it is alive, when it left or died otherwise. */
static int64_t open_end(const rank_rows *r, int64_t now)
{
    if (r->m && r->m->state != C10D_MEMBER_ALIVE && r->m->changed_ms > 0)
        return r->m->changed_ms;
    return now;
}

static void write_event(FILE *f, int *first, const char *g_job, const rank_rows *r, size_t i,
                        int64_t t0, int64_t now)
{
    const c10d_trace_row *row = &r->rows[i];
    int last = i + 1 == r->n, done = !strcmp(row->state, "completed");
    int64_t end, start = row->entered_ms;
    const char *until = "next entry";
    if (!last) {
        end = r->rows[i + 1].entered_ms;
    } else if (done) {
        end = r->p->entered_ms > start ? r->p->entered_ms : start;
        until = "last entry";
    } else {
        end = open_end(r, now);
        until = r->m && r->m->state != C10D_MEMBER_ALIVE ? c10d_member_state_name(r->m->state)
                                                         : "now";
    }
    if (end < start)
        end = start;
    uint64_t count = row->last_seq - row->first_seq + 1;
    char name[300];
    if (count > 1)
        snprintf(name, sizeof name, "%s x%" PRIu64, row->what, count);
    else
        snprintf(name, sizeof name, "%s", row->what);
    fprintf(f, "%s\n{\"name\":", *first ? "" : ",");
    *first = 0;
    json_string(f, name, strlen(name));
    fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%" PRId64 ",\"dur\":%" PRId64
               ",\"pid\":1,\"tid\":%d,\"args\":{\"job\":",
            !strcmp(row->state, "failed") ? "collective,failed" : "collective",
            (start - t0) * 1000, (end - start) * 1000, r->p->global_rank);
    json_string(f, g_job, strlen(g_job));
    fprintf(f, ",\"first_seq\":%" PRIu64 ",\"last_seq\":%" PRIu64 ",\"collectives\":%" PRIu64
               ",\"call\":", row->first_seq, row->last_seq, count);
    json_string(f, row->what, strlen(row->what));
    fprintf(f, ",\"state\":\"%s\",\"open\":%s,\"until\":\"%s\",\"entered_ms\":%" PRId64 "}}",
            row->state, last && !done ? "true" : "false", until, row->entered_ms);
}

static void write_trace(FILE *f, const c10d_group_health *g, const rank_rows *rr, int64_t now)
{
    int64_t t0 = INT64_MAX;
    for (size_t k = 0; k < g->n_ranks; k++)
        for (size_t i = 0; i < rr[k].n; i++)
            if (rr[k].rows[i].entered_ms < t0)
                t0 = rr[k].rows[i].entered_ms;
    if (t0 == INT64_MAX)
        t0 = now;
    char pname[512];
    snprintf(pname, sizeof pname, "job %s generation %" PRIu64 ", group %s", g->job,
             g->generation, g->group);
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"job\":");
    json_string(f, g->job, strlen(g->job));
    fprintf(f, ",\"generation\":%" PRIu64 ",\"group\":", g->generation);
    json_string(f, g->group, strlen(g->group));
    fprintf(f, ",\"status\":\"%s\",\"report\":", c10d_status_name(g->status));
    json_string(f, g->report, strlen(g->report));
    fprintf(f, ",\"t0_ms\":%" PRId64 "},\"traceEvents\":[", t0);
    fprintf(f, "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":");
    json_string(f, pname, strlen(pname));
    fprintf(f, "}}");
    for (size_t k = 0; k < g->n_ranks; k++) {
        const c10d_rank_progress *p = rr[k].p;
        char tname[64];
        if (p->rank == p->global_rank)
            snprintf(tname, sizeof tname, "rank %d", p->rank);
        else
            snprintf(tname, sizeof tname, "rank %d (global rank %d)", p->rank, p->global_rank);
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                   "\"args\":{\"name\":\"%s\"}}", p->global_rank, tname);
        fprintf(f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                   "\"args\":{\"sort_index\":%d}}", p->global_rank, p->rank);
    }
    int first = 0; /* the metadata came first */
    for (size_t k = 0; k < g->n_ranks; k++)
        for (size_t i = 0; i < rr[k].n; i++)
            write_event(f, &first, g->job, &rr[k], i, t0, now);
    fprintf(f, "\n]}\n");
}

int cmd_trace_chrome(c10d_store *s, const ctl_args *a)
{
    const char *gname = a->group ? a->group : "world";
    c10d_group_health *gs = NULL;
    c10d_job_info *jobs = NULL;
    size_t ng = 0, nj = 0;
    rank_rows *rr = NULL;
    const c10d_group_health *g = NULL;
    FILE *f = NULL;
    int rc = EXIT_OK;
    c10d_status st = c10d_store_health(s, a->job, gname, &gs, &ng);
    if (st == C10D_OK)
        st = c10d_store_jobs(s, a->job, &jobs, &nj);
    if (st != C10D_OK) {
        rc = ctl_fail_last(st);
        goto cleanup;
    }
    /* Without --job: the first job (by name) with the group. */
    g = ng ? &gs[0] : NULL;
    if (!g) {
        char msg[512];
        snprintf(msg, sizeof msg, "no collectives verified in group %s%s%s on this coordinator",
                 gname, a->job ? " of job " : "", a->job ? a->job : "");
        rc = a->job && !nj ? ctl_fail_no_job(a->job) : ctl_fail(C10D_ENOTFOUND, msg);
        goto cleanup;
    }
    if (!(rr = calloc(g->n_ranks + 1, sizeof *rr))) {
        rc = ctl_fail(C10D_ENOMEM, "out of memory");
        goto cleanup;
    }
    unsigned limit = a->limit ? (unsigned)a->limit : 100000;
    for (size_t k = 0; k < g->n_ranks; k++) {
        rr[k].p = &g->ranks[k];
        rr[k].m = member_of(jobs, nj, g, g->ranks[k].global_rank);
        st = c10d_store_trace_job(s, g->job, g->group, g->ranks[k].global_rank, limit,
                                  &rr[k].rows, &rr[k].n, NULL);
        if (st == C10D_ENOTFOUND) /* a rank that entered nothing: an empty track */
            rr[k].rows = NULL, rr[k].n = 0;
        else if (st != C10D_OK) {
            rc = ctl_fail_last(st);
            goto cleanup;
        }
    }
    f = a->output ? fopen(a->output, "w") : stdout;
    if (!f) {
        char msg[1024];
        snprintf(msg, sizeof msg, "cannot write %s: %s", a->output, strerror(errno));
        rc = ctl_fail(C10D_ERROR, msg);
        goto cleanup;
    }
    write_trace(f, g, rr, now_ms());
    if ((f != stdout && fclose(f) != 0) || (f == stdout && fflush(f) != 0)) {
        char msg[1024];
        snprintf(msg, sizeof msg, "cannot write %s: %s", a->output ? a->output : "stdout",
                 strerror(errno));
        rc = ctl_fail(C10D_ERROR, msg);
    } else if (a->output && !ctl_json) {
        fprintf(stderr, "c10d-ctl: wrote %s: job %s generation %" PRIu64 ", group %s, %zu ranks "
                        "(open it in ui.perfetto.dev or chrome://tracing)\n",
                a->output, g->job, g->generation, g->group, g->n_ranks);
    }
cleanup:
    if (rr && g)
        for (size_t k = 0; k < g->n_ranks; k++)
            c10d_free(rr[k].rows);
    free(rr);
    c10d_free(gs);
    c10d_free(jobs);
    return rc;
}
