/* The words both sides use for a collective (common/fingerprint.c),
 * which reports and c10d-ctl quote. */
#include "fingerprint.h"

#include "check_main.h"

#include <check.h>

START_TEST(a_collective_is_worded_alike_on_both_sides)
{
    char buf[160];
    c10dc_fp fp = {C10DC_ALL_REDUCE, 0 /* float32 */, 2, C10DC_NO_ROOT, 0 /* SUM */, 0, 0};
    ck_assert_str_eq(c10dc_fp_format(&fp, buf, sizeof buf), "ALL_REDUCE float32[2] SUM");
    c10dc_fp b = {C10DC_BROADCAST, 0, 5, 0, C10DC_NO_OP, 0, 0};
    ck_assert_str_eq(c10dc_fp_format(&b, buf, sizeof buf), "BROADCAST float32[5] root 0");
    c10dc_fp bar = {C10DC_BARRIER, 0, 0, C10DC_NO_ROOT, C10DC_NO_OP, 0, 0};
    ck_assert_str_eq(c10dc_fp_format(&bar, buf, sizeof buf), "BARRIER");
    /* what differs, named for the report */
    c10dc_fp other = fp;
    other.count = 3;
    ck_assert_str_eq(c10dc_fp_diff(&fp, &other), "shape");
    other = fp;
    other.op = 2;
    ck_assert_str_eq(c10dc_fp_diff(&fp, &other), "reduce op");
    ck_assert_ptr_null(c10dc_fp_diff(&fp, &fp));
    ck_assert_str_eq(c10dc_kind_name(C10DC_MONITORED_BARRIER), "MONITORED_BARRIER");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fingerprint");
    TCase *tc = tcase_create("wire");
    tcase_add_test(tc, a_collective_is_worded_alike_on_both_sides);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
