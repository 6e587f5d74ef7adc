/* The backends by kind of device (backends.c): one table, asked by the
 * front end, and which of a group's backends serves a call. */
#ifndef C10DI_BACKENDS_H
#define C10DI_BACKENDS_H

#include "backend/backend.h"

/* The backend for a kind of device (never NULL; a backend not built has
 * no open), and whether it can serve now (C10D_OK, or C10D_EBACKEND
 * saying why). */
const c10di_backend_ops *c10di_backend_of(c10di_dev_kind kind);
c10d_status c10di_backend_available(c10di_dev_kind kind);
/* The kinds of buffers a group under `backend` serves (a bit per
 * c10di_dev_kind), and where its barrier runs. */
unsigned c10di_backend_serves(c10d_backend backend);
c10di_dev_kind c10di_backend_home(c10d_backend backend);
/* Which of pg's backends serves a call on `device` (C10D_CPU, a CUDA
 * device, C10DI_GROUP_DEVICE or C10DI_ANY_CUDA); fills c->device, c->be,
 * c->be_state. Asked before the call is numbered. */
c10d_status c10di_route(c10d_pg *pg, c10di_coll *c, int device, const char *fn);

#endif
