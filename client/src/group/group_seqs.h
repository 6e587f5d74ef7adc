/* (group, collective number) lists (group_seqs.c): where each group of a
 * rank stands, for heartbeats and the lost members' finals. */
#ifndef C10DI_GROUP_SEQS_H
#define C10DI_GROUP_SEQS_H

#include "internal.h"

typedef struct c10di_group_seq {
    char *group;
    uint64_t seq;
} c10di_group_seq;
typedef struct c10di_seqs {
    size_t n;
    c10di_group_seq *v;
} c10di_seqs;
/* Sets group's number (adds it the first time). */
c10d_status c10di_seqs_put(c10di_seqs *s, const char *group, uint64_t seq);
/* 1 and *seq if s (may be NULL) has group, else 0. */
int c10di_seqs_get(const c10di_seqs *s, const char *group, uint64_t *seq);
void c10di_seqs_clear(c10di_seqs *s);
c10d_status c10di_seqs_from_pb(c10di_seqs *s, C10dpb__GroupSeq *const *pb, size_t n);
/* s as GroupSeq messages for a request (pointing into s: valid while s
 * is unchanged); NULL when out of memory. Free with c10di_seqs_pb_free. */
typedef struct c10di_seqs_pb_mem {
    C10dpb__GroupSeq *msgs;
    C10dpb__GroupSeq **ptrs;
} c10di_seqs_pb_mem;
C10dpb__GroupSeq **c10di_seqs_pb(const c10di_seqs *s, c10di_seqs_pb_mem *mem);
void c10di_seqs_pb_free(c10di_seqs_pb_mem *mem);

#endif
