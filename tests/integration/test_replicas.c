/* A replicated coordinator (c10d-coord --replica, docs/replication.md):
 * three real replicas on loopback, each a dqlite node and an engine.
 *
 * A 2-rank job verified in SYNC and a store writer run through the list
 * of the replicas' URLs; the leader is killed with SIGKILL. The job must
 * go on with correct results, every acknowledged write must be there
 * (an add's counter equals the adds acknowledged: exactly once through
 * the failover), the new leader's status must show the job; the killed
 * replica, started again, must rejoin as a voter (the cluster then
 * commits with it and without the third). And with two of three replicas
 * stopped, a write is refused with a clear error, not accepted. */
#include "coord_proc.h"
#include "replica_procs.h"
#include "world_proc.h"

#include "check_main.h"

#include <c10d/c10d.h>
#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORLD 2

typedef struct {
    char job[128];
    char urls[1024];
    volatile long long progress[WORLD]; /* all_reduces completed per rank */
    volatile long long stop_at;
    volatile long long adds_acked; /* the writer's adds acknowledged */
    volatile long long sets_acked; /* its keys w/0 .. w/N-1 acknowledged */
    volatile int writer_stop;
} shared;

static replica_set rs;

static void setup(void)
{
    replicas_init(&rs, 3);
    int late = replicas_start_serving(&rs, 90000);
    ck_assert_msg(late == 0, "replica %d did not serve within 90 s of the start", late);
}

static void teardown(void)
{
    replicas_cleanup(&rs);
}

static shared *new_shared(const char *base)
{
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                      0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset((void *)sh, 0, sizeof *sh);
    snprintf(sh->job, sizeof sh->job, "%s", world_job(base));
    snprintf(sh->urls, sizeof sh->urls, "%s", rs.urls);
    sh->stop_at = 1LL << 60;
    return sh;
}

static int rank_body(int rank, int n, void *arg)
{
    shared *sh = arg;
    c10d_pg *pg = world_init_verify(sh->urls, sh->job, rank, n, 60000, C10D_VERIFY_SYNC);
    if (!pg)
        return 10;
    int rc = world_allreduce_until(pg, rank, n, &sh->progress[rank], &sh->stop_at);
    if (rc == 0)
        c10d_destroy(pg);
    return rc;
}

/* Adds 1 to "counter" and sets w/<i> = i, back to back, counting what was
 * acknowledged; never gives up on a write (a minute each). */
static int writer_body(int rank, int n, void *arg)
{
    (void)rank;
    (void)n;
    shared *sh = arg;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 60000;
    c10d_store *s;
    if (c10d_store_connect(&s, sh->urls, &o) != C10D_OK) {
        fprintf(stderr, "writer: connect: %s\n", c10d_errmsg());
        return 20;
    }
    char key[64], val[32];
    while (!sh->writer_stop) {
        int64_t v;
        if (c10d_store_add(s, "replicated/counter", 1, &v) != C10D_OK) {
            fprintf(stderr, "writer: add: %s\n", c10d_errmsg());
            return 21;
        }
        sh->adds_acked++;
        long long i = sh->sets_acked;
        snprintf(key, sizeof key, "replicated/w/%lld", i);
        int len = snprintf(val, sizeof val, "%lld", i);
        if (c10d_store_set(s, key, val, (size_t)len) != C10D_OK) {
            fprintf(stderr, "writer: set: %s\n", c10d_errmsg());
            return 22;
        }
        sh->sets_acked = i + 1;
    }
    c10d_store_close(s);
    return 0;
}

/* Ranks 0 and 1 of the job, and the writer as a third process (one
 * world_spawn: world_wait reaps any child). */
static int process_body(int i, int n, void *arg)
{
    (void)n;
    return i < WORLD ? rank_body(i, WORLD, arg) : writer_body(i, n, arg);
}

static long long slowest(const shared *sh)
{
    long long m = sh->progress[0];
    for (int r = 1; r < WORLD; r++)
        if (sh->progress[r] < m)
            m = sh->progress[r];
    return m;
}

/* Waits until the job and the writer both got past where they are;
 * returns how long it took, or -1 after timeout_ms. */
static long long wait_both_move(const shared *sh, long long timeout_ms)
{
    long long t0 = test_now_ms(), job = 0, adds = sh->adds_acked;
    for (int r = 0; r < WORLD; r++)
        if (sh->progress[r] > job)
            job = sh->progress[r];
    while (slowest(sh) < job + 5 || sh->adds_acked < adds + 5) {
        if (test_now_ms() - t0 > timeout_ms)
            return -1;
        usleep(1000);
    }
    return test_now_ms() - t0;
}

