#include "engine_fixture.h"

#include "failure.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The database file and what SQLite and c10ds_db_open put beside it. */
static void remove_files(const engine_fixture *f)
{
    static const char *const beside[] = {"", "-wal", "-shm", ".lock"};
    if (strcmp(f->path, ":memory:") == 0)
        return;
    for (size_t i = 0; i < sizeof beside / sizeof *beside; i++) {
        char p[sizeof f->path + 8];
        snprintf(p, sizeof p, "%s%s", f->path, beside[i]);
        unlink(p);
    }
}

/* The default send: the reply decoded, for the test to read. A test that
 * outgrows the array would read replies that are not there: it stops. */
static void capture(void *arg, void *slot, uint64_t request_id, const void *reply, size_t len)
{
    engine_fixture *f = arg;
    (void)slot, (void)request_id;
    if (f->nreplies >= ENGINE_FIXTURE_REPLIES) {
        fprintf(stderr, "engine_fixture: more than %d replies: raise ENGINE_FIXTURE_REPLIES\n",
                ENGINE_FIXTURE_REPLIES);
        abort();
    }
    f->replies[f->nreplies++] = c10dpb__reply__unpack(NULL, len, reply);
}

void engine_fixture_drop(void *arg, void *slot, uint64_t request_id, const void *reply, size_t len)
{
    (void)arg, (void)slot, (void)request_id, (void)reply, (void)len;
}

void engine_fixture_init(engine_fixture *f, const char *name)
{
    memset(f, 0, sizeof *f);
    f->cfg.max_key_bytes = 256;
    f->cfg.max_value_bytes = 1 << 20;
    f->cfg.max_message_bytes = 2 << 20;
    f->cfg.max_multi_keys = 4096;
    f->cfg.max_world_size = 65536;
    f->cfg.dedup_window_s = 60;
    f->cfg.heartbeat_timeout_ms = 10000;
    f->cfg.max_parked = 262144; /* the coordinator's default (config.c) */
    f->cfg.listen_url = "test://";
    if (name)
        snprintf(f->path, sizeof f->path, "/tmp/c10d-%s-%d.db", name, (int)getpid());
    else
        snprintf(f->path, sizeof f->path, ":memory:");
    remove_files(f);
}

/* The cause kept where the tests read it (c10ds_failure() is this
 * thread's, and the next failure's). */
static int failed(engine_fixture *f)
{
    snprintf(f->err, sizeof f->err, "%s", c10ds_failure());
    return -1;
}

static int open_engine(engine_fixture *f)
{
    if (c10ds_db_open(&f->db, f->path) != 0)
        return failed(f);
    f->eng = c10ds_engine_new(&f->cfg, &f->db, f->send, f->send_arg);
    if (!f->eng) {
        failed(f);
        c10ds_db_close(&f->db);
        return -1;
    }
    if (f->manual_sweeps)
        f->eng->next_sweep_ms = INT64_MAX;
    return 0;
}

int engine_fixture_start(engine_fixture *f, c10ds_send_fn send, void *arg)
{
    f->send = send ? send : capture;
    f->send_arg = send ? arg : f;
    return open_engine(f);
}

static void close_engine(engine_fixture *f)
{
    c10ds_engine_free(f->eng);
    f->eng = NULL;
    if (f->db.h) /* opened (c10ds_db_close wants an opened one) */
        c10ds_db_close(&f->db);
}

int engine_fixture_restart(engine_fixture *f)
{
    close_engine(f);
    return open_engine(f);
}

void engine_fixture_stop(engine_fixture *f)
{
    for (int i = 0; i < f->nreplies; i++)
        c10dpb__reply__free_unpacked(f->replies[i], NULL);
    f->nreplies = 0;
    close_engine(f);
    remove_files(f);
}
