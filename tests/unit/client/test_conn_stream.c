/* The connection's dial (client/src/conn/conn_stream.c) with no
 * coordinator there: EUNAVAIL within the timeout, naming every URL
 * tried. */
#include "internal.h"

#include "check_main.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(no_coordinator_is_eunavail_within_timeout)
{
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 300;
    ck_assert_int_eq(c10d_store_connect(&s, "tcp://127.0.0.1:1", &o), C10D_EUNAVAIL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "no coordinator answered at tcp://127.0.0.1:1"));
    /* a list: the error names every URL tried */
    ck_assert_int_eq(c10d_store_connect(&s, "tcp://127.0.0.1:1,127.0.0.1:2", &o), C10D_EUNAVAIL);
    ck_assert_msg(strstr(c10d_errmsg(), "no coordinator answered at any of tcp://127.0.0.1:1,"
                                        "tcp://127.0.0.1:2 within"), "%s", c10d_errmsg());
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conn_stream");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, no_coordinator_is_eunavail_within_timeout);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