/* What `c10d-ctl --coord LIST status` prints (through whichever leads). */
static int ctl_status_shows(const char *job)
{
    char cmd[2048], line[1024];
    snprintf(cmd, sizeof cmd, "C10D_TIMEOUT_MS=10000 %s --coord '%s' status 2>&1", C10D_CTL_BIN,
             rs.urls);
    FILE *p = popen(cmd, "r");
    int found = 0;
    while (p && fgets(line, sizeof line, p))
        found |= strstr(line, job) != NULL;
    if (p)
        pclose(p);
    return found;
}

static int64_t read_int(c10d_store *s, const char *key)
{
    void *v = NULL;
    size_t n = 0;
    if (c10d_store_get(s, key, &v, &n, C10D_NO_WAIT) != C10D_OK)
        return -1;
    char buf[32] = "";
    memcpy(buf, v, n < sizeof buf - 1 ? n : sizeof buf - 1);
    c10d_free(v);
    return strtoll(buf, NULL, 10);
}

START_TEST(a_job_rides_through_the_leader_s_death)
{
    int old = replicas_leader(&rs, 20000);
    ck_assert_int_gt(old, 0);
    /* every replica a voter before the kill: else there is no majority */
    long long until = test_now_ms() + 30000;
    while (replica_log_count(&rs, old, "is a voter") < 2 && test_now_ms() < until)
        usleep(10000);
    ck_assert_int_ge(replica_log_count(&rs, old, "is a voter"), 2);

    shared *sh = new_shared("replicated");
    pid_t procs[WORLD + 1];
    world_spawn(WORLD + 1, process_body, sh, procs);
    char failure[512] = "";
    if (wait_both_move(sh, 30000) < 0)
        snprintf(failure, sizeof failure, "no progress before the kill (job at %lld, %lld adds)",
                 slowest(sh), sh->adds_acked);

    long long took = -1;
    int now = 0;
    if (!*failure) {
        replica_stop(&rs, old, SIGKILL);
        took = wait_both_move(sh, 30000);
        now = replicas_leader(&rs, 20000);
        if (took < 0)
            snprintf(failure, sizeof failure, "the job or the writer stalled over 30 s after "
                     "replica %d was killed (job at %lld, %lld adds)", old, slowest(sh),
                     sh->adds_acked);
        else if (now == 0 || now == old)
            snprintf(failure, sizeof failure, "no new leader after replica %d (%d)", old, now);
        else if (!ctl_status_shows(sh->job))
            snprintf(failure, sizeof failure, "the new leader's c10d-ctl status does not show "
                     "job %s", sh->job);
    }
    if (!*failure) {
        /* the killed replica comes back and rejoins: with the third one
         * stopped, the cluster commits only if it is a voter again */
        int third = 6 - old - now;
        int served = replica_log_count(&rs, old, "serving on");
        replica_start(&rs, old, NULL);
        if (replica_wait_serving(&rs, old, served + 1, 30000) != 0)
            snprintf(failure, sizeof failure, "replica %d did not serve again", old);
        else if (replica_log_count(&rs, old, "following") < 1)
            snprintf(failure, sizeof failure, "replica %d came back, but not as a follower", old);
        if (!*failure) {
            replica_stop(&rs, third, SIGTERM);
            if (wait_both_move(sh, 30000) < 0)
                snprintf(failure, sizeof failure, "no progress with replicas %d and %d only: "
                         "replica %d did not rejoin", now, old, old);
        }
    }
    long long most = 0;
    for (int r = 0; r < WORLD; r++)
        if (sh->progress[r] > most)
            most = sh->progress[r];
    sh->stop_at = most + 10;
    sh->writer_stop = 1;
    int failed = world_wait(WORLD + 1, procs, 60);
    fprintf(stderr, "failover from replica %d to %d: the job and the writer moved on after "
            "%lld ms; %lld all_reduces, %lld adds, %lld sets\n", old, now, took, slowest(sh),
            sh->adds_acked, sh->sets_acked);
    if (*failure || failed)
        replicas_dump_logs(&rs);
    ck_assert_msg(!*failure, "%s", failure);
    ck_assert_int_eq(failed, 0);

    /* every acknowledged write is there, an add exactly once */
    c10d_store *s;
    ck_assert_int_eq(c10d_store_connect(&s, rs.urls, NULL), C10D_OK);
    ck_assert_int_eq(read_int(s, "replicated/counter"), sh->adds_acked);
    char key[64];
    for (long long i = 0; i < sh->sets_acked; i++) {
        snprintf(key, sizeof key, "replicated/w/%lld", i);
        ck_assert_int_eq(read_int(s, key), i);
    }
    c10d_store_close(s);
    munmap((void *)sh, sizeof *sh);
}
END_TEST

