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
#include "engine/engine.h"
#include "engine_fixture.h"
#include "engine_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
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
    engine_fixture fx;
    engine_fixture_init(&fx, "bench-engine");
    /* The unit tests' limits fit what the bench sends; applied-request
     * records are not pruned while it runs. */
    fx.cfg.dedup_window_s = 600;
    fx.cfg.listen_url = "bench://";
    if (engine_fixture_start(&fx, engine_fixture_drop, NULL) != 0) {
        fprintf(stderr, "bench_engine: %s\n", fx.err);
        return 1;
    }
    c10ds_engine *e = fx.eng;
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
    engine_fixture_stop(&fx);
    return 0;
}
