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
    ck_assert_int_eq(ctl("set --write greeting 'hello world'"), 0);
    ck_assert_int_eq(ctl("get greeting"), 0);
    ck_assert_str_eq(out, "hello world");
    ck_assert_int_eq(ctl("add --write steps 5"), 0);
    ck_assert_str_eq(out, "5\n");
    ck_assert_int_eq(ctl("add --write steps -7"), 0); /* negative numbers are not options */
    ck_assert_str_eq(out, "-2\n");
    ck_assert_int_eq(ctl("keys"), 0);
    ck_assert_ptr_nonnull(strstr(out, "greeting"));
    ck_assert_ptr_nonnull(strstr(out, "steps"));
    ck_assert_int_eq(ctl("keys gre"), 0);
    ck_assert_ptr_null(strstr(out, "steps"));
    ck_assert_int_eq(ctl("del --write greeting"), 0);
    ck_assert_int_eq(ctl("del --write greeting"), 3);
    ck_assert_ptr_nonnull(strstr(out, "no such key: greeting"));
    ck_assert_int_eq(ctl("get greeting"), 3);
    ck_assert_int_eq(ctl("add --write greeting x"), 2);
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
    ck_assert_int_eq(ctl_at(list, "set --write k v"), 0);
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
    ck_assert_int_eq(ctl("set --write k 'a \"quoted\" value'"), 0);
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
    ck_assert_int_eq(ctl("set --write bin - < /bin/true"), 0);
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
    ck_assert_ptr_nonnull(strstr(out, "the keys of J's current run"));
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
    ck_assert_int_eq(ctl("set --write k1 a"), 0);
    ck_assert_int_eq(ctl("set --write k2 b"), 0);
    ck_assert_int_eq(ctl("keys k --limit 1"), 0);
    ck_assert_ptr_nonnull(strstr(out, "k1"));
    ck_assert_ptr_null(strstr(out, "k2"));
    ck_assert_int_eq(ctl("desync --json"), 0);
    jv *v = parsed();
    ck_assert(flag(v, "healthy"));
    json_free(v);
    ck_assert_int_eq(ctl("add --write k1 -- -5"), 1); /* after --, -5 is a value; k1 is no integer */
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
    ck_assert_int_eq(ctl("set --write \"$(printf 'k\\377')\" v"), 0);
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
        /* a write is asked for, never a slip of a command line */
        {"set k v", "say so with --write"},
        {"del k", "say so with --write"},
        {"add k 1", "say so with --write"},
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
    /* watch waits for a job that may be about to start, and says so; as a
     * health check its last refresh's code is "no such job". */
    ck_assert_int_eq(ctl("watch --job nosuchjob --count 2 --interval 10"), 3);
    ck_assert_msg(strstr(out, "no job nosuchjob on this coordinator yet: waiting for it") &&
                      !strstr(out, "healthy"), "%s", out);
    ck_assert_int_eq(ctl("--json watch --job nosuchjob --count 1"), 3);
    v = parsed();
    ck_assert(!flag(v, "ok"));
    ck_assert_str_eq(json_str(v, "status"), "ENOTFOUND");
    json_free(v);
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

/* `c10d-ctl CMD --help` is CMD's help (its synopsis, its options, its
 * exit codes), not the global one; an unknown command's is the global. */
START_TEST(each_command_has_its_own_help)
{
    static const char *const cmds[] = {"status", "keys", "get", "set", "del",
                                       "add", "desync", "trace", "watch"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "Usage: c10d-ctl [OPTIONS] %s", cmds[i]);
        ck_assert_int_eq(ctl("%s --help", cmds[i]), 0);
        ck_assert_msg(!strncmp(out, want, strlen(want)) && !strstr(out, "Commands:"),
                      "%s --help: %s", cmds[i], out);
    }
    ck_assert_int_eq(ctl("desync -h"), 0);
    ck_assert_msg(strstr(out, "--finished") && strstr(out, "7 unhealthy"), "%s", out);
    ck_assert_int_eq(ctl("status --help"), 0);
    ck_assert_msg(strstr(out, "3 no job J"), "%s", out);
    ck_assert_int_eq(ctl("--help"), 0);
    ck_assert_msg(strstr(out, "Commands:"), "%s", out);
}
END_TEST

/* The finished run's verification: written by the job's last rank to
 * leave or die; the run ends with it (runs.h). Waits until the listing
 * says no member of job is alive. */
static void wait_run_over(const char *job)
{
    for (int i = 0; i < 500; i++) {
        ck_assert_int_eq(ctl("--json status --job %s", job), 0);
        if (!strstr(out, "\"state\":\"alive\""))
            return;
        usleep(10000);
    }
    ck_abort_msg("job %s's run never ended: %s", job, out);
}

