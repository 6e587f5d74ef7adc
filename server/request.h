/* One request as it travels through the coordinator: received by the
 * listener, run by the engine (perhaps parked, perhaps run again when a key
 * it waits for is written), answered once. */
#ifndef C10DS_REQUEST_H
#define C10DS_REQUEST_H

#include "c10d.pb-c.h"

#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_request c10ds_request;

struct c10ds_request {
    C10dpb__Request *pb;  /* the decoded request (owned) */
    void *slot;           /* the listener's handle to reply through */
    void (*release)(void *slot); /* called when the request is freed */
    void *reply;          /* the packed reply, once answered (malloc'd) */
    size_t reply_len;
    int64_t received_ms;  /* monotonic */
    int64_t deadline_ms;  /* monotonic; parked requests time out then */
    c10ds_request *next;  /* engine queue / ready list / outbox */
    uint32_t pipe;        /* the NNG connection it came on (liveness) */
    uint64_t generation;  /* group_join: the generation it joins, once known */
    uint64_t txn;         /* the engine's transaction it last parked in (engine.c) */
    int txn_free;         /* its reply does not depend on the transaction (a replay, a refusal) */
    /* pb == NULL: an event from the listener, not a request. */
    enum { C10DS_EV_NONE, C10DS_EV_PIPE_CLOSED } event;

    /* While parked (waiters.c): the key it waits for, its place in that
     * key's list and in the deadline heap. */
    char *wait_key;
    c10ds_request *wprev, *wnext;
    size_t heap_idx;
};

#endif
