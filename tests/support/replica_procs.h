/* A replicated coordinator for the tests (docs/replication.md): N real
 * c10d-coord --replica processes on loopback, with ports of their own, a
 * data directory each in one temporary directory, and their logs. */
#ifndef C10D_TEST_REPLICA_PROCS_H
#define C10D_TEST_REPLICA_PROCS_H

#include <sys/types.h>

#define REPLICAS_MAX 5

typedef struct replica_set {
    int n;
    char dir[256];
    char peers[512];            /* --peers */
    char urls[1024];            /* every client URL, comma-separated */
    char url[REPLICAS_MAX][64]; /* replica i+1's client URL */
    pid_t pid[REPLICAS_MAX];    /* its supervisor; 0 when stopped */
} replica_set;

/* Picks ports and makes the directory; starts nothing. */
void replicas_init(replica_set *rs, int n);
/* Starts replica id (1..n) with extra arguments (NULL-terminated, may be
 * NULL); does not wait. */
void replica_start(replica_set *rs, int id, const char *const *extra);
/* Sends sig to replica id's supervisor and reaps it. */
void replica_stop(replica_set *rs, int id, int sig);
/* Sends sig to replica id's supervisor and to its engine process, as a
 * hung host would stop both (SIGSTOP, SIGCONT); reaps nothing. */
void replica_signal_all(const replica_set *rs, int id, int sig);
/* Stops all (SIGKILL) and removes the directory. */
void replicas_cleanup(replica_set *rs);
/* Lines of replica id's log that contain s. */
int replica_log_count(const replica_set *rs, int id, const char *s);
/* Prints every replica's log to stderr (after a failure). */
void replicas_dump_logs(const replica_set *rs);
/* The replica that leads, as one that serves says when asked through
 * the list (c10d-ctl status's database line): 0 when none answers
 * within timeout_ms. */
int replicas_leader(const replica_set *rs, int timeout_ms);
/* Waits until replica id's engine has started serving at least `times`
 * times in all (a restart of its engine counts); 0, or -1 after
 * timeout_ms. */
int replica_wait_serving(const replica_set *rs, int id, int times, int timeout_ms);
/* Waits until the replicas other than the first leader are voters, as
 * any replica's log says ("is a voter": the leader that promoted them
 * may since have handed over): 0, or -1 after timeout_ms. With fewer
 * voters the leader is a majority alone, and its death leaves none. */
int replicas_wait_voters(const replica_set *rs, int timeout_ms);
/* Starts replicas 1..n and waits until each serves, timeout_ms for them
 * all together (three raft nodes and their engines starting beside a
 * CI's builds took over 30 s for one): 0, or the id of the first that
 * did not. */
int replicas_start_serving(replica_set *rs, int timeout_ms);

#endif
