/* Element-wise reduction kernels of the host backend. 16-bit floats are
 * never reduced here: the backend widens them to float32 first, so every
 * partial sum keeps float32 precision (see host_backend.c). */
#ifndef C10DI_HOST_REDUCE_H
#define C10DI_HOST_REDUCE_H

#include <c10d/tensor.h>
#include <stddef.h>
#include <stdint.h>

/* dst[i] = dst[i] op src[i] for n elements. AVG reduces as SUM; finish
 * with c10di_reduce_avg_finish. */
void c10di_reduce(c10d_dtype dt, c10d_reduce_op op, void *dst, const void *src, size_t n);
/* dst[i] /= divisor (integers truncate toward zero). */
void c10di_reduce_avg_finish(c10d_dtype dt, void *dst, size_t n, int divisor);

/* float16 / bfloat16 <-> float32, round to nearest even. */
void c10di_half_to_f32(c10d_dtype dt, float *dst, const uint16_t *src, size_t n);
void c10di_f32_to_half(c10d_dtype dt, uint16_t *dst, const float *src, size_t n);

#endif
