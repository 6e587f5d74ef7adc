/* A client connection's life and its replies: references (the read loop,
 * a send in flight, each request the engine holds), closing it (its ranks
 * are then dead), the reaper that frees it, and the queue of reply frames
 * written back in the order the engine answers them (not the order the
 * requests came: a parked get does not hold up the replies behind it).
 *
 * A connection is freed once it is closed, none of its I/O is in flight
 * and the engine holds none of its requests; the freeing itself is done
 * by the reaper thread, never inside a callback of the connection's own
 * aios. */
#include "net/listener_internal.h"

#include "config.h"
#include "engine/engine.h"
#include "engine/request.h"

#include "c10d.pb-c.h"
#include "frame.h"
#include "log.h"

#include <c10d/errors.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Closed connections that held this much (their buffers, the requests
 * they parked) have their freed pages given back to the system: a
 * flood's memory otherwise stays in malloc's free lists, and the
 * coordinator's RSS with it. */
#define TRIM_AFTER_BYTES (16u << 20)

/* Frees dead connections; returns the bytes they had held. */
static size_t free_conns(c10ds_conn *dead)
{
    size_t held = 0;
    for (c10ds_conn *c = dead, *n; c; c = n) {
        n = c->next;
        held += c->rcap + c->out_cap + c->fly_cap + atomic_load(&c->parked.freed);
        nng_aio_free(c->recv_aio); /* waits for a callback still returning */
        atomic_fetch_sub(&c->l->held, c->held);
        atomic_fetch_sub(&c->l->unsent, c->unsent);
        nng_aio_free(c->send_aio);
        nng_aio_free(c->now_aio);
        nng_aio_free(c->resume_aio);
        nng_aio_free(c->ready_aio);
        c10ds_readiness_forget(c); /* before the socket's number can be reused */
        nng_stream_free(c->s);
        nng_mtx_free(c->mu);
        free(c->rbuf);
        free(c->out);
        free(c->fly);
        if (c->codec_state)
            c->codec->close(c->codec_state);
        free(c);
    }
    return held;
}

/* Frees dead connections on its own thread: a connection's last reference
 * may go inside one of its aio callbacks, where its aios cannot be freed. */
void c10ds_conn_reaper(void *arg)
{
    c10ds_listener *l = arg;
    nng_mtx_lock(l->mu);
    for (;;) {
        while (!l->dead && !l->reaper_stop)
            nng_cv_wait(l->cv);
        c10ds_conn *dead = l->dead;
        l->dead = NULL;
        int stop = l->reaper_stop;
        nng_mtx_unlock(l->mu);
        if (free_conns(dead) >= TRIM_AFTER_BYTES)
            malloc_trim(0); /* here, off the engine's and NNG's threads */
        nng_mtx_lock(l->mu);
        if (stop && !l->dead)
            break;
    }
    nng_mtx_unlock(l->mu);
}

static int replies_near_cap(const c10ds_listener *l, size_t *total);
static void port_freed(c10ds_listener *l);

/* Whether c's port holds as many queries with the engine as it may. If
 * so, the port is marked wanted before it is looked at again: a slot
 * coming free (port_freed) counts down, then looks at the mark, so one of
 * the two sees the other (both sequentially consistent), and a port that
 * nobody waits for is never scanned. */
static int port_busy(const c10ds_conn *c)
{
    c10ds_listener *l = c->l;
    int max = (int)l->cfg->ts_max_port_inflight;
    if (!c->unanswered_max || atomic_load(&l->unanswered) < max)
        return 0;
    atomic_store(&l->port_wanted, 1);
    return atomic_load(&l->unanswered) >= max;
}

/* Whether c's paused read loop may go on (c->mu held; sent_enough: its
 * unsent replies are down far enough, as its caller sees them), and if
 * so marks it going. Down to half of each limit, so that a client at one
 * is not resumed and paused again request by request; no reply unsent at
 * all resumes it whatever the other connections hold. */
static int resumable_locked(c10ds_conn *c, int sent_enough)
{
    int resume = c->read_paused && !c->closed && sent_enough &&
                 c->inflight <= C10DS_CONN_INFLIGHT_MAX / 2 &&
                 !(c->unanswered_max && c->unanswered >= c->unanswered_max) &&
                 (c->unsent == 0 || !c10ds_conn_backlogged_locked(c)) &&
                 !port_busy(c);
    if (resume)
        c->read_paused = 0;
    return resume;
}

/* Brings c->unsent, and the listener's total, up to date (c->mu held). */
static void count_unsent_locked(c10ds_conn *c)
{
    size_t now = c->out_len + (c->fly_len - c->fly_done);
    if (now >= c->unsent)
        atomic_fetch_add(&c->l->unsent, now - c->unsent);
    else
        atomic_fetch_sub(&c->l->unsent, c->unsent - now);
    c->unsent = now;
}

