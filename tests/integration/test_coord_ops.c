/* What an operator reads of a real c10d-coord: its log names clients
 * without their ids; a damaged database is refused
 * with one message and one piece of advice, whatever the damage; every
 * binary answers --version (finding 10). */
#include "coord_proc.h"
#include "sim_ranks.h"

#include <c10d/errors.h>

#include "check_main.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static coord_proc coord;

static void setup(void)
{
    coord_init(&coord);
}

static void teardown(void)
{
    coord_cleanup(&coord);
}

/* --- the log --- */

static C10dpb__Reply *last;
static int replies;

static void on_reply(sim_conn *c, void *tag, C10dpb__Reply *rep, void *arg)
{
    (void)c, (void)tag, (void)arg;
    if (last)
        c10dpb__reply__free_unpacked(last, NULL);
    last = NULL;
    if (rep) { /* the loop frees rep: keep a copy */
        size_t n = c10dpb__reply__get_packed_size(rep);
        uint8_t *buf = malloc(n);
        c10dpb__reply__pack(rep, buf);
        last = c10dpb__reply__unpack(NULL, n, buf);
        free(buf);
    }
    replies++;
}

static int answered(void *want)
{
    return replies >= *(int *)want;
}

/* Sends req as client `client` and waits for its answer; its status. */
static int ask_as(sim_loop *L, sim_conn *c, C10dpb__Request *req, uint64_t client,
                  uint64_t id)
{
    int want = replies + 1;
    ck_assert_int_eq(sim_send_as(c, req, NULL, client, id), 0);
    ck_assert_int_eq(sim_run(L, answered, &want, (int64_t)sim_now_ms() + 10000), 0);
    ck_assert_ptr_nonnull(last);
    return last->status;
}

/* Finding 9: a request for a rank from a client other than the one that
 * joined it is refused and logged. The log printed both clients' ids, and
 * a rank's client id is what speaking for it takes: whoever read the log
 * could then leave, report or watch as that rank. */
START_TEST(the_log_names_clients_without_their_ids)
{
    ck_assert_int_eq(coord_start(&coord, NULL, NULL, NULL), 0);
    const uint64_t holder = 0x5eed1d0000c0ffeeull, other = 0x0bad1d0000decafeull;
    sim_loop *L = sim_loop_new(on_reply, NULL);
    sim_conn *c = sim_connect(L, coord.url);
    ck_assert_ptr_nonnull(c);
    C10dpb__GroupJoin j = C10DPB__GROUP_JOIN__INIT;
    j.job = "logjob";
    j.name = "world";
    j.rank = 0;
    j.world_size = 1;
    j.host = "n7";
    j.has_pid = 1;
    j.pid = 4242;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
    req.group_join = &j;
    ck_assert_int_eq(ask_as(L, c, &req, holder, 1), 0);
    uint64_t gen = last->group_join->generation;

    C10dpb__GroupLeave lv = C10DPB__GROUP_LEAVE__INIT;
    lv.job = "logjob";
    lv.generation = gen;
    lv.rank = 0;
    C10dpb__Request leave = C10DPB__REQUEST__INIT;
    leave.op_case = C10DPB__REQUEST__OP_GROUP_LEAVE;
    leave.group_leave = &lv;
    ck_assert_int_eq(ask_as(L, c, &leave, other, 1), C10D_EAUTH);
    c10dpb__reply__free_unpacked(last, NULL);
    last = NULL;
    sim_loop_free(L);
    coord_stop(&coord, SIGTERM); /* its log is complete */

    ck_assert_msg(coord_log_contains(&coord, "refused a request for rank 0 of job logjob"),
                  "no refusal in the log");
    ck_assert(coord_log_contains(&coord, "(host n7 pid 4242)"));
    char hex[32];
    const uint64_t ids[] = {holder, other};
    for (int i = 0; i < 2; i++) {
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)ids[i]);
        ck_assert_msg(!coord_log_contains(&coord, hex), "the log shows client id %s", hex);
        snprintf(hex, sizeof hex, "%llu", (unsigned long long)ids[i]);
        ck_assert_msg(!coord_log_contains(&coord, hex), "the log shows client id %s", hex);
    }
    ck_assert(coord_log_contains(&coord, "from client #"));
}
END_TEST

