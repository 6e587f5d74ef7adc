/* A replica: its supervisor (the dqlite node), and in the engine process
 * the leader's lookup, the refusal of a replica that does not lead, and
 * the threads that watch the role (replica.h). */
#define _GNU_SOURCE
#include "replica.h"

#include "dqlite_wire.h"
#include "c10d_time.h"
#include "log.h"
#include "replica_mirror.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#ifdef C10DS_HAVE_DQLITE
#include <dqlite.h>
#endif

#define ENGINE_ENV "C10D_REPLICA_SUPERVISOR" /* the supervisor's pid, in the engine's env */
#define DB_NAME "c10d"
#define REPLICAS_TABLE "c10d_replicas"
#define DQ_TIMEOUT_MS 10000
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

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* --- the supervisor --- */

#ifdef C10DS_HAVE_DQLITE
/* raft's links to the other replicas: TCP without Nagle (dqlite 1.11.1
 * leaves it on, and a commit then waits ~40 ms for an ACK) */
static int connect_tcp(void *arg, const char *address, int *fd)
{
    (void)arg;
    char host[64];
    const char *colon = strrchr(address, ':');
    struct sockaddr_in in = {.sin_family = AF_INET};
    if (!colon || (size_t)(colon - address) >= sizeof host)
        return DQLITE_ERROR;
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    in.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &in.sin_addr) != 1)
        return DQLITE_ERROR;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (s < 0)
        return DQLITE_ERROR;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(s, (struct sockaddr *)&in, sizeof in) != 0) {
        close(s);
        return DQLITE_ERROR;
    }
    *fd = s;
    return 0;
}

static pid_t spawn_engine(char **argv)
{
    extern char **environ;
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env), var[64];
    if (!env)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], ENGINE_ENV "=", strlen(ENGINE_ENV) + 1) != 0)
            env[k++] = environ[i];
    snprintf(var, sizeof var, ENGINE_ENV "=%d", (int)getpid());
    env[k++] = var;
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none); /* the supervisor blocks its signals */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, "/proc/self/exe", NULL, &attr, argv, env);
    posix_spawnattr_destroy(&attr);
    free(env);
    if (rc != 0) {
        c10ds_error("cannot start the engine process: %s", strerror(rc));
        return -1;
    }
    return pid;
}

/* Waits for one of sigs for up to ms; returns the signal or 0. */
static int wait_signal(const sigset_t *sigs, int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    int sig = sigtimedwait(sigs, NULL, &ts);
    return sig > 0 ? sig : 0;
}

/* Replica 1 on an empty --data-dir starts a new cluster (dqlite 1.11.1
 * bootstraps node 1 whenever it has no data). If the other replicas
 * already form one, that would be a second cluster, empty, acknowledging
 * writes the first never sees: refused, saying why. */
static int would_split(const c10ds_config *cfg, const c10ds_peer *me, char *why, size_t len)
{
    if (me->id != 1)
        return 0;
    DIR *dir = opendir(cfg->data_dir);
    struct dirent *e;
    int files = 0;
    while (dir && (e = readdir(dir)) != NULL)
        files += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (dir)
        closedir(dir);
    if (files)
        return 0; /* its own raft state: it rejoins its cluster */
    for (int i = 0; i < cfg->npeers; i++) {
        const c10ds_peer *p = &cfg->peers[i];
        c10ds_dq *d = NULL;
        char err[256], addr[64];
        uint64_t leader = 0, ids[C10DS_MAX_REPLICAS * 2];
        size_t n = 0;
        if (p == me || c10ds_dq_connect(&d, p->address, 1000, err, sizeof err) != 0)
            continue;
        if (c10ds_dq_leader(d, &leader, addr, sizeof addr) != 0)
            leader = 0;
        if (!leader && c10ds_dq_cluster(d, ids, NULL, C10DS_MAX_REPLICAS * 2, &n) != 0)
            n = 0;
        c10ds_dq_close(d);
        if (leader || n) {
            snprintf(why, len, "replica 1's --data-dir %s is empty, but replica %llu (%s) "
                     "already belongs to a cluster%s: replica 1 would start a second one. If "
                     "its data is lost, bring this host back under a new id, in place of 1 in "
                     "--peers on every replica (docs/operations.md, \"Replicas\")",
                     cfg->data_dir, (unsigned long long)p->id, p->address,
                     leader ? " that has a leader" : "");
            return 1;
        }
    }
    return 0;
}

