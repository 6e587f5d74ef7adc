/* The dqlite wire client (server/replica/dqlite_wire.c) against real dqlite nodes
 * (libdqlite, Debian's 1.11.1), started in this process on abstract unix
 * sockets: a node's one database, statements with every parameter type,
 * a query whose rows take many messages, a transaction, the FAILURE
 * codes, and three nodes: who leads, joining voters, and a follower's
 * "not leader". docs/replication.md says what it is for. */
#include "dqlite_nodes.h"
#include "failure.h"
#include "replica/dqlite_wire.h"

#include "check_main.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NODES 3

static dq_node nodes[NODES];

static void start_node(int i)
{
    ck_assert_int_eq(dq_node_start(&nodes[i], (unsigned)i + 1, "wire"), 0);
}

static void stop_nodes(void)
{
    for (int i = 0; i < NODES; i++)
        dq_node_stop(&nodes[i]);
}

static c10ds_dq *connect_to(int i)
{
    c10ds_dq *d;
    ck_assert_msg(c10ds_dq_connect(&d, nodes[i].addr, 5000) == 0, "%s", c10ds_failure());
    return d;
}

/* A connection to node 1 with its database open, node 1 leading. */
static c10ds_dq *open_on_leader(void)
{
    c10ds_dq *d = connect_to(0);
    ck_assert_msg(c10ds_dq_open(d, "c10d") == 0, "%s", c10ds_failure());
    return d;
}

#define DQ_OK(d, call) ck_assert_msg((call) == 0, "%s: %s (code %llu)", #call, \
                                     c10ds_failure(), (unsigned long long)c10ds_dq_code(d))

START_TEST(statements_with_every_type_round_trip)
{
    start_node(0);
    c10ds_dq *d = open_on_leader();
    uint64_t id;
    char leader[64];
    DQ_OK(d, c10ds_dq_leader(d, &id, leader, sizeof leader));
    ck_assert_uint_eq(id, 1);
    ck_assert_str_eq(leader, nodes[0].addr);
    DQ_OK(d, c10ds_dq_exec_sql(d, "CREATE TABLE t (i INTEGER, f REAL, s TEXT, b BLOB, n)", NULL,
                               0, NULL, NULL));
    uint32_t ins;
    uint64_t nparams;
    DQ_OK(d, c10ds_dq_prepare(d, "INSERT INTO t VALUES (?, ?, ?, ?, ?)", &ins, &nparams));
    ck_assert_uint_eq(nparams, 5);
    const char blob[] = {0, 1, 2, 0, (char)0xff};
    c10ds_dq_value p[5] = {
        {.type = C10DS_DQ_INTEGER, .i = -1234567890123LL},
        {.type = C10DS_DQ_FLOAT, .f = 2.5},
        {.type = C10DS_DQ_TEXT, .p = "seven b", .n = 7}, /* 8 with its NUL: no padding */
        {.type = C10DS_DQ_BLOB, .p = blob, .n = sizeof blob},
        {.type = C10DS_DQ_NULL},
    };
    uint64_t last, changes;
    DQ_OK(d, c10ds_dq_exec(d, ins, p, 5, &last, &changes));
    ck_assert_uint_eq(changes, 1);
    ck_assert_uint_eq(last, 1);
    c10ds_dq_rows rows;
    DQ_OK(d, c10ds_dq_query_sql(d, "SELECT i, f, s, b, n FROM t", NULL, 0, &rows));
    ck_assert_uint_eq(rows.ncols, 5);
    ck_assert_str_eq(rows.names[2], "s");
    ck_assert_uint_eq(rows.nrows, 1);
    ck_assert_int_eq(rows.values[0].type, C10DS_DQ_INTEGER);
    ck_assert(rows.values[0].i == -1234567890123LL);
    ck_assert(rows.values[1].type == C10DS_DQ_FLOAT && rows.values[1].f == 2.5);
    ck_assert_str_eq(rows.values[2].p, "seven b");
    ck_assert_int_eq(rows.values[3].type, C10DS_DQ_BLOB);
    ck_assert_uint_eq(rows.values[3].n, sizeof blob);
    ck_assert_mem_eq(rows.values[3].p, blob, sizeof blob);
    ck_assert_int_eq(rows.values[4].type, C10DS_DQ_NULL);
    c10ds_dq_rows_free(&rows);
    DQ_OK(d, c10ds_dq_finalize(d, ins));
    c10ds_dq_close(d);
    stop_nodes();
}
END_TEST

/* 20,000 rows come in many ROWS messages (about 4 KiB each), each ending
 * "more follow" but the last; all arrive, in order. And a transaction's
 * rows are one commit. */
