/* A replica's engine process (replica.h): the leader's lookup, the
 * refusal of a replica that does not lead, and the threads that watch the
 * role and grow the membership. The supervisor is replica_supervisor.c. */
#define _GNU_SOURCE
#include "replica/replica.h"

#include "replica/dqlite_wire.h"
#include "c10d_time.h"
#include "failure.h"
#include "log.h"
#include "replica/replica_internal.h"
#include "replica/replica_mirror.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define WATCH_EVERY_MS 100
#define MEMBERSHIP_EVERY_MS 1000
#define MEMBERSHIP_SETTLED_MS 10000

struct c10ds_replica {
    const c10ds_config *cfg;
    const c10ds_peer *me;
    int leads;
    c10ds_mirror *mirror; /* leading: the working copy's link to dqlite */
    char describe[160];
    pthread_mutex_t mu;   /* guards what follows (the engine and main read them) */
    uint64_t leader_id;   /* 0: none known */
    char leader_url[256]; /* "" unknown */
    /* the threads (c10ds_replica_watch), and the node connection each
     * may be blocked on, for c10ds_replica_stop */
    int stopping;
    pthread_t threads[2];
    int nthreads;
    c10ds_dq *blocked_on[2];
};

int c10ds_replica_is_engine(void)
{
    const char *s = getenv(ENGINE_ENV);
    return s && *s;
}

/* --- the engine process --- */

/* Who leads, as the replica's node knows: 0 when nobody (an election). */
static int ask_leader(c10ds_dq *d, uint64_t *id, char *address, size_t len)
{
    *id = 0;
    address[0] = '\0';
    return c10ds_dq_leader(d, id, address, len);
}

static void lost(const char *why)
{
    c10ds_error("this replica stops leading: %s; its clients reconnect to the next leader",
                why);
    fflush(stderr);
    _exit(C10DS_REPLICA_EXIT_ROLE);
}

/* The leader writes where its clients find it, for the replicas that do
 * not lead to tell them (a table of dqlite's only, not in the working
 * copy: the engine never reads it). */
static int publish(c10ds_replica *r, const char *url)
{
    c10ds_dq *d = c10ds_mirror_dq(r->mirror);
    c10ds_dq_value v[3] = {
        {.type = C10DS_DQ_INTEGER, .i = (int64_t)r->me->id},
        {.type = C10DS_DQ_TEXT, .p = url, .n = strlen(url)},
        {.type = C10DS_DQ_TEXT, .p = r->me->address, .n = strlen(r->me->address)},
    };
    if (c10ds_dq_exec_sql(d, "CREATE TABLE IF NOT EXISTS " REPLICAS_TABLE " (id INTEGER "
                          "PRIMARY KEY, client_url TEXT NOT NULL, raft_address TEXT NOT NULL)",
                          NULL, 0, NULL, NULL) != 0 ||
        c10ds_dq_exec_sql(d, "INSERT OR REPLACE INTO " REPLICAS_TABLE " VALUES (?, ?, ?)", v, 3,
                          NULL, NULL) != 0)
        return c10ds_failed(C10D_ERROR, "publishing the leader's URL: %s", c10ds_failure());
    return 0;
}

