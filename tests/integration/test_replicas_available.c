/* A replicated coordinator stays available (docs/replication.md): three
 * real replicas on loopback, and real client processes.
 *
 * A frozen leader (SIGSTOP: a hung host, a partition) keeps its clients'
 * connections open: its writer must move to the new leader about when it
 * is elected, not wait for the freeze to end. Replica 2 or 3 started
 * again on an emptied --data-dir under its old id is refused, saying
 * why, as replica 1 is. A follower whose --data-dir fills says so, and
 * the cluster still elects a leader once the old one is killed. */
#include "coord_proc.h"
#include "replica_procs.h"

#include "check_main.h"

#include <c10d/c10d.h>
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    char urls[1024];
    volatile long long adds;      /* acknowledged */
    volatile long long last_ms;   /* when the last was */
    volatile long long max_gap;   /* the longest wait for one, ms */
    volatile int stop, failed;
} writer_state;

static replica_set rs;

static void start_all(void)
{
    int late = replicas_start_serving(&rs, 90000);
    ck_assert_msg(late == 0, "replica %d did not serve within 90 s of the start", late);
    ck_assert_msg(replicas_wait_voters(&rs, 60000) == 0,
                  "the other replicas did not become voters within 60 s");
}

static void setup(void)
{
    replicas_init(&rs, 3);
    start_all();
}

static void teardown(void)
{
    replicas_cleanup(&rs);
}

/* A child process adding 1 to a key back to back through the list,
 * each add allowed 30 s (the library's default timeout). */
static pid_t start_writer(writer_state *w)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid)
        return pid;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = o.connect_timeout_ms = 30000;
    c10d_store *s;
    if (c10d_store_connect(&s, w->urls, &o) != C10D_OK) {
        fprintf(stderr, "writer: connect: %s\n", c10d_errmsg());
        w->failed = 1;
        _exit(1);
    }
    w->last_ms = test_now_ms();
    while (!w->stop) {
        int64_t v;
        if (c10d_store_add(s, "available/counter", 1, &v) != C10D_OK) {
            fprintf(stderr, "writer: add: %s\n", c10d_errmsg());
            w->failed = 1;
            _exit(1);
        }
        long long now = test_now_ms();
        if (now - w->last_ms > w->max_gap)
            w->max_gap = now - w->last_ms;
        w->last_ms = now;
        w->adds++;
    }
    c10d_store_close(s);
    _exit(0);
}

static writer_state *new_writer(void)
{
    writer_state *w = mmap(NULL, sizeof *w, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                           -1, 0);
    ck_assert_ptr_ne(w, MAP_FAILED);
    memset((void *)w, 0, sizeof *w);
    snprintf(w->urls, sizeof w->urls, "%s", rs.urls);
    return w;
}

/* Waits for n more acknowledged adds; how long it took, or -1. */
static long long wait_adds(writer_state *w, long long n, long long timeout_ms)
{
    long long t0 = test_now_ms(), want = w->adds + n;
    while (w->adds < want && !w->failed) {
        if (test_now_ms() - t0 > timeout_ms)
            return -1;
        usleep(1000);
    }
    return w->failed ? -1 : test_now_ms() - t0;
}

/* The leader's processes, its supervisor and its engine, are frozen
 * for FREEZE_MS. Its writer must be writing again
 * through the new leader within a few seconds of that one's election,
 * long before the freeze ends. (It used to wait for the whole freeze.) */