/* A follower's URL alone reaches the leader (ENOTLEADER and its URL);
 * with two of three replicas stopped (a partition, as the leader sees
 * it) a write fails within its timeout with a clear error; back together,
 * writes are accepted again. */
START_TEST(a_minority_refuses_writes)
{
    int leader = replicas_leader(&rs, 20000);
    ck_assert_int_gt(leader, 0);
    /* Both others voters first: with one voter the leader is a majority
     * alone and commits, as raft should (a run that went on without this
     * saw the write accepted in 47 ms). The leader that promoted them may
     * since have handed over: any replica's log counts. */
    ck_assert_msg(replicas_wait_voters(&rs, 60000) == 0,
                  "the other replicas did not become voters within 60 s");
    leader = replicas_leader(&rs, 20000);
    ck_assert_int_gt(leader, 0);
    int f1 = leader == 1 ? 2 : 1, f2 = 6 - leader - f1;

    c10d_store *s;
    ck_assert_int_eq(c10d_store_connect(&s, rs.url[f1 - 1], NULL), C10D_OK);
    ck_assert_int_eq(c10d_store_set(s, "minority/before", "1", 1), C10D_OK);
    c10d_store_close(s);

    kill(rs.pid[f1 - 1], SIGSTOP);
    kill(rs.pid[f2 - 1], SIGSTOP);
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    /* long enough for the leader's engine to notice and restart as a
     * replica with no leader, under a sanitizer too */
    o.timeout_ms = o.connect_timeout_ms = 8000;
    ck_assert_int_eq(c10d_store_connect(&s, rs.url[leader - 1], &o), C10D_OK);
    long long t0 = test_now_ms();
    c10d_status st = c10d_store_set(s, "minority/during", "1", 1);
    long long took = test_now_ms() - t0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", c10d_errmsg());
    c10d_store_close(s);
    kill(rs.pid[f1 - 1], SIGCONT);
    kill(rs.pid[f2 - 1], SIGCONT);
    fprintf(stderr, "a write with 1 of 3 replicas: %s after %lld ms: %s\n", c10d_status_name(st),
            took, msg);
    if (st == C10D_OK)
        replicas_dump_logs(&rs);
    ck_assert_int_ne(st, C10D_OK);
    /* what the replica itself says, not only that the client gave up */
    ck_assert_msg(strstr(msg, "no leader") && strstr(msg, "majority"), "unclear: %s", msg);
    ck_assert_int_lt(took, 8000 + 3000);

    /* together again: a leader, and writes are accepted */
    o.timeout_ms = o.connect_timeout_ms = 30000;
    ck_assert_int_eq(c10d_store_connect(&s, rs.urls, &o), C10D_OK);
    ck_assert_int_eq(c10d_store_set(s, "minority/after", "1", 1), C10D_OK);
    ck_assert_int_eq(read_int(s, "minority/before"), 1);
    c10d_store_close(s);
}
END_TEST

/* A leader whose node stops answering (its supervisor stopped: a hung
 * host, as the engine sees it) stops serving within about an election
 * timeout: meanwhile the others elect a leader, and its reads would be
 * stale. It used to go on for ~105 s. */
START_TEST(a_leader_cut_off_from_its_node_stops_serving)
{
    int leader = replicas_leader(&rs, 20000);
    ck_assert_int_gt(leader, 0);
    kill(rs.pid[leader - 1], SIGSTOP);
    long long t0 = test_now_ms(), took = -1;
    while (test_now_ms() - t0 < 20000) {
        if (replica_log_count(&rs, leader, "has not answered for an election timeout")) {
            took = test_now_ms() - t0;
            break;
        }
        usleep(10000);
    }
    /* the old leader's engine may answer while it exits: the new one
     * is the one that answers after */
    int now = leader;
    for (long long t = test_now_ms() + 20000; now == leader && test_now_ms() < t;)
        now = replicas_leader(&rs, 20000);
    kill(rs.pid[leader - 1], SIGCONT);
    fprintf(stderr, "a leader cut off from its node stopped serving after %lld ms; replica %d "
            "leads\n", took, now);
    if (took < 0)
        replicas_dump_logs(&rs);
    ck_assert_int_ge(took, 0);
    ck_assert_int_lt(took, 5000); /* an election timeout is 0.75-1.5 s here */
    ck_assert_int_ne(now, leader);
    ck_assert_int_gt(now, 0);
}
END_TEST

