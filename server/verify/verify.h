/* Collective-sequence verification: for every (group, seq), the
 * fingerprints the group's members report must agree. Verified in memory
 * (a window of recent seqs per group); findings go to SQLite once, when
 * made. See docs/verification.md. */
#ifndef C10DS_VERIFY_H
#define C10DS_VERIFY_H

#include "fingerprint.h"

#include <stddef.h>
#include <stdint.h>

/* A run of consecutive collectives with the same fingerprint, as the
 * first rank to report them entered them: the reference every other rank's
 * entries are compared with. */
typedef struct c10ds_vrun {
    uint64_t start, end; /* seqs, inclusive */
    c10dc_fp fp;
    int first;           /* the group rank that reported it first */
    int64_t first_ms;    /* when it was reported, on the sink's clock (now_ms) */
} c10ds_vrun;

/* One rank's recent entries, as reported (a run of the same call). */
typedef struct c10ds_tentry {
    uint64_t first, last;
    c10dc_fp fp;
    int64_t entered_ms; /* wall clock */
} c10ds_tentry;

typedef struct c10ds_trace {
    c10ds_tentry *ring;
    size_t head, count, cap;
    size_t dirty; /* newest entries not yet written to SQLite */
} c10ds_trace;

#define C10DS_TRACE_SEQS 2000 /* collectives kept per rank and group */

/* A send or recv not yet matched with its peer's (server/verify/verify_ops.c). */
typedef struct c10ds_vp2p {
    struct c10ds_vp2p *next;
    int src, dst, tag; /* group ranks */
    uint32_t kind;     /* C10DC_SEND or C10DC_RECV */
    c10dc_fp fp;
    uint64_t seq;      /* the reporting rank's own p2p count */
} c10ds_vp2p;

typedef struct c10ds_engine c10ds_engine;

typedef struct c10ds_vgroup {
    struct c10ds_vgroup *next;
    c10ds_vp2p *p2p, *p2p_tail; /* unmatched, oldest first */
    char job[128], name[64];
    uint64_t gen;
    int size;
    int *ranks;     /* global rank of each group rank */
    int world;
    int *index_of;  /* group rank of each global rank, or -1 */
    uint64_t *entered, *completed;
    int64_t *entered_ms; /* wall clock */
    c10dc_fp *last;      /* what each member entered last */
    uint64_t min_entered; /* every member has entered up to here */
    int64_t min_since_ms; /* when min_entered last moved, on the sink's clock */
    int at_min;           /* members whose entered == min_entered */
    /* reference runs not yet entered by every member, oldest first: a ring */
    c10ds_vrun *runs;
    size_t run_head, run_count, run_cap;
    c10ds_trace *traces; /* per member */
    uint64_t finding_seq;
    int64_t timeout_ms;  /* the longest collective timeout reported (0: none yet) */
    int status;          /* 0, or the sticky finding's C10D_E* */
    char report[1024];
} c10ds_vgroup;

/* --- the state machine (verify_runs.c): pure, no engine or SQLite --- */

/* Where the state machine says what it found. */
typedef struct c10ds_vsink {
    /* Group rank idx entered seq with fp, which differs from the
     * reference ref in field ("dtype", "count"...). */
    void (*desync)(void *arg, c10ds_vgroup *g, uint64_t seq, const c10ds_vrun *ref, int idx,
                   const c10dc_fp *fp, const char *field);
    /* Every member has entered up to g->min_entered now (it moved). */
    void (*min_moved)(void *arg, const c10ds_vgroup *g);
    void *arg;
    /* Now, on the clock a collective's pending time is measured by: the
     * engine's heard clock (c10ds_engine_heard_ms), which stands still
     * while the coordinator stalls, so its stalls count against no rank. */
    int64_t now_ms;
} c10ds_vsink;

/* A group of n members (their global ranks) in a world of `world`. */
c10ds_vgroup *c10ds_vgroup_new(const char *job, uint64_t gen, const char *name,
                               const int32_t *ranks, int n, int world);
void c10ds_vgroup_free(c10ds_vgroup *g);
/* Group rank idx entered start..end, all fp: compared with the reference
 * where some member was there first, the reference after that. A resend
 * (up to what idx entered already) changes nothing. */