#define FREEZE_MS 15000
START_TEST(a_frozen_leader_s_clients_move_to_the_new_one)
{
    int old = replicas_leader(&rs, 20000);
    ck_assert_int_gt(old, 0);
    writer_state *w = new_writer();
    pid_t writer = start_writer(w);
    char failure[512] = "";
    if (wait_adds(w, 20, 30000) < 0)
        snprintf(failure, sizeof failure, "the writer made no progress before the freeze");
    long long stopped = 0, elected = -1, moved = -1;
    if (!*failure) {
        replica_signal_all(&rs, old, SIGSTOP);
        stopped = test_now_ms();
        long long want = w->adds + 5;
        int was[4] = {0};
        for (int id = 1; id <= 3; id++)
            was[id] = replica_log_count(&rs, id, "has been elected");
        while (test_now_ms() - stopped < FREEZE_MS && moved < 0 && !w->failed) {
            for (int id = 1; id <= 3 && elected < 0; id++)
                if (id != old && replica_log_count(&rs, id, "has been elected") > was[id])
                    elected = test_now_ms() - stopped;
            if (w->adds >= want)
                moved = test_now_ms() - stopped;
            usleep(5000);
        }
        replica_signal_all(&rs, old, SIGCONT);
    }
    long long gap = w->max_gap;
    w->stop = 1;
    int st = 0;
    waitpid(writer, &st, 0);
    fprintf(stderr, "a frozen leader (replica %d): a new one elected after %lld ms, its writer "
            "writing again after %lld ms (longest wait for an add: %lld ms)\n", old, elected,
            moved, gap);
    if (!*failure && moved < 0)
        snprintf(failure, sizeof failure, "the writer was blocked for the whole %d ms freeze of "
                 "replica %d (a new leader after %lld ms)", FREEZE_MS, old, elected);
    /* within a few seconds of the election, under a sanitizer on a
     * loaded machine too: the client looks past a silence of 0.3 s */
    if (!*failure && elected >= 0 && moved > elected + 5000)
        snprintf(failure, sizeof failure, "the writer moved %lld ms after the election",
                 moved - elected);
    if (*failure)
        replicas_dump_logs(&rs);
    ck_assert_msg(!*failure, "%s", failure);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the writer failed");
    munmap((void *)w, sizeof *w);
}
END_TEST

/* Replica id's supervisor, started again: waits up to timeout_ms for it
 * to exit; its exit status, or -1 while it runs. */