/* Runs a command; its stdout (and stderr) in out. Returns its status. */
static int run_cmd(char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int run_cmd(char *out, size_t len, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, len - 1, p) : 0;
    out[n] = '\0';
    /* the rest read and dropped: a pipe closed on the command would fail
     * it (SIGPIPE), e.g. once a slow start made it print a notice first */
    char rest[512];
    while (p && fread(rest, 1, sizeof rest, p) > 0)
        ;
    return p ? pclose(p) : -1;
}

/* A backup: --export copies the replicated database into a SQLite file
 * while it runs; a new replicated coordinator seeded from that file
 * (--seed) serves the same keys, and a seed is ignored once the
 * replicated database holds anything. */
START_TEST(an_export_seeds_a_new_cluster)
{
    char out[8192], file[512];
    ck_assert_int_gt(replicas_leader(&rs, 20000), 0);
    ck_assert_msg(run_cmd(out, sizeof out, "C10D_TIMEOUT_MS=20000 %s --coord '%s' set --write backup/a "
                          "alpha && %s --coord '%s' add --write backup/n 41", C10D_CTL_BIN, rs.urls,
                          C10D_CTL_BIN, rs.urls) == 0, "%s", out);
    snprintf(file, sizeof file, "%s/export.db", rs.dir);
    ck_assert_msg(run_cmd(out, sizeof out, "%s --export %s --peers %s", C10D_COORD_BIN, file,
                          rs.peers) == 0, "%s", out);
    ck_assert_msg(strstr(out, "schema version") != NULL, "%s", out);
    /* a second export to the same file is refused, the first kept */
    ck_assert_int_ne(run_cmd(out, sizeof out, "%s --export %s --peers %s", C10D_COORD_BIN, file,
                             rs.peers), 0);
    ck_assert_msg(strstr(out, "must not exist") != NULL, "%s", out);

    replica_set other;
    replicas_init(&other, 3);
    const char *seed[] = {"--seed", file, NULL};
    for (int i = 1; i <= 3; i++)
        replica_start(&other, i, seed);
    int leader = replicas_leader(&other, 30000);
    int got = run_cmd(out, sizeof out, "C10D_TIMEOUT_MS=20000 %s --coord '%s' get backup/a && "
                      "%s --coord '%s' add --write backup/n 1", C10D_CTL_BIN, other.urls, C10D_CTL_BIN,
                      other.urls);
    int seeded = replica_log_count(&other, leader, "seeded from");
    /* started again with the seed: ignored, the keys as they are now */
    for (int i = 1; i <= 3; i++)
        replica_stop(&other, i, SIGTERM);
    for (int i = 1; i <= 3; i++)
        replica_start(&other, i, seed);
    char again[8192]; /* room for "still trying" notices of a slow start */
    int got_again = run_cmd(again, sizeof again, "C10D_TIMEOUT_MS=20000 %s --coord '%s' get "
                            "backup/n", C10D_CTL_BIN, other.urls);
    int ignored = 0;
    for (int i = 1; i <= 3; i++)
        ignored += replica_log_count(&other, i, "ignored: the replicated database is not empty");
    if (got || !seeded || got_again || !ignored)
        replicas_dump_logs(&other);
    replicas_cleanup(&other);
    ck_assert_msg(got == 0, "%s", out);
    ck_assert_msg(strstr(out, "alpha") && strstr(out, "42"), "%s", out);
    ck_assert_int_eq(seeded, 1);
    ck_assert_msg(got_again == 0 && strstr(again, "42"), "%s", again);
    ck_assert_int_ge(ignored, 1);
}
END_TEST

/* Replica 3 starts only after the others have served writes (and the
 * schema's migrations ran on the leader, once): it catches up, becomes a
 * voter, and holds everything: with replica 1 killed, replicas 2 and 3
 * elect a leader that serves the writes made before 3 existed. Replica 1,
 * started again on an empty --data-dir, is refused (dqlite would
 * bootstrap a second, empty cluster). (That
 * migrations run once, on the leader: test_replica_mirror.c.) */
