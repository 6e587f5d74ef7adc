/* The client's environment (client/src/env.c): the coordinator's URL
 * resolved from arguments, C10D_COORD and torchrun's MASTER_*, URL lists
 * and their parts (common/url.c), the job's default name from the
 * launcher, numbers read from variables, malformed settings refused by
 * name. */
#include "internal.h"
#include "url.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

START_TEST(url_resolution_follows_torchrun_env)
{
    char url[256];
    unsetenv("C10D_COORD");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    c10di_resolve_url(NULL, url, sizeof url);
    ck_assert_str_eq(url, "tcp://127.0.0.1:29700");
    c10di_resolve_url("node1:1234", url, sizeof url);
    ck_assert_str_eq(url, "tcp://node1:1234");
    c10di_resolve_url("ipc:///tmp/x", url, sizeof url);
    ck_assert_str_eq(url, "ipc:///tmp/x");
    setenv("MASTER_ADDR", "10.0.0.5", 1);
    setenv("MASTER_PORT", "4000", 1);
    c10di_resolve_url(NULL, url, sizeof url);
    ck_assert_str_eq(url, "tcp://10.0.0.5:4000");
    setenv("MASTER_ADDR", "fe80::1", 1);
    c10di_resolve_url(NULL, url, sizeof url);
    ck_assert_str_eq(url, "tcp://[fe80::1]:4000");
    setenv("C10D_COORD", "tcp://coord:9", 1); /* wins over MASTER_* */
    c10di_resolve_url(NULL, url, sizeof url);
    ck_assert_str_eq(url, "tcp://coord:9");
    c10di_resolve_url("tcp://explicit:1", url, sizeof url); /* an argument wins */
    ck_assert_str_eq(url, "tcp://explicit:1");
}
END_TEST

START_TEST(env_long_ignores_garbage)
{
    setenv("C10D_TEST_N", "123", 1);
    ck_assert_int_eq(c10di_env_long("C10D_TEST_N", 5), 123);
    setenv("C10D_TEST_N", "12x", 1);
    ck_assert_int_eq(c10di_env_long("C10D_TEST_N", 5), 5);
    unsetenv("C10D_TEST_N");
    ck_assert_int_eq(c10di_env_long("C10D_TEST_N", 5), 5);
}
END_TEST

/* The job's name where none is given: what the launcher set. */
START_TEST(job_name_comes_from_the_launcher)
{
    char job[C10D_MAX_JOB_BYTES + 2];
    unsetenv("C10D_JOB");
    unsetenv("TORCHELASTIC_RUN_ID");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    c10di_default_job(job, sizeof job);
    ck_assert_str_eq(job, "default");
    setenv("TORCHELASTIC_RUN_ID", "none", 1); /* torchrun's static rendezvous */
    setenv("MASTER_ADDR", "10.0.0.1", 1);
    setenv("MASTER_PORT", "29400", 1);
    c10di_default_job(job, sizeof job);
    ck_assert_str_eq(job, "torchrun-10.0.0.1:29400");
    /* single-node torchruns on different hosts all default to 127.0.0.1:29500 */
    char host[256], want[300];
    ck_assert_int_eq(gethostname(host, sizeof host), 0);
    snprintf(want, sizeof want, "torchrun-%s:29500", host);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    c10di_default_job(job, sizeof job);
    ck_assert_str_eq(job, want);
    setenv("MASTER_ADDR", "localhost", 1);
    c10di_default_job(job, sizeof job);
    ck_assert_str_eq(job, want);
    setenv("MASTER_ADDR", "10.0.0.1", 1);
    setenv("MASTER_PORT", "29400", 1);
    setenv("TORCHELASTIC_RUN_ID", "5f0c-uuid", 1); /* --standalone, or --rdzv_id */
    c10di_default_job(job, sizeof job);
    ck_assert_str_eq(job, "5f0c-uuid");
    unsetenv("TORCHELASTIC_RUN_ID");
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1); /* Open MPI's mpirun */
    setenv("PMIX_NAMESPACE", "prterun-node1-4242@1", 1);
    c10di_default_job(job, sizeof job);
    ck_assert_str_eq(job, "mpirun-prterun-node1-4242@1");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMIX_NAMESPACE");
    setenv("TORCHELASTIC_RUN_ID", "5f0c-uuid", 1);
    setenv("C10D_JOB", "resnet", 1); /* c10d-run, or the user */
    c10di_default_job(job, sizeof job);
    ck_assert_str_eq(job, "resnet");
    ck_assert_int_eq(c10d_default_job(job, sizeof job), C10D_OK); /* the same, public */
    ck_assert_str_eq(job, "resnet");
    ck_assert_int_eq(c10d_default_job(NULL, 8), C10D_EINVAL);
    ck_assert_int_eq(c10d_default_job(job, 4), C10D_ETOOBIG); /* "resnet" needs 7 */
    unsetenv("C10D_JOB");
    unsetenv("TORCHELASTIC_RUN_ID");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
}
END_TEST