/* A run that ended cleanly is finished, not stuck one short of its end:
 * its last rank's leave says what it completed (GroupLeave.completed), and
 * desync --job shows "finished, N collectives", healthy. */
START_TEST(a_cleanly_finished_run_reads_finished)
{
    c10d_pg *pg = one_rank_job("ctl-done");
    float x[2] = {1, 2};
    c10d_tensor t = c10d_tensor_1d(x, C10D_FLOAT32, 2);
    ck_assert_int_eq(c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL), C10D_OK);
    c10d_destroy(pg);
    wait_run_over("ctl-done");
    ck_assert_int_eq(ctl("desync --job ctl-done"), 0);
    ck_assert_msg(strstr(out, "group world (1 ranks): finished, 2 collectives") &&
                      strstr(out, "completed #2 ") && !strstr(out, "behind"),
                  "%s", out);
    ck_assert_int_eq(ctl("--json desync --job ctl-done"), 0);
    jv *v = parsed();
    const jv *g = json_get(v, "groups");
    ck_assert(g && g->type == JV_ARR && g->n == 1);
    ck_assert_str_eq(json_str(g->items[0], "run"), "finished");
    const jv *r = json_get(g->items[0], "ranks");
    ck_assert(r && r->type == JV_ARR && r->n == 1);
    ck_assert_int_eq((int)num(r->items[0], "entered"), 2);
    ck_assert_int_eq((int)num(r->items[0], "completed"), 2);
    json_free(v);
    /* Without --job a finished run is not part of the health check. */
    ck_assert_int_eq(ctl("desync"), 0);
    ck_assert_msg(strstr(out, "healthy (1 finished run not shown: --finished shows it)") &&
                      !strstr(out, "ctl-done"), "%s", out);
    ck_assert_int_eq(ctl("desync --finished"), 0);
    ck_assert_msg(strstr(out, "job ctl-done generation"), "%s", out);
}
END_TEST

/* A rank that died in a run long over (kept for --retention) does not make
 * today's check of the live runs fail: desync and watch without --job are
 * healthy; --finished and --job J show the failure. */
START_TEST(a_failed_finished_run_does_not_fail_the_check)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        (void)one_rank_job("ctl-died");
        _exit(0); /* no c10d_destroy: the connection closes, the rank is dead */
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    wait_run_over("ctl-died");
    ck_assert_int_eq(ctl("status --job ctl-died"), 0);
    ck_assert_msg(strstr(out, "1 dead"), "%s", out);
    ck_assert_int_eq(ctl("desync"), 0);
    ck_assert_msg(strstr(out, "healthy (1 finished run not shown") && !strstr(out, "ctl-died"),
                  "%s", out);
    ck_assert_int_eq(ctl("watch --count 1"), 0);
    ck_assert_int_eq(ctl("desync --finished"), 7);
    ck_assert_msg(strstr(out, "NOT HEALTHY") && strstr(out, "job ctl-died: rank 0 dead"), "%s",
                  out);
    ck_assert_int_eq(ctl("watch --finished --count 1"), 7);
    ck_assert_int_eq(ctl("desync --job ctl-died"), 7);
    ck_assert_int_eq(ctl("--json desync --finished"), 7);
    jv *v = parsed();
    ck_assert(!flag(v, "healthy"));
    ck_assert_int_eq((int)num(v, "finished_not_shown"), 0);
    json_free(v);
}
END_TEST

/* A job whose rendezvous is not complete says so, and is no failure. */
START_TEST(a_forming_job_says_so)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        c10d_init_opts o = C10D_INIT_OPTS_INIT;
        o.coord_url = coord.url;
        o.rank = 0;
        o.world_size = 2;
        o.job = "ctl-forming";
        o.timeout_ms = 30000;
        c10d_pg *pg = NULL;
        (void)c10d_init(&pg, &o); /* waits for rank 1, who never comes */
        _exit(0);
    }
    int found = 0;
    for (int i = 0; i < 500 && !found; i++) {
        found = ctl("desync --job ctl-forming") == 0 &&
                strstr(out, "job ctl-forming generation") &&
                strstr(out, ": forming: 1 of 2 ranks joined");
        if (!found)
            usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_assert_msg(found, "%s", out);
    ck_assert_msg(strstr(out, "healthy"), "%s", out);
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
    tcase_add_test(tc, each_command_has_its_own_help);
    tcase_add_test(tc, a_cleanly_finished_run_reads_finished);
    tcase_add_test(tc, a_failed_finished_run_does_not_fail_the_check);
    tcase_add_test(tc, a_forming_job_says_so);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
