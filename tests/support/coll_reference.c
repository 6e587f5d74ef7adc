/* The collectives battery's reference; see coll_reference.h. */
#include "coll_reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint16_t to_half(c10d_dtype dt, float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if (dt == C10D_BFLOAT16)
        return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
    if (f == 0)
        return 0;
    uint32_t sign = (x >> 16) & 0x8000;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(sign | ((uint32_t)exp << 10) | ((x & 0x7fffff) >> 13));
}

static float from_half(c10d_dtype dt, uint16_t h)
{
    uint32_t bits;
    if (dt == C10D_BFLOAT16) {
        bits = (uint32_t)h << 16;
    } else {
        uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, sign = (uint32_t)(h & 0x8000) << 16;
        if (exp == 0 && man == 0)
            bits = sign;
        else
            bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

void set_elem(c10d_dtype dt, void *b, int64_t i, double v)
{
    switch (dt) {
    case C10D_FLOAT32: ((float *)b)[i] = (float)v; break;
    case C10D_FLOAT64: ((double *)b)[i] = v; break;
    case C10D_FLOAT16:
    case C10D_BFLOAT16: ((uint16_t *)b)[i] = to_half(dt, (float)v); break;
    case C10D_INT8: ((int8_t *)b)[i] = (int8_t)v; break;
    case C10D_UINT8: ((uint8_t *)b)[i] = (uint8_t)v; break;
    case C10D_INT32: ((int32_t *)b)[i] = (int32_t)v; break;
    case C10D_INT64: ((int64_t *)b)[i] = (int64_t)v; break;
    }
}

double get_elem(c10d_dtype dt, const void *b, int64_t i)
{
    switch (dt) {
    case C10D_FLOAT32: return ((const float *)b)[i];
    case C10D_FLOAT64: return ((const double *)b)[i];
    case C10D_FLOAT16:
    case C10D_BFLOAT16: return from_half(dt, ((const uint16_t *)b)[i]);
    case C10D_INT8: return ((const int8_t *)b)[i];
    case C10D_UINT8: return ((const uint8_t *)b)[i];
    case C10D_INT32: return ((const int32_t *)b)[i];
    case C10D_INT64: return (double)((const int64_t *)b)[i];
    }
    return 0;
}

static int is_float(c10d_dtype dt)
{
    return dt == C10D_FLOAT32 || dt == C10D_FLOAT64 || dt == C10D_FLOAT16 ||
           dt == C10D_BFLOAT16;
}

double val(c10d_reduce_op op, int r, int64_t i)
{
    if (op == C10D_PROD)
        return 1 + (double)((r + i) % 2);
    return 1 + (double)(((r + 1) * 7 + i * 3) % 11);
}

double expect(c10d_dtype dt, c10d_reduce_op op, int n, int64_t i)
{
    double acc = val(op, 0, i);
    int64_t iacc = (int64_t)acc;
    for (int r = 1; r < n; r++) {
        double v = val(op, r, i);
        switch (op) {
        case C10D_SUM:
        case C10D_AVG: acc += v, iacc += (int64_t)v; break;
        case C10D_PROD: acc *= v, iacc *= (int64_t)v; break;
        case C10D_MIN: acc = v < acc ? v : acc, iacc = (int64_t)acc; break;
        case C10D_MAX: acc = v > acc ? v : acc, iacc = (int64_t)acc; break;
        }
    }
    if (is_float(dt))
        return op == C10D_AVG ? acc / n : acc;
    if (op == C10D_AVG)
        iacc /= n;
    /* integers wrap as the dtype does */
    switch (dt) {
    case C10D_INT8: return (int8_t)iacc;
    case C10D_UINT8: return (uint8_t)iacc;
    case C10D_INT32: return (int32_t)iacc;
    default: return (double)iacc;
    }
}

int close_enough(c10d_dtype dt, double got, double want)
{
    if (!is_float(dt))
        return got == want;
    double tol = dt == C10D_FLOAT32 ? 1e-5 : dt == C10D_FLOAT64 ? 1e-12 : 1e-2;
    return fabs(got - want) <= tol * (fabs(want) > 1 ? fabs(want) : 1);
}

void *alloc_t(c10d_dtype dt, int64_t n)
{
    return calloc((size_t)(n ? n : 1), c10d_dtype_size(dt));
}