/* A leader about to stop hands its role to another voter, so that the
 * clients wait for a transfer (a few heartbeats), not for an election
 * timeout. Nothing when it does not lead. */
static void hand_over(const c10ds_peer *me)
{
    c10ds_dq *d = NULL;
    char err[256], addr[64];
    uint64_t leader = 0, ids[C10DS_MAX_REPLICAS * 2], roles[C10DS_MAX_REPLICAS * 2];
    size_t n = 0;
    int leads = c10ds_dq_connect(&d, me->address, 2000, err, sizeof err) == 0 &&
                c10ds_dq_leader(d, &leader, addr, sizeof addr) == 0 && leader == me->id &&
                c10ds_dq_cluster(d, ids, roles, C10DS_MAX_REPLICAS * 2, &n) == 0;
    c10ds_dq_close(d);
    for (size_t i = 0; leads && i < n; i++) {
        if (ids[i] == me->id || roles[i] != 0)
            continue;
        /* a fresh connection each: a failed call leaves one unusable */
        int ok = c10ds_dq_connect(&d, me->address, 2000, err, sizeof err) == 0 &&
                 c10ds_dq_transfer(d, ids[i]) == 0;
        if (ok)
            c10ds_info("handed the lead to replica %llu", (unsigned long long)ids[i]);
        else
            c10ds_debug("handing the lead to replica %llu: %s", (unsigned long long)ids[i],
                        d ? c10ds_dq_errmsg(d) : err);
        c10ds_dq_close(d);
        d = NULL;
        if (ok)
            return;
    }
}

int c10ds_replica_supervise(const c10ds_config *cfg, char **argv)
{
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    /* libuv writes raft's links without MSG_NOSIGNAL */
    signal(SIGPIPE, SIG_IGN);

    const c10ds_peer *me = c10ds_config_peer(cfg, cfg->replica_id);
    if (mkdir(cfg->data_dir, 0700) != 0 && errno != EEXIST) {
        c10ds_error("cannot create --data-dir %s: %s", cfg->data_dir, strerror(errno));
        return 1;
    }
    char why[1024];
    if (would_split(cfg, me, why, sizeof why)) {
        c10ds_error("%s", why);
        return 1;
    }
    dqlite_node *node = NULL;
    if (dqlite_node_create(me->id, me->address, cfg->data_dir, &node) != 0 ||
        dqlite_node_set_bind_address(node, me->address) != 0 ||
        dqlite_node_set_connect_func(node, connect_tcp, NULL) != 0 ||
        dqlite_node_set_network_latency_ms(node, (unsigned)cfg->raft_latency_ms) != 0 ||
        dqlite_node_start(node) != 0) {
        c10ds_error("replica %llu: cannot start its dqlite node on %s (data in %s): %s",
                    (unsigned long long)me->id, me->address, cfg->data_dir,
                    node ? dqlite_node_errmsg(node) : "out of memory");
        if (node)
            dqlite_node_destroy(node);
        return 1;
    }
    c10ds_info("replica %llu of %d: dqlite node on %s, data in %s (election after ~%d ms "
               "without the leader)", (unsigned long long)me->id, cfg->npeers, me->address,
               cfg->data_dir, 15 * cfg->raft_latency_ms);

    int status = 0, quick_exits = 0;
    pid_t child = spawn_engine(argv);
    time_t started = time(NULL);
    for (;;) {
        int sig = wait_signal(&sigs, child > 0 ? 1000 : 200);
        if (sig == SIGTERM || sig == SIGINT)
            break;
        if (sig == SIGHUP)
            c10ds_info("SIGHUP ignored (send SIGTERM to stop)");
        int ws;
        if (child > 0 && waitpid(child, &ws, WNOHANG) == child) {
            int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            child = -1;
            if (code == 2) { /* a usage error: it will not get better */
                status = 2;
                break;
            }
            if (code != C10DS_REPLICA_EXIT_ROLE) {
                quick_exits = time(NULL) - started < 5 ? quick_exits + 1 : 0;
                if (quick_exits >= 3) {
                    /* Its node may lead: kept running, no other replica
                     * would ever be elected to serve in its place. */
                    c10ds_error("the engine process failed %d times in a row within 5 s of "
                                "starting (its errors are above): stopping this replica so "
                                "that another leads; fix the cause and start it again",
                                quick_exits);
                    status = 1;
                    break;
                }
                c10ds_warn("the engine process exited (%d); starting it again%s", code,
                           quick_exits > 1 ? " after a pause" : "");
                if (quick_exits > 1 &&
                    (sig = wait_signal(&sigs, quick_exits > 5 ? 5000 : 1000)) &&
                    (sig == SIGTERM || sig == SIGINT))
                    break;
            }
        }
        if (child < 0) {
            child = spawn_engine(argv);
            started = time(NULL);
        }
    }
    if (child > 0) {
        /* It answers what is queued (--drain-timeout) and commits. */
        kill(child, SIGTERM);
        int waited = 0, limit = cfg->drain_timeout_ms + 5000, ws;
        while (waitpid(child, &ws, WNOHANG) == 0 && waited < limit) {
            sleep_ms(20);
            waited += 20;
        }
        if (waited >= limit) {
            c10ds_warn("the engine process did not stop in %d ms: killing it", limit);
            kill(child, SIGKILL);
            waitpid(child, &ws, 0);
        }
    }
    hand_over(me);
    dqlite_node_stop(node);
    dqlite_node_destroy(node);
    if (status == 0)
        c10ds_info("replica %llu stopped cleanly", (unsigned long long)me->id);
    return status;
}
#else
int c10ds_replica_supervise(const c10ds_config *cfg, char **argv)
{
    (void)cfg;
    (void)argv;
    c10ds_error("--replica: this c10d-coord was built without dqlite (install libdqlite-dev, "
                "scripts/install-deps.sh, and build again)");
    return 1;
}
#endif

