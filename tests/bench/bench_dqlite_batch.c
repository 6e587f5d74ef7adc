/* bench_dqlite_batch: what the engine's batches of adds would cost on
 * dqlite (docs/replication.md), before the engine runs on it.
 *
 *   bench_dqlite_batch [NODES] [BATCHES] [ADDS_A_BATCH] [all|writes|script]
 *
 * Starts NODES dqlite nodes (1 or 3) in this process on abstract sockets,
 * and runs BATCHES batches of ADDS_A_BATCH adds through the wire client
 * (server/replica/dqlite_wire.c), each add the statements the engine runs today
 * for it (store.c, reqlog.c): the record looked up, the value's size and
 * value read, the value written, the record inserted and the client's
 * older ones trimmed; a batch is BEGIN ... COMMIT, one raft entry. The
 * last argument picks how: every statement a round trip (all, as the
 * engine would run unchanged), only the three writes a round trip each
 * (writes: the reads served from memory), or the batch's writes as one
 * EXEC_SQL script with BEGIN and COMMIT in it (script: one round trip a
 * batch). Prints
 * adds a second and the latency of a batch, beside the same statements
 * on an embedded SQLite file in WAL mode (synchronous=NORMAL, as the
 * coordinator runs it) for scale. */
#include "dqlite_nodes.h"
#include "replica/dqlite_wire.h"
#include "failure.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_dqlite_batch: %s: %s\n", what, why);
    exit(1);
}

static const char *schema =
    "CREATE TABLE kv (key TEXT PRIMARY KEY NOT NULL, updated_ms INTEGER NOT NULL,"
    " value BLOB NOT NULL);"
    "CREATE TABLE applied_requests (client_id INTEGER NOT NULL, request_id INTEGER NOT NULL,"
    " reply BLOB NOT NULL, at_ms INTEGER NOT NULL, PRIMARY KEY (client_id, request_id))"
    " WITHOUT ROWID;"
    "INSERT INTO kv VALUES ('ctr', 0, '0')";

enum { FIND, SIZE, GET, SET, RECORD, TRIM, NSTMT };
static const char *sql[NSTMT] = {
    "SELECT reply FROM applied_requests WHERE client_id = ?1 AND request_id = ?2",
    "SELECT length(value) FROM kv WHERE key = ?1",
    "SELECT value FROM kv WHERE key = ?1",
    "UPDATE kv SET value = ?2, updated_ms = ?3 WHERE key = ?1",
    "INSERT OR REPLACE INTO applied_requests (client_id, request_id, reply, at_ms)"
    " VALUES (?1, ?2, ?3, ?4)",
    "DELETE FROM applied_requests WHERE client_id = ?1 AND request_id < ?2",
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double *lat, int batches, int per, double total)
{
    qsort(lat, (size_t)batches, sizeof *lat, cmp_d);
    printf("%-38s %8.0f adds/s   batch of %d: p50 %6.2f ms, p99 %6.2f ms\n", what,
           batches * per / total, per, lat[batches / 2] * 1e3, lat[(size_t)(batches * 0.99)] * 1e3);
}

enum { ALL, WRITES, SCRIPT };
static int mode = ALL;
static const char *mode_names[] = {"every statement", "writes only", "one script"};

static void run_dqlite(int nodes, int batches, int per, double *lat)
{
    dq_node node[3];
    for (int i = 0; i < nodes; i++)
        if (dq_node_start(&node[i], (unsigned)i + 1, "bench") != 0)
            die("starting a node", "failed");
    c10ds_dq *d;
    if (c10ds_dq_connect(&d, node[0].addr, 10000) != 0)
        die("connect", c10ds_failure());
#define DQ(call) do { if ((call) != 0) die(#call, c10ds_failure()); } while (0)
    DQ(c10ds_dq_open(d, "c10d"));
    for (int i = 1; i < nodes; i++) {
        DQ(c10ds_dq_add(d, (uint64_t)i + 1, node[i].addr));
        DQ(c10ds_dq_assign(d, (uint64_t)i + 1, 0));
    }
    DQ(c10ds_dq_exec_sql(d, schema, NULL, 0, NULL, NULL));
    uint32_t st[NSTMT];
    for (int k = 0; k < NSTMT; k++)
        DQ(c10ds_dq_prepare(d, sql[k], &st[k], NULL));
    int64_t counter = 0;
    uint64_t request = 1;
    double t0 = now_s();
    char *script = malloc((size_t)per * 400 + 64);
    if (!script)
        die("malloc", "failed");
    for (int b = 0; b < batches && mode == SCRIPT; b++) {
        double a = now_s();
        size_t len = (size_t)sprintf(script, "BEGIN;");
        for (int i = 0; i < per; i++, request++) {
            ++counter;
            len += (size_t)sprintf(script + len,
                                   "UPDATE kv SET value = '%lld', updated_ms = 1 WHERE key = 'ctr';"
                                   "INSERT OR REPLACE INTO applied_requests VALUES (%d, %llu, "
                                   "'%lld', 1);"
                                   "DELETE FROM applied_requests WHERE client_id = %d AND "
                                   "request_id < %llu;",
                                   (long long)counter, i + 1, (unsigned long long)request,
                                   (long long)counter, i + 1, (unsigned long long)request);
        }
        sprintf(script + len, "COMMIT");
        DQ(c10ds_dq_exec_sql(d, script, NULL, 0, NULL, NULL));
        lat[b] = now_s() - a;
    }
    free(script);
    for (int b = 0; b < batches && mode != SCRIPT; b++) {
        double a = now_s();
        DQ(c10ds_dq_exec_sql(d, "BEGIN", NULL, 0, NULL, NULL));
        for (int i = 0; i < per; i++, request++) {
            int64_t client = i + 1;
            c10ds_dq_value id[2] = {{.type = C10DS_DQ_INTEGER, .i = client},
                                    {.type = C10DS_DQ_INTEGER, .i = (int64_t)request}};
            c10ds_dq_value key = {.type = C10DS_DQ_TEXT, .p = "ctr", .n = 3};
            c10ds_dq_rows rows;
            if (mode == ALL) {
                DQ(c10ds_dq_query(d, st[FIND], id, 2, &rows));
                c10ds_dq_rows_free(&rows);
                DQ(c10ds_dq_query(d, st[SIZE], &key, 1, &rows));
                c10ds_dq_rows_free(&rows);
                DQ(c10ds_dq_query(d, st[GET], &key, 1, &rows));
                c10ds_dq_rows_free(&rows);
            }
            char text[32];
            int n = snprintf(text, sizeof text, "%lld", (long long)++counter);
            c10ds_dq_value set[3] = {key, {.type = C10DS_DQ_BLOB, .p = text, .n = (size_t)n},
                                     {.type = C10DS_DQ_INTEGER, .i = 1}};
            DQ(c10ds_dq_exec(d, st[SET], set, 3, NULL, NULL));
            c10ds_dq_value rec[4] = {id[0], id[1], {.type = C10DS_DQ_BLOB, .p = text,
                                                    .n = (size_t)n},
                                     {.type = C10DS_DQ_INTEGER, .i = 1}};
            DQ(c10ds_dq_exec(d, st[RECORD], rec, 4, NULL, NULL));
            DQ(c10ds_dq_exec(d, st[TRIM], id, 2, NULL, NULL));
        }
        DQ(c10ds_dq_exec_sql(d, "COMMIT", NULL, 0, NULL, NULL));
        lat[b] = now_s() - a;
    }
    double total = now_s() - t0;
    char what[64];
    snprintf(what, sizeof what, "dqlite, %d node%s, %s", nodes, nodes > 1 ? "s" : "",
             mode_names[mode]);
    report(what, lat, batches, per, total);
    c10ds_dq_close(d);
    for (int i = 0; i < nodes; i++)
        dq_node_stop(&node[i]);
}