/* Under torchrun MASTER_ADDR:MASTER_PORT is torchrun's TCPStore: a rank
 * without C10D_COORD is told at once, not left retrying it. */
START_TEST(torchrun_without_a_coordinator_is_told_at_once)
{
    char url[256];
    unsetenv("C10D_COORD");
    setenv("MASTER_ADDR", "localhost", 1);
    setenv("MASTER_PORT", "29777", 1);
    ck_assert_int_eq(c10di_resolve_url(NULL, url, sizeof url), C10D_OK);
    ck_assert_str_eq(url, "tcp://localhost:29777");
    setenv("TORCHELASTIC_RUN_ID", "none", 1);
    ck_assert_int_eq(c10di_resolve_url(NULL, url, sizeof url), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "set C10D_COORD"));
    c10d_store *s;
    ck_assert_int_eq(c10d_store_connect(&s, NULL, NULL), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "torchrun's own store"));
    setenv("C10D_COORD", "tcp://coord:1", 1);
    ck_assert_int_eq(c10di_resolve_url(NULL, url, sizeof url), C10D_OK);
    ck_assert_str_eq(url, "tcp://coord:1");
    unsetenv("C10D_COORD");
    unsetenv("TORCHELASTIC_RUN_ID");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
}
END_TEST

START_TEST(bad_url_is_einval)
{
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 200;
    ck_assert_int_eq(c10d_store_connect(&s, "nosuchscheme://x", &o), C10D_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "nosuchscheme://x"));
}
END_TEST

/* The one reading of a coordinator URL's parts (common/url.c), and the
 * check every URL the library is given passes (c10di_resolve_url). */
START_TEST(url_parts_and_port_are_read_in_one_place)
{
    char host[64], port[16], url[256];
    ck_assert_int_eq(c10dc_url_split("tcp://node1:29500", host, sizeof host, port, sizeof port), 0);
    ck_assert_str_eq(host, "node1");
    ck_assert_str_eq(port, "29500");
    ck_assert_int_eq(c10dc_url_split("tls+tcp://[::1]:7", host, sizeof host, port, sizeof port), 0);
    ck_assert_str_eq(host, "::1");
    ck_assert_str_eq(port, "7");
    ck_assert_int_eq(c10dc_url_split("tcp://node1", host, sizeof host, port, sizeof port), -1);
    c10dc_url_host("tls+tcp://coord.example", host, sizeof host);
    ck_assert_str_eq(host, "coord.example");
    ck_assert(c10dc_url_is_tcp("tls+tcp://h:1"));
    ck_assert(!c10dc_url_is_tcp("ipc:///tmp/tcp"));
    ck_assert_int_eq(c10dc_url_port("tcp://h:65535"), 65535);
    ck_assert_int_eq(c10dc_url_port("tcp://h:70000"), -1);
    ck_assert_int_eq(c10dc_url_port("tcp://h:0"), -1);
    ck_assert_int_eq(c10dc_url_port("tcp://h:80x"), -1);
    unsetenv("C10D_COORD");
    ck_assert_int_eq(c10di_resolve_url("tcp://127.0.0.1:70000", url, sizeof url), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "the port must be a number from 1 to 65535"));
    ck_assert_int_eq(c10di_resolve_url("node1", url, sizeof url), C10D_EINVAL);
    ck_assert_int_eq(c10di_resolve_url("ipc:///tmp/x", url, sizeof url), C10D_OK);
    /* a list's elements, the empty ones too, and nothing after the last */
    const char *list = "tcp://a:1,,ipc:///b", *elem;
    size_t len;
    ck_assert(c10dc_url_list_next(&list, &elem, &len));
    ck_assert_int_eq((int)len, 9);
    ck_assert(!strncmp(elem, "tcp://a:1", len));
    ck_assert(c10dc_url_list_next(&list, &elem, &len));
    ck_assert_int_eq((int)len, 0);
    ck_assert(c10dc_url_list_next(&list, &elem, &len));
    ck_assert_str_eq(elem, "ipc:///b");
    ck_assert(!c10dc_url_list_next(&list, &elem, &len));
    list = "";
    ck_assert(c10dc_url_list_next(&list, &elem, &len));
    ck_assert_int_eq((int)len, 0);
    ck_assert(!c10dc_url_list_next(&list, &elem, &len));
    /* a comma at either end leaves an empty element there */
    list = "a,";
    ck_assert(c10dc_url_list_next(&list, &elem, &len) && len == 1);
    ck_assert(c10dc_url_list_next(&list, &elem, &len) && len == 0);
    ck_assert(!c10dc_url_list_next(&list, &elem, &len));
    list = ",a";
    ck_assert(c10dc_url_list_next(&list, &elem, &len) && len == 0);
    ck_assert(c10dc_url_list_next(&list, &elem, &len) && len == 1 && *elem == 'a');
    ck_assert(!c10dc_url_list_next(&list, &elem, &len));
}
END_TEST

