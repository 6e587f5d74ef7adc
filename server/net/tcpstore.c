/* PyTorch TCPStore's protocol on --tcpstore-listen, for one connection:
 * each query (read by tcpstore_wire.c) becomes the request our own
 * clients send for it, run by the same engine, durable like every other
 * write, and answered in TCPStore's bytes by its reply sink; the answers
 * go in the order the queries came, except that a parked WAIT holds
 * nothing up (flush_locked). docs/tcpstore.md has the protocol.
 *
 * A query the coordinator refuses (a key over --max-key-bytes, an ADD on
 * text that is no number, a GET of a missing key) cannot be answered with
 * a reason in TCPStore's protocol: the connection is closed and the
 * reason logged, as TCPStore's own server closes it. */
#include "net/listener_internal.h"

#include "config.h"
#include "engine/engine.h"
#include "engine/request.h"
#include "failure.h"
#include "net/tcpstore_runs.h"
#include "net/tcpstore_wire.h"
#include "groups/runs_tcpstore.h"

#include "c10d.pb-c.h"

#include <c10d/errors.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Most WAITs one connection may have parked. torch 1.13's client gives up
 * on a wait without telling the server, and its WAIT stays parked (as on
 * TCPStore); a client that waits with a timeout in a loop would otherwise
 * fill --max-parked. Past this many the oldest is dropped. */
#define TS_WAITS_MAX 16
/* Most runs one connection's keys may belong to (tcpstore_runs.h): a
 * torchrun agent's are one rendezvous id's and perhaps the plain run's;
 * a client naming thousands of rendezvous ids would make a run each. */
#define TS_RUNS_MAX 64

/* A run a connection takes part in, and where its keys go. */
typedef struct ts_in {
    uint64_t number;
    char prefix[C10DS_TS_RUN_PREFIX_BYTES + 1];
    size_t len;
    char *scope;
} ts_in;

/* A query on its way: with the engine, or answered and waiting for the
 * queries before it. */
typedef struct ts_query {
    struct ts_query *next;
    uint64_t id;
    c10ds_ts_op op;
    int answered; /* out holds its reply (maybe none) */
    int oom;      /* out could not hold the whole reply */
    uint8_t *out;
    size_t out_len;
} ts_query;

typedef struct c10ds_ts {
    pthread_mutex_t mu; /* the list: the read loop adds, the engine answers */
    int dialect;        /* 0 until the first query; 1 or 2 (tcpstore_wire.h) */
    uint64_t next_id;
    ts_query *head, *tail; /* in the order they came */
    /* The runs its keys belong to, entered at its first query on each,
     * left when it closes; from its listener at the first query. Only
     * its read loop and its close touch them, never at once. */
    c10ds_ts_runs *runs;
    c10ds_engine *engine;
    ts_in *in;
    size_t n_in;
} c10ds_ts;

static void *ts_open(void)
{
    c10ds_ts *ts = calloc(1, sizeof *ts);
    if (ts)
        pthread_mutex_init(&ts->mu, NULL);
    return ts;
}

/* Leaves the runs ts took part in; the engine deletes the keys of those
 * it was the last connection of. */
static void leave_runs(c10ds_ts *ts)
{
    for (size_t i = 0; i < ts->n_in; i++) {
        if (c10ds_ts_runs_leave(ts->runs, ts->in[i].number)) {
            c10ds_request *r = c10ds_request_new(NULL, NULL);
            if (r && (r->drop_prefix = strdup(ts->in[i].prefix))) {
                r->event = C10DS_EV_DROP_KEYS;
                if (c10ds_engine_submit(ts->engine, r) == 0)
                    r = NULL;
            }
            c10ds_request_free(r); /* not submitted: the restart's sweep deletes them */
        }
        free(ts->in[i].scope);
    }
    free(ts->in);
    ts->in = NULL, ts->n_in = 0;
}

static void ts_close(void *state)
{
    c10ds_ts *ts = state;
    if (!ts)
        return;
    leave_runs(ts);
    for (ts_query *q = ts->head, *n; q; q = n) {
        n = q->next;
        free(q->out);
        free(q);
    }
    pthread_mutex_destroy(&ts->mu);
    free(ts);
}

/* Closes c saying why, TCPStore's way of refusing. */
static void refuse(c10ds_conn *c, const char *why)
{
    char line[sizeof c->peer + C10DS_FAILURE_MAX + 32];
    snprintf(line, sizeof line, "TCPStore client %s: %s", c->peer, why);
    c10ds_conn_close(c, line);
}

/* --- the reply sink: what the engine answers, in TCPStore's bytes --- */

/* What a query's answer needs beyond the engine's reply: its op, and a
 * COMPARE_SET's expected value (tcpstore_wire.h, c10ds_ts_encode). */