void c10ds_conn_unref(c10ds_conn *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    c10ds_listener *l = c->l;
    nng_mtx_lock(l->mu);
    for (c10ds_conn **pp = &l->live; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            l->nlive--;
            break;
        }
    c->next = l->dead;
    l->dead = c;
    nng_cv_wake(l->cv);
    nng_mtx_unlock(l->mu);
}

/* Closes c (once): its I/O ends with errors, its ranks are declared dead
 * by the engine, its queued replies are dropped. */
void c10ds_conn_close(c10ds_conn *c, const char *why)
{
    nng_mtx_lock(c->mu);
    int was = c->closed;
    c->closed = 1;
    c->out_len = 0;
    count_unsent_locked(c);
    /* A paused read loop has no receive in flight to end it: its
     * reference goes here. */
    int paused = c->read_paused;
    c->read_paused = 0;
    /* Its queries with the engine no longer hold its port: some are
     * never answered (a read dropped unrun, a refusal). */
    int held = c->unanswered;
    c->unanswered = 0;
    atomic_fetch_sub(&c->l->unanswered, held);
    nng_mtx_unlock(c->mu);
    if (held)
        port_freed(c->l);
    if (was)
        return;
    if (why)
        c10ds_warn("closing connection %u: %s", c->id, why);
    nng_stream_close(c->s);
    /* Ranks that arrived on this connection are dead: tell the engine (it
     * owns the membership; never block an NNG callback). Posted, never
     * run here: a close comes from places that hold a lock a reply to
     * this connection takes (tcpstore.c's queue). */
    c10ds_request *r = c10ds_request_new(NULL, NULL);
    if (r) {
        r->event = C10DS_EV_PIPE_CLOSED;
        r->pipe = c->id;
        if (c10ds_engine_post(c->l->engine, r) != 0)
            c10ds_request_free(r);
    }
    atomic_fetch_sub(&c->l->engine->clients, 1);
    if (paused)
        c10ds_conn_unref(c);
}

/* Readies what is queued for writing, if nothing is being written (c->mu
 * held); returns 1 when the caller is to start the send, after it lets go
 * of c->mu. The send is not started under the lock: NNG writes at once on
 * the calling thread and hands the completion to a task thread, whose
 * callback takes c->mu first thing, and would wait for this thread to let
 * go of it: a futex sleep and wake on every reply. */
static int ready_send_locked(c10ds_conn *c)
{
    if (c->fly_len || !c->out_len || c->closed)
        return 0;
    uint8_t *b = c->fly;
    size_t cap = c->fly_cap;
    c->fly = c->out;
    c->fly_cap = c->out_cap;
    c->fly_len = c->out_len;
    c->fly_done = 0;
    c->out = b;
    c->out_cap = cap;
    c->out_len = 0;
    atomic_fetch_add(&c->refs, 1);
    atomic_fetch_add(&c->l->sends_in_flight, 1);
    return 1;
}

/* The flight ended (rv: 0, or why not) on the thread that wrote its last
 * bytes: readies the next one if replies were queued meanwhile (returns
 * 1: the caller sends it) and resumes a paused read loop. */
static int flight_ended(c10ds_conn *c, int rv, int on_callback)
{
    nng_mtx_lock(c->mu);
    c->fly_len = c->fly_done = 0;
    int next = rv == 0 && ready_send_locked(c); /* takes its own reference */
    count_unsent_locked(c);
    int resume = resumable_locked(c, c->unsent == 0 || c->unsent <= C10DS_READ_PAUSE_BYTES / 2);
    nng_mtx_unlock(c->mu);
    atomic_fetch_sub(&c->l->sends_in_flight, 1);
    if (rv != 0)
        c10ds_conn_close(c, NULL); /* the client went away */
    /* The read loop's reference goes with it. Off an NNG callback this is
     * the thread running a batch, which must not run a read loop (it
     * hands requests to that very engine): resume_aio runs it instead. */
    if (resume && on_callback)
        c->read_resume(c);
    else if (resume)
        nng_sleep_aio(0, c->resume_aio);
    c10ds_conn_unref(c);
    return next;
}

/* Writes the flight from byte done on (c->mu not held: the caller readied
 * the flight, or goes on with it). On tcp:// and ipc:// it is written on
 * this thread as far as the socket takes it at once: NNG writes inline,
 * and an aio with no callback then ends with no task thread woken (a
 * callback costs a thread switch and NNG's one task-queue lock, contended
 * by all its threads, on every reply). What the socket does not take goes
 * by send_aio, whose callback goes on when the client has read. */