START_TEST(a_late_replica_catches_up)
{
    replicas_init(&rs, 3);
    replica_start(&rs, 1, NULL);
    replica_start(&rs, 2, NULL);
    char out[8192];
    ck_assert_int_eq(replicas_leader(&rs, 30000), 1);
    ck_assert_msg(run_cmd(out, sizeof out, "C10D_TIMEOUT_MS=20000 %s --coord '%s' set --write late/a "
                          "early && %s --coord '%s' add --write late/n 7", C10D_CTL_BIN, rs.urls,
                          C10D_CTL_BIN, rs.urls) == 0, "%s", out);
    replica_start(&rs, 3, NULL);
    long long until = test_now_ms() + 30000;
    while (replica_log_count(&rs, 1, "replica 3 (") < 1 && test_now_ms() < until)
        usleep(10000);
    int voter = replica_log_count(&rs, 1, "replica 3 (");
    replica_stop(&rs, 1, SIGKILL);
    /* replica 1 again, its data lost: it must not start a second cluster */
    char wipe[512];
    snprintf(wipe, sizeof wipe, "rm -rf '%s/data1'", rs.dir);
    ck_assert_int_eq(system(wipe), 0);
    int got = run_cmd(out, sizeof out, "C10D_TIMEOUT_MS=20000 %s --coord '%s' get late/a && "
                      "%s --coord '%s' add --write late/n 1", C10D_CTL_BIN, rs.urls, C10D_CTL_BIN,
                      rs.urls);
    replica_start(&rs, 1, NULL);
    int st = 0;
    pid_t p1 = rs.pid[0];
    for (long long t = test_now_ms() + 20000; test_now_ms() < t; usleep(10000))
        if (waitpid(p1, &st, WNOHANG) == p1) {
            rs.pid[0] = 0;
            break;
        }
    int refused = rs.pid[0] == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1 &&
                  replica_log_count(&rs, 1, "would start a second one") == 1;
    /* and the cluster of 2 and 3 still holds the writes */
    char after[8192];
    int got_after = run_cmd(after, sizeof after, "C10D_TIMEOUT_MS=20000 %s --coord '%s' get "
                            "late/n", C10D_CTL_BIN, rs.urls);
    if (!voter || got || !refused || got_after)
        replicas_dump_logs(&rs);
    replicas_cleanup(&rs);
    ck_assert_msg(voter, "replica 3 never became a voter");
    ck_assert_msg(got == 0 && strstr(out, "early") && strstr(out, "8"), "%s", out);
    ck_assert_msg(refused, "replica 1 on an empty --data-dir was not refused");
    ck_assert_msg(got_after == 0 && strstr(after, "8"), "%s", after);
}
END_TEST

/* Wrong replica options are refused at once, exit 2, saying what is
 * wrong (and a replica of a build without dqlite says so instead). */
START_TEST(bad_replica_options_say_why)
{
    static const struct {
        const char *args, *says;
    } cases[] = {
        {"--replica 1", "--replica needs --peers"},
        {"--peers 1=127.0.0.1:1", "go with --replica ID"},
        {"--replica 2 --peers 1=127.0.0.1:1", "--replica's ID is not in --peers"},
        {"--replica 1 --peers 1=127.0.0.1:1 --db x.db", "not in --db"},
        {"--replica 1 --peers 1=localhost:1", "is not ID=IPv4:PORT"},
        {"--replica 1 --peers 0=127.0.0.1:1", "is not ID=IPv4:PORT"},
        {"--replica 1 --peers 1=127.0.0.1:1,2=127.0.0.1:1", "an address is listed twice"},
        {"--replica 1 --peers 1=127.0.0.1:1,1=127.0.0.1:2", "a replica's id is listed twice"},
        {"--replica 1 --peers 1=127.0.0.1:29700", "takes the port of this replica's dqlite"},
        {"--export x.db", "--export needs --peers"},
        {"--export x.db --replica 1 --peers 1=127.0.0.1:1", "not with --replica"},
        {"--seed x.db", "go with --replica ID"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[2048];
        int st = run_cmd(out, sizeof out, "%s %s", C10D_COORD_BIN, cases[i].args);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s: status %d: %s",
                      cases[i].args, st, out);
        ck_assert_msg(strstr(out, cases[i].says) != NULL, "%s said: %s", cases[i].args, out);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("replicas");
    TCase *tc = tcase_create("replicas");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, a_job_rides_through_the_leader_s_death);
    tcase_add_test(tc, a_minority_refuses_writes);
    tcase_add_test(tc, an_export_seeds_a_new_cluster);
    tcase_add_test(tc, a_leader_cut_off_from_its_node_stops_serving);
    suite_add_tcase(s, tc);
    TCase *usage = tcase_create("usage");
    tcase_add_test(usage, bad_replica_options_say_why);
    suite_add_tcase(s, usage);
    TCase *late = tcase_create("late");
    tcase_set_timeout(late, 120);
    tcase_add_test(late, a_late_replica_catches_up);
    suite_add_tcase(s, late);
    return c10d_run_suite(s);
}
