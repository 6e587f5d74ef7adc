/* Who may act on a run (docs/operations.md, "Who may do what"), end to
 * end: a real coordinator, real ranks, and a stranger that holds
 * everything the coordinator asks for (here: no token at all) but joined
 * no rank. The stranger reads a run's store; it cannot write it, nor
 * prepare the next generation's; it cannot take a rank slot of a run
 * started with a job key, and a run it started first refuses the real
 * ranks naming it. */
#include "coord_proc.h"
#include "state_wait.h"
#include "world_proc.h"

#include <c10d/c10d.h>
#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"

static c10d_store *stranger(void)
{
    c10d_store *s = NULL;
    ck_assert_int_eq(c10d_store_connect(&s, world_coord.url, NULL), C10D_OK);
    return s;
}

/* c10d-ctl's exit status for a command line. */
static int ctl_exit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int ctl_exit(const char *fmt, ...)
{
    char args[512], cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s --coord %s %s >/dev/null 2>&1", C10D_CTL_BIN, world_coord.url,
             args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void assert_refused(c10d_status st, const char *want)
{
    ck_assert_msg(st == C10D_EAUTH, "a stranger's write: %s (%s), want EAUTH", c10d_strerror(st),
                  c10d_errmsg());
    ck_assert_msg(strstr(c10d_errmsg(), want), "'%s' not in: %s", want, c10d_errmsg());
}

/* A one-rank world in this process is the run; a second connection, which
 * joined nothing, is the stranger. */
START_TEST(only_a_runs_ranks_write_its_store)
{
    const char *job = world_job("own");
    unsetenv("C10D_JOB_KEY");
    c10d_pg *pg = world_init(world_coord.url, job, 0, 1, 20000);
    ck_assert_ptr_nonnull(pg);
    c10d_store *mine = NULL;
    ck_assert_int_eq(c10d_run_store(&mine, pg), C10D_OK);
    ck_assert_int_eq(c10d_store_set(mine, "k", "rank", 4), C10D_OK);

    char prefix[256], key[300], next[300];
    uint64_t gen = c10d_pg_generation(pg);
    ck_assert_int_eq(c10d_run_prefix(prefix, sizeof prefix, job, gen), C10D_OK);
    snprintf(key, sizeof key, "%sk", prefix);
    c10d_store *s = stranger();

    /* reading is an operator's right (c10d-ctl get, keys) */
    void *v = NULL;
    size_t n = 0;
    ck_assert_int_eq(c10d_store_get(s, key, &v, &n, C10D_NO_WAIT), C10D_OK);
    c10d_free(v);

    /* every writing operation is refused, and nothing changes */
    const char *rule = "which only that run's ranks write";
    assert_refused(c10d_store_set(s, key, "evil", 4), rule);
    int deleted = 0;
    assert_refused(c10d_store_delete_key(s, key, &deleted), rule);
    int64_t sum = 0;
    assert_refused(c10d_store_add(s, key, 1, &sum), rule);
    assert_refused(c10d_store_append(s, key, "x", 1), rule);
    void *cur = NULL;
    size_t clen = 0;
    assert_refused(c10d_store_compare_set(s, key, "rank", 4, "evil", 4, &cur, &clen), rule);
    const char *keys[] = {"free/ok", key};
    const void *vals[] = {"a", "b"};
    size_t lens[] = {1, 1};
    assert_refused(c10d_store_multi_set(s, keys, vals, lens, 2), rule);
    ck_assert_int_eq(c10d_store_get(s, key, &v, &n, C10D_NO_WAIT), C10D_OK);
    ck_assert_msg(n == 4 && memcmp(v, "rank", 4) == 0, "the run's key changed");
    c10d_free(v);
    int exists = 1;
    ck_assert_int_eq(c10d_store_check(s, &keys[0], 1, &exists), C10D_OK);
    ck_assert_msg(!exists, "a refused multi_set wrote part of itself");

    /* the next generation's store, and a job that never ran, are nobody's */
    snprintf(next, sizeof next, "jobs/%s/%llu/planted", job, (unsigned long long)gen + 1);
    assert_refused(c10d_store_set(s, next, "x", 1), "which has not started");
    assert_refused(c10d_store_set(s, "jobs/never-ran/7/k", "x", 1), "which has not started");

    /* an operator's c10d-ctl writes only when told to, and even then
     * not into a run's store (exit 6: refused by the coordinator) */
    ck_assert_int_eq(ctl_exit("set %s x", key), 2);
    ck_assert_int_eq(ctl_exit("set --write %s x", key), 6);
    ck_assert_int_eq(ctl_exit("del --write %s", key), 6);
    ck_assert_int_eq(ctl_exit("set --write %s x", "free/by-ctl"), 0);
    ck_assert_msg(coord_log_contains(&world_coord, "(c10d-ctl --write, client #") &&
                  coord_log_contains(&world_coord, "writes key 'free/by-ctl'"),
                  "an operator's write is not on the record");

    /* the root of the store stays everybody's */
    ck_assert_int_eq(c10d_store_set(s, "free/ok", "y", 1), C10D_OK);
    ck_assert_msg(coord_log_contains(&world_coord, "refused a write of key"),
                  "the refusals were not logged");
    c10d_store_close(s);
    c10d_store_close(mine);
    c10d_destroy(pg);
}
END_TEST

/* Rank 0 of a two-rank world, in a child: it waits for rank 1 in the
 * rendezvous, with key (NULL: none). */
static pid_t spawn_rank0(const char *job, const char *key)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (key)
            setenv("C10D_JOB_KEY", key, 1);
        else
            unsetenv("C10D_JOB_KEY");
        c10d_pg *pg = world_init(world_coord.url, job, 0, 2, 60000);
        if (!pg)
            _exit(10);
        c10d_destroy(pg);
        _exit(0);
    }
    ck_assert_msg(wait_member(world_coord.url, job, 0, "alive", 30000), "rank 0 never arrived");
    return pid;
}

