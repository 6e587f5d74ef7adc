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

/* Frees anything the library returned through a `void **` or `char **`
 * out-parameter. NULL is accepted. */
C10D_API void c10d_free(void *p);

/* The library's version, "MAJOR.MINOR.PATCH". */
C10D_API const char *c10d_version(void);

#ifdef __cplusplus
}
#endif
#endif
