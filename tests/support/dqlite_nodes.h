/* dqlite nodes in a test's or a benchmark's process (docs/replication.md):
 * each on an abstract unix socket, raft's links dialled there too, with
 * a short election timeout for one machine. */
#ifndef C10D_TEST_DQLITE_NODES_H
#define C10D_TEST_DQLITE_NODES_H

#include <dqlite.h>

typedef struct dq_node {
    dqlite_node *node;
    char dir[64];  /* its data directory, made for it */
    char addr[64]; /* "@c10d-dq-<pid>-<tag>-<id>" */
} dq_node;

/* Starts node `id` (1 bootstraps a cluster; others wait to be added).
 * Ignores SIGPIPE for the process: libuv writes raft's links without
 * MSG_NOSIGNAL, and a node stopping while a peer writes to it would
 * raise it. 0, or -1 with the reason on stderr. */
int dq_node_start(dq_node *n, unsigned id, const char *tag);
/* Stops and destroys it, and removes its directory. */
void dq_node_stop(dq_node *n);

#endif
