/* c10d/pg.h — process groups: rendezvous, subgroups, leaving.
 *
 * c10d_init joins the world of a job on the coordinator and returns when
 * every rank has arrived; the ranks then talk to each other directly (the
 * data plane), never through the coordinator. The coordinator keeps who is
 * in the job and who is alive: a rank whose process dies, or whose
 * heartbeats stop, is declared dead, and every peer blocked in something
 * that needs it (a collective, a barrier, a rendezvous) fails with
 * C10D_EPEERLOST within about a second, naming it.
 *
 * Threads: one thread at a time per c10d_pg (as with torch.distributed);
 * different groups may be used from different threads. */
#ifndef C10D_PG_H
#define C10D_PG_H

#include "common.h"
#include "errors.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The longest job name (bytes) the library and the coordinator accept:
 * longer ones are refused with C10D_EINVAL on both sides, never cut (two
 * long names would become one job). */
#define C10D_MAX_JOB_BYTES 127

typedef struct c10d_pg c10d_pg;

typedef enum {
    C10D_BACKEND_AUTO = 0, /* NCCL for CUDA buffers when built with it, host otherwise */
    C10D_BACKEND_HOST = 1, /* CPU buffers: shared memory on one host, TCP across hosts */
    C10D_BACKEND_NCCL = 2,
} c10d_backend;

typedef enum {
    C10D_VERIFY_DEFAULT = 0, /* C10D_VERIFY from the environment, else SYNC */
    C10D_VERIFY_OFF = 1,
    C10D_VERIFY_ASYNC = 2,
    C10D_VERIFY_SYNC = 3,
} c10d_verify;

#define C10D_INIT_OPTS_VERSION 2

/* Start with C10D_INIT_OPTS_INIT (its version first: see c10d/coll.h). */
typedef struct c10d_init_opts {
    unsigned int version;  /* C10D_INIT_OPTS_VERSION */
    const char *coord_url; /* NULL: C10D_COORD, or MASTER_ADDR + MASTER_PORT */
    int rank;              /* -1: RANK, else Open MPI's OMPI_COMM_WORLD_RANK */
    int world_size;        /* 0: WORLD_SIZE, else OMPI_COMM_WORLD_SIZE */
    const char *job;       /* NULL: C10D_JOB, else torchrun's TORCHELASTIC_RUN_ID (its
                              static rendezvous's "none": "torchrun-MASTER_ADDR:MASTER_PORT",
                              the host's name for a loopback address), else under Open
                              MPI's mpirun "mpirun-" + PMIX_NAMESPACE, else "default";
                              at most C10D_MAX_JOB_BYTES */
    c10d_backend backend;
    c10d_verify verify;
    int timeout_ms; /* rendezvous and collectives; C10D_TIMEOUT_DEFAULT: C10D_TIMEOUT_MS,
                       else 600000 */
    int device;     /* CUDA device; -1: LOCAL_RANK, else OMPI_COMM_WORLD_LOCAL_RANK */
    /* For a tls+tcp:// coordinator: the CA file (PEM) that signed its
     * certificate; NULL: C10D_TLS_CA. */
    const char *tls_ca;
    /* Version 2: this rank's certificate and key (PEM files) for a
     * coordinator that requires one (--tls-ca); NULL: C10D_TLS_CERT,
     * C10D_TLS_KEY. Both or neither. */
    const char *tls_cert;
    const char *tls_key;
} c10d_init_opts;

#define C10D_INIT_OPTS_INIT                                                                        \
    {C10D_INIT_OPTS_VERSION, NULL, -1, 0, NULL, C10D_BACKEND_AUTO, C10D_VERIFY_DEFAULT,            \
     C10D_TIMEOUT_DEFAULT, -1, NULL, NULL, NULL}

/* Joins the world group of the job and waits for every rank. o NULL =
 * defaults + environment (torchrun-compatible: C10D_COORD or MASTER_ADDR +
 * MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, C10D_JOB, C10D_TIMEOUT_MS,
 * C10D_TOKEN, C10D_TLS_CA, C10D_JOB_KEY). On success *out is the world group; free with
 * c10d_destroy.
 * Errors: C10D_ETIMEDOUT (names the ranks that never arrived), C10D_EINVAL
 * (bad rank/world size, or the rank is held by another live process: the
 * message names its host and pid), C10D_EPEERLOST (a rank died during the
 * rendezvous), C10D_EUNAVAIL (no coordinator), C10D_EAUTH (wrong token, or
 * this rank's C10D_JOB_KEY is not the run's: the message names the process
 * that started the run). */
C10D_API c10d_status c10d_init(c10d_pg **out, const c10d_init_opts *o);

/* A subgroup of parent made of `ranks` (ranks of the parent, in the order
 * that defines the new group's ranks). As in torch, every rank of the
 * parent calls it, in the same order as the others; a caller not in ranks
 * gets *out = NULL and C10D_OK. Members rendezvous like c10d_init. */
C10D_API c10d_status c10d_new_group(c10d_pg **out, c10d_pg *parent, const int *ranks, int n);

/* This rank in pg, and pg's size; -1 for NULL. */
C10D_API int c10d_rank(const c10d_pg *pg);
C10D_API int c10d_size(const c10d_pg *pg);
/* The rank in the world group of rank `group_rank` of pg; -1 if out of range. */
C10D_API int c10d_global_rank(const c10d_pg *pg, int group_rank);

/* The job name c10d_init uses when opts->job is NULL (see
 * c10d_init_opts.job), written to out (NUL-terminated). Errors:
 * C10D_EINVAL (out NULL or len 0), C10D_ETOOBIG (it needs more than len
 * bytes; out holds what fit). */
C10D_API c10d_status c10d_default_job(char *out, size_t len);

/* The job pg belongs to (its world's name on the coordinator) and the
 * generation its ranks met in: one run of the job. NULL and 0 for NULL. */
C10D_API const char *c10d_pg_job(const c10d_pg *pg);
C10D_API uint64_t c10d_pg_generation(const c10d_pg *pg);

/* The run's store: a view of the coordinator's store that only this run
 * of pg's job sees (keys under "jobs/<job>/<generation>/"; a restarted
 * job, the next run and other jobs each have their own). The coordinator
 * removes its keys once the run is over (every rank left or died):
 * docs/store.md. Its timeout is pg's. Close it with c10d_store_close;
 * it may outlive pg. Errors: C10D_EINVAL (NULL arguments). */
C10D_API c10d_status c10d_run_store(c10d_store **out, const c10d_pg *pg);

/* The key prefix of generation `generation` of job's store, what every
 * key of c10d_run_store starts with: "jobs/<job>/<generation>/", '%' and
 * '/' of the name written %25 and %2F (so one job's prefix is never
 * inside another's). Written NUL-terminated into buf (len bytes; 3 x the
 * name + 32 always suffice): for tools that look at a run's keys from a
 * plain store handle (c10d-ctl keys --job). Errors: C10D_EINVAL (NULL
 * buf or job), C10D_ETOOBIG (buf too small; it holds "" then). */
C10D_API c10d_status c10d_run_prefix(char *buf, size_t len, const char *job,
                                     uint64_t generation);

/* Leaves: for the world group the coordinator records this rank as left
 * (peers still waiting on it get C10D_EPEERLOST saying so). Subgroups made
 * from a world stay usable until destroyed. NULL is accepted. */
C10D_API void c10d_destroy(c10d_pg *pg);

#ifdef __cplusplus
}
#endif
#endif
