#include "engine/reqlog.h"

#include "db/db.h"

#include "c10d_time.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

/* The client's slot, made if missing (NULL when out of memory). */
static c10ds_reqlog_client *client_slot(c10ds_reqlog *rl, uint64_t id, int make)
{
    if (make && (rl->nclients + 1) * 2 > rl->cap) {
        size_t cap = rl->cap ? rl->cap * 2 : 64;
        c10ds_reqlog_client *nt = calloc(cap, sizeof *nt);
        if (!nt)
            return NULL;
        for (size_t i = 0; i < rl->cap; i++)
            if (rl->clients[i].id) {
                size_t j = mix(rl->clients[i].id) & (cap - 1);
                while (nt[j].id)
                    j = (j + 1) & (cap - 1);
                nt[j] = rl->clients[i];
            }
        free(rl->clients);
        rl->clients = nt;
        rl->cap = cap;
    }
    if (!rl->cap)
        return NULL;
    for (size_t j = mix(id) & (rl->cap - 1);; j = (j + 1) & (rl->cap - 1)) {
        if (rl->clients[j].id == id)
            return &rl->clients[j];
        if (!rl->clients[j].id) {
            if (!make)
                return NULL;
            rl->clients[j] = (c10ds_reqlog_client){.id = id};
            rl->nclients++;
            return &rl->clients[j];
        }
    }
}

/* Who has records, from the table: once, at start. */
static int load_clients(c10ds_reqlog *rl)
{
    sqlite3_stmt *s = c10ds_db_prepare(rl->db, "SELECT client_id, MAX(request_id), MAX(at_ms) "
                                               "FROM applied_requests GROUP BY client_id");
    if (!s)
        return -1;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        c10ds_reqlog_client *c = client_slot(rl, (uint64_t)sqlite3_column_int64(s, 0), 1);
        if (!c)
            break;
        c->newest = (uint64_t)sqlite3_column_int64(s, 1);
        c->last_ms = sqlite3_column_int64(s, 2);
    }
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : -1;
}

int c10ds_reqlog_init(c10ds_reqlog *rl, c10ds_db *db, int window_s)
{
    memset(rl, 0, sizeof *rl);
    rl->db = db;
    rl->window_ms = (int64_t)window_s * 1000;
    rl->st_find = c10ds_db_prepare(
        db, "SELECT reply FROM applied_requests WHERE client_id = ?1 AND request_id = ?2");
    rl->st_insert = c10ds_db_prepare(db, "INSERT OR REPLACE INTO applied_requests"
                                         "(client_id, request_id, reply, at_ms) VALUES(?1,?2,?3,?4)");
    rl->st_trim = c10ds_db_prepare(
        db, "DELETE FROM applied_requests WHERE client_id = ?1 AND request_id < ?2");
    rl->st_forget = c10ds_db_prepare(db, "DELETE FROM applied_requests WHERE client_id = ?1");
    if (!rl->st_find || !rl->st_insert || !rl->st_trim || !rl->st_forget ||
        load_clients(rl) != 0) {
        c10ds_reqlog_fini(rl);
        return -1;
    }
    return 0;
}

void c10ds_reqlog_fini(c10ds_reqlog *rl)
{
    sqlite3_finalize(rl->st_find);
    sqlite3_finalize(rl->st_insert);
    sqlite3_finalize(rl->st_trim);
    sqlite3_finalize(rl->st_forget);
    free(rl->clients);
    memset(rl, 0, sizeof *rl);
}

size_t c10ds_reqlog_clients(const c10ds_reqlog *rl)
{
    return rl->nclients;
}

static int step_done(c10ds_reqlog *rl, sqlite3_stmt *s, const char *what, uint64_t client_id)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        c10ds_warn("%s of client #%08x in the applied-request log: %s", what,
                   c10ds_client_tag(client_id), sqlite3_errmsg(rl->db->h));
        return -1;
    }
    return 0;
}