int c10ds_replica_open(c10ds_replica **out, const c10ds_config *cfg, c10ds_db *db)
{
    *out = NULL;
    /* Dies with its supervisor (kill -9 of the replica): a coordinator
     * serving without its node must not outlive it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != (pid_t)atoi(getenv(ENGINE_ENV)))
        return c10ds_failed(C10D_ERROR, "the replica's supervisor is gone");
    c10ds_replica *r = calloc(1, sizeof *r);
    if (!r)
        return c10ds_failed(C10D_ERROR, "out of memory");
    pthread_mutex_init(&r->mu, NULL);
    r->cfg = cfg;
    r->me = c10ds_config_peer(cfg, cfg->replica_id);
    c10ds_dq *d = NULL;
    char addr[64];
    uint64_t id = 0;
    /* The node may still be starting (the supervisor has just started it) */
    for (int i = 0; i < 50 && c10ds_dq_connect(&d, r->me->address, DQ_TIMEOUT_MS) != 0; i++)
        sleep_ms(100);
    if (!d)
        goto fail;
    /* An election may be under way: wait a little for its outcome */
    for (int i = 0; i < 20; i++) {
        if (ask_leader(d, &id, addr, sizeof addr) != 0) {
            c10ds_failed(C10D_ERROR, "asking node %s who leads: %s", r->me->address,
                         c10ds_failure());
            c10ds_dq_close(d);
            goto fail;
        }
        if (id)
            break;
        sleep_ms(cfg->raft_latency_ms * 2 > 100 ? 100 : cfg->raft_latency_ms * 2 + 1);
    }
    c10ds_dq_close(d);
    r->leads = id == r->me->id;
    r->leader_id = id;
    if (r->leads) {
        if (c10ds_mirror_new(&r->mirror, r->me->address, DB_NAME, DQ_TIMEOUT_MS) != 0)
            goto fail;
        static const char *const own[] = {REPLICAS_TABLE, NULL};
        if (c10ds_db_open_replicated(db, r->mirror, own, cfg->seed_path, lost) != 0)
            goto fail;
    } else if (c10ds_db_open(db, ":memory:") != 0) {
        goto fail;
    }
    snprintf(r->describe, sizeof r->describe, "replica %llu of %d, %s",
             (unsigned long long)r->me->id, cfg->npeers,
             r->leads ? "leading" : id ? "following" : "no leader yet");
    *out = r;
    return 0;
fail:
    c10ds_mirror_free(r->mirror);
    free(r);
    return -1;
}

int c10ds_replica_leads(const c10ds_replica *r)
{
    return r->leads;
}

const char *c10ds_replica_describe(const c10ds_replica *r)
{
    return r->describe;
}

int c10ds_replica_refuse(void *arg, c10ds_request *req)
{
    c10ds_replica *r = arg;
    char url[256], detail[512];
    pthread_mutex_lock(&r->mu);
    uint64_t id = r->leader_id;
    snprintf(url, sizeof url, "%s", r->leader_url);
    pthread_mutex_unlock(&r->mu);
    if (url[0])
        snprintf(detail, sizeof detail, "replica %llu does not lead; replica %llu does, at %s",
                 (unsigned long long)r->me->id, (unsigned long long)id, url);
    else if (id)
        snprintf(detail, sizeof detail, "replica %llu does not lead; replica %llu does (its "
                 "URL is not known yet: try the others)", (unsigned long long)r->me->id,
                 (unsigned long long)id);
    else
        snprintf(detail, sizeof detail, "replica %llu does not lead, and no replica does: an "
                 "election is under way, or fewer than a majority of the %d replicas are "
                 "reachable; nothing is accepted until one leads",
                 (unsigned long long)r->me->id, r->cfg->npeers);
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.status = C10D_ENOTLEADER;
    rep.detail = detail;
    rep.leader_url = url[0] ? url : NULL;
    c10ds_reply(req, &rep);
    return 1;
}

/* The connection a thread is about to block on, so that stop can
 * interrupt it; NULL once it is done with it. Returns 0 when stopping. */
static int hold(c10ds_replica *r, int slot, c10ds_dq *d)
{
    pthread_mutex_lock(&r->mu);
    r->blocked_on[slot] = d;
    int go = !r->stopping;
    pthread_mutex_unlock(&r->mu);
    return go;
}

/* Sleeps ms unless stopping; returns 0 when stopping. */
static int pause_ms(c10ds_replica *r, c10d_ms ms)
{
    for (int waited = 0; waited < ms; waited += 20) {
        pthread_mutex_lock(&r->mu);
        int stopping = r->stopping;
        pthread_mutex_unlock(&r->mu);
        if (stopping)
            return 0;
        sleep_ms(20);
    }
    return 1;
}

/* The client URL of replica id, from the table its leadership wrote;
 * asked of the leader's node (dqlite reads on the leader only). */