/* --- a damaged database --- */

/* Writes 64 bytes of garbage at offset `at` of the database file. */
static void damage(const char *path, off_t at)
{
    int fd = open(path, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    char junk[64];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(0xa5 ^ (i * 37));
    ck_assert_int_eq(pwrite(fd, junk, sizeof junk, at), (ssize_t)sizeof junk);
    close(fd);
}

/* Finding 10: garbage over the file's header read "cannot configure
 * database X: file is not a database", a damaged first page "cannot
 * configure ...: database disk image is malformed", a later page "is
 * damaged (...): restore it from a backup"; the advice only for the last.
 * Each is a copy of a real database, damaged, given to a real c10d-coord. */
START_TEST(a_damaged_database_is_said_to_be_damaged_whatever_the_damage)
{
    ck_assert_int_eq(coord_start(&coord, NULL, NULL, NULL), 0);
    ck_assert_int_eq(coord_stop(&coord, SIGTERM), 0); /* a clean file, its WAL checkpointed */
    char good[600];
    snprintf(good, sizeof good, "%s.good", coord.db);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", coord.db, good);
    ck_assert_int_eq(system(cmd), 0);
    static const struct {
        off_t at;
        const char *sqlite_says;
    } cases[] = {
        {0, "file is not a database"},
        {100, "malformed"}, /* the first page's b-tree header */
        /* a later page: only quick_check sees it. SQLite says "Page 2: ..."
         * or "... on page 2", by what the page holds (a b-tree, or free
         * pages since schema 13's copy of kv) */
        {4096, "age 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "cp '%s' '%s' && rm -f '%s-wal' '%s-shm' && : > '%s'", good,
                 coord.db, coord.db, coord.db, coord.log);
        ck_assert_int_eq(system(cmd), 0);
        damage(coord.db, cases[i].at);
        int st = 0;
        ck_assert_msg(coord_start(&coord, NULL, NULL, &st) == -1,
                      "a coordinator served a database damaged at %lld", (long long)cases[i].at);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
        char want[1024];
        snprintf(want, sizeof want, "database %s is damaged (", coord.db);
        ck_assert_msg(coord_log_contains(&coord, want), "damage at %lld: no '%s'",
                      (long long)cases[i].at, want);
        ck_assert_msg(coord_log_contains(&coord, cases[i].sqlite_says), "damage at %lld: no '%s'",
                      (long long)cases[i].at, cases[i].sqlite_says);
        ck_assert(coord_log_contains(&coord, "): restore it from a backup or move it aside and "
                                             "start on a new one (docs/operations.md, \"A "
                                             "damaged database\")"));
        ck_assert(!coord_log_contains(&coord, "cannot configure"));
    }
    unlink(good);
}
END_TEST

/* --- --version --- */

/* Finding 10: every binary says its version (c10d-run had no --version). */
START_TEST(every_binary_answers_version)
{
    const char *bins[] = {C10D_COORD_BIN, C10D_CTL_BIN, C10D_RUN_BIN};
    const char *names[] = {"c10d-coord", "c10d-ctl", "c10d-run"};
    for (int i = 0; i < 3; i++) {
        char cmd[1024], out[256] = "", want[128];
        snprintf(cmd, sizeof cmd, "%s --version 2>&1", bins[i]);
        FILE *p = popen(cmd, "r");
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = '\0';
        int st = pclose(p);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s --version: status %d: %s",
                      names[i], st, out);
        snprintf(want, sizeof want, "%s %s", names[i], C10D_TEST_VERSION);
        ck_assert_msg(!strncmp(out, want, strlen(want)), "%s --version said: %s", names[i],
                      out);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("coord_ops");
    TCase *tc = tcase_create("ops");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, the_log_names_clients_without_their_ids);
    tcase_add_test(tc, a_damaged_database_is_said_to_be_damaged_whatever_the_damage);
    tcase_add_test(tc, every_binary_answers_version);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
