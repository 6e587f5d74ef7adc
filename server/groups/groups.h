/* Jobs, members and process groups over the database: who is in which
 * generation of a job, who is alive, which groups exist and which of their
 * members have arrived. Runs on the engine thread, inside its transaction.
 * rendezvous_ops.c and liveness_ops.c turn these into the wire operations.
 *
 * groups.c holds the statements and the tables' reads and writes;
 * members.c builds members as messages (and the lost members' cache),
 * endpoints.c the formed group's endpoints by host. Both read through
 * c10ds_groups_stmt and groups.c calls neither: it is the layer below
 * them. Their caches are therefore not part of c10ds_groups (whose fini
 * would have to call up into them): each is its own struct, empty when
 * zeroed and freed by its own file's clear, held by whoever uses it (the
 * engine, beside e->groups). */
#ifndef C10DS_GROUPS_H
#define C10DS_GROUPS_H

#include "db/db.h"

#include "c10d.pb-c.h"

#include <protobuf-c/protobuf-c.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum {
    GS_JOB_GET,
    GS_JOB_PUT,
    GS_JOB_FORMED,
    GS_JOB_BUMP,
    GS_JOB_LIST,
    GS_JOB_PRUNE_GM,
    GS_MEMBER_GET,
    GS_MEMBER_PUT,
    GS_MEMBER_STATE,
    GS_MEMBER_SEEN,
    GS_MEMBERS_BY_PIPE,
    GS_MEMBERS_STALE,
    GS_MEMBERS_OF_GEN,
    GS_MEMBERS_LOST,
    GS_MEMBERS_ALIVE,
    GS_FINALS_PUT,
    GS_FINALS_OF,
    GS_GROUP_GET,
    GS_GROUP_PUT,
    GS_GROUP_ARRIVED,
    GS_GROUPS_OF_GEN,
    GS_GROUP_HASH,
    GS_GRANKS_PUT,
    GS_GRANKS_LIST,
    GS_GM_PUT,
    GS_GM_LIST,
    GS_GM_HOSTS,
    GS_GM_ONE,
    GS_RESET_PIPES,
    GS_FINDING_PUT,
    GS_TRACE_PUT,
    GS_TRACE_PRUNE,
    GS_TRACE_OF,
    GS_FINDING_GET,
    GS_PROGRESS_PUT,
    GS_PROGRESS_OF,
    GS_MEMBER_OF_CLIENT,
    GS_RUN_KEY_GET,
    GS_RUN_KEY_PUT,
    GS_COUNT
};

typedef struct c10ds_groups {
    int64_t last_change_ms; /* the latest state change stamped (see set_state) */
    c10ds_db *db;
    sqlite3_stmt *st[GS_COUNT];
} c10ds_groups;

/* FNV-1a over a group's global ranks in group order, what an arrival's
 * list is compared by; ranks NULL is the world in order, 0..n-1. */
uint64_t c10ds_ranks_hash(const int32_t *ranks, size_t n);
/* A group's global ranks in group order (size of them, malloc'd; NULL when
 * out of memory), from its group_ranks rows; a group made without a list
 * has none and is 0..size-1. */
int32_t *c10ds_groups_ranks(c10ds_groups *g, const char *job, uint64_t gen, const char *name,
                            int size);

typedef struct c10ds_job {
    uint64_t generation;
    int world_size;
    int formed;
    uint64_t version;
} c10ds_job;

typedef struct c10ds_member {
    char host[256];
    int pid;
    uint64_t client_id;
    C10dpb__MemberState state;
    char reason[256];
    char activity[256];
    int64_t changed_ms, last_seen_ms;
} c10ds_member;

typedef struct c10ds_group {
    uint64_t ranks_hash; /* c10ds_ranks_hash of its ranks (the list itself: c10ds_groups_ranks) */
    int size, arrived, formed; /* arrived: members that reached its rendezvous */
    uint64_t secret; /* data-plane admission, handed to members in the rendezvous reply */
} c10ds_group;

int c10ds_groups_init(c10ds_groups *g, c10ds_db *db);
/* Finalizes the statements; the caches below are their holder's to clear. */
void c10ds_groups_fini(c10ds_groups *g);

/* A member's state is proto's MemberState in memory, in messages and on
 * the wire, and its word (common/member_state.h: "alive", "left", "dead")
 * in SQLite's members.state, so that `sqlite3` shows what c10d-ctl does
 * and the schema-3 CHECK still holds (docs/liveness.md, "Member
 * states"). groups.c and members.c read and write the column through
 * these two, the database edge, and nothing else compares the words. */
C10dpb__MemberState c10ds_state_column(sqlite3_stmt *s, int col);
const char *c10ds_state_word(C10dpb__MemberState state);

