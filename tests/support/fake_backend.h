/* A data plane played in process: fake_backend.c defines the library's
 * CPU backend (c10di_host_backend, client/src/backend/backend.h) for
 * c10dclient_frontend, the front end linked without its host backend and
 * its connection (the link seam, client/CMakeLists.txt). It moves no
 * bytes: it records every call it is given, and completes it at once or,
 * while held, when the test releases it (waiting as a real backend waits
 * for its peers: asking the front end's check hook, so that a lost member
 * or the call's deadline ends it). */
#ifndef C10D_TEST_FAKE_BACKEND_H
#define C10D_TEST_FAKE_BACKEND_H

#include "backend/backend.h"

/* One call, as the backend was given it. */
typedef struct fake_call {
    uint64_t tick; /* fake_tick() when it began to run */
    int rank;      /* the group rank it ran on (its context's) */
    char group[32];
    c10dc_kind kind;
    c10d_dtype dtype;
    c10d_reduce_op op;
    size_t count;
    int root, tag;
    uint64_t seq;
    int divisor; /* AVG: what it divides by (0: the group's size) */
    int async;
    char what[160];
    c10d_status st; /* how it ended (while running: C10D_OK) */
} fake_call;

/* 1: calls wait in run until fake_backend_release (or the check hook
 * fails them); 0 (the default): they complete at once. */
void fake_backend_hold(int on);
/* Lets the held calls complete, those running now and later ones. */
void fake_backend_release(void);
/* A receive from any member (c10d_recv_any) is met by group rank `from`
 * (-1, the default: it stays from any member, as nobody sent it). */
void fake_backend_any_source_from(int from);
/* Calls begun (held ones included), and the i-th; 0 past the end. */
int fake_backend_count(void);
int fake_backend_call(int i, fake_call *out);
/* Waits until n calls have begun: 1, or 0 after timeout_ms. */
int fake_backend_wait_count(int n, int timeout_ms);
/* The front end's failure hook for collective seq, as a backend asks it
 * (the last group rank `rank` opened): what is recorded against it. */
c10d_status fake_backend_failure(int rank, uint64_t seq, char *msg, size_t cap);

#endif
