/* Process groups: c10d_init (the world's rendezvous), c10d_new_group,
 * c10d_destroy. A rendezvous is one group_join request, parked by the
 * coordinator until every member has arrived; its reply carries every
 * member's data-plane endpoint, and the backend connects from there. */
#include "backend/backend_ctx.h"
#include "backend/backends.h"
#include "coll/lane.h"
#include "group/liveness.h"
#include "coll/posted.h"
#include "coll/program_plane.h"
#include "coll/verify.h"
#include "group/watch.h"
#include "coll/work.h"

#include "budgets.h"
#include "c10d_time.h"
#include "run_scope.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void world_unref(c10di_world *w)
{
    if (!w || atomic_fetch_sub(&w->refs, 1) != 1)
        return;
    c10di_watch_stop(w);
    c10di_verify_stop(w);
    c10di_progress_stop(w);
    c10di_alerts_free(w);
    for (int i = 0; w->lost && i < w->size; i++) {
        free(w->lost[i]);
        c10di_seqs_clear(&w->lost_finals[i]);
    }
    free(w->lost);
    free(w->lost_finals);
    c10di_seqs_clear(&w->finals);
    c10di_seqs_clear(&w->final_completed);
    free(w->lost_order);
    pthread_cond_destroy(&w->progress_cv);
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->flush_mu);
    pthread_mutex_destroy(&w->alert_cb_mu);
    pthread_spin_destroy(&w->rmu);
    c10di_conn_unref(w->conn);
    free(w);
}

/* Stops pg's lane, running what was queued first, then ends the receives
 * posted on it (they are never on the lane). Once: a lane stopped is
 * gone. */
static void lane_end(c10d_pg *pg)
{
    if (!pg->lane)
        return;
    c10di_lane_stop(pg->lane);
    c10di_posted_abort(pg);
    pg->lane = NULL;
}

static void pg_free(c10d_pg *pg)
{
    if (!pg)
        return;
    pthread_mutex_lock(&pg->w->alert_cb_mu); /* not while the watcher tells its program */
    pthread_mutex_lock(&pg->w->mu);
    for (c10d_pg **pp = &pg->w->groups; *pp; pp = &(*pp)->next_in_world)
        if (*pp == pg) {
            *pp = pg->next_in_world;
            break;
        }
    pthread_mutex_unlock(&pg->w->mu);
    pthread_mutex_unlock(&pg->w->alert_cb_mu);
    lane_end(pg);
    c10di_backends_close(pg);
    c10di_program_free(pg);
    world_unref(pg->w);
    free(pg->ranks);
    free(pg->join.after);
    free(pg->join.told);
    free(pg);
}

