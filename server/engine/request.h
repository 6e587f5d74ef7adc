/* One request as it travels through the coordinator: received by the
 * listener, run by the engine (perhaps parked, perhaps run again when a key
 * it waits for is written), answered once; and what a handler answers it
 * with (request.c). */
#ifndef C10DS_REQUEST_H
#define C10DS_REQUEST_H

#include "c10d.pb-c.h"
#include "c10d_time.h"

#include <c10d/errors.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_engine c10ds_engine;
typedef struct c10ds_request c10ds_request;

/* How a request's answer becomes bytes: the reply sink of the dialect it
 * came in (net/). A request without one is answered in our own protocol,
 * a packed Reply; TCPStore's requests are answered in TCPStore's bytes,
 * written straight from the Reply a handler made (no pack and unpack in
 * between). The engine stores and sends those bytes as they are; the
 * request log keeps only our own protocol's (TCPStore's requests name no
 * client, so none is deduplicated). */
typedef struct c10ds_reply_sink {
    /* rep in the dialect's bytes, malloc'd into *out; -1: out of memory */
    int (*encode)(void *arg, const C10dpb__Reply *rep, void **out, size_t *len);
    /* frees arg with the request (NULL: nothing to free) */
    void (*free)(void *arg);
} c10ds_reply_sink;

/* Bytes of parked requests held against one limit: the coordinator's
 * (--max-parked-bytes, the engine's), a connection's, a port's (the
 * listener's). Counting requests (--max-parked) says nothing of their
 * size: a wait names up to --max-multi-keys keys of --max-key-bytes. */
typedef struct c10ds_budget {
    atomic_size_t bytes;  /* held now */
    atomic_size_t freed;  /* let go since the engine last gave memory back (engine.c) */
    uint64_t limit;
    const char *what;     /* "the coordinator", "this connection", ... */
    const char *option;   /* the option that sets limit */
} c10ds_budget;

/* Bytes a port's clients hold in the store (--tcpstore-quota-bytes):
 * counted up by every write's key and value (an overwrite too), and
 * counted exactly (the store's range under prefix) when that would pass
 * the limit, so a write is refused only on the store's own count. Not
 * more often than once a second or a quarter of the limit written: a
 * count reads the whole range's index. */
typedef struct c10ds_quota {
    c10ds_budget b;
    const char *prefix;
    int64_t counted_ms; /* monotonic, of the last count; the engine's thread only */
    size_t counted;     /* b.bytes then */
} c10ds_quota;

/* The budgets a request's parking counts against: the engine's, its
 * connection's, its port's (NULL: none). */
#define C10DS_PARK_BUDGETS 3

struct c10ds_request {
    C10dpb__Request *pb;  /* the decoded request (owned) */
    void *slot;           /* the listener's handle to reply through */
    void (*release)(void *slot); /* called when the request is freed */
    const c10ds_reply_sink *sink; /* NULL: our own protocol */
    void *sink_arg;               /* what sink->encode is given (owned) */
    /* The listener vouches for it: no token is asked (TCPStore's port,
     * which has none, is open by choice: docs/tcpstore.md). */
    int vouched;
    void *reply;          /* the answer as the client's dialect says it (malloc'd) */
    size_t reply_len;
    int64_t received_ms;  /* monotonic */
    int64_t received_us;  /* the same, finer: the latency histogram's (metrics/counters.h) */
    int64_t deadline_ms;  /* monotonic; parked requests time out then */
    c10ds_request *next;  /* engine queue / ready list / outbox */
    uint32_t pipe;        /* the NNG connection it came on (liveness) */
    uint64_t generation;  /* group_join: the generation it joins, once known */
    uint64_t txn;         /* the engine's transaction it last parked in (engine.c) */
    int txn_free;         /* its reply does not depend on the transaction (a replay, a refusal) */
    /* pb == NULL: an event from the listener, not a request: connection
     * pipe closed, or (TCPStore's CANCEL_WAIT) its parked request
     * cancel_id is to be dropped unanswered, or (TCPStore's port) a run
     * of its clients is over and the keys under drop_prefix go. */
    enum { C10DS_EV_NONE, C10DS_EV_PIPE_CLOSED, C10DS_EV_CANCEL, C10DS_EV_DROP_KEYS } event;
    uint64_t cancel_id;
    char *drop_prefix; /* malloc'd */

    /* Bytes it holds of each budget since it first parked (c10ds_park),
     * given back when it is freed; [0] is the engine's, set there, the
     * others the listener's (net/). */
    size_t parked_bytes;
    c10ds_budget *budgets[C10DS_PARK_BUDGETS];
    /* Whether its connection is gone (NULL: never asked): a request that
     * only reads is then dropped unrun, since its reply can never be
     * sent (engine.c; the listener's). */
    int (*gone)(void *slot);
    /* The store quota its writes count against (NULL: none; the
     * listener's). */
    c10ds_quota *quota;

    /* While parked (waiters.c): the key it waits for, its place in that
     * key's list and in the deadline heap. */
    char *wait_key;
    c10ds_request *wprev, *wnext;
    size_t heap_idx;
};

/* Why a handler runs r (c10ds_op_fn, ops.h). */
typedef enum {
    C10DS_FIRST,   /* as received */
    C10DS_RETRY,   /* parked, and a key it waited for was written */
    C10DS_EXPIRED, /* parked, and its deadline passed */
} c10ds_phase;

/* What a handler did with r: answered it, or parked it. */
typedef enum { C10DS_DONE, C10DS_PARKED } c10ds_outcome;

c10ds_request *c10ds_request_new(C10dpb__Request *pb, void *slot);
void c10ds_request_free(c10ds_request *r);
/* Answers r with rep (request_id is filled in; status is rep->status), in
 * r's dialect (r->sink). */
c10ds_outcome c10ds_reply(c10ds_request *r, C10dpb__Reply *rep);
c10ds_outcome c10ds_fail(c10ds_request *r, c10d_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Parks r on key: on FIRST its deadline becomes timeout_ms after it was
 * received, plus any stall of the engine's since (it waited in the queue
 * through it); the engine moves it on by the stalls that follow, unless
 * r's op is a C10DS_OP_PERIOD. */
c10ds_outcome c10ds_park(c10ds_engine *e, c10ds_request *r, c10ds_phase ph, const char *key,
                         c10d_ms timeout_ms);
/* A duration a request carries (proto/c10d.proto, "Durations") in the
 * coordinator's convention (common/c10d_time.h): the field left out, 0 or
 * negative is the field's default, def (C10D_MS_NO_WAIT where that is
 * "answer now"). The one place a handler reads a timeout off the wire,
 * so none of them interprets 0 or a negative value itself. */
static inline c10d_ms c10ds_wire_ms(protobuf_c_boolean has, int32_t value, c10d_ms def)
{
    return has && value > 0 ? (c10d_ms)value : def;
}
/* Checks a key against the limits; fails r and returns -1 if it is bad. */
int c10ds_check_key(c10ds_engine *e, c10ds_request *r, const char *key);
/* Checks that r's client may write key (the engine's write_guard: a
 * run's store is written by its ranks only); fails r and returns -1 if
 * not. */
int c10ds_check_write(c10ds_engine *e, c10ds_request *r, const char *key);
int c10ds_check_value(c10ds_engine *e, c10ds_request *r, const char *key, size_t len);

#endif