typedef struct ts_ask {
    c10ds_ts_op op;
    uint8_t *expected;
    size_t expected_len;
} ts_ask;

static int ask_encode(void *arg, const C10dpb__Reply *rep, void **out, size_t *len)
{
    const ts_ask *a = arg;
    return c10ds_ts_encode(a->op, a->expected, a->expected_len, rep, out, len);
}

static void ask_free(void *arg)
{
    ts_ask *a = arg;
    free(a->expected);
    free(a);
}

static const c10ds_reply_sink ts_sink = {.encode = ask_encode, .free = ask_free};

/* --- the queries with the engine, and their replies --- */

/* Appends n bytes to q's answer; -1 (and q->oom) when out of memory. */
static int append_out(ts_query *q, const void *b, size_t n)
{
    if (n == 0) /* an empty answer (b may be NULL) */
        return 0;
    uint8_t *nb = q->oom ? NULL : realloc(q->out, q->out_len + n);
    if (!nb) {
        q->oom = 1;
        return -1;
    }
    memcpy(nb + q->out_len, b, n);
    q->out = nb;
    q->out_len += n;
    return 0;
}

/* Takes q out of the list (ts->mu held) and frees it. */
static void unlink_locked(c10ds_ts *ts, ts_query *q)
{
    ts_query **pp = &ts->head, *prev = NULL;
    while (*pp && *pp != q)
        prev = *pp, pp = &(*pp)->next;
    if (!*pp)
        return;
    *pp = q->next;
    if (ts->tail == q)
        ts->tail = prev;
    free(q->out);
    free(q);
}

static ts_query *enqueue_locked(c10ds_ts *ts, c10ds_ts_op op)
{
    ts_query *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->id = ++ts->next_id;
    q->op = op;
    if (ts->tail)
        ts->tail->next = q;
    else
        ts->head = q;
    ts->tail = q;
    return q;
}

/* Sends the replies that are due (ts->mu held): in the order the queries
 * came, as TCPStore's server answers a client that sends several at once;
 * but a parked WAIT holds nothing up, as there: torch 1.13's client gives
 * up on a wait without a word and goes on with its next query. */
static void flush_locked(c10ds_conn *c, c10ds_ts *ts)
{
    for (ts_query *q = ts->head, *n; q; q = n) {
        n = q->next;
        if (q->answered) {
            if (q->out_len)
                c10ds_conn_queue_raw(c, q->out, q->out_len);
            unlink_locked(ts, q);
        } else if (q->op != C10DS_TS_WAIT) {
            break;
        }
    }
}

/* Whether q's answer goes now (ts->mu held): no query before it waits
 * for its answer, parked WAITs aside (flush_locked's order). */
static int due_now_locked(const c10ds_ts *ts, const ts_query *q)
{
    for (const ts_query *p = ts->head; p != q; p = p->next)
        if (p->answered || p->op != C10DS_TS_WAIT)
            return 0;
    return 1;
}

/* Answers a query here, not through the engine (PING, an empty list,
 * CANCEL_WAIT): in its turn. -1: out of memory (recorded). */
static int answer_here(c10ds_conn *c, c10ds_ts_op op, const void *b, size_t n)
{
    c10ds_ts *ts = c->codec_state;
    pthread_mutex_lock(&ts->mu);
    ts_query *q = enqueue_locked(ts, op);
    int ok = q && append_out(q, b, n) == 0;
    if (ok) {
        q->answered = 1; /* else the connection is closed: it never goes */
        flush_locked(c, ts); /* may free q */
    }
    pthread_mutex_unlock(&ts->mu);
    return ok ? 0 : c10ds_failed(C10D_ENOMEM, "out of memory");
}

/* Whether the read loop waits for a query of op to be answered before
 * it reads more (--tcpstore-max-inflight): every query the engine
 * answers but a WAIT, which may stay parked for good (TS_WAITS_MAX
 * bounds those). */
static int held_up_by(c10ds_ts_op op)
{
    return op != C10DS_TS_WAIT;
}

/* The sink's bytes for one of c's queries: a verdict, then the answer or
 * why it was refused (c10ds_ts_encode). */
