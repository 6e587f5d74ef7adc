/* The program's own data plane as a backend (external.c): what the front
 * end routes to where the program moves the bytes itself
 * (c10d_data_plane_set). It moves nothing; its one call is a joined
 * rank's shadow, which it hands to the program's callback. */
#ifndef C10DI_EXTERNAL_H
#define C10DI_EXTERNAL_H

#include "backend/backend.h"

/* Its state: the program's callbacks, and the public handle they are
 * given (opaque here). */
typedef struct c10di_external {
    c10d_data_plane dp;
    c10d_pg *pg;
} c10di_external;

extern const c10di_backend_ops c10di_external_backend;

/* A call as the program's callbacks see it. */
void c10di_external_describe(const c10di_coll *c, int device, c10d_check_opts *out);

#endif
