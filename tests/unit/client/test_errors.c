/* The client's error contract (client/src/errors.c, misc.c): the status
 * list as ABI, per-thread error detail, option struct versions, the one
 * timeout convention, the header's version, NULL-safety of the API. */
#include "internal.h"

#include "check_main.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The numbers are ABI and wire protocol: written out here, not taken from
 * the list they check, so renumbering or reordering the list fails. */
START_TEST(status_numbers_never_change)
{
    static const struct {
        c10d_status st;
        int value;
        const char *name;
    } abi[] = {
        {C10D_OK, 0, "OK"},           {C10D_ERROR, -1, "ERROR"},
        {C10D_EINVAL, -2, "EINVAL"},  {C10D_ETIMEDOUT, -3, "ETIMEDOUT"},
        {C10D_ENOTFOUND, -4, "ENOTFOUND"}, {C10D_EDESYNC, -5, "EDESYNC"},
        {C10D_EPEERLOST, -6, "EPEERLOST"}, {C10D_EUNAVAIL, -7, "EUNAVAIL"},
        {C10D_EAUTH, -8, "EAUTH"},    {C10D_EBACKEND, -9, "EBACKEND"},
        {C10D_EJOINED, -10, "EJOINED"}, {C10D_EABORTED, -11, "EABORTED"},
        {C10D_ENOMEM, -12, "ENOMEM"}, {C10D_EPROTO, -13, "EPROTO"},
        {C10D_ETOOBIG, -14, "ETOOBIG"}, {C10D_ENOTLEADER, -15, "ENOTLEADER"},
    };
    for (size_t i = 0; i < sizeof abi / sizeof abi[0]; i++) {
        ck_assert_int_eq((int)abi[i].st, abi[i].value);
        ck_assert_str_eq(c10d_status_name((c10d_status)abi[i].value), abi[i].name);
    }
    /* and nothing added in the middle: the list has exactly these, new
     * codes go after -15 (update this table when adding one) */
    int n = 0;
#define COUNT_ONE(name, value, msg) n++;
    C10D_ERROR_LIST(COUNT_ONE)
#undef COUNT_ONE
    ck_assert_int_eq(n, (int)(sizeof abi / sizeof abi[0]));
}
END_TEST

/* Option structs carry a version: one not made with its _INIT
 * macro, or from a newer header, is refused before anything else. */
START_TEST(option_structs_are_checked_for_their_version)
{
    c10d_store_opts so = C10D_STORE_OPTS_INIT;
    so.version = 0;
    c10d_store *s = NULL;
    ck_assert_int_eq(c10d_store_connect(&s, "tcp://127.0.0.1:1", &so), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "c10d_store_opts has version 0"));
    so.version = C10D_STORE_OPTS_VERSION + 1;
    ck_assert_int_eq(c10d_store_connect(&s, "tcp://127.0.0.1:1", &so), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "newer than this library knows"));
    c10d_init_opts io = C10D_INIT_OPTS_INIT;
    io.version = 0;
    c10d_pg *pg = NULL;
    ck_assert_int_eq(c10d_init(&pg, &io), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "c10d_init_opts has version 0"));
    ck_assert_int_eq(C10D_COLL_OPTS_VERSION, 1);
    c10d_coll_opts co = C10D_COLL_OPTS_INIT;
    c10d_join_opts jo = C10D_JOIN_OPTS_INIT;
    ck_assert_uint_eq(co.version, C10D_COLL_OPTS_VERSION);
    ck_assert_uint_eq(jo.version, C10D_JOIN_OPTS_VERSION);
    ck_assert_int_eq(jo.divide_by_initial_world_size, 1);
}
END_TEST

/* The generated c10d/version.h and the library built with it agree. */
START_TEST(header_version_is_the_librarys)
{
    ck_assert_str_eq(C10D_VERSION, c10d_version());
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", C10D_VERSION_MAJOR, C10D_VERSION_MINOR, C10D_VERSION_PATCH);
    ck_assert_str_eq(v, C10D_VERSION);
    ck_assert_int_eq(C10D_VERSION_NUMBER,
                     C10D_VERSION_MAJOR * 10000 + C10D_VERSION_MINOR * 100 + C10D_VERSION_PATCH);
}
END_TEST

