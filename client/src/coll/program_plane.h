/* A group whose bytes the program moves itself (c10d_data_plane_set,
 * c10d/checked.h): which kinds of device it serves, its checked calls in
 * flight, and what the watcher tells it (program_plane.c); the handles
 * themselves are checked.c's. */
#ifndef C10DI_PROGRAM_PLANE_H
#define C10DI_PROGRAM_PLANE_H

#include "external/external.h"
#include "group/group.h"

typedef struct c10di_program {
    unsigned kinds;     /* bits of c10di_dev_kind */
    c10di_external ext; /* the backend's state (external/external.c) */
    /* The calls begun and not ended, oldest first: the watcher looks at
     * the oldest, the one the data plane is blocked in. */
    pthread_mutex_t mu;
    struct c10d_checked *open, *open_tail;
    atomic_int alerted; /* on_alert was called: once per group */
    atomic_uint_least64_t last_begun; /* the latest begun: its end ends the heartbeat's activity */
} c10di_program;

/* Whether pg's buffers of kind k are the program's to move. */
static inline int c10di_program_serves(const c10d_pg *pg, c10di_dev_kind k)
{
    return pg->program && pg->program->kinds & 1u << k;
}

/* child, made from parent, gets parent's data plane (if it has one). */
c10d_status c10di_program_inherit(c10d_pg *parent, c10d_pg *child);
void c10di_program_free(c10d_pg *pg);
/* The watcher, after each answer: for every group whose program asked to
 * be told (on_alert) and whose data plane is inside a checked call, tells
 * it once what makes that call impossible (a finding, a member lost, its
 * timeout passed). */
void c10di_program_scan(c10di_world *w);

/* checked.c: why the call h can never complete (C10D_OK: nothing known),
 * its report in msg. */
c10d_status c10di_checked_failure(const struct c10d_checked *h, char *msg, size_t cap);

#endif
