/* c10d/jobs.h — what the coordinator knows about jobs: their current
 * generation, members (alive, left, dead, and why) and process groups.
 * For operators and tools (c10d-ctl status); ranks do not need it. */
#ifndef C10D_JOBS_H
#define C10D_JOBS_H

#include "common.h"
#include "errors.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A member's state (numbered as the wire's MemberState). */
typedef enum c10d_member_state {
    C10D_MEMBER_ALIVE = 1,
    C10D_MEMBER_LEFT = 2, /* called c10d_destroy, or gave up waiting in its rendezvous */
    C10D_MEMBER_DEAD = 3, /* its connection closed, or its heartbeats stopped */
} c10d_member_state;

/* "alive", "left" or "dead", what c10d-ctl prints; "unknown" for any
 * other value. A fixed string. */
C10D_API const char *c10d_member_state_name(c10d_member_state state);

typedef struct c10d_member_info {
    int rank;
    c10d_member_state state;
    const char *host;
    int pid;
    const char *reason;   /* why it left or died; "" while alive */
    const char *activity; /* last reported, e.g. "in collective #5 ALL_REDUCE ..." */
    int64_t changed_ms;   /* wall clock of the last state change */
    int64_t last_seen_ms; /* wall clock of the last heartbeat */
} c10d_member_info;

/* A rank that ran out of inputs in a join region (c10d/join.h). */
typedef struct c10d_joined_rank {
    int rank; /* in the group */
    int global_rank;
    uint64_t after_seq; /* out of inputs after this collective: it shadows the later ones */
    int64_t joined_ms;  /* wall clock */
} c10d_joined_rank;

/* A group's latest join region. */
typedef struct c10d_join_info {
    unsigned region; /* 1, 2, ... */
    int begun;       /* members that called c10d_join_begin (since the coordinator started) */
    int throw_on_early_termination;
    int divide_by_initial_world_size;
    size_t n_joined;
    const c10d_joined_rank *joined; /* in the order they joined */
    uint64_t released;     /* the joined ranks were told every collective up to here */
    const char *shadowing; /* the last of those: "#6 ALL_REDUCE float32[2] SUM" ("" if none) */
    int caught_up;         /* every joined rank has shadowed all of them */
    int done;              /* every member joined: the region is over */
    int last_joiner;       /* once done (a group rank); else -1 */
} c10d_join_info;

typedef struct c10d_group_info {
    const char *name; /* "world", "world.1", ... */
    int size;
    const int *ranks; /* global ranks in group order */
    int arrived;      /* members that arrived in its rendezvous */
    int formed;
    const c10d_join_info *join; /* its latest join region; NULL if it had none */
} c10d_group_info;

typedef struct c10d_job_info {
    const char *job;
    uint64_t generation;
    int world_size;
    int formed;
    size_t n_members;
    const c10d_member_info *members;
    size_t n_groups;
    const c10d_group_info *groups;
} c10d_job_info;

/* Jobs on the coordinator behind s (job NULL = all; else that one). On
 * success *jobs holds *n entries: one allocation with everything they
 * point to, freed with one c10d_free. */
C10D_API c10d_status c10d_store_jobs(c10d_store *s, const char *job, c10d_job_info **jobs,
                                     size_t *n);

/* Collective-sequence verification, per group: how far each rank got,
 * and the group's finding if any (a desync, a lost member, a stall). */
typedef struct c10d_rank_progress {
    int rank;           /* in the group */
    int global_rank;
    uint64_t entered;   /* highest collective number entered (0: none) */
    uint64_t completed; /* highest reported completed */
    int64_t entered_ms; /* wall clock of the last entry */
    const char *last;   /* what it entered last: "ALL_REDUCE float32[2] SUM" ("" if none) */
} c10d_rank_progress;

typedef struct c10d_group_health {
    const char *job;
    uint64_t generation;
    const char *group;
    int size;
    c10d_status status; /* C10D_OK, or C10D_EDESYNC / C10D_EPEERLOST / C10D_ETIMEDOUT */
    const char *report; /* the finding, "" when healthy */
    size_t n_ranks;
    const c10d_rank_progress *ranks;
} c10d_group_health;

/* Verification state of the current generation's groups (job and group
 * NULL = all). Groups appear once a collective was verified on them. On
 * success *groups holds *n entries (one allocation: free with c10d_free). */
C10D_API c10d_status c10d_store_health(c10d_store *s, const char *job, const char *group,
                                       c10d_group_health **groups, size_t *n);

/* A run of a rank's collectives: the same call from first to last. */
typedef struct c10d_trace_row {
    uint64_t first_seq, last_seq;
    const char *what;   /* "ALL_REDUCE float32[2] SUM" */
    const char *state;  /* "entered", "verified" (every member entered it alike),
                           "completed", or "failed" (the group's finding is here) */
    int64_t entered_ms; /* wall clock, when the run began */
} c10d_trace_row;

/* The most recent `limit` collectives (0: 50) that global rank `rank`
 * entered in `group` (NULL: "world") of `job` (NULL: any), oldest first.
 * *rows is one allocation: free it with c10d_free. Errors: C10D_ENOTFOUND. */
C10D_API c10d_status c10d_store_trace(c10d_store *s, const char *job, const char *group, int rank,
                                      unsigned limit, c10d_trace_row **rows, size_t *n);

/* c10d_store_trace, also saying whose collectives they are: on success
 * *job_out (when job_out is not NULL) is the job's name, the one the
 * coordinator picked when `job` is NULL. It lies in *rows's allocation
 * (freed with it). Errors: C10D_ENOTFOUND. */
C10D_API c10d_status c10d_store_trace_job(c10d_store *s, const char *job, const char *group,
                                          int rank, unsigned limit, c10d_trace_row **rows,
                                          size_t *n, const char **job_out);

#ifdef __cplusplus
}
#endif
#endif
