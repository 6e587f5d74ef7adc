/* Join's release rule (join.h) applied to verification's state, and the
 * findings a join makes (join_release.c). Join on the wire (join_ops.c)
 * and what join hears (join_events.c) both drive it; it calls neither,
 * and reaches verification only through verify.h. */
#ifndef C10DS_JOIN_RELEASE_H
#define C10DS_JOIN_RELEASE_H

#include "join/join.h"
#include "verify/verify.h"

#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_engine c10ds_engine;

/* The waiter key a joined rank's join_shadow parks on. */
void c10ds_join_key(char *buf, size_t cap, const char *job, uint64_t gen, const char *name);
/* Runs the region's parked join_shadow requests again. */
void c10ds_join_wake(c10ds_engine *e, const c10ds_jregion *jr);
/* Releases to the joined ranks every collective the active ranks allow:
 * enters it for them, so verification moves on, and logs it for their
 * join_shadow; a collective they cannot shadow is g's finding. */
void c10ds_join_apply_release_rule(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g);
/* Group rank idx of g is out of inputs after collective `after`: recorded,
 * announced, and what it makes impossible found. */
void c10ds_join_joined(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g, int idx,
                       uint64_t after);
/* An active rank's send or recv x with a joined peer can never be matched:
 * g's finding (nothing if the peer is active). */
void c10ds_join_p2p_with_joined(c10ds_engine *e, c10ds_jregion *jr, c10ds_vgroup *g,
                                const c10ds_vp2p *x);

#endif
