/* c10d-ctl against a real coordinator: output, --json, exit codes. */
#include "coord_proc.h"
#include "json_read.h"

#include "check_main.h"

#include <c10d/c10d.h>

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static coord_proc coord;
static char out[65536];

static void setup(void)
{
    coord_init(&coord);
    ck_assert_int_eq(coord_start(&coord, NULL, NULL, NULL), 0);
}

static void teardown(void)
{
    coord_cleanup(&coord);
}

static int vctl_at(const char *url, const char *fmt, va_list ap)
{
    char args[2048], cmd[4096];
    vsnprintf(args, sizeof args, fmt, ap);
    snprintf(cmd, sizeof cmd, "%s --coord '%s' %s 2>&1", C10D_CTL_BIN, url, args);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs c10d-ctl with args (a shell fragment); stdout+stderr into out;
 * returns the exit code. */
static int ctl(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int ctl(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vctl_at(coord.url, fmt, ap);
    va_end(ap);
    return rc;
}

/* The same with --coord url. */
static int ctl_at(const char *url, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int ctl_at(const char *url, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vctl_at(url, fmt, ap);
    va_end(ap);
    return rc;
}

START_TEST(set_get_add_del_keys)
{
    ck_assert_int_eq(ctl("set greeting 'hello world'"), 0);
    ck_assert_int_eq(ctl("get greeting"), 0);
    ck_assert_str_eq(out, "hello world");
    ck_assert_int_eq(ctl("add steps 5"), 0);
    ck_assert_str_eq(out, "5\n");
    ck_assert_int_eq(ctl("add steps -7"), 0); /* negative numbers are not options */
    ck_assert_str_eq(out, "-2\n");
    ck_assert_int_eq(ctl("keys"), 0);
    ck_assert_ptr_nonnull(strstr(out, "greeting"));
    ck_assert_ptr_nonnull(strstr(out, "steps"));
    ck_assert_int_eq(ctl("keys gre"), 0);
    ck_assert_ptr_null(strstr(out, "steps"));
    ck_assert_int_eq(ctl("del greeting"), 0);
    ck_assert_int_eq(ctl("del greeting"), 3);
    ck_assert_ptr_nonnull(strstr(out, "no such key: greeting"));
    ck_assert_int_eq(ctl("get greeting"), 3);
    ck_assert_int_eq(ctl("add greeting x"), 2);
}
END_TEST

/* A replicated coordinator's replicas as a --coord list: a
 * dead one listed first is passed over; a list with a bad URL is a usage
 * error naming it. */
START_TEST(coord_takes_a_list_of_replicas)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); /* bound, never listening */
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    char list[512];
    snprintf(list, sizeof list, "tcp://127.0.0.1:%d,%s", ntohs(a.sin_port), coord.url);
    ck_assert_int_eq(ctl_at(list, "set k v"), 0);
    ck_assert_int_eq(ctl_at(list, "get k"), 0);
    ck_assert_str_eq(out, "v");
    ck_assert_int_eq(ctl_at(list, "status"), 0);
    ck_assert_msg(strstr(out, list) != NULL, "%s", out); /* the list it was given */
    snprintf(list, sizeof list, "%s,tcp://127.0.0.1:70000", coord.url);
    ck_assert_int_eq(ctl_at(list, "get k"), 2);
    ck_assert_msg(strstr(out, "tcp://127.0.0.1:70000") != NULL, "%s", out);
    close(fd);
}
END_TEST

/* out, parsed: the test fails on output that is not JSON. */
static jv *parsed(void)
{
    jv *v = json_parse(out);
    ck_assert_msg(v != NULL, "not JSON: %s", out);
    return v;
}

static double num(const jv *o, const char *key)
{
    const jv *v = json_get(o, key);
    ck_assert_msg(v && v->type == JV_NUM, "no number %s", key);
    return v->num;
}

static int flag(const jv *o, const char *key)
{
    const jv *v = json_get(o, key);
    ck_assert_msg(v && v->type == JV_BOOL, "no boolean %s", key);
    return v->boolean;
}

START_TEST(json_output)
{
    ck_assert_int_eq(ctl("set k 'a \"quoted\" value'"), 0);
    ck_assert_int_eq(ctl("--json get k"), 0);
    jv *v = parsed();
    ck_assert(flag(v, "ok"));
    ck_assert_str_eq(json_str(v, "key"), "k");
    ck_assert_int_eq((int)num(v, "size"), 16);
    ck_assert_str_eq(json_str(v, "value"), "a \"quoted\" value");
    json_free(v);

    ck_assert_int_eq(ctl("--json status"), 0);
    v = parsed();
    /* the schema this coordinator migrated to: one per schema/NNN_*.sql */
    const jv *coordinator = json_get(v, "coordinator");
    ck_assert_int_eq((int)num(coordinator ? coordinator : v, "schema_version"),
                     C10D_TEST_SCHEMA_VERSION);
    ck_assert_int_eq((int)num(coordinator ? coordinator : v, "keys"), 1);
    json_free(v);

    ck_assert_int_eq(ctl("--json keys"), 0);
    v = parsed();
    const jv *keys = json_get(v, "keys");
    ck_assert(keys && keys->type == JV_ARR && keys->n == 1);
    ck_assert_str_eq(json_str(keys->items[0], "key"), "k");
    ck_assert_int_eq((int)num(keys->items[0], "size"), 16);
    json_free(v);

    ck_assert_int_eq(ctl("--json get missing"), 3);
    v = parsed();
    ck_assert(!flag(v, "ok"));
    ck_assert_str_eq(json_str(v, "status"), "ENOTFOUND");
    ck_assert_str_eq(json_str(v, "error"), "no such key: missing");
    json_free(v);

    /* binary values come out as base64 */
    ck_assert_int_eq(ctl("set bin - < /bin/true"), 0);
    ck_assert_int_eq(ctl("--json get bin"), 0);
    v = parsed();
    ck_assert(json_str(v, "value_base64") && !strncmp(json_str(v, "value_base64"), "f0VMR", 5));
    json_free(v);
}
END_TEST

START_TEST(status_for_people)
{
    ck_assert_int_eq(ctl("status"), 0);
    ck_assert_ptr_nonnull(strstr(out, "database     "));
    ck_assert_ptr_nonnull(strstr(out, coord.db));
}
END_TEST

START_TEST(exit_codes_for_scripts)
{
    ck_assert_int_eq(ctl("-w 200 get nothing"), 5);
    ck_assert_ptr_nonnull(strstr(out, "timed out after 200 ms waiting for key: nothing"));
    ck_assert_int_eq(ctl("frobnicate"), 2);
    ck_assert_int_eq(ctl("get"), 2);
    ck_assert_int_eq(ctl("--help"), 0);
    ck_assert_ptr_nonnull(strstr(out, "Exit status"));
    coord_stop(&coord, SIGTERM);
    /* help after the command is help, with no coordinator to ask */
    ck_assert_int_eq(ctl("-t 300 keys --help"), 0);
    ck_assert_ptr_nonnull(strstr(out, "--job J: those of J's current run"));
    ck_assert_int_eq(ctl("-t 300 status"), 4);
    ck_assert_ptr_nonnull(strstr(out, "no coordinator answered"));
}
END_TEST

/* Options after the command, as docs/api.md
 * writes them; values checked; a coordinator's EINVAL is not "bad usage";
 * JSON always valid, usage errors included. */
START_TEST(options_anywhere_values_checked_json_always)
{
    ck_assert_int_eq(ctl("get nothing --wait 100"), 5);
    ck_assert_ptr_nonnull(strstr(out, "timed out after 100 ms"));
    ck_assert_int_eq(ctl("set k1 a"), 0);
    ck_assert_int_eq(ctl("set k2 b"), 0);
    ck_assert_int_eq(ctl("keys k --limit 1"), 0);
    ck_assert_ptr_nonnull(strstr(out, "k1"));
    ck_assert_ptr_null(strstr(out, "k2"));
    ck_assert_int_eq(ctl("desync --json"), 0);
    jv *v = parsed();
    ck_assert(flag(v, "healthy"));
    json_free(v);
    ck_assert_int_eq(ctl("add k1 -- -5"), 1); /* after --, -5 is a value; k1 is no integer */
    ck_assert_ptr_nonnull(strstr(out, "k1"));
    ck_assert_int_eq(ctl("--json frobnicate"), 2);
    v = parsed();
    ck_assert(!flag(v, "ok"));
    ck_assert_str_eq(json_str(v, "status"), "usage");
    ck_assert_str_eq(json_str(v, "error"), "unknown command 'frobnicate'");
    json_free(v);
    ck_assert_int_eq(ctl("trace --rank abc"), 2);
    ck_assert_ptr_nonnull(strstr(out, "--rank wants a whole number"));
    ck_assert_int_eq(ctl("watch --interval x --count 1"), 2);
    ck_assert_int_eq(ctl("--coord '' status"), 2);
    ck_assert_ptr_nonnull(strstr(out, "--coord wants a URL"));
    ck_assert_int_eq(ctl("--coord tcp://127.0.0.1:70000 -t 300 status"), 2);
    ck_assert_ptr_nonnull(strstr(out, "port must be a number from 1 to 65535"));
    /* a key of bytes that are not UTF-8: still valid JSON, and its bytes */
    ck_assert_int_eq(ctl("set \"$(printf 'k\\377')\" v"), 0);
    ck_assert_int_eq(ctl("--json keys"), 0);
    v = parsed();
    const jv *keys = json_get(v, "keys");
    int found = 0;
    for (size_t i = 0; keys && i < keys->n; i++)
        found |= json_str(keys->items[i], "key_base64") &&
                 !strcmp(json_str(keys->items[i], "key_base64"), "a/8=") &&
                 !strcmp(json_str(keys->items[i], "key"), "k\xff");
    ck_assert_msg(found, "the key of bytes k\\377 is missing: %s", out);
    json_free(v);
}
END_TEST

/* A command's arguments are checked before any
 * coordinator is asked, so a bad one is bad usage (2), not "unreachable"
 * (4) after the timeout; finding 10: so is a URL that cannot be one. */
START_TEST(bad_arguments_are_usage_errors_with_no_coordinator)
{
    coord_stop(&coord, SIGTERM); /* nothing answers at coord.url now */
    static const struct {
        const char *args, *says;
    } bad[] = {
        {"trace --rank abc", "--rank wants a whole number"},
        {"trace", "trace needs --rank R"},
        {"trace --rank 0 -n 0", "-n wants a whole number from 1"},
        {"watch --interval 5", "--interval wants a whole number from 10"},
        {"watch --count x", "--count wants a whole number"},
        {"desync --frob", "unknown option '--frob' for desync"},
        {"status extra", "too many arguments for status"},
        {"status --job", "--job wants a value"},
        {"status --job ''", "--job wants a name"},
        {"add k x", "add wants an integer, not 'x'"},
        {"set k", "too few arguments for set"},
        {"--coord tcp://bogus status", "bad coordinator URL 'tcp://bogus'"},
        {"--coord tcp://127.0.0.1:0 get k", "the port must be a number from 1 to 65535"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long long t0 = test_now_ms();
        int rc = ctl("-t 3000 %s", bad[i].args);
        ck_assert_msg(rc == 2, "c10d-ctl %s: exit %d, want 2: %s", bad[i].args, rc, out);
        ck_assert_msg(strstr(out, bad[i].says), "c10d-ctl %s: no '%s' in: %s", bad[i].args,
                      bad[i].says, out);
        ck_assert_msg(test_now_ms() - t0 < 2500, "c10d-ctl %s waited for a coordinator",
                      bad[i].args);
    }
    char longjob[C10D_MAX_JOB_BYTES + 2];
    memset(longjob, 'j', sizeof longjob - 1);
    longjob[sizeof longjob - 1] = '\0';
    ck_assert_int_eq(ctl("--json keys --job %s", longjob), 2);
    jv *v = parsed();
    ck_assert_str_eq(json_str(v, "status"), "usage");
    ck_assert_ptr_nonnull(strstr(json_str(v, "error"), "C10D_MAX_JOB_BYTES"));
    json_free(v);
    /* good arguments still go to the coordinator, which is not there */
    ck_assert_int_eq(ctl("-t 300 trace --rank 0"), 4);
}
END_TEST

/* Finding 10: `status --job J` of a job the coordinator does not know is
 * an error a script can see, not an empty listing and 0. */
START_TEST(status_of_an_unknown_job_fails)
{
    ck_assert_int_eq(ctl("status --job nosuchjob"), 3);
    ck_assert_ptr_nonnull(strstr(out, "no job nosuchjob on this coordinator"));
    ck_assert_int_eq(ctl("--json status --job nosuchjob"), 3);
    jv *v = parsed();
    ck_assert(!flag(v, "ok"));
    ck_assert_str_eq(json_str(v, "status"), "ENOTFOUND");
    json_free(v);
}
END_TEST

/* desync --job J of a job the coordinator knows nothing of fails as
 * status --job does, rather than saying "healthy" about nothing. */
START_TEST(desync_of_an_unknown_job_fails)
{
    ck_assert_int_eq(ctl("desync --job nosuchjob"), 3);
    ck_assert_msg(strstr(out, "no job nosuchjob on this coordinator") && !strstr(out, "healthy"),
                  "%s", out);
    ck_assert_int_eq(ctl("--json desync --job nosuchjob"), 3);
    jv *v = parsed();
    ck_assert(!flag(v, "ok"));
    ck_assert_str_eq(json_str(v, "status"), "ENOTFOUND");
    json_free(v);
    /* Without --job, no jobs at all is still healthy: nothing is wrong. */
    ck_assert_int_eq(ctl("desync"), 0);
    ck_assert_msg(strstr(out, "healthy"), "%s", out);
    /* watch waits for a job that may be about to start. */
    ck_assert_int_eq(ctl("watch --job nosuchjob --count 1"), 0);
}
END_TEST

/* A job of one rank, in this process, that ran a verified collective. */
static c10d_pg *one_rank_job(const char *job)
{
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.coord_url = coord.url;
    o.rank = 0;
    o.world_size = 1;
    o.job = job;
    o.verify = C10D_VERIFY_SYNC;
    c10d_pg *pg = NULL;
    ck_assert_msg(c10d_init(&pg, &o) == C10D_OK, "c10d_init: %s", c10d_errmsg());
    float x[2] = {1, 2};
    c10d_tensor t = c10d_tensor_1d(x, C10D_FLOAT32, 2);
    ck_assert_msg(c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) == C10D_OK, "all_reduce: %s",
                  c10d_errmsg());
    return pg;
}

/* Finding 10: trace without --job shows a job the coordinator picked;
 * it says which. */
START_TEST(trace_names_the_job_it_shows)
{
    c10d_pg *pg = one_rank_job("ctl-trace");
    ck_assert_int_eq(ctl("trace --rank 0"), 0);
    ck_assert_msg(strstr(out, "job ctl-trace, group world, rank 0"), "%s", out);
    ck_assert_msg(strstr(out, "ALL_REDUCE float32[2] SUM"), "%s", out);
    ck_assert_int_eq(ctl("--json trace --rank 0"), 0);
    jv *v = parsed();
    ck_assert_str_eq(json_str(v, "job"), "ctl-trace");
    ck_assert_str_eq(json_str(v, "group"), "world");
    json_free(v);
    c10d_destroy(pg);
}
END_TEST

/* Finding 10: watch --json is one JSON object a refresh, a line each,
 * and no terminal escape codes when the output is not a terminal. */
START_TEST(watch_output_for_pipes_and_scripts)
{
    c10d_pg *pg = one_rank_job("ctl-watch");
    ck_assert_int_eq(ctl("--json watch --job ctl-watch --interval 10 --count 3"), 0);
    ck_assert_ptr_null(strchr(out, '\033'));
    int lines = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        jv *v = json_parse(line);
        ck_assert_msg(v != NULL, "refresh %d is not one JSON object: %s", lines, line);
        ck_assert(flag(v, "healthy"));
        ck_assert(num(v, "at_ms") > 0);
        const jv *groups = json_get(v, "groups");
        ck_assert(groups && groups->type == JV_ARR && groups->n == 1);
        ck_assert_str_eq(json_str(groups->items[0], "job"), "ctl-watch");
        json_free(v);
    }
    ck_assert_int_eq(lines, 3);
    ck_assert_int_eq(ctl("watch --job ctl-watch --interval 10 --count 2"), 0);
    ck_assert_msg(!strchr(out, '\033'), "escape codes into a pipe: %s", out);
    ck_assert_msg(strstr(out, "c10d-ctl watch, every 10 ms") &&
                      strstr(strstr(out, "c10d-ctl watch") + 1, "c10d-ctl watch, every 10 ms"),
                  "not two refreshes: %s", out);
    c10d_destroy(pg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctl");
    TCase *tc = tcase_create("cli");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, set_get_add_del_keys);
    tcase_add_test(tc, coord_takes_a_list_of_replicas);
    tcase_add_test(tc, json_output);
    tcase_add_test(tc, status_for_people);
    tcase_add_test(tc, exit_codes_for_scripts);
    tcase_add_test(tc, options_anywhere_values_checked_json_always);
    tcase_add_test(tc, bad_arguments_are_usage_errors_with_no_coordinator);
    tcase_add_test(tc, status_of_an_unknown_job_fails);
    tcase_add_test(tc, desync_of_an_unknown_job_fails);
    tcase_add_test(tc, trace_names_the_job_it_shows);
    tcase_add_test(tc, watch_output_for_pipes_and_scripts);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
