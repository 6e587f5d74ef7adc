/* A replica's supervisor (replica.h, c10d-coord --replica): it runs the
 * replica's dqlite node and starts the engine process, again each time
 * the role it plays changes; on SIGTERM it hands the leadership over
 * before it stops. The engine process's side is replica.c. */
#define _GNU_SOURCE
#include "replica/replica.h"

#include "replica/dqlite_wire.h"
#include "failure.h"
#include "log.h"
#include "replica/replica_internal.h"

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

/* The cluster as the replica at p's address knows it: whether it has a
 * leader, and its members and their roles (0: voter), asked of the
 * leader (dqlite answers that on the leader only). 1 when p belongs to a
 * cluster. */
static int cluster_seen_by(const c10ds_peer *p, uint64_t *leader, uint64_t *ids,
                           uint64_t *roles, size_t cap, size_t *n)
{
    c10ds_dq *d = NULL;
    char addr[64] = "";
    *leader = 0;
    *n = 0;
    if (c10ds_dq_connect(&d, p->address, 1000) != 0)
        return 0;
    if (c10ds_dq_leader(d, leader, addr, sizeof addr) != 0)
        *leader = 0;
    if (*leader && addr[0] && strcmp(addr, p->address) != 0) {
        c10ds_dq_close(d);
        d = NULL;
        if (c10ds_dq_connect(&d, addr, 1000) != 0)
            d = NULL;
    }
    if (d && c10ds_dq_cluster(d, ids, roles, cap, n) != 0)
        *n = 0;
    c10ds_dq_close(d);
    return *leader || *n;
}

/* A replica on an empty --data-dir must not join under an id the
 * cluster already knows. Replica 1 would start a new cluster (dqlite
 * 1.11.1 bootstraps node 1 whenever it has no data): a second one,
 * empty, acknowledging writes the first never sees. Replica 2 or 3 would
 * be taken for the voter it was, its log and its votes forgotten: it
 * could vote twice in a term, or help elect a leader that lacks
 * committed writes. Refused, saying why (c10ds_failure()). A replica
 * that the cluster does not count as a voter yet (one started late)
 * joins. */
static int would_forget(const c10ds_config *cfg, const c10ds_peer *me)
{
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
        uint64_t leader, ids[C10DS_MAX_REPLICAS * 2], roles[C10DS_MAX_REPLICAS * 2];
        size_t n;
        if (p == me ||
            !cluster_seen_by(p, &leader, ids, roles, C10DS_MAX_REPLICAS * 2, &n))
            continue;
        /* a voter: it voted and held the log. Not a spare: the leader
         * adds each replica of --peers as one before it has started, and
         * makes it a voter once it has caught up. */
        int voter = 0;
        for (size_t k = 0; k < n; k++)
            voter |= ids[k] == me->id && roles[k] == 0;
        if (me->id == 1) {
            c10ds_failed(C10D_ERROR, "replica 1's --data-dir %s is empty, but replica %llu (%s) "
                         "already belongs to a cluster%s: replica 1 would start a second one. "
                         "If its data is lost, bring this host back under a new id, in place "
                         "of 1 in --peers on every replica (docs/operations.md, \"Replicas\")",
                         cfg->data_dir, (unsigned long long)p->id, p->address,
                         leader ? " that has a leader" : "");
            return 1;
        }
        if (voter) {
            c10ds_failed(C10D_ERROR, "replica %llu's --data-dir %s is empty, but the cluster "
                         "counts replica %llu as a voter (as replica %llu at %s says): it "
                         "would rejoin as the voter it was without that voter's log and votes. "
                         "If its data is lost, bring this host back under a new id, in place "
                         "of %llu in --peers on every replica (docs/operations.md, "
                         "\"Replicas\")", (unsigned long long)me->id, cfg->data_dir,
                         (unsigned long long)me->id, (unsigned long long)p->id, p->address,
                         (unsigned long long)me->id);
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
    char addr[64];
    uint64_t leader = 0, ids[C10DS_MAX_REPLICAS * 2], roles[C10DS_MAX_REPLICAS * 2];
    size_t n = 0;
    int leads = c10ds_dq_connect(&d, me->address, 2000) == 0 &&
                c10ds_dq_leader(d, &leader, addr, sizeof addr) == 0 && leader == me->id &&
                c10ds_dq_cluster(d, ids, roles, C10DS_MAX_REPLICAS * 2, &n) == 0;
    c10ds_dq_close(d);
    for (size_t i = 0; leads && i < n; i++) {
        if (ids[i] == me->id || roles[i] != 0)
            continue;
        /* a fresh connection each: a failed call leaves one unusable */
        int ok = c10ds_dq_connect(&d, me->address, 2000) == 0 &&
                 c10ds_dq_transfer(d, ids[i]) == 0;
        if (ok)
            c10ds_info("handed the lead to replica %llu", (unsigned long long)ids[i]);
        else
            c10ds_debug("handing the lead to replica %llu: %s", (unsigned long long)ids[i],
                        c10ds_failure());
        c10ds_dq_close(d);
        d = NULL;
        if (ok)
            return;
    }
}

/* The replica's dqlite node, started on its --data-dir; NULL, said why,
 * when it cannot be. */
static dqlite_node *start_node(const c10ds_config *cfg, const c10ds_peer *me)
{
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
        return NULL;
    }
    return node;
}

/* Stops the engine process (nothing when child <= 0): it answers what
 * is queued (--drain-timeout) and commits; killed if it does not. */
static void stop_engine(const c10ds_config *cfg, pid_t child)
{
    if (child <= 0)
        return;
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
    if (would_forget(cfg, me)) {
        c10ds_error("%s", c10ds_failure());
        return 1;
    }
    dqlite_node *node = start_node(cfg, me);
    if (!node)
        return 1;
    c10ds_info("replica %llu of %d: dqlite node on %s, data in %s (election after ~%d ms "
               "without the leader)", (unsigned long long)me->id, cfg->npeers, me->address,
               cfg->data_dir, 15 * cfg->raft_latency_ms);

    int status = 0, quick_exits = 0;
    c10ds_disk_watch disk = {0};
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
        if (c10ds_replica_disk_check(&disk, cfg->data_dir, (unsigned long long)me->id)) {
            /* its raft failed on the full disk, and stays failed */
            stop_engine(cfg, child);
            child = -1;
            dqlite_node_stop(node);
            dqlite_node_destroy(node);
            if (!(node = start_node(cfg, me))) {
                status = 1;
                break;
            }
        }
        if (child < 0) {
            child = spawn_engine(argv);
            started = time(NULL);
        }
    }
    stop_engine(cfg, child);
    if (node) {
        hand_over(me);
        dqlite_node_stop(node);
        dqlite_node_destroy(node);
    }
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