void c10ds_vgroup_enter(c10ds_vgroup *g, int idx, uint64_t start, uint64_t end,
                        const c10dc_fp *fp, const c10ds_vsink *sink);
/* idx moved on to seq without reporting (OFF): not compared. */
void c10ds_vgroup_skip_to(c10ds_vgroup *g, int idx, uint64_t seq, const c10ds_vsink *sink);
/* The reference run holding seq, or NULL once every member passed it. */
const c10ds_vrun *c10ds_vgroup_ref(c10ds_vgroup *g, uint64_t seq);

typedef struct c10ds_verify {
    c10ds_vgroup *groups;
    int64_t next_flush_ms; /* traces to SQLite, monotonic */
    int flush_slice, flush_slices; /* the ranks the next flush writes (verify_trace.c) */
    int flush_all;         /* the next flush writes every rank (a finding) */
} c10ds_verify;

void c10ds_verify_fini(c10ds_verify *v);

/* --- for modules that build on verification (join_release.c, join_ops.c,
 * join_events.c) --- */

/* The group's verification state, made from the groups table the first
 * time; NULL if the group has not formed. */
c10ds_vgroup *c10ds_verify_group(c10ds_engine *e, const char *job, uint64_t gen,
                                 const char *name);
/* Group rank idx entered start..end, all fp, as if it had reported them
 * (compared with the reference like any report). */
void c10ds_verify_enter(c10ds_engine *e, c10ds_vgroup *g, int idx, uint64_t start, uint64_t end,
                        const c10dc_fp *fp);
/* idx issued everything up to seq without reporting it (OFF): it is moved
 * on without comparing. */
void c10ds_verify_skip_to(c10ds_engine *e, c10ds_vgroup *g, int idx, uint64_t seq);
/* The reference run holding seq, or NULL once every member passed it. */
const c10ds_vrun *c10ds_verify_ref(c10ds_vgroup *g, uint64_t seq);
/* Records g's sticky finding (the first one stands), tells everyone. */
void c10ds_verify_finding(c10ds_engine *e, c10ds_vgroup *g, uint64_t seq, int status,
                          const char *report);
/* If a member that died or left before entering seq makes it impossible,
 * records that as g's finding (ending the report with `waiter`, "rank 1
 * waits in #6 ...") and returns 1. */
int c10ds_verify_member_lost(c10ds_engine *e, c10ds_vgroup *g, uint64_t seq, const char *waiter);
/* "rank 1" or "rank 1 (global 3)". */
const char *c10ds_verify_who(const c10ds_vgroup *g, int idx, char *buf, size_t cap);
/* Where every member is: "rank 0 in #6 ... for 5.0 s; rank 1 completed #5 ...". */
void c10ds_verify_whereabouts(const c10ds_vgroup *g, char *buf, size_t cap);

/* verify_report.c: the key SYNC reports of g park on; waking them; the
 * findings (each records itself and is told to everyone). */
void c10ds_verify_coll_key(char *buf, size_t cap, const c10ds_vgroup *g);
void c10ds_verify_wake(c10ds_engine *e, const c10ds_vgroup *g);
void c10ds_verify_desync(c10ds_engine *e, c10ds_vgroup *g, uint64_t seq, const c10ds_vrun *ref,
                         int idx, const c10dc_fp *fp, const char *field);
void c10ds_verify_stall(c10ds_engine *e, c10ds_vgroup *g, uint64_t seq);
/* c10ds_verify_member_lost, worded for group rank `waiter` waiting in seq. */
int c10ds_verify_waiter_lost(c10ds_engine *e, c10ds_vgroup *g, uint64_t seq, int waiter);

/* verify_trace.c: rank idx entered first..last (one call, fp) — kept as a
 * run of its trace; the traces' new runs written to SQLite (each rank's
 * every 2 s; past 1,024 ranks a slice of them at a time; a group's all at
 * once before it is freed). */
void c10ds_trace_add(c10ds_trace *t, uint64_t first, uint64_t last, const c10dc_fp *fp);
void c10ds_traces_flush(c10ds_engine *e);
void c10ds_traces_flush_group(c10ds_engine *e, c10ds_vgroup *g);

#endif