/* The statement id, reset and ready to bind. */
static inline sqlite3_stmt *c10ds_groups_stmt(c10ds_groups *g, int id)
{
    sqlite3_stmt *s = g->st[id];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

/* The waiter keys: a job's watches, and a forming group's joins. */
static inline void c10ds_watch_key(char *buf, size_t cap, const char *job, uint64_t gen)
{
    snprintf(buf, cap, "\x01live:%s:%llu", job, (unsigned long long)gen);
}

static inline void c10ds_group_key(char *buf, size_t cap, const char *job, uint64_t gen,
                                   const char *name)
{
    snprintf(buf, cap, "\x01group:%s:%llu:%s", job, (unsigned long long)gen, name);
}

/* --- members.c --- */

/* The lost members of the generation a watch reply named last, at the
 * job's membership version then: a change wakes every watcher of the job,
 * and each gets this same list. */
typedef struct c10ds_lost_cache {
    char key[512];
    uint64_t version;
    int valid;
    C10dpb__MemberInfo **v;
    size_t n;
    /* The same, compact (lost_ranges_ok): whoever left, the first
     * C10DS_LOST_DETAIL that died (pointers into v), runs of the rest. */
    int compact;
    C10dpb__MemberInfo **detail;
    size_t n_detail;
    C10dpb__LostRange **ranges;
    size_t n_ranges;
} c10ds_lost_cache;

#define C10DS_LOST_DETAIL 16

/* Members of a generation as messages (all, or those not alive), in rank
 * order, each that left with its finals; free with c10ds_groups_lost_free. */
C10dpb__MemberInfo **c10ds_members_load(c10ds_groups *g, const char *job, uint64_t gen,
                                        int lost_only, size_t *n);
void c10ds_groups_lost_free(C10dpb__MemberInfo **v, size_t n);
/* Frees everything the cache holds and marks it empty (a zeroed cache is
 * empty: this is its fini, and how it is emptied when stale). */
void c10ds_lost_cache_clear(c10ds_lost_cache *c);

/* --- endpoints.c --- */

/* The endpoints of the group that formed last: all of its members are
 * answered in one burst, and reading N endpoints from the database for
 * each of N replies would make a rendezvous quadratic in reads. */
typedef struct c10ds_endpoints {
    char key[512];
    int size;
    ProtobufCBinaryData *eps; /* malloc'd, each .data too */
    /* peers_on_demand replies carry the caller's host's members only:
     * group ranks ordered by (host, rank), and where each rank's host
     * begins and ends in that order, so a reply costs its own size. */
    int *by_host;            /* size entries */
    int *host_from, *host_to; /* per group rank: its host's range in by_host */
} c10ds_endpoints;

/* The endpoints of a formed group of size members (group-rank order),
 * from the cache c or, for another group than the cached one, the database;
 * NULL out of memory. */
const ProtobufCBinaryData *c10ds_groups_formed_endpoints(c10ds_groups *g, c10ds_endpoints *c,
                                                         const char *job, uint64_t gen,
                                                         const char *name, int size);
/* The members on group rank idx's host, in rank order, into out (room for
 * host_to - host_from); returns how many. */
int c10ds_endpoints_host_peers(const c10ds_endpoints *c, int idx, int32_t *out);
/* Frees what the cache holds and marks it empty (zeroed is empty, as for
 * the lost members' cache). */
void c10ds_endpoints_clear(c10ds_endpoints *c);

/* --- groups.c: the tables --- */

/* 1 found, 0 not, -1 error. */
int c10ds_groups_job(c10ds_groups *g, const char *job, c10ds_job *out);
int c10ds_groups_new_generation(c10ds_groups *g, const char *job, uint64_t gen, int world_size);
int c10ds_groups_member(c10ds_groups *g, const char *job, uint64_t gen, int rank,
                        c10ds_member *out);
int c10ds_groups_member_put(c10ds_groups *g, const char *job, uint64_t gen, int rank,
                            const char *host, int pid, uint64_t client_id, uint32_t pipe);
/* How many members of (job, gen) are alive (-1: database error), and the
 * first `max` of them in rank order into out (NULL when max is 0); with
 * max 0 it stops at the first: whether any is. */
typedef struct c10ds_alive_member {
    int rank;
    int pid;
    char host[256];
} c10ds_alive_member;
int c10ds_groups_alive(c10ds_groups *g, const char *job, uint64_t gen, c10ds_alive_member *out,
                       int max);
/* Moves an alive member to state (left or dead) and records where it
 * stopped in each group (finals, a rank that leaves); 1 if it changed.
 * Bumps the job's version so watchers learn of it. */
int c10ds_groups_set_state(c10ds_groups *g, const char *job, uint64_t gen, int rank,
                           C10dpb__MemberState state, const char *reason,
                           C10dpb__GroupSeq *const *finals, size_t n_finals);
void c10ds_groups_seen(c10ds_groups *g, const char *job, uint64_t gen, int rank, uint32_t pipe,
                       const char *activity);

int c10ds_groups_group(c10ds_groups *g, const char *job, uint64_t gen, const char *name,
                       c10ds_group *out);
/* Creates the group of size members with a fresh random secret (*secret):
 * its ranks (n_ranks of them, written as rows), or none for the world in
 * order (0..size-1, nothing written); *ranks_hash gets their hash. */
int c10ds_groups_group_put(c10ds_groups *g, const char *job, uint64_t gen, const char *name,
                           const int32_t *ranks, size_t n_ranks, int size, uint64_t *ranks_hash,
                           uint64_t *secret);
/* Records a member's arrival; 1 if new (the group's arrived count grew). */
int c10ds_groups_arrive(c10ds_groups *g, const char *job, uint64_t gen, const char *name, int idx,
                        int rank, const void *endpoint, size_t len);

#endif
