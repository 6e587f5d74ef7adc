/* c10d/errors.h — status codes and error details.
 *
 * Every function returns a c10d_status: C10D_OK (0) or a negative code.
 * c10d_strerror() gives a fixed string per code; c10d_errmsg() gives the
 * detail of the last failure on the calling thread, with names and numbers
 * in it ("timed out after 300 ms waiting for keys: b, c").
 *
 * Codes are only ever added at the end of C10D_ERROR_LIST, never renumbered:
 * the numbers are part of the ABI and of the wire protocol. */
#ifndef C10D_ERRORS_H
#define C10D_ERRORS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, fixed message) */
#define C10D_ERROR_LIST(X)                                                                         \
    X(OK, 0, "success")                                                                            \
    X(ERROR, -1, "unspecified error")                                                              \
    X(EINVAL, -2, "invalid argument")                                                              \
    X(ETIMEDOUT, -3, "timed out")                                                                  \
    X(ENOTFOUND, -4, "not found")                                                                  \
    X(EDESYNC, -5, "ranks disagree about the collective sequence")                                 \
    X(EPEERLOST, -6, "a peer rank died or left")                                                   \
    X(EUNAVAIL, -7, "coordinator unavailable")                                                     \
    X(EAUTH, -8, "not authorized")                                                                 \
    X(EBACKEND, -9, "data-plane backend error")                                                    \
    X(EJOINED, -10, "rank has already joined")                                                     \
    X(EABORTED, -11, "operation aborted")                                                          \
    X(ENOMEM, -12, "out of memory")                                                                \
    X(EPROTO, -13, "protocol error")                                                               \
    X(ETOOBIG, -14, "too large")                                                                   \
    X(ENOTLEADER, -15, "not the leading replica")

typedef enum c10d_status {
#define C10D_ENUM_ENTRY(name, value, msg) C10D_##name = value,
    C10D_ERROR_LIST(C10D_ENUM_ENTRY)
#undef C10D_ENUM_ENTRY
} c10d_status;

/* A fixed, static description of `status`; "unknown status" for a number
 * that is not a c10d_status. Never NULL. */
C10D_API const char *c10d_strerror(c10d_status status);

/* The enum's name without prefix ("ETIMEDOUT"), for logs and JSON. */
C10D_API const char *c10d_status_name(c10d_status status);

/* The detail of the last failure on the calling thread. Calls that succeed
 * leave it as it was. The string is owned by the library and valid until the
 * next failing call on this thread. Never NULL ("" when there is none). */
C10D_API const char *c10d_errmsg(void);

#ifdef __cplusplus
}
#endif
#endif
