/* The coordinator's engine on a SQLite file of its own, without the
 * network: what the engine's unit tests, bench_engine, bench_runs and the
 * fuzzer start the same way. Requests for it: engine_request.h. */
#ifndef C10D_TEST_ENGINE_FIXTURE_H
#define C10D_TEST_ENGINE_FIXTURE_H

#include "config.h"
#include "db/db.h"
#include "engine/engine.h"

#include <stdint.h>

#define ENGINE_FIXTURE_REPLIES 64

typedef struct engine_fixture {
    /* The unit tests' limits (engine_fixture_init); the caller changes
     * what it needs before engine_fixture_start, or during a case: the
     * engine reads it as it goes. */
    c10ds_config cfg;
    /* Nonzero: the engine never sweeps by itself (next_sweep_ms at its
     * largest after every start), so that the caller sweeps or reclaims
     * where it says, each step checked. */
    int manual_sweeps;
    c10ds_db db;
    c10ds_engine *eng;
    /* What the engine sent, decoded, in order (with send NULL at start):
     * freed by engine_fixture_stop. More than ENGINE_FIXTURE_REPLIES
     * aborts, naming the limit. */
    C10dpb__Reply *replies[ENGINE_FIXTURE_REPLIES];
    int nreplies;
    char path[128]; /* the database file, or ":memory:" */
    char err[1024]; /* why start or restart failed */
    c10ds_send_fn send;
    void *send_arg;
} engine_fixture;

/* Zeroes f, fills cfg with the unit tests' limits and names the database
 * /tmp/c10d-<name>-<pid>.db (removed first, and by engine_fixture_stop
 * with its -wal and -shm), or ":memory:" when name is NULL. */
void engine_fixture_init(engine_fixture *f, const char *name);
/* Opens the database and makes the engine on f->cfg, its replies sent to
 * send(arg, ...), or kept in f->replies when send is NULL. Returns 0, or
 * -1 with the cause in f->err (nothing left open). */
int engine_fixture_start(engine_fixture *f, c10ds_send_fn send, void *arg);
/* The coordinator restarted on the same file: a new engine with nothing
 * in memory; replies kept so far stay. Returns as engine_fixture_start. */
int engine_fixture_restart(engine_fixture *f);
/* Frees the replies, the engine and the database, and removes the file. */
void engine_fixture_stop(engine_fixture *f);
/* A send that drops every reply (benches: only the time counts). */
void engine_fixture_drop(void *arg, void *slot, uint64_t request_id, const void *reply, size_t len);

#endif
