/* The CPU-side logic of the NCCL data plane, tested without a GPU: which
 * per-rank blocks are one flat buffer (no flatten/unflatten copies), NCCL's
 * in-place rule, fingerprints of CUDA collectives, the dtype and reduce-op
 * mapping, a joined rank's identities and AVG over the active ranks, and
 * the answers when NCCL, the CUDA runtime or a device is missing. Each test runs in its own process (Check's fork mode), so each
 * loads NCCL afresh under its own environment. */
#include "fingerprint.h"
#include "layout.h"
#include "backend/backends.h"
#ifdef C10D_HAVE_NCCL
#include "nccl_backend.h"
#endif

#include "check_main.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(consecutive_views_are_one_flat_buffer)
{
    static char buf[4 * 64];
    const void *views[4] = {buf, buf + 64, buf + 128, buf + 192};
    ck_assert_int_eq(c10di_blocks_flat(views, 4, 64), 1);
    ck_assert_int_eq(c10di_blocks_flat(views, 1, 64), 1);
    /* the same views, but blocks of 32 bytes: gaps between them */
    ck_assert_int_eq(c10di_blocks_flat(views, 4, 32), 0);
    /* out of order: rank 1's block before rank 0's */
    const void *swapped[4] = {buf + 64, buf, buf + 128, buf + 192};
    ck_assert_int_eq(c10di_blocks_flat(swapped, 4, 64), 0);
    /* separate allocations */
    static char a[64], b[64];
    const void *apart[2] = {a, b};
    ck_assert_int_eq(c10di_blocks_flat(apart, 2, 64) && (b != a + 64), 0);
    ck_assert_int_eq(c10di_blocks_flat(NULL, 2, 64), 0);
    const void *none[2] = {NULL, NULL};
    ck_assert_int_eq(c10di_blocks_flat(none, 2, 0), 0);
}
END_TEST

START_TEST(in_place_is_the_ranks_own_slot)
{
    static char flat[4 * 16];
    ck_assert_int_eq(c10di_block_in_place(flat + 2 * 16, flat, 2, 16), 1);
    ck_assert_int_eq(c10di_block_in_place(flat, flat, 0, 16), 1);
    ck_assert_int_eq(c10di_block_in_place(flat + 16, flat, 2, 16), 0); /* rank 1's slot */
    ck_assert_int_eq(c10di_block_in_place(flat + 2 * 16 + 1, flat, 2, 16), 0);
    ck_assert_int_eq(c10di_block_in_place(NULL, flat, 0, 16), 0);
}
END_TEST

START_TEST(fingerprints_of_cuda_collectives)
{
    char buf[128];
    c10dc_fp cpu = {C10DC_ALL_REDUCE, 0, 2, C10DC_NO_ROOT, 0, C10DC_DEV_CPU, 0};
    c10dc_fp gpu = cpu;
    gpu.device = C10DC_DEV_CUDA;
    ck_assert_str_eq(c10dc_fp_format(&cpu, buf, sizeof buf), "ALL_REDUCE float32[2] SUM");
    ck_assert_str_eq(c10dc_fp_format(&gpu, buf, sizeof buf), "ALL_REDUCE float32[2] SUM on cuda");
    /* a CPU call on one rank and a CUDA call on another would run on
     * different data planes and hang: a desync, named as such */
    ck_assert_str_eq(c10dc_fp_diff(&cpu, &gpu), "device");
    ck_assert_ptr_null(c10dc_fp_diff(&gpu, &gpu));
    /* other differences are named first */
    c10dc_fp other = gpu;
    other.count = 3;
    ck_assert_str_eq(c10dc_fp_diff(&cpu, &other), "shape");
    /* barriers carry no data: their device does not matter */
    c10dc_fp b1 = {C10DC_BARRIER, 0, 0, C10DC_NO_ROOT, C10DC_NO_OP, C10DC_DEV_CPU, 0};
    c10dc_fp b2 = b1;
    b2.device = C10DC_DEV_CUDA;
    ck_assert_ptr_null(c10dc_fp_diff(&b1, &b2));
    ck_assert_str_eq(c10dc_fp_format(&b2, buf, sizeof buf), "BARRIER");
    c10dc_fp bc = {C10DC_BROADCAST, 3, 5, 1, C10DC_NO_OP, C10DC_DEV_CUDA, 0};
    ck_assert_str_eq(c10dc_fp_format(&bc, buf, sizeof buf), "BROADCAST bfloat16[5] root 1 on cuda");
    /* no padding: the client compares fingerprints with memcmp */
    ck_assert_uint_eq(sizeof(c10dc_fp), 32);
}
END_TEST

