/* c10d/tensor.h — the buffers collectives work on.
 *
 * A c10d_tensor describes a contiguous buffer: its element type, its shape
 * and where it lives (C10D_CPU, or a CUDA device number). The library never
 * owns the memory. */
#ifndef C10D_TENSOR_H
#define C10D_TENSOR_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define C10D_MAX_DIMS 8
#define C10D_CPU (-1)

typedef enum {
    C10D_FLOAT32 = 0,
    C10D_FLOAT64 = 1,
    C10D_FLOAT16 = 2,
    C10D_BFLOAT16 = 3,
    C10D_INT8 = 4,
    C10D_UINT8 = 5,
    C10D_INT32 = 6,
    C10D_INT64 = 7,
} c10d_dtype;

typedef enum {
    C10D_SUM = 0,
    C10D_PROD = 1,
    C10D_MIN = 2,
    C10D_MAX = 3,
    C10D_AVG = 4, /* integers: the sum divided by the group size, truncated */
} c10d_reduce_op;

typedef struct c10d_tensor {
    void *data;
    c10d_dtype dtype;
    int ndim; /* 0 = a scalar (one element) */
    int64_t shape[C10D_MAX_DIMS];
    int device; /* C10D_CPU or a CUDA device */
} c10d_tensor;

/* A 1-D CPU tensor of n elements over data. */
C10D_API c10d_tensor c10d_tensor_1d(void *data, c10d_dtype dtype, int64_t n);
/* Number of elements (the product of the shape; 1 for ndim 0). */
C10D_API int64_t c10d_tensor_numel(const c10d_tensor *t);
/* Bytes of one element; 0 for an unknown dtype. */
C10D_API size_t c10d_dtype_size(c10d_dtype dtype);
/* "float32", …; "?" for an unknown dtype. */
C10D_API const char *c10d_dtype_name(c10d_dtype dtype);
/* "SUM", …; "?" for an unknown op. */
C10D_API const char *c10d_reduce_op_name(c10d_reduce_op op);

#ifdef __cplusplus
}
#endif
#endif
