/* Liveness (liveness_ops.c), as the rest of the coordinator uses it:
 * members that joined on a closed connection are dead, and so are members
 * silent for --heartbeat-timeout (the engine reports both); a member is
 * marked left or dead once, and whoever watches its job hears of it. Its
 * operations (group_leave, the watch) are in c10ds_liveness_ops (ops.h). */
#ifndef C10DS_LIVENESS_OPS_H
#define C10DS_LIVENESS_OPS_H

#include "c10d.pb-c.h"

#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_engine c10ds_engine;
typedef struct c10ds_request c10ds_request;

/* The members that joined on connection `pipe` are dead (it closed). */
void c10ds_groups_pipe_closed(c10ds_engine *e, uint32_t pipe);
/* Judges silence as of now_ms (c10d_steady_wall_ms(), or earlier: when the
 * oldest request not yet run arrived), not counting e->stalls. */
void c10ds_groups_sweep(c10ds_engine *e, int64_t now_ms);
/* Whether the member (job, gen, rank) arrived from the client that sent
 * r (its who.client_id, random per client). Requests that speak for a
 * member (leave, watch, collective reports, join) must come from it:
 * another client must not mark it left, bind its liveness to another
 * connection, or report collectives for it. Fails r with C10D_EAUTH and
 * returns -1 when it was not; 0 when it was, or when there is no such
 * member (the handler says so its own way). */
int c10ds_check_member_caller(c10ds_engine *e, c10ds_request *r, const char *job, uint64_t gen,
                              int rank);
/* The job's version goes up and its watchers are answered. */
void c10ds_groups_bump(c10ds_engine *e, const char *job, uint64_t gen);
/* Moves a member to state (left or dead) with reason, once: its peers'
 * watches and any rendezvous still forming in its generation hear of it.
 * A rank that leaves says where it stopped in each group (finals). */
void c10ds_member_mark(c10ds_engine *e, const char *job, uint64_t gen, int rank,
                       C10dpb__MemberState state, const char *reason,
                       C10dpb__GroupSeq *const *finals, size_t n_finals);
/* Members of a generation that are not alive (free with
 * c10ds_groups_lost_free, groups.h). */
C10dpb__MemberInfo **c10ds_groups_lost(c10ds_engine *e, const char *job, uint64_t gen, size_t *n);

#endif
