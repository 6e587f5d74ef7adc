/* c10d/c10d.h — the umbrella header of libc10dclient.
 *
 *   #include <c10d/c10d.h>
 *   cc prog.c $(pkg-config --cflags --libs c10dclient)
 *
 * Conventions (docs/api.md): every call that can fail returns a
 * c10d_status (0 = C10D_OK, negative = error, detail in c10d_errmsg());
 * constructors take the out-pointer first and set it to NULL on failure;
 * anything returned through `void **` is freed with c10d_free; close and
 * destroy accept NULL; option structs start from their _INIT macro. */
#ifndef C10D_C10D_H
#define C10D_C10D_H

#include "checked.h"
#include "coll.h"
#include "common.h"
#include "errors.h"
#include "jobs.h"
#include "join.h"
#include "pg.h"
#include "store.h"
#include "tensor.h"
#include <c10d/version.h> /* generated: client/include/c10d/version.h.in */

#endif
