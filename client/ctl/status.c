/* c10d-ctl status: what the coordinator says about itself, and its jobs:
 * groups, members alive, left or dead and why, join regions. A job of more
 * than CTL_LIST_EACH ranks is summarized (summary.c) unless --all. */
#include "status.h"
#include "json.h"
#include "output.h"
#include "summary.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void fmt_duration(int64_t ms, char *out, size_t n)
{
    int64_t s = ms / 1000;
    if (s < 60)
        snprintf(out, n, "%" PRId64 ".%03" PRId64 " s", s, ms % 1000);
    else if (s < 3600)
        snprintf(out, n, "%" PRId64 " min %" PRId64 " s", s / 60, s % 60);
    else
        snprintf(out, n, "%" PRId64 " h %" PRId64 " min", s / 3600, (s % 3600) / 60);
}

static void print_join_json(const c10d_join_info *ji)
{
    printf(",\"join\":{\"region\":%u,\"begun\":%d,\"throw_on_early_termination\":%s,"
           "\"divide_by_initial_world_size\":%s,\"joined\":[", ji->region, ji->begun,
           ji->throw_on_early_termination ? "true" : "false",
           ji->divide_by_initial_world_size ? "true" : "false");
    for (size_t i = 0; i < ji->n_joined; i++)
        printf("%s{\"rank\":%d,\"global_rank\":%d,\"after_seq\":%" PRIu64
               ",\"joined_ms\":%" PRId64 "}", i ? "," : "", ji->joined[i].rank,
               ji->joined[i].global_rank, ji->joined[i].after_seq, ji->joined[i].joined_ms);
    printf("],\"released\":%" PRIu64 ",\"shadowing\":", ji->released);
    json_string(stdout, ji->shadowing, strlen(ji->shadowing));
    printf(",\"caught_up\":%s,\"done\":%s", ji->caught_up ? "true" : "false",
           ji->done ? "true" : "false");
    if (ji->done)
        printf(",\"last_joiner\":%d", ji->last_joiner);
    printf("}");
}

/* "    join region 1   1 of 4 joined: rank 0 after #5, rank 2 after #7;
 *                      shadowing up to #9 ALL_REDUCE float32[2] SUM" */
static void print_join_text(const c10d_group_info *g)
{
    const c10d_join_info *ji = g->join;
    printf("    join region %-3u", ji->region);
    if (ji->done) {
        printf(" over: all %d ranks joined; last joiner rank %d", g->size, ji->last_joiner);
        for (size_t i = 0; i < ji->n_joined; i++)
            if (ji->joined[i].rank == ji->last_joiner)
                printf(" (after #%" PRIu64 ")", ji->joined[i].after_seq);
        printf("\n");
        return;
    }
    printf(" %zu of %d joined", ji->n_joined, g->size);
    for (size_t i = 0; i < ji->n_joined && i < 16; i++)
        printf("%s rank %d after #%" PRIu64, i ? "," : ":", ji->joined[i].rank,
               ji->joined[i].after_seq);
    if (ji->n_joined > 16)
        printf(" and %zu more", ji->n_joined - 16);
    if (*ji->shadowing && !ji->caught_up)
        printf("; shadowing up to %s", ji->shadowing);
    else if (*ji->shadowing)
        printf("; shadowed up to %s, waiting for the next collective", ji->shadowing);
    else if (ji->n_joined)
        printf("; waiting for the next collective");
    if (ji->throw_on_early_termination)
        printf(" (throw_on_early_termination)");
    printf("\n");
}

