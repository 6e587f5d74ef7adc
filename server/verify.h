/* Collective-sequence verification: for every (group, seq), the
 * fingerprints the group's members report must agree. Verified in memory
 * (a window of recent seqs per group); findings go to SQLite once, when
 * made. See docs/verification.md. */
#ifndef C10DS_VERIFY_H
#define C10DS_VERIFY_H

#include "fingerprint.h"

#include <stddef.h>
#include <stdint.h>

#define C10DS_VERIFY_WINDOW 1024 /* seqs of one group checked at once */

typedef struct c10ds_vslot {
    uint64_t seq; /* 0: unused */
    c10dc_fp fp;  /* the first reporter's */
    int first;    /* its group rank */
    int count;    /* members that entered */
    int64_t first_ms;
} c10ds_vslot;

typedef struct c10ds_vgroup {
    struct c10ds_vgroup *next;
    char job[128], name[64];
    uint64_t gen;
    int size;
    int *ranks;     /* global rank of each group rank */
    int world;
    int *index_of;  /* group rank of each global rank, or -1 */
    uint64_t *entered, *completed;
    int64_t *entered_ms; /* wall clock */
    c10dc_fp *last;      /* what each member entered last */
    c10ds_vslot *win;
    int64_t timeout_ms;  /* the longest collective timeout reported */
    int status;          /* 0, or the sticky finding's C10D_E* */
    char report[1024];
} c10ds_vgroup;

typedef struct c10ds_verify {
    c10ds_vgroup *groups;
} c10ds_verify;

void c10ds_verify_fini(c10ds_verify *v);

#endif