/* --- a backup --- */

int c10ds_replica_export(const c10ds_config *cfg)
{
    char err[1024], addr[64] = "";
    uint64_t id = 0;
    for (int i = 0; i < cfg->npeers && !id; i++) {
        c10ds_dq *d = NULL;
        if (c10ds_dq_connect(&d, cfg->peers[i].address, 5000, err, sizeof err) == 0 &&
            c10ds_dq_leader(d, &id, addr, sizeof addr) != 0)
            id = 0;
        c10ds_dq_close(d);
    }
    if (!id) {
        c10ds_error("--export: no replica of --peers knows a leader (are a majority running?)");
        return 1;
    }
    int fd = open(cfg->export_path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        c10ds_error("--export %s: %s (it must not exist yet)", cfg->export_path,
                    strerror(errno));
        return 1;
    }
    close(fd);
    c10ds_mirror *m = NULL;
    sqlite3 *h = NULL;
    int rc = 1;
    if (c10ds_mirror_new(&m, addr, DB_NAME, DQ_TIMEOUT_MS, err, sizeof err) != 0)
        goto out;
    if (sqlite3_open(cfg->export_path, &h) != SQLITE_OK) {
        snprintf(err, sizeof err, "%s", sqlite3_errmsg(h));
        goto out;
    }
    /* one read transaction on the leader: every table as of one commit */
    static const char *const own[] = {REPLICAS_TABLE, NULL};
    c10ds_dq *d = c10ds_mirror_dq(m);
    if (c10ds_dq_exec_sql(d, "BEGIN", NULL, 0, NULL, NULL) != 0) {
        snprintf(err, sizeof err, "%s", c10ds_dq_errmsg(d));
        goto out;
    }
    if (c10ds_mirror_load(m, h, own, err, sizeof err) != 0)
        goto out;
    c10ds_dq_exec_sql(d, "COMMIT", NULL, 0, NULL, NULL);
    sqlite3_stmt *st = NULL;
    long long keys = -1;
    int version = -1;
    if (sqlite3_prepare_v2(h, "SELECT (SELECT count(*) FROM kv), (SELECT user_version FROM "
                              "pragma_user_version)", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        keys = sqlite3_column_int64(st, 0);
        version = sqlite3_column_int(st, 1);
    }
    sqlite3_finalize(st);
    c10ds_info("exported the replicated database from replica %llu (%s) to %s: schema version "
               "%d, %lld keys", (unsigned long long)id, addr, cfg->export_path, version, keys);
    rc = 0;
out:
    if (rc != 0) {
        c10ds_error("--export %s: %s", cfg->export_path, err);
        unlink(cfg->export_path);
    }
    sqlite3_close(h);
    c10ds_mirror_free(m);
    return rc;
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
static int publish(c10ds_replica *r, const char *url, char *err, size_t errlen)
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
                          NULL, NULL) != 0) {
        snprintf(err, errlen, "publishing the leader's URL: %s", c10ds_dq_errmsg(d));
        return -1;
    }
    return 0;
}