static c10d_pg *pg_new(c10di_world *w, const char *name, const int *ranks, int n, int me)
{
    c10d_pg *pg = calloc(1, sizeof *pg);
    if (!pg || !(pg->ranks = malloc((size_t)n * sizeof *pg->ranks)) ||
        !(pg->join.after = malloc((size_t)n * sizeof *pg->join.after)) ||
        !(pg->join.told = calloc((size_t)n, sizeof *pg->join.told))) {
        if (pg) {
            free(pg->ranks);
            free(pg->join.after);
        }
        free(pg);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        pg->join.after[i] = UINT64_MAX; /* nobody joined */
    pg->join.active_last = n;
    atomic_fetch_add(&w->refs, 1);
    pg->w = w;
    snprintf(pg->name, sizeof pg->name, "%s", name);
    pg->size = n;
    pg->rank = me;
    for (int i = 0; i < n; i++)
        pg->ranks[i] = ranks ? ranks[i] : i;
    pg->timeout_ms = w->timeout_ms;
    pg->backend = w->backend;
    pthread_mutex_lock(&w->mu);
    pg->next_in_world = w->groups;
    w->groups = pg;
    pthread_mutex_unlock(&w->mu);
    if (c10di_lane_start(&pg->lane, c10di_work_run, c10di_work_ended) != C10D_OK) {
        pg_free(pg);
        return NULL;
    }
    return pg;
}

/* Rendezvous of pg's members and data-plane setup. World: learns the
 * generation and starts the liveness watcher. */
static c10d_status rendezvous(c10d_pg *pg, int world)
{
    c10di_world *w = pg->w;
    char ep[1024];
    size_t eplen = 0;
    c10d_status st = c10di_backends_open(pg, !world, ep, sizeof ep, &eplen);
    if (st != C10D_OK)
        return st;
    C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
    m.job = w->job;
    m.name = pg->name;
    m.rank = w->rank;
    m.world_size = w->size;
    if (!world) {
        m.n_members = (size_t)pg->size;
        m.members = pg->ranks;
        m.has_generation = 1;
        m.generation = w->generation;
    }
    m.has_endpoint = 1;
    m.endpoint.data = (uint8_t *)ep;
    m.endpoint.len = eplen;
    m.host = w->host;
    m.has_pid = m.has_timeout_ms = 1;
    m.pid = (int)getpid();
    m.timeout_ms = pg->timeout_ms;
    m.has_peers_on_demand = m.peers_on_demand = 1;
    /* The run's key (c10d-run makes one per launch): the coordinator
     * admits to a run only the ranks that carry the key its first rank
     * brought (docs/operations.md, "Who may do what"). */
    const char *job_key = world ? getenv("C10D_JOB_KEY") : NULL;
    if (job_key && *job_key)
        m.job_key = (char *)job_key;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_GROUP_JOIN;
    req.group_join = &m;
    C10dpb__Reply *rep = NULL;
    if ((st = c10di_call(w->conn, &req, pg->timeout_ms, C10DI_CONTROL_CALL_BUDGET_MS, &rep)) != C10D_OK)
        return st;
    C10dpb__GroupJoinReply *gj =
        rep->result_case == C10DPB__REPLY__RESULT_GROUP_JOIN ? rep->group_join : NULL;
    int sorted = gj && gj->n_endpoints == gj->n_endpoint_ranks;
    for (size_t i = 0; sorted && i < gj->n_endpoint_ranks; i++)
        sorted = gj->endpoint_ranks[i] >= 0 && gj->endpoint_ranks[i] < pg->size &&
                 (i == 0 || gj->endpoint_ranks[i - 1] < gj->endpoint_ranks[i]);
    if (!sorted) {
        c10dpb__reply__free_unpacked(rep, NULL);
        return c10di_error(C10D_EPROTO, "the coordinator answered the rendezvous of group %s "
                           "with something else", pg->name);
    }
    if (world) {
        w->generation = rep->group_join->generation;
        if ((st = c10di_watch_start(w)) != C10D_OK || (st = c10di_verify_start(w)) != C10D_OK) {
            c10dpb__reply__free_unpacked(rep, NULL);
            return st;
        }
    }
    pg->secret = gj->has_secret ? gj->secret : 0;
    c10di_peers peers = {gj->n_endpoints, gj->endpoint_ranks, gj->endpoints};
    st = c10di_backends_connect(pg, &peers);
    c10dpb__reply__free_unpacked(rep, NULL);
    return st;
}

/* name where it is set, else the other launcher's (may be unset too). */
static const char *launcher_var(const char *name, const char *other)
{
    const char *v = getenv(name);
    return v && *v ? name : getenv(other) ? other : name;
}

c10d_status c10d_init(c10d_pg **out, const c10d_init_opts *o)
{
    if (!out)
        return c10di_error(C10D_EINVAL, "c10d_init: out is NULL");
    *out = NULL; /* defined on failure: c10d_destroy(NULL) is safe */
    c10d_init_opts opts = C10D_INIT_OPTS_INIT;
    c10d_status st;
    if (o && (st = c10di_opts_version("c10d_init", "c10d_init_opts", o->version,
                                      C10D_INIT_OPTS_VERSION)) != C10D_OK)
        return st;
    if (o)
        /* A version 1 struct ends before tls_cert: only what it has is read. */
        memcpy(&opts, o, o->version >= 2 ? sizeof opts : offsetof(c10d_init_opts, tls_cert));
    long env_rank = -1, env_size = 0, env_timeout = C10D_COLL_TIMEOUT_DEFAULT_MS, env_device = -1;
    c10d_verify verify;
    /* torchrun's and c10d-run's names, else Open MPI's mpirun's */
    const char *rank_var = launcher_var("RANK", "OMPI_COMM_WORLD_RANK");
    const char *size_var = launcher_var("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
    const char *local_var = launcher_var("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK");
    if ((opts.rank < 0 && (st = c10di_env_int(rank_var, -1, 0, INT_MAX, &env_rank))) ||
        (opts.world_size <= 0 && (st = c10di_env_int(size_var, 0, 1, INT_MAX, &env_size))) ||
        (opts.timeout_ms == C10D_TIMEOUT_DEFAULT &&
         (st = c10di_env_int("C10D_TIMEOUT_MS", C10D_COLL_TIMEOUT_DEFAULT_MS, 1, INT_MAX, &env_timeout))) ||
        (opts.device < 0 && (st = c10di_env_int(local_var, -1, 0, INT_MAX, &env_device))) ||
        (st = c10di_verify_mode(opts.verify, &verify)))
        return c10di_error(st, "c10d_init: %s", c10d_errmsg());
    int rank = opts.rank >= 0 ? opts.rank : (int)env_rank;
    int size = opts.world_size > 0 ? opts.world_size : (int)env_size;
    char env_job[C10D_MAX_JOB_BYTES + 2];
    size_t env_job_len = c10di_default_job(env_job, sizeof env_job);
    const char *job = opts.job ? opts.job : env_job;
    int timeout;
    if ((st = c10di_timeout("c10d_init", "opts.timeout_ms", opts.timeout_ms, (int)env_timeout, 0,
                            &timeout)) != C10D_OK)
        return st;
    int device = opts.device >= 0 ? opts.device : (int)env_device;
    if (size <= 0)
        return c10di_error(C10D_EINVAL, "c10d_init: no world size (set WORLD_SIZE or "
                           "opts.world_size)");
    if (rank < 0 || rank >= size)
        return c10di_error(C10D_EINVAL, "c10d_init: rank %d is out of range for world size %d "
                           "(set RANK or opts.rank)", rank, size);
    size_t job_len = opts.job ? strlen(opts.job) : env_job_len;
    if (job_len > C10D_MAX_JOB_BYTES)
        return c10di_error(C10D_EINVAL, "c10d_init: the job name (%s) is %zu bytes long, more "
                           "than %d (C10D_MAX_JOB_BYTES)", opts.job ? "opts.job" : "from the environment",
                           job_len, C10D_MAX_JOB_BYTES);
    if (opts.backend != C10D_BACKEND_AUTO && opts.backend != C10D_BACKEND_HOST &&
        opts.backend != C10D_BACKEND_NCCL)
        return c10di_error(C10D_EINVAL, "c10d_init: unknown backend %d", (int)opts.backend);
    /* A backend asked for by name: say at once if it cannot be had, before
     * the peers are kept waiting in the rendezvous. */
    if (opts.backend != C10D_BACKEND_AUTO &&
        (st = c10di_backend_available(c10di_backend_home(opts.backend))) != C10D_OK)
        return c10di_error(st, "c10d_init: C10D_BACKEND_%s is unavailable: %s (the host "
                           "backend serves CPU buffers)",
                           opts.backend == C10D_BACKEND_NCCL ? "NCCL" : "HOST", c10d_errmsg());
    c10di_world *w = calloc(1, sizeof *w);
    if (!w || !(w->lost = calloc((size_t)size, sizeof *w->lost)) ||
        !(w->lost_finals = calloc((size_t)size, sizeof *w->lost_finals)) ||
        !(w->lost_order = calloc((size_t)size, sizeof *w->lost_order))) {
        if (w) {
            free(w->lost);
            free(w->lost_finals);
        }
        free(w);
        return c10di_error(C10D_ENOMEM, "out of memory");
    }
    atomic_init(&w->refs, 1);
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->flush_mu, NULL);
    pthread_mutex_init(&w->alert_cb_mu, NULL);
    pthread_cond_init(&w->progress_cv, NULL);
    /* its length was checked above: the precision only tells the compiler */
    snprintf(w->job, sizeof w->job, "%.*s", C10D_MAX_JOB_BYTES, job && *job ? job : "default");
    /* C10D_HOST_NAME: the host this rank says it is on; ranks on one host
     * use shared memory (containers with their own host names but one
     * /dev/shm, or tests that play several hosts). */
    const char *host_env = getenv("C10D_HOST_NAME");
    if (host_env && *host_env)
        snprintf(w->host, sizeof w->host, "%s", host_env);
    else if (gethostname(w->host, sizeof w->host) != 0)
        snprintf(w->host, sizeof w->host, "localhost");
    w->host[sizeof w->host - 1] = '\0';
    w->rank = rank;
    w->size = size;
    w->timeout_ms = timeout;
    w->backend = opts.backend;
    w->device = device;
    c10di_activity(w, "c10d_init", NULL, NULL, NULL);
    w->verify = verify;
    pthread_spin_init(&w->rmu, PTHREAD_PROCESS_PRIVATE);
    const char *token = getenv("C10D_TOKEN");
    c10di_tls_files tls = {opts.tls_ca, opts.tls_cert, opts.tls_key};
    if ((st = c10di_conn_open(&w->conn, opts.coord_url, token, &tls, w->timeout_ms,
                              c10di_timeout_from(opts.timeout_ms))) != C10D_OK) {
        free(w->lost);
        free(w->lost_finals);
        free(w->lost_order);
        pthread_mutex_destroy(&w->mu);
        pthread_mutex_destroy(&w->flush_mu);
        pthread_mutex_destroy(&w->alert_cb_mu);
        pthread_spin_destroy(&w->rmu);
        free(w);
        return st;
    }
    c10d_pg *pg = pg_new(w, "world", NULL, size, rank);
    world_unref(w); /* pg holds it now */
    if (!pg)
        return c10di_error(C10D_ENOMEM, "out of memory");
    if ((st = rendezvous(pg, 1)) != C10D_OK) {
        pg_free(pg);
        return st;
    }
    c10di_activity_done(w);
    *out = pg;
    return C10D_OK;
}

c10d_status c10d_new_group(c10d_pg **out, c10d_pg *parent, const int *ranks, int n)
{
    if (out)
        *out = NULL;
    if (!out || !parent || !ranks || n <= 0)
        return c10di_error(C10D_EINVAL, "c10d_new_group: %s",
                           !out ? "out is NULL" : !parent ? "parent is NULL"
                                                          : "needs a non-empty list of ranks");
    *out = NULL;
    /* Every rank of the parent calls this in the same order, so the count
     * names the group identically everywhere. */
    char name[sizeof parent->name + 12];
    snprintf(name, sizeof name, "%s.%d", parent->name, ++parent->groups_made);
    if (strlen(name) >= sizeof parent->name)
        return c10di_error(C10D_EINVAL, "c10d_new_group: groups nested too deep (%s)", name);
    int *global = malloc((size_t)n * sizeof *global), me = -1;
    if (!global)
        return c10di_error(C10D_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= parent->size) {
            free(global);
            return c10di_error(C10D_EINVAL, "c10d_new_group: rank %d is out of range for group "
                               "%s of size %d", ranks[i], parent->name, parent->size);
        }
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i]) {
                free(global);
                return c10di_error(C10D_EINVAL, "c10d_new_group: rank %d is listed twice",
                                   ranks[i]);
            }
        global[i] = parent->ranks[ranks[i]];
        if (ranks[i] == parent->rank)
            me = i;
    }
    /* A parent's backend that splits (NCCL's communicator) does so with
     * every member of the parent, those outside the new group too. */
    if (me < 0) {
        free(global);
        return c10di_backends_split(parent, NULL);
    }
    c10d_pg *pg = pg_new(parent->w, name, global, n, me);
    free(global);
    if (!pg)
        return c10di_error(C10D_ENOMEM, "out of memory");
    c10d_status st = rendezvous(pg, 0);
    if (st == C10D_OK)
        st = c10di_backends_split(parent, pg);
    if (st == C10D_OK)
        st = c10di_program_inherit(parent, pg);
    if (st != C10D_OK) {
        pg_free(pg);
        return st;
    }
    *out = pg;
    return C10D_OK;
}

