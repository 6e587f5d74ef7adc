/* An MPI program whose every collective is checked by c10d-coord: MPI moves
 * the bytes, the coordinator numbers and verifies each call and says when
 * one can never complete (the ranks called different collectives, a rank
 * died inside one), so that the job aborts with the reason instead of
 * hanging in MPI. docs/checked.md explains it.
 *
 *   c10d-coord --listen tcp://127.0.0.1:29700 --db /tmp/coord.db &
 *   mpirun -np 2 -x C10D_COORD=tcp://127.0.0.1:29700 -x C10D_JOB=demo \
 *       ./checked_mpi ok [steps]
 *
 * The mode makes it misbehave, to see what is reported:
 *   ok      `steps` all_reduces (default 20), each checked; every rank
 *           checks that MPI's sums are right
 *   desync  at step 4 rank 0 calls MPI_Barrier where the others call
 *           MPI_Allreduce; every rank says what it was told and how long
 *           after entering the call, and exits 0
 *   killed  at step 4 rank 1 dies (SIGKILL) inside its MPI_Allreduce; the
 *           others are told it died and abort the job
 * C10D_VERIFY=sync (the default) checks each call before MPI is entered;
 * C10D_VERIFY=async alongside, telling the program through on_alert.
 * Open MPI ends the survivors of a death itself, soon: give them time to
 * be told (4.1: mpirun --mca odls_base_sigkill_timeout 3; 5.0: mpirun
 * --with-ft ulfm, or each rank aborts as its TCP peer disconnects). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include <c10d/c10d.h>

#include <mpi.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 4 /* doubles per all_reduce */

static int rank, can_abort;
static const char *mode = "ok";
static _Atomic long long entered_ms; /* when this rank entered its latest call */

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* This rank learnt that the call it is in, or was about to enter, can
 * never complete. */
static void say(c10d_status st, const char *report)
{
    static atomic_flag said = ATOMIC_FLAG_INIT; /* on_alert and the main thread may both learn it */
    if (atomic_flag_test_and_set(&said))
        return;
    fprintf(stderr, "rank %d: named: %s after %lld ms: %s\n", rank, c10d_status_name(st),
            now_ms() - atomic_load(&entered_ms), report);
}

/* MPI would wait for good: end the job. */
static void abort_job(void)
{
    if (strcmp(mode, "desync") == 0)
        _exit(0); /* the demonstration ends here */
    if (can_abort)
        MPI_Abort(MPI_COMM_WORLD, 3); /* mpirun ends the other ranks */
    _exit(3); /* without MPI_THREAD_MULTIPLE: mpirun ends the job when a rank exits */
}

/* From a thread of the library's, while the main thread waits inside MPI
 * (ASYNC, a dead peer, a stall): MPI cannot be interrupted, so abort. It
 * must not destroy the group or wait for MPI. */
static void on_alert(void *arg, c10d_pg *pg, c10d_status st, const char *report)
{
    (void)arg, (void)pg;
    say(st, report);
    abort_job();
}

/* One collective on MPI_COMM_WORLD, checked: an MPI_Allreduce (SUM of N
 * doubles, in place) or an MPI_Barrier. -1 when the coordinator refused
 * it, and MPI was not entered. */
