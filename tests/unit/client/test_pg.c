/* A process group's run store (client/src/group/pg.c): the prefix
 * c10d_run_prefix gives tools, and the library's own per-run keys under
 * it or nowhere. */
#include "internal.h"
#include "store/store_internal.h"

#include "check_main.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* A run's prefix for tools (c10d-ctl keys --job): the one c10d_run_store
 * uses, the name escaped; a buffer too small gets "" and ETOOBIG. */
START_TEST(a_runs_prefix_is_the_run_stores)
{
    char buf[64] = "x";
    ck_assert_int_eq(c10d_run_prefix(buf, sizeof buf, "train", 3), C10D_OK);
    ck_assert_str_eq(buf, "jobs/train/3/");
    ck_assert_int_eq(c10d_run_prefix(buf, sizeof buf, "a/b%c", 12), C10D_OK);
    ck_assert_str_eq(buf, "jobs/a%2Fb%25c/12/");
    ck_assert_int_eq(c10d_run_prefix(buf, strlen("jobs/train/3/"), "train", 3), C10D_ETOOBIG);
    ck_assert_str_eq(buf, "");
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "does not fit"));
    ck_assert_int_eq(c10d_run_prefix(NULL, 8, "train", 3), C10D_EINVAL);
    ck_assert_int_eq(c10d_run_prefix(buf, sizeof buf, NULL, 3), C10D_EINVAL);
}
END_TEST

/* The library's own per-run keys (NCCL ids, monitored barriers) go under
 * the run's prefix or nowhere: a prefix that does not fit is an error,
 * never keys at the store's root, where they would outlive the run. */
START_TEST(a_run_key_prefix_that_does_not_fit_is_an_error)
{
    char job[4 * C10D_MAX_JOB_BYTES];
    memset(job, '%', sizeof job - 1); /* each '%' is written "%25" */
    job[sizeof job - 1] = '\0';
    c10d_store *s = (c10d_store *)1;
    ck_assert_int_eq(c10di_run_store_over(&s, NULL, job, 1, 1000, "c10d/%s/", "nccl"),
                     C10D_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(c10d_errmsg(), "the run's store prefix of job %%%") &&
                  strstr(c10d_errmsg(), "does not fit"), "%s", c10d_errmsg());
    char group[1024];
    memset(group, 'g', sizeof group - 1);
    group[sizeof group - 1] = '\0';
    s = (c10d_store *)1;
    ck_assert_int_eq(c10di_run_store_over(&s, NULL, "train", 3, 1000,
                                          "c10d/monitored_barrier/%s/%d/", group, 1),
                     C10D_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(c10d_errmsg(), "does not fit") &&
                  strstr(c10d_errmsg(), "(jobs/train/3/c10d/monitored_barrier/ggg"),
                  "%s", c10d_errmsg());
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pg");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, a_runs_prefix_is_the_run_stores);
    tcase_add_test(tc, a_run_key_prefix_that_does_not_fit_is_an_error);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