int c10d_rank(const c10d_pg *pg)
{
    return pg ? pg->rank : -1;
}

int c10d_size(const c10d_pg *pg)
{
    return pg ? pg->size : -1;
}

int c10d_global_rank(const c10d_pg *pg, int group_rank)
{
    return pg && group_rank >= 0 && group_rank < pg->size ? pg->ranks[group_rank] : -1;
}

c10d_status c10d_default_job(char *out, size_t len)
{
    if (!out || !len)
        return c10di_error(C10D_EINVAL, "c10d_default_job: %s", !out ? "out is NULL" : "len is 0");
    size_t n = c10di_default_job(out, len);
    if (n >= len)
        return c10di_error(C10D_ETOOBIG, "c10d_default_job: the name is %zu bytes long, more "
                           "than the %zu given", n, len - 1);
    return C10D_OK;
}

const char *c10d_pg_job(const c10d_pg *pg)
{
    return pg ? pg->w->job : NULL;
}

uint64_t c10d_pg_generation(const c10d_pg *pg)
{
    return pg ? pg->w->generation : 0;
}

c10d_status c10d_run_store(c10d_store **out, const c10d_pg *pg)
{
    if (out)
        *out = NULL;
    if (!out || !pg)
        return c10di_error(C10D_EINVAL, "c10d_run_store: %s", !out ? "out is NULL" : "pg is NULL");
    return c10di_run_store_over(out, pg->w->conn, pg->w->job, pg->w->generation,
                                pg->w->timeout_ms, "%s", "");
}