static c10d_status join_rank1(const char *job, const char *key, c10d_pg **out)
{
    if (key)
        setenv("C10D_JOB_KEY", key, 1);
    else
        unsetenv("C10D_JOB_KEY");
    c10d_init_opts o = C10D_INIT_OPTS_INIT;
    o.coord_url = world_coord.url;
    o.job = job;
    o.rank = 1;
    o.world_size = 2;
    o.timeout_ms = 30000;
    *out = NULL;
    return c10d_init(out, &o);
}

START_TEST(a_rank_without_the_runs_job_key_is_refused_and_logged)
{
    const char *job = world_job("keyed");
    pid_t real = spawn_rank0(job, "k3y-of-the-launch");
    c10d_pg *pg;
    char pid_s[32], log_s[256];
    snprintf(pid_s, sizeof pid_s, "pid %d", (int)real);

    ck_assert_int_eq(join_rank1(job, NULL, &pg), C10D_EAUTH);
    ck_assert_msg(strstr(c10d_errmsg(), pid_s) && strstr(c10d_errmsg(), "this rank has none"),
                  "the refusal names neither who started the run nor why: %s", c10d_errmsg());
    ck_assert_int_eq(join_rank1(job, "a-guess", &pg), C10D_EAUTH);
    ck_assert_msg(strstr(c10d_errmsg(), "another job key"), "%s", c10d_errmsg());
    snprintf(log_s, sizeof log_s, "refused rank 1 of job %s", job);
    ck_assert_int_eq(coord_log_count(&world_coord, log_s), 2);
    snprintf(log_s, sizeof log_s, "pid %d (client", (int)getpid());
    ck_assert_msg(coord_log_contains(&world_coord, log_s), "the log does not name the refused "
                  "joiner's pid");

    char huge[400];
    memset(huge, 'k', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    ck_assert_int_eq(join_rank1(job, huge, &pg), C10D_EINVAL);
    ck_assert_msg(strstr(c10d_errmsg(), "the limit is 256"), "%s", c10d_errmsg());

    /* the slot is still free: the real rank 1 forms the run */
    ck_assert_int_eq(join_rank1(job, "k3y-of-the-launch", &pg), C10D_OK);
    c10d_destroy(pg);
    int status;
    ck_assert_int_eq(waitpid(real, &status, 0), real);
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    unsetenv("C10D_JOB_KEY");
}
END_TEST

/* A squatter that guessed the job's name came first, without a key: the
 * real ranks do not join it, and their error names it. */
START_TEST(a_squatter_that_came_first_is_named_to_the_real_ranks)
{
    const char *job = world_job("squat");
    pid_t squatter = spawn_rank0(job, NULL);
    c10d_pg *pg;
    ck_assert_int_eq(join_rank1(job, "k3y-of-the-launch", &pg), C10D_EAUTH);
    char pid_s[32];
    snprintf(pid_s, sizeof pid_s, "pid %d without a job key", (int)squatter);
    ck_assert_msg(strstr(c10d_errmsg(), pid_s), "the squatter is not named: %s", c10d_errmsg());
    kill(squatter, SIGKILL);
    waitpid(squatter, NULL, 0);
    unsetenv("C10D_JOB_KEY");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trust");
    TCase *tc = tcase_create("runs");
    tcase_add_checked_fixture(tc, world_coord_start, world_coord_stop);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, only_a_runs_ranks_write_its_store);
    tcase_add_test(tc, a_rank_without_the_runs_job_key_is_refused_and_logged);
    tcase_add_test(tc, a_squatter_that_came_first_is_named_to_the_real_ranks);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