static void send_flight(c10ds_conn *c, size_t done, int on_callback)
{
    for (;;) {
        int rv = 0;
        while (c->now_aio && done < c->fly_len) {
            nng_iov iov = {c->fly + done, c->fly_len - done};
            nng_aio_set_iov(c->now_aio, 1, &iov);
            nng_stream_send(c->s, c->now_aio);
            /* A write the socket did not take waits for the poller:
             * take it back (none of it was written; or, racing the
             * poller, all of it was, and the result says so). */
            nng_aio_cancel(c->now_aio);
            nng_aio_wait(c->now_aio);
            if ((rv = nng_aio_result(c->now_aio)) != 0)
                break;
            done += nng_aio_count(c->now_aio);
        }
        if (done < c->fly_len && (rv == 0 || rv == NNG_ECANCELED)) {
            nng_mtx_lock(c->mu);
            if (c->closed) {
                /* NNG 1.5 queues a send on a closed stream and never ends
                 * it: the flight's reference would stay for good. */
                nng_mtx_unlock(c->mu);
                rv = NNG_ECLOSED;
            } else {
                c->fly_done = done;
                count_unsent_locked(c);
                if (c->now_aio)
                    atomic_fetch_add(&c->l->engine->replies_waited, 1);
                nng_iov iov = {c->fly + done, c->fly_len - done};
                nng_aio_set_iov(c->send_aio, 1, &iov);
                /* Under c->mu, which close takes before it closes the
                 * stream (the slow path: a client that reads late). */
                nng_stream_send(c->s, c->send_aio);
                nng_mtx_unlock(c->mu);
                return;
            }
        }
        if (!flight_ended(c, rv, on_callback))
            return;
        done = 0;
    }
}

void c10ds_conn_send_cb(void *arg)
{
    c10ds_conn *c = arg;
    int rv = nng_aio_result(c->send_aio);
    if (rv != 0) {
        (void)flight_ended(c, rv, 1); /* no next flight after an error */
        return;
    }
    /* fly_done is written only by the flight's owner, which is now us. */
    send_flight(c, c->fly_done + nng_aio_count(c->send_aio), 1);
}

/* Whether unsent replies, all connections together, are within one
 * largest message of --max-reply-bytes: then large replies are refused,
 * and connections with replies unsent are not read (their next large
 * reply would only be refused). One threshold for both, so a connection
 * is paused exactly while its large replies would be refused. */
static int replies_near_cap(const c10ds_listener *l, size_t *total)
{
    *total = atomic_load(&l->unsent);
    return *total + l->cfg->max_message_bytes > l->cfg->max_reply_bytes;
}

int c10ds_conn_backlogged_locked(const c10ds_conn *c)
{
    size_t total;
    return c->unsent > C10DS_READ_PAUSE_BYTES || c->inflight > C10DS_CONN_INFLIGHT_MAX ||
           (c->unanswered_max && c->unanswered >= c->unanswered_max) || port_busy(c) ||
           (c->unsent && replies_near_cap(c->l, &total));
}

void c10ds_conn_request_sent(c10ds_conn *c)
{
    nng_mtx_lock(c->mu);
    c->inflight++;
    nng_mtx_unlock(c->mu);
}

void c10ds_conn_request_done(c10ds_conn *c)
{
    nng_mtx_lock(c->mu);
    c->inflight--;
    int resume = resumable_locked(c, 1);
    nng_mtx_unlock(c->mu);
    /* Called on the engine's thread, which must not run the read loop (it
     * hands requests to that very engine): resume_aio completes at once on
     * an NNG thread, whose callback goes on with it. */
    if (resume)
        nng_sleep_aio(0, c->resume_aio);
}

/* Resumes c if its paused read loop may go on. Called where the engine
 * answers (its thread, or a read loop's that runs a batch): never goes on
 * with the read loop here, as above. */
static void resume_if_resumable(c10ds_conn *c)
{
    nng_mtx_lock(c->mu);
    int resume = resumable_locked(c, 1);
    nng_mtx_unlock(c->mu);
    if (resume)
        nng_sleep_aio(0, c->resume_aio);
}

/* A slot of l's port came free: any of its connections paused for it
 * may take it (the first to read does; the others pause again). Called
 * after the count went down, so that one pausing meanwhile either sees
 * it or is paused by the time it is looked at (under its mu). */
static void port_freed(c10ds_listener *l)
{
    if (atomic_load(&l->resumes_off) || !atomic_exchange(&l->port_wanted, 0))
        return;
    nng_mtx_lock(l->mu);
    for (c10ds_conn *o = l->live; o; o = o->next)
        resume_if_resumable(o);
    nng_mtx_unlock(l->mu);
}

void c10ds_conn_unanswered(c10ds_conn *c, int delta)
{
    nng_mtx_lock(c->mu);
    int counted = !c->closed; /* a close gave back all it held */
    if (counted) {
        c->unanswered += delta;
        atomic_fetch_add(&c->l->unanswered, delta);
    }
    nng_mtx_unlock(c->mu);
    if (counted && delta < 0)
        port_freed(c->l);
}