START_TEST(a_query_of_many_messages_and_a_transaction)
{
    start_node(0);
    c10ds_dq *d = open_on_leader();
    DQ_OK(d, c10ds_dq_exec_sql(d, "CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT)", NULL, 0,
                               NULL, NULL));
    DQ_OK(d, c10ds_dq_exec_sql(d, "BEGIN", NULL, 0, NULL, NULL));
    uint32_t ins;
    DQ_OK(d, c10ds_dq_prepare(d, "INSERT INTO kv VALUES (?, ?)", &ins, NULL));
    char text[32];
    for (int i = 0; i < 20000; i++) {
        snprintf(text, sizeof text, "value %d", i);
        c10ds_dq_value p[2] = {{.type = C10DS_DQ_INTEGER, .i = i},
                               {.type = C10DS_DQ_TEXT, .p = text, .n = strlen(text)}};
        DQ_OK(d, c10ds_dq_exec(d, ins, p, 2, NULL, NULL));
    }
    DQ_OK(d, c10ds_dq_exec_sql(d, "COMMIT", NULL, 0, NULL, NULL));
    c10ds_dq_rows rows;
    DQ_OK(d, c10ds_dq_query_sql(d, "SELECT k, v FROM kv ORDER BY k", NULL, 0, &rows));
    ck_assert_uint_eq(rows.nrows, 20000);
    for (size_t r = 0; r < rows.nrows; r += 997) {
        snprintf(text, sizeof text, "value %zu", r);
        ck_assert_int_eq(rows.values[r * 2].i, (int64_t)r);
        ck_assert_str_eq(rows.values[r * 2 + 1].p, text);
    }
    c10ds_dq_rows_free(&rows);
    /* a parameter for the query */
    c10ds_dq_value k = {.type = C10DS_DQ_INTEGER, .i = 19999};
    DQ_OK(d, c10ds_dq_query_sql(d, "SELECT v FROM kv WHERE k = ?", &k, 1, &rows));
    ck_assert_uint_eq(rows.nrows, 1);
    ck_assert_str_eq(rows.values[0].p, "value 19999");
    c10ds_dq_rows_free(&rows);
    c10ds_dq_close(d);
    stop_nodes();
}
END_TEST

START_TEST(a_failure_has_its_code_and_message)
{
    start_node(0);
    c10ds_dq *d = open_on_leader();
    ck_assert_int_eq(c10ds_dq_exec_sql(d, "CREATE TABLEX nonsense", NULL, 0, NULL, NULL),
                     C10DS_DQ_FAILED);
    ck_assert_uint_eq(c10ds_dq_code(d), 1); /* SQLITE_ERROR */
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "syntax error"));
    /* the connection goes on */
    DQ_OK(d, c10ds_dq_exec_sql(d, "CREATE TABLE ok (x)", NULL, 0, NULL, NULL));
    /* a parameter the protocol cannot carry is refused here, not sent */
    c10ds_dq_value t = {.type = C10DS_DQ_UNIXTIME, .i = 1};
    ck_assert_int_eq(c10ds_dq_exec_sql(d, "INSERT INTO ok VALUES (?)", &t, 1, NULL, NULL), -1);
    c10ds_dq_close(d);
    stop_nodes();
}
END_TEST

/* Waits until the connection's node names a leader: a budget in time, not
 * in tries, so that a loaded machine (a sanitizer build beside other work)
 * has the same 30 s as a quiet one. */
static uint64_t leader_of(c10ds_dq *d, char *addr, size_t len)
{
    uint64_t id = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        DQ_OK(d, c10ds_dq_leader(d, &id, addr, len));
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (id || t.tv_sec - t0.tv_sec > 30)
            return id;
        usleep(10000);
    }
}

/* Three nodes: node 1 bootstraps; 2 and 3 join as spares and are made
 * voters; a follower names the leader and refuses a write with "not
 * leader"; a row written on the leader is there for all. */
START_TEST(three_nodes_one_leader)
{
    for (int i = 0; i < NODES; i++)
        start_node(i);
    c10ds_dq *d = open_on_leader();
    for (int i = 1; i < NODES; i++) {
        DQ_OK(d, c10ds_dq_add(d, (uint64_t)i + 1, nodes[i].addr));
        DQ_OK(d, c10ds_dq_assign(d, (uint64_t)i + 1, 0));
    }
    uint64_t ids[8], roles[8];
    size_t n = 0;
    DQ_OK(d, c10ds_dq_cluster(d, ids, roles, 8, &n));
    ck_assert_uint_eq(n, NODES);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(roles[i], 0); /* voters all */
    DQ_OK(d, c10ds_dq_exec_sql(d, "CREATE TABLE r (x)", NULL, 0, NULL, NULL));
    DQ_OK(d, c10ds_dq_exec_sql(d, "INSERT INTO r VALUES (42)", NULL, 0, NULL, NULL));

    c10ds_dq *f = connect_to(2);
    char addr[64];
    ck_assert_uint_eq(leader_of(f, addr, sizeof addr), 1);
    ck_assert_str_eq(addr, nodes[0].addr);
    DQ_OK(f, c10ds_dq_open(f, "c10d"));
    ck_assert_int_eq(c10ds_dq_exec_sql(f, "INSERT INTO r VALUES (1)", NULL, 0, NULL, NULL),
                     C10DS_DQ_FAILED);
    ck_assert_uint_eq(c10ds_dq_code(f), C10DS_DQ_NOT_LEADER);
    c10ds_dq_close(f);

    c10ds_dq_rows rows;
    DQ_OK(d, c10ds_dq_query_sql(d, "SELECT x FROM r", NULL, 0, &rows));
    ck_assert_uint_eq(rows.nrows, 1);
    ck_assert_int_eq(rows.values[0].i, 42);
    c10ds_dq_rows_free(&rows);
    c10ds_dq_close(d);
    stop_nodes();
}
END_TEST

/* Bad addresses are refused with a reason, before any socket. */
START_TEST(bad_addresses_say_why)
{
    c10ds_dq *d;
    ck_assert_int_eq(c10ds_dq_connect(&d, "node1:9001", 1000), -1);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "IPv4 address:port"));
    ck_assert_int_eq(c10ds_dq_connect(&d, "@c10d-dq-nobody-listens", 1000), -1);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "cannot connect"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dqlite_wire");
    TCase *tc = tcase_create("wire");
    /* A hang guard, far beyond a case's 5-15 s under ASan beside two busy
     * processes: three raft nodes elect and replicate in one process. */
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, statements_with_every_type_round_trip);
    tcase_add_test(tc, a_query_of_many_messages_and_a_transaction);
    tcase_add_test(tc, a_failure_has_its_code_and_message);
    tcase_add_test(tc, three_nodes_one_leader);
    tcase_add_test(tc, bad_addresses_say_why);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