static void ts_reply(c10ds_conn *c, uint64_t request_id, const void *body, size_t len)
{
    c10ds_ts *ts = c->codec_state;
    const uint8_t *b = body;
    char why[C10DS_FAILURE_MAX] = "";
    int counted = 0;
    pthread_mutex_lock(&ts->mu);
    ts_query *q = ts->head;
    while (q && q->id != request_id)
        q = q->next;
    if (q) { /* not found: a WAIT cancelled meanwhile, whose answer is dropped */
        counted = held_up_by(q->op);
        if (len < 1)
            snprintf(why, sizeof why, "its %s got no answer", c10ds_ts_op_name(q->op));
        else if (b[0] == C10DS_TS_REFUSED)
            snprintf(why, sizeof why, "%.*s", (int)(len - 1), (const char *)b + 1);
        else if (due_now_locked(ts, q))
            /* queued from the engine's bytes: a copy of a 16 MiB value
             * spared, on the engine's thread; flushed below (empty) */
            c10ds_conn_queue_raw(c, b + 1, len - 1);
        else if (append_out(q, b + 1, len - 1) != 0)
            snprintf(why, sizeof why, "out of memory for the reply to its %s",
                     c10ds_ts_op_name(q->op));
        q->answered = 1;
        if (!why[0])
            flush_locked(c, ts);
    }
    pthread_mutex_unlock(&ts->mu);
    if (counted) /* after its reply is queued: an unread one keeps c paused */
        c10ds_conn_unanswered(c, -1);
    if (why[0])
        refuse(c, why);
}

/* Drops parked WAITs (ts->mu held): off the list, and an event for each
 * that tells the engine to let go of it, chained on *cancels for the
 * caller to submit once the lock is let go (the engine may run it on the
 * caller's thread, and answer this connection). All of them, or the
 * oldest beyond keep. */
static void drop_waits_locked(c10ds_conn *c, c10ds_ts *ts, int keep, c10ds_request **cancels)
{
    int parked = 0;
    for (ts_query *q = ts->head; q; q = q->next)
        parked += q->op == C10DS_TS_WAIT && !q->answered;
    for (ts_query *q = ts->head, *n; q && parked > keep; q = n) {
        n = q->next;
        if (q->op != C10DS_TS_WAIT || q->answered)
            continue;
        c10ds_request *r = c10ds_request_new(NULL, NULL);
        if (r) {
            r->event = C10DS_EV_CANCEL;
            r->pipe = c->id;
            r->cancel_id = q->id;
            r->next = *cancels;
            *cancels = r;
        }
        unlink_locked(ts, q);
        parked--;
    }
}

static void submit_cancels(c10ds_conn *c, c10ds_request *cancels)
{
    for (c10ds_request *r = cancels, *n; r; r = n) {
        n = r->next;
        if (c10ds_engine_submit(c->l->engine, r) != 0)
            c10ds_request_free(r);
    }
}

/* CANCEL_WAIT: the client's WAIT is given up. If the engine answered it
 * already, its STOP_WAITING goes first; if not, it is dropped (and the
 * engine told to let go of it). Either way WAIT_CANCELED follows. */
static int cancel_wait(c10ds_conn *c)
{
    c10ds_ts *ts = c->codec_state;
    c10ds_request *cancels = NULL;
    uint8_t byte = C10DS_TS_WAIT_CANCELED;
    pthread_mutex_lock(&ts->mu);
    drop_waits_locked(c, ts, 0, &cancels);
    pthread_mutex_unlock(&ts->mu);
    int rc = answer_here(c, C10DS_TS_CANCEL_WAIT, &byte, 1);
    submit_cancels(c, cancels);
    return rc;
}

/* Where a key of this connection's goes (c10ds_ts_prefix_fn): its run's
 * prefix, the run entered at the connection's first key of it. */
static const char *run_prefix(void *arg, const uint8_t *key, size_t len)
{
    c10ds_ts *ts = arg;
    const uint8_t *scope;
    size_t sl;
    c10ds_ts_scope(key, len, &scope, &sl);
    for (size_t i = 0; i < ts->n_in; i++)
        if (ts->in[i].len == sl && memcmp(ts->in[i].scope, scope, sl) == 0)
            return ts->in[i].prefix;
    if (ts->n_in == TS_RUNS_MAX) {
        c10ds_failed(C10D_EINVAL, "its keys name more than %d rendezvous ids (a run each)",
                     TS_RUNS_MAX);
        return NULL;
    }
    ts_in *in = realloc(ts->in, (ts->n_in + 1) * sizeof *in);
    if (!in) {
        c10ds_failed(C10D_ENOMEM, "out of memory");
        return NULL;
    }
    ts->in = in;
    ts_in *x = &in[ts->n_in];
    memset(x, 0, sizeof *x);
    if (!(x->scope = malloc(sl + 1)) || !(x->number = c10ds_ts_runs_enter(ts->runs, (const char *)scope, sl))) {
        free(x->scope);
        c10ds_failed(C10D_ENOMEM, "out of memory");
        return NULL;
    }
    memcpy(x->scope, scope, sl);
    x->scope[sl] = 0;
    x->len = sl;
    c10ds_ts_run_prefix(x->prefix, x->number);
    ts->n_in++;
    return x->prefix;
}

/* The query's place in c's order, and its request handed to the engine
 * with the sink that answers it in TCPStore's bytes. -1: recorded why. */