static void print_jobs_json(const c10d_job_info *jobs, size_t nj)
{
    printf("\"jobs\":[");
    for (size_t i = 0; i < nj; i++) {
        const c10d_job_info *j = &jobs[i];
        printf("%s{\"job\":", i ? "," : "");
        json_string(stdout, j->job, strlen(j->job));
        printf(",\"generation\":%" PRIu64 ",\"world_size\":%d,\"formed\":%s,\"members\":[",
               j->generation, j->world_size, j->formed ? "true" : "false");
        for (size_t k = 0; k < j->n_members; k++) {
            const c10d_member_info *m = &j->members[k];
            printf("%s{\"rank\":%d,\"state\":", k ? "," : "", m->rank);
            const char *state = c10d_member_state_name(m->state);
            json_string(stdout, state, strlen(state));
            printf(",\"host\":");
            json_string(stdout, m->host, strlen(m->host));
            printf(",\"pid\":%d,\"reason\":", m->pid);
            json_string(stdout, m->reason, strlen(m->reason));
            printf(",\"activity\":");
            json_string(stdout, m->activity, strlen(m->activity));
            printf(",\"last_seen_ms\":%" PRId64 "}", m->last_seen_ms);
        }
        printf("],\"groups\":[");
        for (size_t k = 0; k < j->n_groups; k++) {
            const c10d_group_info *g = &j->groups[k];
            printf("%s{\"name\":", k ? "," : "");
            json_string(stdout, g->name, strlen(g->name));
            /* "joined": the key from before the field was named arrived */
            printf(",\"size\":%d,\"joined\":%d,\"formed\":%s,\"ranks\":[", g->size, g->arrived,
                   g->formed ? "true" : "false");
            for (int r = 0; r < g->size; r++)
                printf("%s%d", r ? "," : "", g->ranks[r]);
            printf("]");
            if (g->join)
                print_join_json(g->join);
            printf("}");
        }
        printf("]}");
    }
    printf("]");
}

/* One member's line. */
static void print_member(const c10d_member_info *m)
{
    printf("  rank %-4d %-5s %s pid %d", m->rank, c10d_member_state_name(m->state), m->host,
           m->pid);
    if (*m->reason)
        printf(" - %s", m->reason);
    if (*m->activity)
        printf(" [%s]", m->activity);
    printf("\n");
}

/* A big job's members in a few lines: the ranks of each state (and, for
 * those not alive, each reason) as ranges, then the first few not alive
 * by name. */
static void print_members_summary(const c10d_job_info *j)
{
    ctl_buckets bs = {0};
    for (size_t k = 0; k < j->n_members; k++) {
        const c10d_member_info *m = &j->members[k];
        char key[600];
        snprintf(key, sizeof key, "%s%s%s", c10d_member_state_name(m->state),
                 *m->reason ? ": " : "", m->reason);
        if (ctl_bucket_add(&bs, key, m->rank) != 0)
            break;
    }
    ctl_buckets_sort(&bs);
    for (int i = 0; i < bs.n; i++) {
        printf("  %d %s: ranks ", bs.b[i].n, bs.b[i].key);
        ctl_print_ranges(stdout, bs.b[i].ranks, bs.b[i].n);
        printf("\n");
    }
    ctl_buckets_free(&bs);
    /* By name: the first to go (the likeliest cause of the rest). */
    const c10d_member_info *first[CTL_LIST_ODD];
    int nf = 0, odd = 0;
    for (size_t k = 0; k < j->n_members; k++) {
        const c10d_member_info *m = &j->members[k];
        if (m->state == C10D_MEMBER_ALIVE)
            continue;
        odd++;
        int at = nf < CTL_LIST_ODD ? nf++ : CTL_LIST_ODD;
        if (at == CTL_LIST_ODD && first[at - 1]->changed_ms <= m->changed_ms)
            continue;
        if (at == CTL_LIST_ODD)
            at--;
        for (; at > 0 && first[at - 1]->changed_ms > m->changed_ms; at--)
            first[at] = first[at - 1];
        first[at] = m;
    }
    for (int i = 0; i < nf; i++)
        print_member(first[i]);
    if (odd > nf)
        printf("  ... %d more not alive (--all lists every rank; --json has them all)\n",
               odd - nf);
}