#ifdef C10D_HAVE_NCCL
START_TEST(every_dtype_and_op_maps_to_nccl)
{
    ck_assert_int_eq(c10di_nccl_dtype(C10D_FLOAT32), ncclFloat32);
    ck_assert_int_eq(c10di_nccl_dtype(C10D_FLOAT64), ncclFloat64);
    ck_assert_int_eq(c10di_nccl_dtype(C10D_FLOAT16), ncclFloat16);
    ck_assert_int_eq(c10di_nccl_dtype(C10D_BFLOAT16), ncclBfloat16);
    ck_assert_int_eq(c10di_nccl_dtype(C10D_INT8), ncclInt8);
    ck_assert_int_eq(c10di_nccl_dtype(C10D_UINT8), ncclUint8);
    ck_assert_int_eq(c10di_nccl_dtype(C10D_INT32), ncclInt32);
    ck_assert_int_eq(c10di_nccl_dtype(C10D_INT64), ncclInt64);
    ck_assert_int_eq(c10di_nccl_dtype((c10d_dtype)99), -1);
    ck_assert_int_eq(c10di_nccl_op(C10D_SUM), ncclSum);
    ck_assert_int_eq(c10di_nccl_op(C10D_PROD), ncclProd);
    ck_assert_int_eq(c10di_nccl_op(C10D_MIN), ncclMin);
    ck_assert_int_eq(c10di_nccl_op(C10D_MAX), ncclMax);
    ck_assert_int_eq(c10di_nccl_op(C10D_AVG), ncclAvg);
    ck_assert_int_eq(c10di_nccl_op((c10d_reduce_op)99), -1);
    /* element sizes agree with NCCL's */
    ck_assert_uint_eq(c10d_dtype_size(C10D_BFLOAT16), 2);
}
END_TEST

START_TEST(missing_nccl_is_named)
{
    setenv("C10D_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    ck_assert_int_eq(c10di_backend_available(C10DI_DEV_CUDA), C10D_EBACKEND);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "libnccl.so.2 not found"));
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "/nonexistent/libnccl.so.2"));
    /* asked again: the same answer, not a crash or a retry */
    ck_assert_int_eq(c10di_backend_available(C10DI_DEV_CUDA), C10D_EBACKEND);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "libnccl.so.2 not found"));
}
END_TEST

START_TEST(missing_cuda_runtime_is_named)
{
    setenv("C10D_CUDART_LIBRARY", "/nonexistent/libcudart.so", 1);
    ck_assert_int_eq(c10di_backend_available(C10DI_DEV_CUDA), C10D_EBACKEND);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "CUDA runtime"));
}
END_TEST

START_TEST(no_device_is_named)
{
    if (c10di_backend_available(C10DI_DEV_CUDA) == C10D_OK) {
        printf("no_device_is_named: this machine has a GPU; nothing to check\n");
        return;
    }
    /* Here: CUDA and NCCL installed, no GPU or driver. */
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "no CUDA device visible"));
}
END_TEST
#else
START_TEST(a_build_without_nccl_says_so)
{
    ck_assert_int_eq(c10di_backend_available(C10DI_DEV_CUDA), C10D_EBACKEND);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "built without NCCL"));
    ck_assert_ptr_null(c10di_nccl_backend.open);
}
END_TEST
#endif

/* What a joined rank contributes (join.c), host and NCCL alike: every
 * reduce op's identity in every dtype, by value. */
