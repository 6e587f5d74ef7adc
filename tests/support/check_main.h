/* The end of every test program's main: run the suite, report, exit. */
#ifndef C10D_TEST_CHECK_MAIN_H
#define C10D_TEST_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

static inline int c10d_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