static int checked_call(c10d_pg *pg, c10d_coll_kind kind, double *buf, int step)
{
    c10d_check_opts co = C10D_CHECK_OPTS_INIT;
    co.kind = kind;
    co.dtype = C10D_FLOAT64;
    co.count = N;
    co.op = C10D_SUM;
    atomic_store(&entered_ms, now_ms());
    c10d_checked *h;
    c10d_status st = c10d_check_begin(pg, &co, &h);
    if (st != C10D_OK) {
        say(st, c10d_errmsg());
        return -1;
    }
    if (strcmp(mode, "killed") == 0 && step == 4 && rank == 1)
        raise(SIGKILL); /* dies inside the call, as far as the others know */
    int rc = kind == C10D_COLL_BARRIER
                 ? MPI_Barrier(MPI_COMM_WORLD)
                 : MPI_Allreduce(MPI_IN_PLACE, buf, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) { /* MPI saw a failure first: give the coordinator a second to say why */
        struct timespec tick = {0, 10000000};
        for (int i = 0; i < 100 && c10d_check_state(h) == C10D_OK; i++)
            nanosleep(&tick, NULL);
    }
    /* MPI's outcome; the coordinator's finding against the call, if any, wins */
    st = c10d_check_end(h, rc == MPI_SUCCESS ? C10D_OK : C10D_EBACKEND, "MPI failed");
    if (st != C10D_OK) {
        say(st, c10d_errmsg());
        abort_job();
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        mode = argv[1];
    int steps = argc > 2 ? atoi(argv[2]) : 20;
    if (strcmp(mode, "ok") && strcmp(mode, "desync") && strcmp(mode, "killed")) {
        fprintf(stderr, "usage: checked_mpi [ok|desync|killed] [steps]\n");
        return 2;
    }
    if (steps < 4)
        steps = 4;
    int provided, world;
    /* MPI_THREAD_MULTIPLE: on_alert may call MPI_Abort from its own thread */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    can_abort = provided == MPI_THREAD_MULTIPLE;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    /* A failed call returns to the program (to c10d_check_end) instead of aborting it */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* The coordinator's world is MPI's: the same ranks (C10D_COORD names
     * the coordinator, C10D_JOB the job, C10D_VERIFY the mode). Under
     * Open MPI's mpirun c10d_init reads them from the environment
     * (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK); any other MPI says them. */
    c10d_init_opts io = C10D_INIT_OPTS_INIT;
    if (!getenv("OMPI_COMM_WORLD_RANK")) {
        io.rank = rank;
        io.world_size = world;
    }
    c10d_pg *pg;
    c10d_status st = c10d_init(&pg, &io);
    if (st != C10D_OK) {
        fprintf(stderr, "rank %d: c10d_init: %s\n", rank, c10d_errmsg());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (c10d_rank(pg) != rank || c10d_size(pg) != world) {
        fprintf(stderr, "rank %d: the coordinator's world has me as rank %d of %d\n", rank,
                c10d_rank(pg), c10d_size(pg));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    c10d_data_plane dp = C10D_DATA_PLANE_INIT; /* CPU buffers, moved by MPI */
    dp.on_alert = on_alert;
    if ((st = c10d_data_plane_set(pg, &dp)) != C10D_OK) {
        fprintf(stderr, "rank %d: c10d_data_plane_set: %s\n", rank, c10d_errmsg());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    int bad = 0;
    double buf[N];
    for (int step = 1; step <= steps; step++) {
        for (int i = 0; i < N; i++)
            buf[i] = (rank + 1) * (double)(step + i);
        int barrier = strcmp(mode, "desync") == 0 && step == 4 && rank == 0;
        if (checked_call(pg, barrier ? C10D_COLL_BARRIER : C10D_COLL_ALL_REDUCE, buf, step)) {
            /* SYNC: refused on every rank before MPI was entered, so MPI
             * can still finish cleanly; otherwise a rank may be inside */
            if (strcmp(mode, "desync") != 0)
                abort_job();
            c10d_destroy(pg);
            MPI_Finalize();
            return 0;
        }
        /* MPI's own sums, untouched: (step + i) x (1 + 2 + ... + world) */
        for (int i = 0; i < N; i++)
            bad += buf[i] != (step + i) * (world * (world + 1) / 2.0);
    }
    if (rank == 0)
        printf("%d all_reduces on %d ranks, each checked; the last gave %g %g %g %g%s\n", steps,
               world, buf[0], buf[1], buf[2], buf[3], bad ? ": WRONG" : "");
    if (bad)
        fprintf(stderr, "rank %d: %d wrong sums\n", rank, bad);
    c10d_destroy(pg);
    MPI_Finalize();
    return bad ? 1 : 0;
}