static void find_url(c10ds_replica *r, uint64_t id, const char *address)
{
    c10ds_dq *d = NULL;
    char url[256] = "";
    c10ds_dq_rows rows = {0};
    c10ds_dq_value v = {.type = C10DS_DQ_INTEGER, .i = (int64_t)id};
    if (c10ds_dq_connect(&d, address, 1000) == 0 && hold(r, 0, d) &&
        c10ds_dq_open(d, DB_NAME) == 0 &&
        c10ds_dq_query_sql(d, "SELECT client_url FROM " REPLICAS_TABLE " WHERE id = ?", &v, 1,
                           &rows) == 0 &&
        rows.nrows == 1 && rows.values[0].type == C10DS_DQ_TEXT)
        snprintf(url, sizeof url, "%s", (const char *)rows.values[0].p);
    hold(r, 0, NULL);
    c10ds_dq_rows_free(&rows);
    c10ds_dq_close(d);
    pthread_mutex_lock(&r->mu);
    if (r->leader_id == id)
        snprintf(r->leader_url, sizeof r->leader_url, "%s", url);
    pthread_mutex_unlock(&r->mu);
}

/* Asks the node who leads every WATCH_EVERY_MS. A leader that has not
 * heard its node say so for an election timeout stops (its node may be
 * stopped or cut off, and another elected: its reads would be stale); a
 * replica that is told it was elected restarts to lead. */
static void *watch_role(void *arg)
{
    c10ds_replica *r = arg;
    c10ds_dq *d = NULL;
    char addr[64];
    /* an election timeout (15x the latency), at least a second */
    int64_t patience = 15 * (int64_t)r->cfg->raft_latency_ms;
    if (patience < 1000)
        patience = 1000;
    c10d_ms call_ms = (c10d_ms)(patience / 3);
    int64_t confirmed = c10d_now_ms();
    uint64_t asked_url_of = 0;
    int64_t asked_url_at = 0;
    while (pause_ms(r, WATCH_EVERY_MS)) {
        uint64_t id;
        if (!d && c10ds_dq_connect(&d, r->me->address, call_ms) != 0)
            d = NULL;
        if (!d || !hold(r, 0, d) || ask_leader(d, &id, addr, sizeof addr) != 0) {
            hold(r, 0, NULL);
            c10ds_dq_close(d);
            d = NULL;
            if (c10d_now_ms() - confirmed >= patience) {
                if (r->leads)
                    lost("its dqlite node has not answered for an election timeout");
                c10ds_error("the replica's dqlite node does not answer: restarting");
                fflush(stderr);
                _exit(C10DS_REPLICA_EXIT_ROLE);
            }
            continue;
        }
        hold(r, 0, NULL);
        confirmed = c10d_now_ms();
        if (r->leads && id != r->me->id) {
            char why[128];
            snprintf(why, sizeof why, "its node reports %s",
                     id ? "another leader" : "no leader (it lost its majority)");
            lost(why);
        }
        if (!r->leads && id == r->me->id) {
            c10ds_info("replica %llu has been elected: taking over", (unsigned long long)id);
            fflush(stderr);
            _exit(C10DS_REPLICA_EXIT_ROLE);
        }
        if (r->leads)
            continue;
        pthread_mutex_lock(&r->mu);
        int changed = r->leader_id != id, unknown = !r->leader_url[0];
        r->leader_id = id;
        if (changed)
            r->leader_url[0] = '\0';
        pthread_mutex_unlock(&r->mu);
        /* a leader's URL unknown (it has not written it yet): asked again
         * each second, not at every look */
        if (id && (changed || (unknown && (id != asked_url_of ||
                                           c10d_now_ms() - asked_url_at >= 1000)))) {
            asked_url_of = id;
            asked_url_at = c10d_now_ms();
            find_url(r, id, addr);
        }
    }
    c10ds_dq_close(d);
    return NULL;
}

/* The leader makes every replica of --peers a voter: replica 1 starts
 * the cluster alone, and the others join as they are first seen. */
