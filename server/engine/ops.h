/* How an operation plugs into the engine: one handler per operation of
 * proto/c10d.proto, in the module that owns its state, listed in that
 * module's table. The engine (engine.c) dispatches a request to its
 * handler by the request's op_case, and reads the flags; nothing else
 * calls a handler. Handlers answer through request.h; the modules hear of
 * each other's changes through events.h, never by calling each other's
 * handlers. */
#ifndef C10DS_OPS_H
#define C10DS_OPS_H

#include "engine/request.h"

typedef struct c10ds_engine c10ds_engine;

typedef c10ds_outcome (*c10ds_op_fn)(c10ds_engine *e, c10ds_request *r, c10ds_phase ph);

/* Not idempotent: a resent copy must get the first copy's reply. */
#define C10DS_OP_DEDUP 1u
/* Parks for a period, not a timeout (the watch: a heartbeat's answer):
 * the coordinator's stalls do not move its deadline (engine_stalls.c). */
#define C10DS_OP_PERIOD 2u
/* Only reads: when its connection is gone before it runs, it is dropped
 * unrun (no reply could be sent, and nothing it does stays). */
#define C10DS_OP_READS 4u

typedef struct c10ds_op {
    int op_case; /* C10DPB__REQUEST__OP_* */
    const char *name;
    c10ds_op_fn fn;
    unsigned flags;
} c10ds_op;

/* The tables, each ended by an entry without a handler, and the file
 * that holds each; engine.c registers them all. */
extern const c10ds_op c10ds_store_ops[];      /* store_ops.c */
extern const c10ds_op c10ds_admin_ops[];      /* admin_ops.c */
extern const c10ds_op c10ds_rendezvous_ops[]; /* rendezvous_ops.c */
extern const c10ds_op c10ds_liveness_ops[];   /* liveness_ops.c */
extern const c10ds_op c10ds_verify_ops[];     /* verify_ops.c */
extern const c10ds_op c10ds_trace_ops[];      /* verify_trace.c */
extern const c10ds_op c10ds_health_ops[];     /* verify_report.c */
extern const c10ds_op c10ds_join_ops[];       /* join_ops.c */

#endif
