/* What the checked-call suites share (integration/test_checked_calls.c,
 * integration/test_checked_failures.c): the program's data plane, two
 * ranks meeting in shared memory that hang, as MPI or NCCL would, when
 * they disagree; what the library tells a rank through on_alert; and a
 * world of two ranks on that data plane (c10d/checked.h). */
#ifndef C10D_TEST_CHECKED_PLANE_H
#define C10D_TEST_CHECKED_PLANE_H

#include <c10d/c10d.h>
#include <stdatomic.h>

#define SLOTS 64
typedef struct {
    _Atomic long step[2];  /* the last call each rank entered (1-based) */
    _Atomic int kind[2];   /* what it called there */
    float val[SLOTS][2][4];
    _Atomic int shadows;   /* calls the joined rank's shadow callback took part in */
    _Atomic int rank0_rc;  /* a case where rank 1 dies: how rank 0 ended */
} shm_plane;

/* in shared memory, seen by every rank a case forks (plane_new maps it) */
extern shm_plane *plane;
/* A new plane, zeroed, before a case forks its ranks. */
void plane_new(void);

/* written by on_alert (a library thread) before alerted is set */
extern _Atomic int alerted;
extern char alert_report[1024];
extern c10d_status alert_st;

/* This rank's call number `step` of kind (a C10D_COLL_*): an all_reduce
 * (SUM of 4 floats) or a barrier; hangs until the peer enters the same
 * step with the same kind, or until the coordinator says it never will
 * (on_alert, or c10d_check_state when h is given). 0 when it completed. */
int plane_call(int rank, long step, int kind, float *v, c10d_checked *h);
/* Rank `rank` of a world of 2 in job, verified in mode, on this data
 * plane (its alerts to on_alert, a joined rank's part to shadow, which may
 * be NULL); NULL, having said why, if either failed. */
c10d_pg *init_plane(const char *job, int rank, c10d_verify mode, c10d_shadow_fn shadow);
/* An all_reduce of 4 float32 elements, SUM. */
c10d_check_opts all_reduce_opts(void);
/* 1 if msg holds want; else 0, having said so on stderr (naming rank). */
int contains(const char *msg, const char *want, int rank);

/* what a case hands its ranks: the job, and how it is verified */
typedef struct {
    const char *job;
    c10d_verify mode;
} scenario;

#endif