static void *grow_membership(void *arg)
{
    c10ds_replica *r = arg;
    c10ds_dq *d = NULL;
    /* at once, then every MEMBERSHIP_EVERY_MS: until the others are
     * voters, the cluster does not survive its leader */
    for (int first = 1; first || pause_ms(r, MEMBERSHIP_EVERY_MS); first = 0) {
        uint64_t ids[C10DS_MAX_REPLICAS * 2], roles[C10DS_MAX_REPLICAS * 2];
        size_t n = 0;
        if (!d && c10ds_dq_connect(&d, r->me->address, DQ_TIMEOUT_MS) != 0)
            d = NULL;
        if (!d || !hold(r, 1, d) || c10ds_dq_cluster(d, ids, roles, C10DS_MAX_REPLICAS * 2,
                                                     &n) != 0) {
            hold(r, 1, NULL);
            c10ds_dq_close(d);
            d = NULL;
            continue;
        }
        int voters = 0, failed = 0;
        for (int p = 0; p < r->cfg->npeers && !failed; p++) {
            const c10ds_peer *peer = &r->cfg->peers[p];
            int found = -1;
            for (size_t i = 0; i < n; i++)
                if (ids[i] == peer->id)
                    found = (int)i;
            if (found >= 0 && roles[found] == 0) {
                voters++;
                continue;
            }
            /* ADD, then ASSIGN voter, which waits for it to catch up: an
             * absent replica fails, and is tried again next time. A failed
             * call leaves the connection unusable (a late answer would be
             * read as the next call's): a new one next time. */
            if (found < 0 && c10ds_dq_add(d, peer->id, peer->address) != 0) {
                c10ds_debug("adding replica %llu: %s", (unsigned long long)peer->id,
                            c10ds_failure());
                failed = 1;
            } else if (c10ds_dq_assign(d, peer->id, 0) != 0) {
                c10ds_debug("making replica %llu a voter: %s", (unsigned long long)peer->id,
                            c10ds_failure());
                failed = 1;
            } else {
                c10ds_info("replica %llu (%s) is a voter", (unsigned long long)peer->id,
                           peer->address);
                voters++;
            }
        }
        /* --peers is the list of every replica: a node it no longer names
         * (a host replaced under a new id) leaves the cluster, or it would
         * count toward the majority for ever */
        for (size_t i = 0; i < n && !failed; i++) {
            if (ids[i] == r->me->id || c10ds_config_peer(r->cfg, ids[i]))
                continue;
            if (c10ds_dq_remove(d, ids[i]) == 0) {
                c10ds_warn("replica %llu is not in --peers: removed from the cluster",
                           (unsigned long long)ids[i]);
            } else {
                c10ds_debug("removing replica %llu: %s", (unsigned long long)ids[i],
                            c10ds_failure());
                failed = 1;
            }
        }
        hold(r, 1, NULL);
        if (failed) {
            c10ds_dq_close(d);
            d = NULL;
            continue;
        }
        int extra = 0;
        for (size_t i = 0; i < n; i++)
            extra += !c10ds_config_peer(r->cfg, ids[i]);
        /* all there: looked at again now and then (the thread lives as
         * long as the lead: the process ends with _exit when it goes) */
        if (voters == r->cfg->npeers && !extra && !pause_ms(r, MEMBERSHIP_SETTLED_MS))
            break;
    }
    c10ds_dq_close(d);
    return NULL;
}

/* --advertise-url, else the URL bound with a wildcard host made this
 * replica's IP from --peers */
static void advertised(const c10ds_replica *r, const char *bound, char *out, size_t len)
{
    if (r->cfg->advertise_url) {
        snprintf(out, len, "%s", r->cfg->advertise_url);
        return;
    }
    char ip[64];
    snprintf(ip, sizeof ip, "%s", r->me->address);
    *strrchr(ip, ':') = '\0';
    const char *wild = strstr(bound, "://0.0.0.0:");
    if (wild)
        snprintf(out, len, "%.*s://%s:%s", (int)(wild - bound), bound, ip,
                 wild + strlen("://0.0.0.0:"));
    else
        snprintf(out, len, "%s", bound);
}

int c10ds_replica_publish(c10ds_replica *r, const char *bound_url)
{
    if (!r->leads)
        return 0;
    char url[512];
    advertised(r, bound_url, url, sizeof url);
    return publish(r, url);
}

int c10ds_replica_watch(c10ds_replica *r)
{
    if (pthread_create(&r->threads[r->nthreads], NULL, watch_role, r) != 0)
        goto fail;
    r->nthreads++;
    if (r->leads) {
        if (pthread_create(&r->threads[r->nthreads], NULL, grow_membership, r) != 0)
            goto fail;
        r->nthreads++;
    }
    return 0;
fail:
    return c10ds_failed(C10D_ERROR, "cannot start the replica's threads");
}

void c10ds_replica_free(c10ds_replica *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stopping = 1;
    for (int i = 0; i < 2; i++)
        c10ds_dq_interrupt(r->blocked_on[i]);
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < r->nthreads; i++)
        pthread_join(r->threads[i], NULL);
    c10ds_mirror_free(r->mirror);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
