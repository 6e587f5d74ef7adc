/* Join for uneven inputs: the coordinator's bookkeeping (docs/join.md).
 *
 * Every member of a group enters a join region (c10d_join_begin); a rank
 * out of inputs joins after its last collective N and from then on shadows
 * the group's collectives N+1, N+2, ... with identity contributions. The
 * coordinator, not extra collectives, tells it what to shadow: collective
 * s is *released* to the joined ranks once every member still active at s
 * has entered s alike (verification) and knows of every join before s (so
 * it divides an AVG and counts active ranks right). The region ends when
 * every member has joined; all learn the same last joiner.
 *
 * A region's joins are in SQLite (join_regions, join_members): what
 * c10d-ctl status shows and what a restarted coordinator reloads. The
 * released collectives not yet shadowed by every joined rank are kept in
 * memory as runs. */
#ifndef C10DS_JOIN_H
#define C10DS_JOIN_H

#include "db/db.h"
#include "fingerprint.h"

#include <stddef.h>
#include <stdint.h>

#define C10DS_ACTIVE UINT64_MAX /* c10ds_jmember.after of a member still active */

typedef struct c10ds_jmember {
    uint64_t after;  /* joined after this collective, or C10DS_ACTIVE */
    uint32_t order;  /* 1 for the first to join; 0 while active */
    uint32_t known;  /* joins it acknowledged (JoinState.version) */
    uint64_t asked;  /* joined: it has shadowed everything up to here */
    int64_t joined_ms;
    int begun;       /* called c10d_join_begin */
    int told_done;   /* heard that the region is over */
    int inband;      /* joined, learns what to shadow from its peers' data plane: it
                        needs no released runs (docs/join.md) */
} c10ds_jmember;

/* Released collectives first..last, all the same call, with `active`
 * ranks contributing data. */
typedef struct c10ds_jrun {
    uint64_t first, last;
    c10dc_fp fp;
    int active;
} c10ds_jrun;

typedef struct c10ds_jregion {
    struct c10ds_jregion *next;
    char job[128], name[64];
    uint64_t gen;
    uint32_t region;
    int size;
    int *ranks; /* global rank of each group rank */
    int throw_early, divide_initial;
    int inband; /* as the first member to begin said it: 1 in-band, 0 not, -1 not known
                   (reloaded after a restart: the next to begin says) */
    c10ds_jmember *m;
    uint32_t joins;    /* how many joined: the region's version */
    uint64_t released; /* every joined rank was entered up to here */
    c10dc_fp last_fp;  /* what collective `released` was (kind C10DC_KIND_COUNT: none yet) */
    c10ds_jrun *runs;  /* released, not yet shadowed by every joined rank: a ring */
    size_t run_head, run_count, run_cap;
    int done, last_joiner;
    uint64_t final_seq;
    int64_t begun_ms;
    int restored; /* reloaded after a coordinator restart: released is unknown */
} c10ds_jregion;

enum { JS_REGION_GET, JS_REGION_PUT, JS_REGION_DONE, JS_MEMBERS_GET, JS_MEMBER_PUT, JS_COUNT };

typedef struct c10ds_join {
    c10ds_db *db;
    sqlite3_stmt *st[JS_COUNT];
    c10ds_jregion *regions;
} c10ds_join;

int c10ds_join_init(c10ds_join *j, c10ds_db *db);
void c10ds_join_fini(c10ds_join *j);

/* The region, from memory or the database (then marked restored); with
 * create, a new one for a group of `size` members (ranks: global ranks).
 * NULL if there is none (or on a database error). */
c10ds_jregion *c10ds_join_region(c10ds_join *j, const char *job, uint64_t gen, const char *name,
                                 uint32_t region, int size, const int *ranks, int create,
                                 int throw_early, int divide_initial);
/* The newest region of a group, from memory or the database; *loaned = 1
 * when it was read for the caller alone (free it with
 * c10ds_join_region_free). */
c10ds_jregion *c10ds_join_latest(c10ds_join *j, const char *job, uint64_t gen, const char *name,
                                 int size, const int *ranks, int *loaned);
void c10ds_join_region_free(c10ds_jregion *r);
/* Records that group rank idx joined after collective `after`: its order,
 * the database row, and the end of the region when it was the last. */
int c10ds_join_record(c10ds_join *j, c10ds_jregion *r, int idx, uint64_t after);
/* Frees regions that are over and told to every member, and those of
 * generations other than the current one. */
void c10ds_join_prune(c10ds_join *j, const char *job, uint64_t current_gen);
/* Frees every region of (job, gen): its run's records are reclaimed. */
void c10ds_join_forget(c10ds_join *j, const char *job, uint64_t gen);

/* --- the release rule (pure: unit-tested) --- */

/* Whether member idx shadows collective s (it joined before s). */
int c10ds_join_shadows(const c10ds_jregion *r, int idx, uint64_t s);
/* Ranks that contribute data to collective s. */
int c10ds_join_active_at(const c10ds_jregion *r, uint64_t s);
/* For each k = 0..joins: the lowest `after` among the joins after the k-th
 * (UINT64_MAX if none), into out (joins + 1 entries). A member that knows
 * k joins must not see released a collective after that seq. */
void c10ds_join_unknown_after(const c10ds_jregion *r, uint64_t *out);
/* The last collective, from s on, that member idx (active at s) lets be
 * released: bounded by what it entered, by its knowledge of the joins (it
 * must know every join before a collective: unknown_after from above;
 * until it joins itself), and by its own join (after which the set of
 * active ranks changes). entered is what verification saw it enter. */
uint64_t c10ds_join_member_limit(const c10ds_jregion *r, int idx, uint64_t s, uint64_t entered,
                                 const uint64_t *unknown_after);
/* NULL if the joined ranks can shadow fp at s; else why not, naming the
 * rule ("needs every member's data", "is rooted at"); *culprit is the
 * joined rank concerned. */
const char *c10ds_join_unshadowable(const c10ds_jregion *r, const c10dc_fp *fp, uint64_t s,
                                    int *culprit);
/* The rank that joined last (highest after; ties: highest rank). */
int c10ds_join_last_joiner(const c10ds_jregion *r);

/* Appends released run [first, last] (merging with the previous). */
int c10ds_join_log(c10ds_jregion *r, uint64_t first, uint64_t last, const c10dc_fp *fp,
                   int active);
/* The i-th logged run. */
const c10ds_jrun *c10ds_join_run(const c10ds_jregion *r, size_t i);
/* Drops logged runs every joined rank has shadowed. */
void c10ds_join_trim(c10ds_jregion *r);

#endif
