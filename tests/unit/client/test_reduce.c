/* The host backend's reduction kernels (client/src/host/reduce.c):
 * integer sums and products wrap as NCCL's do, AVG at any world size. */
#include "internal.h"
#include "host/reduce.h"

#include "check_main.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

/* Integer reductions. AVG of uint8 over 256 ranks
 * divided by (uint8_t)256 == 0 (SIGFPE); int8 AVG from 128 ranks divided
 * by -128; int32/int64 SUM and PROD overflowed, undefined behaviour (this
 * suite runs under UBSan too). They wrap as NCCL's do. */
START_TEST(integer_reductions_wrap_and_average_at_any_world_size)
{
    uint8_t u = 200, one = 1;
    c10di_reduce(C10D_UINT8, C10D_AVG, &u, &one, 1); /* 201 */
    c10di_reduce_avg_finish(C10D_UINT8, &u, 1, 256);
    ck_assert_uint_eq(u, 0); /* 201 / 256 */
    u = 255;
    c10di_reduce_avg_finish(C10D_UINT8, &u, 1, 300);
    ck_assert_uint_eq(u, 0);
    int8_t sum = 0, x = 1;
    for (int r = 0; r < 128; r++)
        c10di_reduce(C10D_INT8, C10D_AVG, &sum, &x, 1);
    ck_assert_int_eq(sum, -128); /* 128 wrapped, as NCCL's int8 sum */
    c10di_reduce_avg_finish(C10D_INT8, &sum, 1, 128);
    ck_assert_int_eq(sum, -1);
    int32_t a = INT32_MAX, b = 1;
    c10di_reduce(C10D_INT32, C10D_SUM, &a, &b, 1);
    ck_assert_int_eq(a, INT32_MIN);
    a = INT32_MAX, b = 2;
    c10di_reduce(C10D_INT32, C10D_PROD, &a, &b, 1);
    ck_assert_int_eq(a, -2);
    int64_t c = INT64_MAX, d = 1;
    c10di_reduce(C10D_INT64, C10D_SUM, &c, &d, 1);
    ck_assert(c == INT64_MIN);
    c = INT64_MIN, d = -1;
    c10di_reduce(C10D_INT64, C10D_PROD, &c, &d, 1);
    ck_assert(c == INT64_MIN);
    c = -7;
    c10di_reduce_avg_finish(C10D_INT64, &c, 1, 2);
    ck_assert(c == -3); /* truncates toward zero */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reduce");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, integer_reductions_wrap_and_average_at_any_world_size);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
