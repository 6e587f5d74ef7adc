/* bench_engine: where a store request's time goes inside the coordinator,
 * without the network. The engine runs one-request batches, as it does at
 * one client, on a real SQLite file in WAL mode like c10d-coord's:
 *
 *   empty batch      BEGIN + COMMIT with nothing in them (every batch)
 *   get              a read
 *   add, no record   the update, from a client without an id (nothing to
 *                    deduplicate, so no applied-request record)
 *   add              the update + the applied-request record that makes a
 *                    resent add apply once (its row and its at_ms index
 *                    entry: two more pages in the WAL at every commit)
 *   set              a write with no record (a set is idempotent)
 *
 *   bench_engine [N] */
#include "engine.h"
#include "engine_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void drop_reply(void *arg, void *slot, uint64_t id, const void *reply, size_t len)
{
    (void)arg, (void)slot, (void)id, (void)reply, (void)len;
}


typedef enum { EMPTY, GET, ADD_NO_RECORD, ADD, SET } kind;

static c10ds_request *make(kind k, uint64_t id)
{
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    C10dpb__StoreGet g = C10DPB__STORE_GET__INIT;
    C10dpb__StoreAdd a = C10DPB__STORE_ADD__INIT;
    C10dpb__StoreSet s = C10DPB__STORE_SET__INIT;
    switch (k) {
    case GET:
        g.key = "counter";
        pb.op_case = C10DPB__REQUEST__OP_GET;
        pb.get = &g;
        return engine_request(&pb, 1, id);
    case ADD_NO_RECORD:
    case ADD:
        a.key = "counter";
        a.delta = 1;
        pb.op_case = C10DPB__REQUEST__OP_ADD;
        pb.add = &a;
        return engine_request(&pb, k == ADD ? 1 : 0, id);
    case SET: {
        char v[32]; /* a new value each time, as a real write */
        s.key = "k";
        s.value.len = (size_t)snprintf(v, sizeof v, "value-%llu", (unsigned long long)id);
        s.value.data = (uint8_t *)v;
        pb.op_case = C10DPB__REQUEST__OP_SET;
        pb.set = &s;
        return engine_request(&pb, 1, id);
    }
    default:
        return NULL;
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    char dir[] = "/tmp/c10d-bench-engine-XXXXXX", path[256], err[512];
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof path, "%s/coord.db", dir);
    c10ds_db db;
    if (c10ds_db_open(&db, path, err, sizeof err) != 0) {
        fprintf(stderr, "bench_engine: %s\n", err);
        return 1;
    }
    c10ds_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_key_bytes = 1024;
    cfg.max_value_bytes = 1 << 20;
    cfg.max_multi_keys = 64;
    cfg.dedup_window_s = 600;
    cfg.listen_url = "bench://";
    c10ds_engine *e = c10ds_engine_new(&cfg, &db, drop_reply, NULL, err, sizeof err);
    if (!e) {
        fprintf(stderr, "bench_engine: %s\n", err);
        return 1;
    }
    static const char *names[] = {"empty batch (BEGIN+COMMIT)", "get", "add, no record",
                                  "add (+ applied-request record)", "set (no record: idempotent)"};
    uint64_t id = 1;
    double best[5];
    for (int k = 0; k < 5; k++)
        best[k] = 1e18;
    for (int round = 0; round < 3; round++)
        for (int k = 0; k < 5; k++) {
            double t0 = now_us();
            for (int i = 0; i < n; i++) {
                c10ds_request *r = make((kind)k, id++);
                c10ds_engine_run_batch(e, r);
            }
            double us = (now_us() - t0) / n;
            if (us < best[k])
                best[k] = us;
        }
    printf("engine time per one-request batch, SQLite WAL file, best of 3 rounds of %d:\n", n);
    for (int k = 0; k < 5; k++)
        printf("  %-32s %7.1f us\n", names[k], best[k]);
    c10ds_engine_free(e);
    c10ds_db_close(&db);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return 0;
}
