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
    int64_t first_ms;    /* monotonic, when it was reported */
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

/* A send or recv not yet matched with its peer's (server/verify_ops.c). */
typedef struct c10ds_vp2p {
    struct c10ds_vp2p *next;
    int src, dst, tag; /* group ranks */
    uint32_t kind;     /* C10DC_SEND or C10DC_RECV */
    c10dc_fp fp;
    uint64_t seq;      /* the reporting rank's own p2p count */
} c10ds_vp2p;

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
    int64_t min_since_ms; /* monotonic, when min_entered last moved */
    int at_min;           /* members whose entered == min_entered */
    /* reference runs not yet entered by every member, oldest first: a ring */
    c10ds_vrun *runs;
    size_t run_head, run_count, run_cap;
    c10ds_trace *traces; /* per member */
    uint64_t finding_seq;
    int64_t timeout_ms;  /* the longest collective timeout reported */
    int status;          /* 0, or the sticky finding's C10D_E* */
    char report[1024];
} c10ds_vgroup;

typedef struct c10ds_verify {
    c10ds_vgroup *groups;
    int64_t next_flush_ms; /* traces to SQLite, monotonic */
} c10ds_verify;

void c10ds_verify_fini(c10ds_verify *v);

#endif