static int to_engine(c10ds_conn *c, const c10ds_ts_query *f)
{
    c10ds_ts *ts = c->codec_state;
    ts_ask *ask = calloc(1, sizeof *ask);
    if (!ask)
        return c10ds_failed(C10D_ENOMEM, "out of memory");
    ask->op = f->op;
    if (f->op == C10DS_TS_COMPARE_SET && f->blen) {
        if (!(ask->expected = malloc(f->blen))) {
            ask_free(ask);
            return c10ds_failed(C10D_ENOMEM, "out of memory");
        }
        memcpy(ask->expected, f->b, f->blen);
        ask->expected_len = f->blen;
    }
    c10ds_request *cancels = NULL;
    pthread_mutex_lock(&ts->mu);
    if (f->op == C10DS_TS_WAIT)
        drop_waits_locked(c, ts, TS_WAITS_MAX - 1, &cancels);
    ts_query *q = enqueue_locked(ts, f->op);
    uint64_t id = q ? q->id : 0;
    pthread_mutex_unlock(&ts->mu);
    submit_cancels(c, cancels);
    if (!q) {
        ask_free(ask);
        return c10ds_failed(C10D_ENOMEM, "out of memory");
    }
    C10dpb__Request *rq = c10ds_ts_request(f, id, ts->runs ? run_prefix : NULL, ts);
    if (!rq) {
        ask_free(ask);
        return -1; /* the connection is closed: q never goes */
    }
    if (held_up_by(f->op)) /* before the engine can answer it */
        c10ds_conn_unanswered(c, 1);
    return c10ds_conn_hand_on(c, rq, &ts_sink, ask, 1);
}

static int run_query(c10ds_conn *c, const c10ds_ts_query *f)
{
    switch (f->op) {
    case C10DS_TS_VALIDATE:
        if (f->u32 != C10DS_TS_MAGIC)
            return c10ds_failed(C10D_EPROTO, "its VALIDATE carried 0x%08x, not TCPStore's magic "
                                "number", f->u32);
        return 0;
    case C10DS_TS_PING:
        return answer_here(c, C10DS_TS_PING, &f->u32, 4);
    case C10DS_TS_CANCEL_WAIT:
        return cancel_wait(c);
    case C10DS_TS_WATCH_KEY:
        return c10ds_failed(C10D_EPROTO, "it asked to watch a key (torch 1.13's watch_key); the "
                            "coordinator's TCPStore port does not support watches");
    case C10DS_TS_CHECK:
    case C10DS_TS_WAIT:
    case C10DS_TS_MULTI_GET:
    case C10DS_TS_MULTI_SET:
        if (f->n == 0) {
            /* TCPStore: no keys are all there at once (our store refuses
             * an empty list) */
            uint8_t byte =
                f->op == C10DS_TS_CHECK ? C10DS_TS_CHECK_READY : C10DS_TS_WAIT_STOP_WAITING;
            int says = f->op == C10DS_TS_CHECK || f->op == C10DS_TS_WAIT;
            return answer_here(c, f->op, &byte, says ? 1 : 0);
        }
        break;
    default:
        break;
    }
    return to_engine(c, f);
}

static int ts_parse(c10ds_conn *c)
{
    c10ds_ts *ts = c->codec_state;
    size_t off = 0, want = 0;
    int rc = 0;
    if (!ts->dialect && !(ts->dialect = c10ds_ts_detect(c->rbuf, c->rlen)))
        return 0;
    if (!ts->engine) {
        ts->runs = c->l->ts_runs;
        ts->engine = c->l->engine;
    }
    while (off < c->rlen) {
        if (c10ds_readiness_turn_over(c)) {
            rc = 2;
            break;
        }
        if (c10ds_conn_closed(c))
            return -1; /* closed already: nothing more to say */
        if (c10ds_conn_backlogged(c)) {
            rc = 1;
            break;
        }
        c10ds_ts_query f;
        size_t used;
        c10ds_ts_read_result got =
            c10ds_ts_read(c->rbuf + off, c->rlen - off, ts->dialect, c->l->cfg, &f, &used);
        if (got == C10DS_TS_SHORT) {
            want = used;
            break;
        }
        if (got == C10DS_TS_BAD || run_query(c, &f) != 0) {
            rc = -1;
            break;
        }
        off += used;
    }
    if (rc < 0) {
        refuse(c, c10ds_failure());
        return -1;
    }
    c10ds_conn_consumed(c, off);
    if (want && c10ds_conn_room_for(c, want) != 0) {
        c10ds_conn_close(c, "out of memory for a TCPStore query");
        return -1;
    }
    return rc;
}

const c10ds_codec c10ds_codec_tcpstore = {
    .name = "tcpstore",
    .open = ts_open,
    .close = ts_close,
    .parse = ts_parse,
    .reply = ts_reply,
};