static void run_sqlite(int batches, int per, double *lat)
{
    char dir[64] = "/tmp/c10d-sqb-XXXXXX", path[128];
    if (!mkdtemp(dir))
        die("mkdtemp", "failed");
    snprintf(path, sizeof path, "%s/bench.db", dir);
    sqlite3 *h;
    if (sqlite3_open(path, &h) != SQLITE_OK ||
        sqlite3_exec(h, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL", NULL, NULL, NULL) ||
        sqlite3_exec(h, schema, NULL, NULL, NULL))
        die("sqlite", sqlite3_errmsg(h));
    sqlite3_stmt *st[NSTMT];
    for (int k = 0; k < NSTMT; k++)
        if (sqlite3_prepare_v2(h, sql[k], -1, &st[k], NULL) != SQLITE_OK)
            die("prepare", sqlite3_errmsg(h));
    int64_t counter = 0;
    uint64_t request = 1;
    double t0 = now_s();
    for (int b = 0; b < batches; b++) {
        double a = now_s();
        sqlite3_exec(h, "BEGIN", NULL, NULL, NULL);
        for (int i = 0; i < per; i++, request++) {
            for (int k = 0; k < NSTMT; k++) {
                sqlite3_stmt *s = st[k];
                char text[32];
                int n = snprintf(text, sizeof text, "%lld", (long long)counter + 1);
                if (k == FIND || k == RECORD || k == TRIM) {
                    sqlite3_bind_int64(s, 1, i + 1);
                    sqlite3_bind_int64(s, 2, (sqlite3_int64)request);
                }
                if (k == SIZE || k == GET || k == SET)
                    sqlite3_bind_text(s, 1, "ctr", 3, SQLITE_STATIC);
                if (k == SET) {
                    sqlite3_bind_blob(s, 2, text, n, SQLITE_TRANSIENT);
                    sqlite3_bind_int64(s, 3, 1);
                }
                if (k == RECORD) {
                    sqlite3_bind_blob(s, 3, text, n, SQLITE_TRANSIENT);
                    sqlite3_bind_int64(s, 4, 1);
                }
                while (sqlite3_step(s) == SQLITE_ROW) {
                }
                sqlite3_reset(s);
            }
            counter++;
        }
        if (sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
            die("commit", sqlite3_errmsg(h));
        lat[b] = now_s() - a;
    }
    report("embedded SQLite (WAL)", lat, batches, per, now_s() - t0);
    for (int k = 0; k < NSTMT; k++)
        sqlite3_finalize(st[k]);
    sqlite3_close(h);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    int nodes = argc > 1 ? atoi(argv[1]) : 3;
    int batches = argc > 2 ? atoi(argv[2]) : 500;
    int per = argc > 3 ? atoi(argv[3]) : 4;
    if (argc > 4)
        mode = !strcmp(argv[4], "writes") ? WRITES : !strcmp(argv[4], "script") ? SCRIPT
               : !strcmp(argv[4], "all") ? ALL : -1;
    if ((nodes != 1 && nodes != 3) || batches < 1 || per < 1 || mode < 0) {
        fprintf(stderr, "usage: bench_dqlite_batch [1|3] [BATCHES] [ADDS_A_BATCH] "
                        "[all|writes|script]\n");
        return 2;
    }
    double *lat = malloc((size_t)batches * sizeof *lat);
    if (!lat)
        return 1;
    run_sqlite(batches, per, lat);
    run_dqlite(nodes, batches, per, lat);
    free(lat);
    return 0;
}