START_TEST(every_status_has_a_message_and_name)
{
#define CHECK_ONE(name, value, msg)                                                                \
    ck_assert_str_eq(c10d_strerror(C10D_##name), msg);                                             \
    ck_assert_str_eq(c10d_status_name(C10D_##name), #name);                                        \
    ck_assert_int_eq(C10D_##name, value);
    C10D_ERROR_LIST(CHECK_ONE)
#undef CHECK_ONE
    ck_assert_str_eq(c10d_strerror((c10d_status)-999), "unknown status");
    ck_assert_str_eq(c10d_status_name((c10d_status)5), "UNKNOWN");
}
END_TEST

static void *set_other_thread(void *arg)
{
    c10di_error(C10D_ETIMEDOUT, "other thread's detail");
    return arg;
}

START_TEST(errmsg_is_per_thread)
{
    ck_assert_int_eq(c10di_error(C10D_EINVAL, "bad rank %d", 7), C10D_EINVAL);
    pthread_t t;
    pthread_create(&t, NULL, set_other_thread, NULL);
    pthread_join(t, NULL);
    ck_assert_str_eq(c10d_errmsg(), "bad rank 7");
}
END_TEST

START_TEST(errmsg_can_wrap_the_previous_detail)
{
    c10di_error(C10D_EBACKEND, "no CUDA device visible");
    ck_assert_int_eq(c10di_error(C10D_EBACKEND, "all_reduce: unavailable: %s", c10d_errmsg()),
                     C10D_EBACKEND);
    ck_assert_str_eq(c10d_errmsg(), "all_reduce: unavailable: no CUDA device visible");
}
END_TEST

START_TEST(null_handles_are_safe)
{
    c10d_store_close(NULL);
    c10d_free(NULL);
    ck_assert_ptr_null(c10d_store_url(NULL));
    ck_assert_int_eq(c10d_store_set(NULL, "k", "v", 1), C10D_EINVAL);
    int64_t n;
    ck_assert_int_eq(c10d_store_num_keys(NULL, &n), C10D_EINVAL);
    ck_assert_int_eq(c10d_store_connect(NULL, NULL, NULL), C10D_EINVAL);
    ck_assert_str_ne(c10d_errmsg(), "");
    ck_assert_str_eq(c10d_version(), C10D_TEST_VERSION);
    ck_assert_ptr_null(c10d_pg_job(NULL));
    ck_assert_uint_eq(c10d_pg_generation(NULL), 0);
    c10d_store *s = (c10d_store *)&n;
    ck_assert_int_eq(c10d_run_store(&s, NULL), C10D_EINVAL);
    ck_assert_ptr_null(s);
}
END_TEST

/* One timeout convention (c10d/common.h) for arguments and
 * option fields alike: > 0 ms, C10D_TIMEOUT_DEFAULT, C10D_NO_WAIT where
 * not waiting means something; anything else is refused by name. */
START_TEST(timeouts_follow_one_convention)
{
    int out = -9;
    ck_assert_int_eq(c10di_timeout("f", "t", 250, 7, 0, &out), C10D_OK);
    ck_assert_int_eq(out, 250);
    ck_assert_int_eq(c10di_timeout("f", "t", C10D_TIMEOUT_DEFAULT, 7, 0, &out), C10D_OK);
    ck_assert_int_eq(out, 7);
    ck_assert_int_eq(c10di_timeout("f", "t", C10D_NO_WAIT, 7, 1, &out), C10D_OK);
    ck_assert_int_eq(out, 0);
    ck_assert_int_eq(c10di_timeout("f", "t", C10D_NO_WAIT, 7, 0, &out), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "f: t is C10D_NO_WAIT, which does not apply"));
    ck_assert_int_eq(c10di_timeout("f", "t", -5, 7, 1, &out), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "f: t is -5"));

    /* where it is refused: before anything is sent (no coordinator here) */
    c10d_store_opts so = C10D_STORE_OPTS_INIT;
    ck_assert_int_eq(so.timeout_ms, C10D_TIMEOUT_DEFAULT);
    so.connect_timeout_ms = C10D_NO_WAIT;
    c10d_store *s = NULL;
    ck_assert_int_eq(c10d_store_connect(&s, "tcp://127.0.0.1:1", &so), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "opts.connect_timeout_ms is C10D_NO_WAIT"));
    c10d_init_opts io = C10D_INIT_OPTS_INIT;
    io.rank = 0;
    io.world_size = 1;
    io.coord_url = "tcp://127.0.0.1:1";
    io.timeout_ms = -2;
    c10d_pg *pg = NULL;
    ck_assert_int_eq(c10d_init(&pg, &io), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "c10d_init: opts.timeout_ms is -2"));
    c10d_coll_opts co = C10D_COLL_OPTS_INIT;
    ck_assert_int_eq(co.timeout_ms, C10D_TIMEOUT_DEFAULT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, status_numbers_never_change);
    tcase_add_test(tc, option_structs_are_checked_for_their_version);
    tcase_add_test(tc, header_version_is_the_librarys);
    tcase_add_test(tc, every_status_has_a_message_and_name);
    tcase_add_test(tc, errmsg_is_per_thread);
    tcase_add_test(tc, errmsg_can_wrap_the_previous_detail);
    tcase_add_test(tc, null_handles_are_safe);
    tcase_add_test(tc, timeouts_follow_one_convention);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
