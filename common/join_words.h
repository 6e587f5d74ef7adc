/* common/join_words.h — the messages of a join region (docs/join.md)
 * that both the coordinator and a rank's library word, and the rule the
 * first of them words (which collectives a joined rank cannot shadow):
 * one wording, so an operator reads the same sentence whichever side
 * found it. Each side
 * names ranks its own way (the coordinator adds a subgroup's global rank)
 * and passes the names in. */
#ifndef C10DC_JOIN_WORDS_H
#define C10DC_JOIN_WORDS_H

#include "fingerprint.h"

#include <stddef.h>
#include <stdint.h>

/* Join (docs/join.md): NULL when ranks that joined (ran out of inputs) can
 * take part in fp with identity contributions while others still call it;
 * else why not, worded to follow "ALL_GATHER float32[4], which ...".
 * root_joined: fp's root is one of the joined ranks. One rule for the
 * coordinator (which checks what the active ranks enter) and the ranks'
 * data planes (which see it in a peer's transfer header). */
const char *c10dc_join_unshadowable(const c10dc_fp *fp, int root_joined);

/* A list of the ranks that joined, "rank 0 joined after collective #5,
 * rank 2 after #7", at most 8 named (then " and others"): start it with
 * c10dc_join_list_start and add each rank in the order it is to be named;
 * buf is a C string throughout ("" with nobody added). */
typedef struct c10dc_join_list {
    char *buf;
    size_t cap;
    size_t off;
    int named;
} c10dc_join_list;
void c10dc_join_list_start(c10dc_join_list *l, char *buf, size_t cap);
/* Adds `who` ("rank 2") that joined after collective `after`; 0 once the
 * list is full (adding more changes nothing). */
int c10dc_join_list_add(c10dc_join_list *l, const char *who, uint64_t after);

/* The finding when `caller` calls fp at collective seq of a group while
 * members have joined, `why` being c10dc_join_unshadowable's answer and
 * `joined` a c10dc_join_list. */
void c10dc_join_unshadowable_report(char *buf, size_t cap, const char *group, const char *job,
                                    uint64_t seq, const char *caller, const c10dc_fp *fp,
                                    const char *why, const char *joined);

/* The end of the message of a send or recv whose peer has joined:
 * "joined after collective #7 (out of inputs) and will never receive it"
 * (send: the poster sends, so the peer would receive). Returns buf. */
char *c10dc_join_never_matched(char *buf, size_t cap, uint64_t after, int send);

#endif
