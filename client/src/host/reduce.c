#include "reduce.h"

#include <string.h>

/* One loop per (type, op); the compiler vectorises each. Integer SUM and
 * PROD wrap around, as NCCL's and torch's do: the arithmetic is done in
 * U, an unsigned type as wide as T, where overflow is defined (signed
 * overflow is undefined behaviour). */
#define REDUCE_LOOPS(T, U)                                                                       \
    do {                                                                                         \
        T *d = dst;                                                                              \
        const T *s = src;                                                                        \
        switch (op) {                                                                            \
        case C10D_SUM:                                                                           \
        case C10D_AVG:                                                                           \
            for (size_t i = 0; i < n; i++)                                                       \
                d[i] = (T)((U)d[i] + (U)s[i]);                                                   \
            break;                                                                               \
        case C10D_PROD:                                                                          \
            for (size_t i = 0; i < n; i++)                                                       \
                d[i] = (T)((U)d[i] * (U)s[i]);                                                   \
            break;                                                                               \
        case C10D_MIN:                                                                           \
            for (size_t i = 0; i < n; i++)                                                       \
                d[i] = s[i] < d[i] ? s[i] : d[i];                                                \
            break;                                                                               \
        case C10D_MAX:                                                                           \
            for (size_t i = 0; i < n; i++)                                                       \
                d[i] = s[i] > d[i] ? s[i] : d[i];                                                \
            break;                                                                               \
        }                                                                                        \
    } while (0)

void c10di_reduce(c10d_dtype dt, c10d_reduce_op op, void *dst, const void *src, size_t n)
{
    switch (dt) {
    case C10D_FLOAT32: REDUCE_LOOPS(float, float); break;
    case C10D_FLOAT64: REDUCE_LOOPS(double, double); break;
    case C10D_INT8: REDUCE_LOOPS(int8_t, uint32_t); break;
    case C10D_UINT8: REDUCE_LOOPS(uint8_t, uint32_t); break;
    case C10D_INT32: REDUCE_LOOPS(int32_t, uint32_t); break;
    case C10D_INT64: REDUCE_LOOPS(int64_t, uint64_t); break;
    case C10D_FLOAT16:
    case C10D_BFLOAT16: break; /* widened by the caller */
    }
}

/* The divisor in W, not T: (uint8_t)256 is 0 (SIGFPE at 256 ranks) and
 * (int8_t)128 is -128. Integer AVG is the wrapped sum divided, truncating. */
#define AVG_LOOP(T, W)                                                                           \
    do {                                                                                         \
        T *d = dst;                                                                              \
        for (size_t i = 0; i < n; i++)                                                           \
            d[i] = (T)((W)d[i] / (W)divisor);                                                    \
    } while (0)

void c10di_reduce_avg_finish(c10d_dtype dt, void *dst, size_t n, int divisor)
{
    if (divisor < 1)
        return; /* nobody contributed: nothing to divide */
    switch (dt) {
    case C10D_FLOAT32: AVG_LOOP(float, float); break;
    case C10D_FLOAT64: AVG_LOOP(double, double); break;
    case C10D_INT8: AVG_LOOP(int8_t, int32_t); break;
    case C10D_UINT8: AVG_LOOP(uint8_t, int32_t); break;
    case C10D_INT32: AVG_LOOP(int32_t, int64_t); break;
    case C10D_INT64: AVG_LOOP(int64_t, int64_t); break;
    case C10D_FLOAT16:
    case C10D_BFLOAT16: break;
    }
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* may carry into the exponent: still right */
    return (uint16_t)half;
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

void c10di_half_to_f32(c10d_dtype dt, float *dst, const uint16_t *src, size_t n)
{
    if (dt == C10D_BFLOAT16)
        for (size_t i = 0; i < n; i++)
            dst[i] = bf16_to_f32(src[i]);
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = f16_to_f32(src[i]);
}

void c10di_f32_to_half(c10d_dtype dt, uint16_t *dst, const float *src, size_t n)
{
    if (dt == C10D_BFLOAT16)
        for (size_t i = 0; i < n; i++)
            dst[i] = f32_to_bf16(src[i]);
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = f32_to_f16(src[i]);
}
