/* c10d/common.h — what every c10d header needs: export macro, c10d_free. */
#ifndef C10D_COMMON_H
#define C10D_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) && !defined(C10D_STATIC)
#define C10D_API __attribute__((visibility("default")))
#else
#define C10D_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Timeouts, everywhere in this API (arguments and option fields alike),
 * in milliseconds:
 *   > 0                   at most that long;
 *   C10D_TIMEOUT_DEFAULT  the default of what the call belongs to: the
 *                         store's timeout, the group's, C10D_TIMEOUT_MS for
 *                         c10d_init and c10d_store_connect; c10d_work_wait
 *                         waits until the work ends (its own timeout bounds
 *                         it). An option struct's _INIT sets this.
 *   C10D_NO_WAIT          do not wait: answer from what is there now (a
 *                         store get of a missing key is C10D_ENOTFOUND; a
 *                         work still running is C10D_ETIMEDOUT). Only where
 *                         that means something: store gets and waits,
 *                         c10d_work_wait; elsewhere it is C10D_EINVAL.
 * Any other negative value is C10D_EINVAL, naming the call. There is no
 * "forever" (unlike NNG, whose -1 is that): a wait is bounded by the
 * default of what it belongs to. */
#define C10D_TIMEOUT_DEFAULT 0
#define C10D_NO_WAIT (-1)

/* Frees anything the library returned through an out-parameter (a value's
 * bytes, a key list, a job listing...): every result is one allocation.
 * NULL is accepted. Handles (c10d_store, c10d_pg, c10d_work) are closed
 * by their own calls instead. */
C10D_API void c10d_free(void *p);

/* The library's version, "MAJOR.MINOR.PATCH". */
C10D_API const char *c10d_version(void);

#ifdef __cplusplus
}
#endif
#endif
