/* A replica of a replicated coordinator (docs/replication.md).
 *
 * `c10d-coord --replica ID --peers ...` is two processes. The first (the
 * supervisor) runs the replica's dqlite node for as long as the replica
 * runs, and starts the second, the engine process: the coordinator as in
 * the single-node mode, serving the clients' URL. The engine process asks
 * its node who leads. Leading, it builds its working database from the
 * replicated one and serves (replica_mirror.h); not leading, it answers
 * every request ENOTLEADER with the leader's client URL. When that
 * changes (an election, a commit that fails) it exits, which drops every
 * connection exactly as a coordinator's restart does, and the supervisor
 * starts a new one in the new role: the restart path, tested for years of
 * kill -9, is the failover path. */
#ifndef C10DS_REPLICA_H
#define C10DS_REPLICA_H

#include "config.h"
#include "db/db.h"
#include "engine/request.h"

#include <stddef.h>

/* The engine process exits with this when its role changed: the
 * supervisor starts the next one at once. */
#define C10DS_REPLICA_EXIT_ROLE 75

typedef struct c10ds_replica c10ds_replica;

/* 1 in a replica's engine process (started by its supervisor). */
int c10ds_replica_is_engine(void);

/* The supervisor: runs the node and engine processes until SIGTERM or
 * SIGINT. Returns the exit status (0 after a signal). */
int c10ds_replica_supervise(const c10ds_config *cfg, char **argv);

/* --export PATH: copies the replicated database, read on the replica
 * that leads in one transaction, into a new SQLite file. Returns the
 * exit status. */
int c10ds_replica_export(const c10ds_config *cfg);

/* In the engine process: asks the node who leads. Leading, opens db as
 * the replicated working copy; else db in memory, and the replica
 * refuses every request (c10ds_replica_refuse). This and publish and
 * watch return 0, or -1 with why in c10ds_failure() (failure.h). */
int c10ds_replica_open(c10ds_replica **out, const c10ds_config *cfg, c10ds_db *db);
int c10ds_replica_leads(const c10ds_replica *r);
/* "replica 2 of 3, leading" */
const char *c10ds_replica_describe(const c10ds_replica *r);

/* The engine's hook for a replica that does not lead: answers r with
 * ENOTLEADER and the leader's URL. Returns 1 (answered). */
int c10ds_replica_refuse(void *arg, c10ds_request *r);

/* Once bound to bound_url, before the engine starts (the engine's
 * connection to dqlite is then the only one writing: dqlite refuses a
 * second writer with SQLITE_BUSY): the leader publishes its client URL,
 * for the others' ENOTLEADER. */
int c10ds_replica_publish(c10ds_replica *r, const char *bound_url);
/* Starts the threads that watch who leads (exiting the process when it
 * changes) and, on the leader, add the other replicas as voters. */
int c10ds_replica_watch(c10ds_replica *r);
/* Stops the threads (interrupting a call to the node) and frees r: after
 * the engine has stopped, before the database is closed. */
void c10ds_replica_free(c10ds_replica *r);

#endif