c10d_status c10d_run_prefix(char *buf, size_t len, const char *job, uint64_t generation)
{
    if (!buf || !job)
        return c10di_error(C10D_EINVAL, "c10d_run_prefix: %s is NULL", !buf ? "buf" : "job");
    if (c10d_run_scope(buf, len, job, generation))
        return C10D_OK;
    if (len)
        buf[0] = '\0';
    return c10di_error(C10D_ETOOBIG, "c10d_run_prefix: the prefix of job %.64s%s does not fit "
                       "in %zu bytes", job, strlen(job) > 64 ? "..." : "", len);
}

void c10d_destroy(c10d_pg *pg)
{
    if (!pg)
        return;
    lane_end(pg); /* finishes what was queued */
    c10di_world *w = pg->w;
    /* Every destroyed group is named, however many: a list cut short
     * made peers of the groups left out fail with a false EPEERLOST. */
    pthread_mutex_lock(&w->mu);
    (void)c10di_seqs_put(&w->finals, pg->name, pg->seq);
    (void)c10di_seqs_put(&w->final_completed, pg->name, atomic_load(&pg->completed));
    pthread_mutex_unlock(&w->mu);
    if (strcmp(pg->name, "world") == 0) {
        c10di_verify_stop(w); /* flushes queued reports before we leave */
        atomic_store(&w->stopping, 1);
        char activity[sizeof w->act_text + 16];
        c10di_activity_read(w, activity, sizeof activity);
        C10dpb__GroupLeave m = C10DPB__GROUP_LEAVE__INIT;
        m.job = w->job;
        m.generation = w->generation;
        m.rank = w->rank;
        m.activity = activity;
        c10di_seqs_pb_mem mem, cmem;
        m.finals = c10di_seqs_pb(&w->finals, &mem);
        m.n_finals = m.finals ? w->finals.n : 0;
        /* what completed since the last heartbeat: a run that ended
         * cleanly reads so (c10d-ctl desync), not as stopped one short */
        pthread_mutex_lock(&w->mu);
        for (c10d_pg *g = w->groups; g; g = g->next_in_world)
            if (!c10di_seqs_get(&w->final_completed, g->name, &(uint64_t){0}))
                (void)c10di_seqs_put(&w->final_completed, g->name, atomic_load(&g->completed));
        pthread_mutex_unlock(&w->mu);
        m.completed = c10di_seqs_pb(&w->final_completed, &cmem);
        m.n_completed = m.completed ? w->final_completed.n : 0;
        C10dpb__Request req = C10DPB__REQUEST__INIT;
        req.op_case = C10DPB__REQUEST__OP_GROUP_LEAVE;
        req.group_leave = &m;
        /* Leaving also answers this rank's parked watch, so the watcher
         * stops at once. A coordinator that is gone is not waited for. */
        (void)c10di_call_drop(w->conn, &req, 0, C10DI_FAREWELL_BUDGET_MS);
        c10di_seqs_pb_free(&mem);
        c10di_seqs_pb_free(&cmem);
        c10di_watch_stop(w);
    }
    pg_free(pg);
}