static void print_jobs_text(const c10d_job_info *jobs, size_t nj)
{
    if (!nj) {
        printf("jobs         none\n");
        return;
    }
    for (size_t i = 0; i < nj; i++) {
        const c10d_job_info *j = &jobs[i];
        int alive = 0, left = 0, dead = 0;
        for (size_t k = 0; k < j->n_members; k++)
            alive += j->members[k].state == C10D_MEMBER_ALIVE,
                left += j->members[k].state == C10D_MEMBER_LEFT,
                dead += j->members[k].state == C10D_MEMBER_DEAD;
        printf("\njob %s  generation %" PRIu64 ", world size %d, %s: %d alive, %d left, %d dead\n",
               j->job, j->generation, j->world_size, j->formed ? "formed" : "forming", alive,
               left, dead);
        for (size_t k = 0; k < j->n_groups; k++) {
            const c10d_group_info *g = &j->groups[k];
            printf("  group %-10s %d ranks [", g->name, g->size);
            ctl_print_ranges(stdout, g->ranks, g->size);
            printf("]%s\n", g->formed ? "" : " (forming)");
            if (g->join)
                print_join_text(g);
        }
        if (j->n_members > CTL_LIST_EACH && !ctl_list_all) {
            print_members_summary(j);
            continue;
        }
        for (size_t k = 0; k < j->n_members; k++)
            print_member(&j->members[k]);
    }
}

int cmd_status(c10d_store *s, const ctl_args *a)
{
    const char *job = a->job;
    c10d_coord_info *ip = NULL;
    c10d_status st = c10d_store_coord_info(s, &ip);
    if (st != C10D_OK)
        return ctl_fail_last(st);
    c10d_coord_info info = *ip; /* its strings stay in ip's block until the end */
    c10d_job_info *jobs = NULL;
    size_t nj = 0;
    if ((st = c10d_store_jobs(s, job, &jobs, &nj)) != C10D_OK) {
        c10d_free(ip);
        return ctl_fail_last(st);
    }
    if (job && !nj) {
        c10d_free(jobs);
        c10d_free(ip);
        return ctl_fail_no_job(job);
    }
    if (ctl_json) {
        printf("{\"ok\":true,\"coordinator\":{\"url\":");
        json_string(stdout, c10d_store_url(s), strlen(c10d_store_url(s)));
        printf(",\"listen\":");
        json_string(stdout, info.listen_url, strlen(info.listen_url));
        printf(",\"version\":");
        json_string(stdout, info.version, strlen(info.version));
        printf(",\"database\":");
        json_string(stdout, info.db_path, strlen(info.db_path));
        printf(",\"tcpstore\":");
        if (info.tcpstore_url)
            json_string(stdout, info.tcpstore_url, strlen(info.tcpstore_url));
        else
            printf("null");
        printf(",\"schema_version\":%d,\"uptime_ms\":%" PRId64 ",\"keys\":%" PRId64
               ",\"clients\":%" PRId64 ",\"requests\":%" PRId64 ",\"parked\":%" PRId64
               ",\"replies_waited\":%" PRId64 ",\"batches\":%" PRId64 ",\"polled\":%" PRId64
               "},",
               info.schema_version, info.uptime_ms, info.num_keys, info.clients, info.requests,
               info.parked, info.replies_waited, info.batches, info.polled);
        print_jobs_json(jobs, nj);
        printf("}\n");
        c10d_free(jobs);
        c10d_free(ip);
        return EXIT_OK;
    }
    char up[64];
    fmt_duration(info.uptime_ms, up, sizeof up);
    printf("coordinator  %s (c10d-coord %s, listening on %s)\n", c10d_store_url(s), info.version,
           info.listen_url);
    if (info.tcpstore_url)
        printf("tcpstore     %s (PyTorch TCPStore's protocol, keys under tcpstore/)\n",
               info.tcpstore_url);
    printf("uptime       %s\n", up);
    printf("database     %s (schema version %d)\n", info.db_path, info.schema_version);
    printf("keys         %" PRId64 "\n", info.num_keys);
    printf("clients      %" PRId64 " connected\n", info.clients);
    printf("requests     %" PRId64 " served in %" PRId64 " batches (a commit each), %" PRId64
           " waiting on keys\n", info.requests, info.batches, info.parked);
    printf("replies      %" PRId64 " waited for a client slow to read\n", info.replies_waited);
    printf("busy-poll    %" PRId64 " rounds of requests found awake (--busy-poll-us)\n",
           info.polled);
    print_jobs_text(jobs, nj);
    c10d_free(jobs);
    c10d_free(ip);
    return EXIT_OK;
}