/* A replicated coordinator is a list of its replicas' URLs (C10D_COORD
 * or the url argument): each is resolved and checked as one URL is. */
START_TEST(a_url_list_is_resolved_and_checked_url_by_url)
{
    char url[512];
    unsetenv("C10D_COORD");
    ck_assert_int_eq(c10di_resolve_url("tcp://a:1,b:2, tcp://[::1]:3", url, sizeof url), C10D_OK);
    ck_assert_str_eq(url, "tcp://a:1,tcp://b:2,tcp://[::1]:3");
    setenv("C10D_COORD", "tcp://a:1,ipc:///tmp/x", 1);
    ck_assert_int_eq(c10di_resolve_url(NULL, url, sizeof url), C10D_OK);
    ck_assert_str_eq(url, "tcp://a:1,ipc:///tmp/x");
    unsetenv("C10D_COORD");
    ck_assert_int_eq(c10di_resolve_url("tcp://a:1,tcp://b:70000", url, sizeof url), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "'tcp://b:70000'"));
    ck_assert_int_eq(c10di_resolve_url("tcp://a:1,,tcp://b:2", url, sizeof url), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "empty URL"));
    ck_assert_int_eq(c10di_resolve_url("tcp://a:1,", url, sizeof url), C10D_EINVAL);
    ck_assert_int_eq(c10di_resolve_url("tls+tcp://a:1,tcp://b:2", url, sizeof url), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "mixes tls+tcp://"));
    ck_assert_int_eq(c10di_resolve_url("tcp://a:1,tcp://b:2", url, 12), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "too long"));
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 200;
    ck_assert_int_eq(c10d_store_connect(&s, "tcp://127.0.0.1:1,nosuchscheme://x", &o),
                     C10D_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "nosuchscheme://x"));
}
END_TEST

/* A malformed setting became the default in
 * silence (C10D_TIMEOUT_MS=12x, C10D_VERIFY=bogus became SYNC). Finding
 * 10: a long C10D_JOB was cut to 127 bytes. Each is refused at once,
 * naming the variable, before anything is sent. */
START_TEST(bad_settings_are_refused_naming_them)
{
    c10d_pg *pg = NULL;
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.rank = 0;
    o.world_size = 1;
    o.coord_url = "tcp://127.0.0.1:1";
    struct { const char *var, *val, *says; } cases[] = {
        {"C10D_TIMEOUT_MS", "12x", "C10D_TIMEOUT_MS=12x"},
        {"C10D_TIMEOUT_MS", "-5", "C10D_TIMEOUT_MS=-5"},
        {"C10D_VERIFY", "bogus", "C10D_VERIFY=bogus: want sync, async or off"},
        {"LOCAL_RANK", "one", "LOCAL_RANK=one"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(cases[i].var, cases[i].val, 1);
        ck_assert_int_eq(c10d_init(&pg, &o), C10D_EINVAL);
        ck_assert_msg(strstr(c10d_errmsg(), cases[i].says) != NULL, "%s=%s: %s", cases[i].var,
                      cases[i].val, c10d_errmsg());
        unsetenv(cases[i].var);
    }
    setenv("C10D_TIMEOUT_MS", "abc", 1);
    c10d_store *s = NULL;
    ck_assert_int_eq(c10d_store_connect(&s, "tcp://127.0.0.1:1", NULL), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "C10D_TIMEOUT_MS=abc"));
    unsetenv("C10D_TIMEOUT_MS");
    char job[C10D_MAX_JOB_BYTES + 2];
    memset(job, 'j', sizeof job - 1);
    job[sizeof job - 1] = '\0';
    setenv("C10D_JOB", job, 1);
    ck_assert_int_eq(c10d_init(&pg, &o), C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "C10D_MAX_JOB_BYTES"));
    unsetenv("C10D_JOB");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("env");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, url_resolution_follows_torchrun_env);
    tcase_add_test(tc, env_long_ignores_garbage);
    tcase_add_test(tc, job_name_comes_from_the_launcher);
    tcase_add_test(tc, torchrun_without_a_coordinator_is_told_at_once);
    tcase_add_test(tc, bad_url_is_einval);
    tcase_add_test(tc, url_parts_and_port_are_read_in_one_place);
    tcase_add_test(tc, a_url_list_is_resolved_and_checked_url_by_url);
    tcase_add_test(tc, bad_settings_are_refused_naming_them);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
