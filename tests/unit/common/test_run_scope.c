/* A run's store prefix (common/run_scope.c), which the client writes
 * under and the coordinator deletes by. */
#include "run_scope.h"

#include "check_main.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

START_TEST(a_run_scope_is_never_inside_another_jobs)
{
    char buf[C10D_RUN_SCOPE_BYTES(16)];
    ck_assert_uint_eq(c10d_run_scope(buf, sizeof buf, "train", 3), strlen("jobs/train/3/"));
    ck_assert_str_eq(buf, "jobs/train/3/");
    /* "a" and "a/1": the second's keys must not fall under the first's */
    c10d_run_scope(buf, sizeof buf, "a/1", 2);
    ck_assert_str_eq(buf, "jobs/a%2F1/2/");
    c10d_run_scope(buf, sizeof buf, "50%", 18446744073709551615ull);
    ck_assert_str_eq(buf, "jobs/50%25/18446744073709551615/");
    /* the longest escaped name fits the room the macro asks for */
    char name[17];
    memset(name, '/', 16);
    name[16] = '\0';
    ck_assert_uint_gt(c10d_run_scope(buf, sizeof buf, name, UINT64_MAX), 0);
    /* too small: nothing claimed written */
    ck_assert_uint_eq(c10d_run_scope(buf, 8, "train", 3), 0);
    ck_assert_uint_eq(c10d_run_scope(buf, strlen("jobs/train/3/"), "train", 3), 0);
}
END_TEST

/* What the coordinator's writes rule reads a key as: the run it is in,
 * back from the prefix c10d_run_scope makes, and nothing for the rest. */
START_TEST(a_key_names_its_run)
{
    char buf[256], job[64];
    uint64_t gen = 0;
    const char *names[] = {"train", "a/1", "50%", "%2F"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = c10d_run_scope(buf, sizeof buf, names[i], 42);
        ck_assert_uint_gt(n, 0);
        snprintf(buf + n, sizeof buf - n, "c10d/nccl/world");
        ck_assert_int_eq(c10d_run_scope_parse(buf, job, sizeof job, &gen), 1);
        ck_assert_str_eq(job, names[i]);
        ck_assert_uint_eq(gen, 42);
    }
    const char *none[] = {"root", "jobs/", "jobs/j", "jobs/j/", "jobs/j/1", "jobs/j/x/k",
                          "jobs//1/k", "jobs/j/1a/k", "tcpstore/jobs/j/1/k",
                          "jobs/j/99999999999999999999/k"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        ck_assert_msg(c10d_run_scope_parse(none[i], job, sizeof job, &gen) == 0,
                      "'%s' read as a run's key", none[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run_scope");
    TCase *tc = tcase_create("wire");
    tcase_add_test(tc, a_run_scope_is_never_inside_another_jobs);
    tcase_add_test(tc, a_key_names_its_run);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