int c10ds_replica_open(c10ds_replica **out, const c10ds_config *cfg, c10ds_db *db, char *err,
                       size_t errlen)
{
    *out = NULL;
    /* Dies with its supervisor (kill -9 of the replica): a coordinator
     * serving without its node must not outlive it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != (pid_t)atoi(getenv(ENGINE_ENV))) {
        snprintf(err, errlen, "the replica's supervisor is gone");
        return -1;
    }
    c10ds_replica *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_init(&r->mu, NULL);
    r->cfg = cfg;
    r->me = c10ds_config_peer(cfg, cfg->replica_id);
    c10ds_dq *d = NULL;
    char addr[64];
    uint64_t id = 0;
    /* The node may still be starting (the supervisor has just started it) */
    for (int i = 0; i < 50 && c10ds_dq_connect(&d, r->me->address, DQ_TIMEOUT_MS, err,
                                                errlen) != 0; i++)
        sleep_ms(100);
    if (!d)
        goto fail;
    /* An election may be under way: wait a little for its outcome */
    for (int i = 0; i < 20; i++) {
        if (ask_leader(d, &id, addr, sizeof addr) != 0) {
            snprintf(err, errlen, "asking node %s who leads: %s", r->me->address,
                     c10ds_dq_errmsg(d));
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
        if (c10ds_mirror_new(&r->mirror, r->me->address, DB_NAME, DQ_TIMEOUT_MS, err,
                             errlen) != 0)
            goto fail;
        static const char *const own[] = {REPLICAS_TABLE, NULL};
        if (c10ds_db_open_replicated(db, r->mirror, own, cfg->seed_path, lost, err,
                                     errlen) != 0)
            goto fail;
    } else if (c10ds_db_open(db, ":memory:", err, errlen) != 0) {
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
static int pause_ms(c10ds_replica *r, int ms)
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
    char err[256], url[256] = "";
    c10ds_dq_rows rows = {0};
    c10ds_dq_value v = {.type = C10DS_DQ_INTEGER, .i = (int64_t)id};
    if (c10ds_dq_connect(&d, address, 1000, err, sizeof err) == 0 && hold(r, 0, d) &&
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
    char err[256], addr[64];
    /* an election timeout (15x the latency), at least a second */
    int64_t patience = 15 * (int64_t)r->cfg->raft_latency_ms;
    if (patience < 1000)
        patience = 1000;
    int call_ms = (int)(patience / 3);
    int64_t confirmed = c10d_now_ms();
    uint64_t asked_url_of = 0;
    int64_t asked_url_at = 0;
    while (pause_ms(r, WATCH_EVERY_MS)) {
        uint64_t id;
        if (!d && c10ds_dq_connect(&d, r->me->address, call_ms, err, sizeof err) != 0)
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
    char err[256];
    /* at once, then every MEMBERSHIP_EVERY_MS: until the others are
     * voters, the cluster does not survive its leader */
    for (int first = 1; first || pause_ms(r, MEMBERSHIP_EVERY_MS); first = 0) {
        uint64_t ids[C10DS_MAX_REPLICAS * 2], roles[C10DS_MAX_REPLICAS * 2];
        size_t n = 0;
        if (!d && c10ds_dq_connect(&d, r->me->address, DQ_TIMEOUT_MS, err, sizeof err) != 0)
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
                            c10ds_dq_errmsg(d));
                failed = 1;
            } else if (c10ds_dq_assign(d, peer->id, 0) != 0) {
                c10ds_debug("making replica %llu a voter: %s", (unsigned long long)peer->id,
                            c10ds_dq_errmsg(d));
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
                            c10ds_dq_errmsg(d));
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

int c10ds_replica_publish(c10ds_replica *r, const char *bound_url, char *err, size_t errlen)
{
    if (!r->leads)
        return 0;
    char url[512];
    advertised(r, bound_url, url, sizeof url);
    return publish(r, url, err, errlen);
}

int c10ds_replica_watch(c10ds_replica *r, char *err, size_t errlen)
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
    snprintf(err, errlen, "cannot start the replica's threads");
    return -1;
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