void c10ds_conn_resume_cb(void *arg)
{
    c10ds_conn *c = arg;
    c->read_resume(c); /* the read loop's reference goes with it */
}

int c10ds_conn_pause_if_backlogged(c10ds_conn *c)
{
    nng_mtx_lock(c->mu);
    if (c10ds_conn_backlogged_locked(c) && !c->closed)
        c->read_paused = 1;
    int paused = c->read_paused;
    nng_mtx_unlock(c->mu);
    return paused;
}

/* Whether a reply of len bytes is refused for --max-reply-bytes. Small
 * ones always go. */
static int over_reply_budget(c10ds_conn *c, size_t len, size_t *total)
{
    return replies_near_cap(c->l, total) && len > C10DS_SMALL_REPLY;
}

/* Queues, instead of a reply over a limit, an error that says so (why:
 * which limit): the client learns why, and the memory is not spent. */
static void queue_refusal(c10ds_conn *c, uint64_t request_id, size_t len, const char *why)
{
    char detail[400];
    snprintf(detail, sizeof detail, "the coordinator dropped this request's reply of %zu bytes: "
             "%s; what the request did stands", len, why);
    c10ds_warn("connection %u: %s", c->id, detail);
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.request_id = request_id;
    rep.status = C10D_ETOOBIG;
    rep.detail = detail;
    uint8_t buf[C10DS_SMALL_REPLY];
    size_t n = c10dpb__reply__get_packed_size(&rep);
    if (n <= sizeof buf) {
        c10dpb__reply__pack(&rep, buf);
        c10ds_conn_queue(c, request_id, buf, n);
    }
}

/* Appends a reply to c's queue and starts writing it: a frame (framed,
 * with its header) or bytes as they are (a TCPStore reply). Over a limit
 * a frame is replaced by a refusal that says which; bytes as they are
 * cannot say it, and c is closed instead (the reason logged). */
static void queue_reply(c10ds_conn *c, uint64_t request_id, int framed, const void *body,
                        size_t len)
{
    size_t total;
    char why[200];
    if (over_reply_budget(c, len, &total)) {
        snprintf(why, sizeof why, "replies not yet read by their clients come to %zu bytes "
                 "(--max-reply-bytes %llu)", total,
                 (unsigned long long)c->l->cfg->max_reply_bytes);
        if (framed)
            queue_refusal(c, request_id, len, why);
        else
            c10ds_conn_close(c, why);
        return;
    }
    nng_mtx_lock(c->mu);
    if (c->closed) {
        nng_mtx_unlock(c->mu);
        return;
    }
    size_t need = c->out_len + (framed ? C10DC_FRAME_HDR : 0) + len;
    /* A large reply past this client's own limit is refused, not the
     * client cut off: its requests in flight (up to
     * C10DS_CONN_INFLIGHT_MAX) may all be gets of a large value. */
    if (framed && need > c->l->cfg->max_conn_buffer && len > C10DS_SMALL_REPLY) {
        size_t queued = c->out_len;
        nng_mtx_unlock(c->mu);
        snprintf(why, sizeof why, "this client has %zu bytes of replies it has not read "
                 "(--max-connection-buffer %llu)", queued,
                 (unsigned long long)c->l->cfg->max_conn_buffer);
        queue_refusal(c, request_id, len, why);
        return;
    }
    if (need > c->l->cfg->max_conn_buffer) {
        nng_mtx_unlock(c->mu);
        snprintf(why, sizeof why, "it does not read its replies (%zu bytes queued, over "
                 "--max-connection-buffer)", need);
        c10ds_conn_close(c, why);
        return;
    }
    if (need > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap < need)
            cap *= 2;
        uint8_t *nb = realloc(c->out, cap);
        if (!nb) {
            nng_mtx_unlock(c->mu);
            c10ds_conn_close(c, "out of memory for its replies");
            return;
        }
        c->out = nb;
        c->out_cap = cap;
    }
    if (framed)
        c10dc_frame_header(c->out + c->out_len, request_id, len);
    if (len)
        memcpy(c->out + need - len, body, len);
    c->out_len = need;
    int send = ready_send_locked(c);
    count_unsent_locked(c);
    nng_mtx_unlock(c->mu);
    if (send)
        send_flight(c, 0, 0);
}

void c10ds_conn_queue(c10ds_conn *c, uint64_t request_id, const void *body, size_t len)
{
    c->codec->reply(c, request_id, body, len);
}

void c10ds_conn_queue_framed(c10ds_conn *c, uint64_t request_id, const void *body, size_t len)
{
    queue_reply(c, request_id, 1, body, len);
}

void c10ds_conn_queue_raw(c10ds_conn *c, const void *bytes, size_t len)
{
    queue_reply(c, 0, 0, bytes, len);
}
