/* Tensor and dtype helpers of the public API. */
#include <c10d/tensor.h>

#include "fingerprint.h"

#include <string.h>

c10d_tensor c10d_tensor_1d(void *data, c10d_dtype dtype, int64_t n)
{
    c10d_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.ndim = 1;
    t.shape[0] = n;
    t.device = C10D_CPU;
    return t;
}

int64_t c10d_tensor_numel(const c10d_tensor *t)
{
    if (!t || t->ndim < 0 || t->ndim > C10D_MAX_DIMS)
        return -1;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return -1;
        n *= t->shape[i];
    }
    return n;
}

size_t c10d_dtype_size(c10d_dtype d)
{
    switch (d) {
    case C10D_FLOAT32: return 4;
    case C10D_FLOAT64: return 8;
    case C10D_FLOAT16: return 2;
    case C10D_BFLOAT16: return 2;
    case C10D_INT8: return 1;
    case C10D_UINT8: return 1;
    case C10D_INT32: return 4;
    case C10D_INT64: return 8;
    }
    return 0;
}

/* The names are fingerprint.c's, which reports and c10d-ctl use too: one
 * table for both sides. */
const char *c10d_dtype_name(c10d_dtype d)
{
    return c10dc_dtype_name((uint32_t)d);
}

const char *c10d_reduce_op_name(c10d_reduce_op op)
{
    return c10dc_op_name((uint32_t)op);
}