START_TEST(identities_per_op_and_dtype)
{
    unsigned char e[8];
    float f;
    double d;
    uint16_t h;
    ck_assert_uint_eq(c10di_identity_element(C10D_FLOAT32, C10D_SUM, e), 4);
    memcpy(&f, e, 4);
    ck_assert(f == 0.0f);
    c10di_identity_element(C10D_FLOAT32, C10D_PROD, e);
    memcpy(&f, e, 4);
    ck_assert(f == 1.0f);
    c10di_identity_element(C10D_FLOAT32, C10D_MIN, e);
    memcpy(&f, e, 4);
    ck_assert(isinf(f) && f > 0);
    c10di_identity_element(C10D_FLOAT64, C10D_MAX, e);
    memcpy(&d, e, 8);
    ck_assert(isinf(d) && d < 0);
    c10di_identity_element(C10D_FLOAT64, C10D_AVG, e);
    memcpy(&d, e, 8);
    ck_assert(d == 0.0);
    c10di_identity_element(C10D_FLOAT16, C10D_MIN, e);
    memcpy(&h, e, 2);
    ck_assert_uint_eq(h, 0x7c00);
    c10di_identity_element(C10D_FLOAT16, C10D_PROD, e);
    memcpy(&h, e, 2);
    ck_assert_uint_eq(h, 0x3c00);
    c10di_identity_element(C10D_BFLOAT16, C10D_MAX, e);
    memcpy(&h, e, 2);
    ck_assert_uint_eq(h, 0xff80);
    ck_assert_uint_eq(c10di_identity_element(C10D_INT8, C10D_MIN, e), 1);
    ck_assert_int_eq((int8_t)e[0], 127);
    c10di_identity_element(C10D_INT8, C10D_MAX, e);
    ck_assert_int_eq((int8_t)e[0], -128);
    c10di_identity_element(C10D_UINT8, C10D_MAX, e);
    ck_assert_uint_eq(e[0], 0);
    c10di_identity_element(C10D_UINT8, C10D_MIN, e);
    ck_assert_uint_eq(e[0], 255);
    int32_t i32;
    int64_t i64;
    c10di_identity_element(C10D_INT32, C10D_MAX, e);
    memcpy(&i32, e, 4);
    ck_assert_int_eq(i32, INT32_MIN);
    c10di_identity_element(C10D_INT64, C10D_MIN, e);
    memcpy(&i64, e, 8);
    ck_assert(i64 == INT64_MAX);
    c10di_identity_element(C10D_INT64, C10D_PROD, e);
    memcpy(&i64, e, 8);
    ck_assert(i64 == 1);
    ck_assert_uint_eq(c10di_identity_element((c10d_dtype)99, C10D_SUM, e), 0);
}
END_TEST

START_TEST(identity_fills_a_buffer)
{
    float buf[37];
    float one = 1.0f;
    c10di_fill_pattern(buf, sizeof buf, &one, sizeof one);
    for (int i = 0; i < 37; i++)
        ck_assert(buf[i] == 1.0f);
    unsigned char zero[4] = {0};
    c10di_fill_pattern(buf, sizeof buf, zero, 4);
    for (int i = 0; i < 37; i++)
        ck_assert(buf[i] == 0.0f);
    /* a length that is not a multiple of the element: no overrun */
    unsigned char small[5] = {9, 9, 9, 9, 9};
    uint16_t two = 0x0102;
    c10di_fill_pattern(small, 3, &two, 2);
    ck_assert_uint_eq(small[3], 9);
}
END_TEST

#ifdef C10D_HAVE_NCCL
/* An AVG over the ranks that have not joined: ncclAvg when all are
 * active, a pre-multiplied sum for floating types, refused for integers. */
START_TEST(avg_over_active_ranks_on_nccl)
{
    ck_assert_int_eq(c10di_nccl_avg_plan(C10D_FLOAT32, C10D_AVG, 0, 4), 0);
    ck_assert_int_eq(c10di_nccl_avg_plan(C10D_FLOAT32, C10D_AVG, 4, 4), 0);
    ck_assert_int_eq(c10di_nccl_avg_plan(C10D_FLOAT32, C10D_SUM, 3, 4), 0);
    ck_assert_int_eq(c10di_nccl_avg_plan(C10D_FLOAT32, C10D_AVG, 3, 4), 1);
    ck_assert_int_eq(c10di_nccl_avg_plan(C10D_BFLOAT16, C10D_AVG, 1, 4), 1);
    ck_assert_int_eq(c10di_nccl_avg_plan(C10D_FLOAT64, C10D_AVG, 2, 4), 1);
    ck_assert_int_eq(c10di_nccl_avg_plan(C10D_INT32, C10D_AVG, 3, 4), -1);
    ck_assert_int_eq(c10di_nccl_avg_plan(C10D_INT32, C10D_AVG, 4, 4), 0);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("gpu_logic");
    TCase *tc = tcase_create("cpu_side");
    tcase_add_test(tc, consecutive_views_are_one_flat_buffer);
    tcase_add_test(tc, in_place_is_the_ranks_own_slot);
    tcase_add_test(tc, fingerprints_of_cuda_collectives);
    tcase_add_test(tc, identities_per_op_and_dtype);
    tcase_add_test(tc, identity_fills_a_buffer);
#ifdef C10D_HAVE_NCCL
    tcase_add_test(tc, avg_over_active_ranks_on_nccl);
    tcase_add_test(tc, every_dtype_and_op_maps_to_nccl);
    tcase_add_test(tc, missing_nccl_is_named);
    tcase_add_test(tc, missing_cuda_runtime_is_named);
    tcase_add_test(tc, no_device_is_named);
#else
    tcase_add_test(tc, a_build_without_nccl_says_so);
#endif
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
