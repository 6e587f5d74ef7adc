/* The coordinator's settings: defaults, command line, environment. */
#ifndef C10DS_CONFIG_H
#define C10DS_CONFIG_H

#include "c10d_time.h"
#include "url.h"

#include <stddef.h>
#include <stdint.h>

/* This host only: reaching it from others is asked for (--listen
 * tcp://0.0.0.0:PORT), and then a token is wanted (config.c warns). */
#define C10DS_DEFAULT_LISTEN "tcp://127.0.0.1:" C10DC_DEFAULT_PORT
#define C10DS_DEFAULT_REPLICA_LISTEN "tcp://0.0.0.0:" C10DC_DEFAULT_PORT
#define C10DS_DEFAULT_DB "c10d-coord.db"
#define C10DS_DEFAULT_RETENTION_S 86400 /* a day: time for a post-mortem */
/* File descriptors kept back from --max-connections' default: the
 * database and its WAL, shm and lock files, SQLite's temporary files, the
 * log, NNG's poller (14 at idle). */
#define C10DS_FD_RESERVE 64

/* Durations, in the convention of common/c10d_time.h. The defaults of
 * the options (--help prints these numbers): */
#define C10DS_DEFAULT_DRAIN_TIMEOUT_MS 3000
#define C10DS_DEFAULT_FRAME_TIMEOUT_MS 30000
#define C10DS_DEFAULT_HEARTBEAT_TIMEOUT_MS 10000
#define C10DS_DEFAULT_BUSY_POLL_US 50 /* C10DC_BUSY_POLL_DEFAULT_US, common/busy_poll.h */
/* The longest any timeout option may be: an hour. */
#define C10DS_MAX_TIMEOUT_OPTION_MS 3600000
/* Fixed policy, no option:
 * how long a statement waits for SQLite's lock before it fails (only
 * the checkpoint or an operator's sqlite3 shell contend for it); */
#define C10DS_DB_BUSY_TIMEOUT_MS 5000
/* at shutdown, how long NNG gets to put the replies already handed to it
 * on the wire, and then how long closing the listener waits for a
 * connection the engine or an NNG callback still holds; */
#define C10DS_SHUTDOWN_DRAIN_MS 500
#define C10DS_LISTENER_CLOSE_MS 2000
/* the longest the coordinator holds a watch (a heartbeat) whatever its
 * wait_ms says, so that a rank is heard from at least this often. */
#define C10DS_WATCH_PARK_MAX_MS 60000

/* A replicated coordinator's replicas (docs/replication.md): three or
 * five in practice; more only slow every commit down. */
#define C10DS_MAX_REPLICAS 7
#define C10DS_DEFAULT_RAFT_LATENCY_MS 100

typedef struct c10ds_peer {
    uint64_t id;
    char address[64]; /* IPv4:port: the replica's dqlite node (raft and SQL) */
} c10ds_peer;

typedef struct c10ds_config {
    char *listen_url;
    char *tcpstore_url;      /* --tcpstore-listen as tcp://host:port; NULL: off */
    char *metrics_url;       /* --metrics-listen as http://host:port; NULL: off */
    char *db_path;
    char *ready_file;        /* written with the bound URL once serving */
    char *token;             /* NULL = no authentication */
    uint64_t max_key_bytes;
    uint64_t max_value_bytes;
    uint64_t max_message_bytes;
    uint32_t max_multi_keys;
    uint32_t max_world_size;  /* most ranks in one job (group_join refuses more) */
    uint64_t max_conn_buffer; /* replies queued for one slow client before it is cut off */
    uint64_t max_pending_bytes; /* unfinished requests held, all connections together */
    c10d_ms frame_timeout_ms;     /* a request left unfinished this long closes its connection */
    uint64_t max_decode_bytes; /* what unpacking one request may allocate (decode_budget.h) */
    uint64_t max_reply_bytes; /* unsent replies, all connections together */
    uint64_t max_parked;      /* requests parked (waiting for keys, groups), all together */
    uint64_t max_parked_bytes;      /* their bytes as sent, all together */
    uint64_t max_conn_parked_bytes; /* the same, one connection's (either port) */
    /* The TCPStore port's own limits: it checks no token, so whoever can
     * reach it is held to these, apart from the main port's clients. */
    uint64_t ts_max_parked_bytes; /* parked bytes of all its connections together */
    uint32_t ts_max_inflight;     /* a connection's queries with the engine, parked WAITs aside */
    uint32_t ts_max_port_inflight; /* the same, all its connections together */
    uint64_t ts_quota_bytes;      /* bytes its clients' keys and values may hold in the store */
    uint32_t max_connections; /* client connections open at once; more are closed at once */
    c10d_ms drain_timeout_ms;     /* SIGTERM: how long queued requests are still run */
    char *tls_cert, *tls_key, *tls_ca; /* tls+tcp:// (tls_ca: client certificates) */
    int dedup_window_s;      /* how long applied-request replies are kept */
    c10d_ms heartbeat_timeout_ms; /* a rank silent this long is declared dead */
    int busy_poll_us;         /* the readiness loop looks this long before sleeping */
    int64_t retention_s;      /* a run over this long has its records reclaimed (runs.c) */
    int log_level;
    /* --replica: 0 in the single-node mode (the default) */
    uint64_t replica_id;
    c10ds_peer peers[C10DS_MAX_REPLICAS];
    int npeers;
    char *data_dir;          /* the replica's raft log and snapshots */
    char *advertise_url;     /* the URL clients are sent to when it leads (NULL: the
                              * bound one, replica.c) */
    c10d_ms raft_latency_ms;     /* heartbeat 1.5x, election timeout 15x */
    char *seed_path;         /* --seed: an empty replicated database starts from this file */
    char *export_path;       /* --export: copy the replicated database there, and exit */
} c10ds_config;

/* The replica of this id in cfg->peers, or NULL. */
const c10ds_peer *c10ds_config_peer(const c10ds_config *cfg, uint64_t id);

/* Fills cfg from argv and the environment. Returns 0 to run, 1 when the
 * program should exit 0 (--help, --version), -1 on a usage error (already
 * reported on stderr). */
int c10ds_config_parse(c10ds_config *cfg, int argc, char **argv);
void c10ds_config_free(c10ds_config *cfg);

#endif