int c10ds_reqlog_find(c10ds_reqlog *rl, uint64_t client_id, uint64_t request_id, void **reply,
                      size_t *len)
{
    sqlite3_stmt *s = rl->st_find;
    sqlite3_reset(s);
    sqlite3_bind_int64(s, 1, (sqlite3_int64)client_id);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)request_id);
    int found = 0;
    if (sqlite3_step(s) == SQLITE_ROW) {
        size_t n = (size_t)sqlite3_column_bytes(s, 0);
        void *p = malloc(n ? n : 1);
        if (p) {
            if (n)
                memcpy(p, sqlite3_column_blob(s, 0), n);
            *reply = p;
            *len = n;
            found = 1;
        }
    }
    sqlite3_reset(s);
    return found;
}

/* Drops the client's records below `below`. */
static void trim(c10ds_reqlog *rl, uint64_t client_id, uint64_t below)
{
    sqlite3_bind_int64(rl->st_trim, 1, (sqlite3_int64)client_id);
    sqlite3_bind_int64(rl->st_trim, 2, (sqlite3_int64)below);
    step_done(rl, rl->st_trim, "trimming", client_id);
}

int c10ds_reqlog_record(c10ds_reqlog *rl, uint64_t client_id, uint64_t request_id,
                        uint64_t acked_below, const void *reply, size_t len)
{
    sqlite3_stmt *s = rl->st_insert;
    int64_t now = c10d_steady_wall_ms();
    sqlite3_reset(s);
    sqlite3_bind_int64(s, 1, (sqlite3_int64)client_id);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)request_id);
    sqlite3_bind_blob64(s, 3, reply, len, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, now);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        c10ds_error("recording request %llu of client #%08x: %s", (unsigned long long)request_id,
                    c10ds_client_tag(client_id), sqlite3_errmsg(rl->db->h));
        return -1;
    }
    c10ds_reqlog_client *c = client_slot(rl, client_id, 1);
    if (!c)
        return 0; /* not pruned early; the record itself is safe */
    c->last_ms = now;
    if (request_id > c->newest)
        c->newest = request_id;
    /* The records the client says it no longer needs go now: they sit
     * beside the new one, so this costs no extra page at commit, and the
     * table stays a row or so per client. The new record always stays (a
     * client cannot have the reply to what it is sending). */
    uint64_t below = acked_below < request_id ? acked_below : request_id;
    if (below > c->acked) {
        c->acked = below;
        c->since_trim = 0;
        trim(rl, client_id, below);
        return 0;
    }
    /* A client that does not say (an older library): now and then its
     * records far behind its newest go. */
    if (++c->since_trim >= C10DS_REQLOG_TRIM_EVERY && c->newest > C10DS_REQLOG_KEEP_IDS) {
        c->since_trim = 0;
        trim(rl, client_id, c->newest - C10DS_REQLOG_KEEP_IDS);
    }
    return 0;
}

uint64_t c10ds_reqlog_acked(c10ds_reqlog *rl, uint64_t client_id)
{
    c10ds_reqlog_client *c = client_slot(rl, client_id, 0);
    return c ? c->acked : 0;
}

void c10ds_reqlog_prune(c10ds_reqlog *rl)
{
    int64_t now = c10d_steady_wall_ms();
    if (now - rl->last_prune_ms < 1000)
        return;
    rl->last_prune_ms = now;
    size_t gone = 0;
    for (size_t i = 0; i < rl->cap; i++) {
        c10ds_reqlog_client *c = &rl->clients[i];
        if (!c->id || now - c->last_ms <= rl->window_ms)
            continue;
        sqlite3_bind_int64(rl->st_forget, 1, (sqlite3_int64)c->id);
        if (step_done(rl, rl->st_forget, "forgetting", c->id) != 0)
            continue; /* kept, tried again next time */
        c->id = 0;
        gone++;
    }
    if (!gone)
        return;
    /* Rehash what is left: open addressing cannot just leave holes. */
    c10ds_reqlog_client *old = rl->clients;
    size_t cap = rl->cap;
    rl->clients = NULL;
    rl->cap = rl->nclients = 0;
    for (size_t i = 0; i < cap; i++)
        if (old[i].id) {
            c10ds_reqlog_client *c = client_slot(rl, old[i].id, 1);
            if (c)
                *c = old[i];
        }
    free(old);
}
