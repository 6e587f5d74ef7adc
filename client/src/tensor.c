/* Tensor and dtype helpers of the public API. */
#include <c10d/tensor.h>

#include "backend/backend.h"

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

/* --- a joined rank's identity buffers (backend.h) --- */

size_t c10di_identity_element(c10d_dtype dtype, c10d_reduce_op op, void *out)
{
    union {
        float f;
        double d;
        int8_t i8;
        uint8_t u8;
        int32_t i32;
        int64_t i64;
        uint16_t h;
        unsigned char b[8];
    } v;
    memset(&v, 0, sizeof v);
    size_t es = c10d_dtype_size(dtype);
    int hi = op == C10D_MIN; /* MIN's identity is the largest value */
    int lo = op == C10D_MAX;
    int one = op == C10D_PROD;
    switch (dtype) {
    case C10D_FLOAT32: v.f = hi ? __builtin_inff() : lo ? -__builtin_inff() : one ? 1.0f : 0.0f; break;
    case C10D_FLOAT64: v.d = hi ? __builtin_inf() : lo ? -__builtin_inf() : one ? 1.0 : 0.0; break;
    /* IEEE half: +inf 0x7c00, -inf 0xfc00, 1.0 0x3c00; bfloat16: 0x7f80, 0xff80, 0x3f80 */
    case C10D_FLOAT16: v.h = hi ? 0x7c00 : lo ? 0xfc00 : one ? 0x3c00 : 0; break;
    case C10D_BFLOAT16: v.h = hi ? 0x7f80 : lo ? 0xff80 : one ? 0x3f80 : 0; break;
    case C10D_INT8: v.i8 = hi ? INT8_MAX : lo ? INT8_MIN : one ? 1 : 0; break;
    case C10D_UINT8: v.u8 = hi ? UINT8_MAX : lo ? 0 : one ? 1 : 0; break;
    case C10D_INT32: v.i32 = hi ? INT32_MAX : lo ? INT32_MIN : one ? 1 : 0; break;
    case C10D_INT64: v.i64 = hi ? INT64_MAX : lo ? INT64_MIN : one ? 1 : 0; break;
    default: return 0;
    }
    memcpy(out, v.b, es);
    return es;
}

void c10di_fill_pattern(void *buf, size_t bytes, const void *elem, size_t esize)
{
    uint8_t *b = buf;
    int zero = 1;
    for (size_t i = 0; i < esize; i++)
        zero &= ((const uint8_t *)elem)[i] == 0;
    if (zero || !esize) {
        memset(b, 0, bytes);
        return;
    }
    size_t done = esize < bytes ? esize : bytes;
    memcpy(b, elem, done);
    while (done < bytes) { /* doubling copies */
        size_t k = done < bytes - done ? done : bytes - done;
        memcpy(b + done, b, k);
        done += k;
    }
}
