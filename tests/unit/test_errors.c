/* Client basics: the error list, per-thread error detail, environment
 * handling, NULL-safety, the host backend's reduction kernels. */
#include "internal.h"
#include "store/store_internal.h"
#include "url.h"
#include "host/reduce.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Option structs carry a version (issue 14): one not made with its _INIT
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

START_TEST(url_resolution_follows_torchrun_env)
{
    char url[256];
    unsetenv("C10D_COORD");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    c10di_resolve_url(NULL, url, sizeof url);
    ck_assert_str_eq(url, "tcp://127.0.0.1:29500");
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

/* Issue 12, finding 28: a malformed setting became the default in
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

/* Issue 14: one timeout convention (c10d/common.h) for arguments and
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

/* Issue 12, finding 16: integer reductions. AVG of uint8 over 256 ranks
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
    Suite *s = suite_create("client_basics");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, status_numbers_never_change);
    tcase_add_test(tc, option_structs_are_checked_for_their_version);
    tcase_add_test(tc, header_version_is_the_librarys);
    tcase_add_test(tc, every_status_has_a_message_and_name);
    tcase_add_test(tc, errmsg_is_per_thread);
    tcase_add_test(tc, errmsg_can_wrap_the_previous_detail);
    tcase_add_test(tc, url_resolution_follows_torchrun_env);
    tcase_add_test(tc, env_long_ignores_garbage);
    tcase_add_test(tc, null_handles_are_safe);
    tcase_add_test(tc, a_runs_prefix_is_the_run_stores);
    tcase_add_test(tc, a_run_key_prefix_that_does_not_fit_is_an_error);
    tcase_add_test(tc, job_name_comes_from_the_launcher);
    tcase_add_test(tc, torchrun_without_a_coordinator_is_told_at_once);
    tcase_add_test(tc, bad_url_is_einval);
    tcase_add_test(tc, url_parts_and_port_are_read_in_one_place);
    tcase_add_test(tc, a_url_list_is_resolved_and_checked_url_by_url);
    tcase_add_test(tc, no_coordinator_is_eunavail_within_timeout);
    tcase_add_test(tc, bad_settings_are_refused_naming_them);
    tcase_add_test(tc, timeouts_follow_one_convention);
    tcase_add_test(tc, integer_reductions_wrap_and_average_at_any_world_size);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
