/* A group's backends (backend_ctx.c): opened with a context whose hooks
 * answer them, connected, split and closed. */
#ifndef C10DI_BACKEND_CTX_H
#define C10DI_BACKEND_CTX_H

#include "group/group.h"

/* Opens pg's backends (before its rendezvous; subgroup: made by
 * c10d_new_group): the bytes peers need are written to buf. */
c10d_status c10di_backends_open(c10d_pg *pg, int subgroup, char *buf, size_t cap, size_t *len);
/* After the rendezvous: completes the contexts and connects. */
c10d_status c10di_backends_connect(c10d_pg *pg, const c10di_peers *peers);
/* A new group's backends from its parent's, for those that split (all of
 * the parent's members call it; child is NULL on non-members). */
c10d_status c10di_backends_split(c10d_pg *parent, c10d_pg *child);
void c10di_backends_close(c10d_pg *pg);

#endif