static int wait_exit(int id, long long timeout_ms)
{
    int st = 0;
    for (long long t = test_now_ms() + timeout_ms; test_now_ms() < t; usleep(10000))
        if (waitpid(rs.pid[id - 1], &st, WNOHANG) == rs.pid[id - 1]) {
            rs.pid[id - 1] = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
    return -1;
}

/* A follower (2 or 3) whose data is lost, started again under its id:
 * the cluster counts it as a voter whose log and votes it kept, and it
 * has neither; it is refused, naming the fix, and the others serve on. */
START_TEST(an_emptied_follower_under_its_old_id_is_refused)
{
    int leader = replicas_leader(&rs, 20000);
    ck_assert_int_gt(leader, 0);
    int f = leader == 3 ? 2 : 3;
    replica_stop(&rs, f, SIGKILL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/data%d'", rs.dir, f);
    ck_assert_int_eq(system(cmd), 0);
    replica_start(&rs, f, NULL);
    int code = wait_exit(f, 30000);
    char why[128];
    snprintf(why, sizeof why, "is empty, but the cluster counts replica %d as a voter", f);
    int said = replica_log_count(&rs, f, why);
    int serves = replicas_leader(&rs, 20000) > 0;
    if (code != 1 || !said || !serves)
        replicas_dump_logs(&rs);
    ck_assert_msg(code == 1, "replica %d on an emptied --data-dir: exit %d (-1: it runs)", f,
                  code);
    ck_assert_msg(said, "replica %d did not say why it was refused", f);
    ck_assert_msg(serves, "the other replicas stopped serving");
}
END_TEST

/* One set through the list, in a child: this process forks writers and
 * must not start NNG itself. 1 when it was acknowledged. */
static int write_once(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        c10d_store_opts o = C10D_STORE_OPTS_INIT;
        o.timeout_ms = o.connect_timeout_ms = 30000;
        c10d_store *s;
        if (c10d_store_connect(&s, rs.urls, &o) != C10D_OK ||
            c10d_store_set(s, "available/after", "1", 1) != C10D_OK) {
            fprintf(stderr, "write: %s\n", c10d_errmsg());
            _exit(1);
        }
        c10d_store_close(s);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* One round of a full follower (rounds: the test): follower f's
 * --data-dir filled while a writer runs; it must say so, naming the
 * directory; the leader is then killed and the space freed, and the two
 * left must elect a leader that serves; the killed one comes back.
 * Returns "" or what failed, into failure. */
static void full_follower_round(int leader, int f, char *failure, size_t cap)
{
    char data[300], fill[400], cmd[1200], said[400];
    snprintf(data, sizeof data, "%s/data%d", rs.dir, f);
    snprintf(fill, sizeof fill, "%s/fill", data);
    snprintf(said, sizeof said, "--data-dir %s has ", data);
    int said_before = replica_log_count(&rs, f, said);
    writer_state *w = new_writer();
    pid_t writer = start_writer(w);
    if (wait_adds(w, 20, 30000) < 0)
        snprintf(failure, cap, "the writer made no progress");
    snprintf(cmd, sizeof cmd, "dd if=/dev/zero of='%s' bs=1M 2>/dev/null", fill);
    if (!*failure && system(cmd) == -1)
        snprintf(failure, cap, "cannot fill %s", data);
    long long until = test_now_ms() + 15000;
    while (!*failure && replica_log_count(&rs, f, said) <= said_before && test_now_ms() < until)
        usleep(10000);
    if (!*failure && replica_log_count(&rs, f, said) <= said_before)
        snprintf(failure, cap, "replica %d did not say its --data-dir is full", f);
    /* the writer goes on a while: the full follower's writes fail */
    wait_adds(w, 50, 3000);
    w->stop = 1;
    waitpid(writer, NULL, 0);
    munmap((void *)w, sizeof *w);
    long long led = -1;
    int now = 0;
    if (!*failure) {
        int served = replica_log_count(&rs, leader, "serving on");
        replica_stop(&rs, leader, SIGKILL);
        unlink(fill);
        long long t0 = test_now_ms();
        while (test_now_ms() - t0 < 100000 && (now == 0 || now == leader))
            now = replicas_leader(&rs, 5000);
        led = now > 0 && now != leader ? test_now_ms() - t0 : -1;
        if (led < 0)
            snprintf(failure, cap, "no replica led within 100 s of the leader's death, the "
                     "space freed");
        else if (!write_once())
            snprintf(failure, cap, "a write through the new leader failed");
        replica_start(&rs, leader, NULL);
        if (!*failure && replica_wait_serving(&rs, leader, served + 1, 60000) != 0)
            snprintf(failure, cap, "replica %d did not serve again", leader);
    }
    fprintf(stderr, "a full follower (replica %d, replica %d killed): a new leader (%d) %lld ms "
            "after the leader's death; replica %d started its node afresh %d times\n", f,
            leader, now, led, f, replica_log_count(&rs, f, "afresh"));
}

/* Every replica's --data-dir on a tmpfs of its own (raft preallocates 3
 * segments of 8 MiB: room for them and a little), so that any follower
 * can be filled; two rounds, as it was seen to fail twice. (It used to
 * say nothing, and no replica led for over 110 s.) Needs mount(2):
 * skipped, saying so, where it is not permitted. */
START_TEST(a_follower_s_full_disk_is_said_and_the_cluster_elects)
{
    replicas_init(&rs, 3);
    char data[3][300];
    int mounted = 0;
    for (int i = 0; i < 3; i++) {
        snprintf(data[i], sizeof data[i], "%s/data%d", rs.dir, i + 1);
        ck_assert_int_eq(mkdir(data[i], 0700), 0);
        if (mount("tmpfs", data[i], "tmpfs", 0, "size=40m") != 0) {
            fprintf(stderr, "skipped: cannot mount a tmpfs for a full disk: %s\n",
                    strerror(errno));
            break;
        }
        mounted++;
    }
    char failure[512] = "";
    if (mounted == 3) {
        start_all();
        for (int round = 0; round < 2 && !*failure; round++) {
            int leader = replicas_leader(&rs, 20000);
            if (leader <= 0) {
                snprintf(failure, sizeof failure, "no leader before round %d", round + 1);
                break;
            }
            full_follower_round(leader, leader == 3 ? 2 : 3, failure, sizeof failure);
        }
        if (*failure)
            replicas_dump_logs(&rs);
    }
    for (int i = 1; i <= 3; i++)
        replica_stop(&rs, i, SIGKILL);
    for (int i = 0; i < mounted; i++)
        umount2(data[i], MNT_DETACH);
    replicas_cleanup(&rs);
    ck_assert_msg(!*failure, "%s", failure);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("replicas_available");
    TCase *tc = tcase_create("available");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, a_frozen_leader_s_clients_move_to_the_new_one);
    tcase_add_test(tc, an_emptied_follower_under_its_old_id_is_refused);
    suite_add_tcase(s, tc);
    TCase *disk = tcase_create("disk");
    tcase_set_timeout(disk, 300);
    tcase_add_test(disk, a_follower_s_full_disk_is_said_and_the_cluster_elects);
    suite_add_tcase(s, disk);
    return c10d_run_suite(s);
}
