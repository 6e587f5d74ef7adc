/* Tagged point-to-point transfers on the P2P channel. Each message is a
 * frame (tag, length) and its bytes.
 *
 * Receives are matched as MPI matches them: a message goes to the
 * earliest receive, in the order they were posted, that names its sender
 * (or any member) and its tag; a message nobody has posted a receive for
 * yet is kept (`unexpected`) until one is. A sync recv is posted behind
 * the posted ones like any other, so the two kinds never overtake each
 * other for one (sender, tag), nor do receives from any member and from
 * a named one.
 *
 * A posted receive (an async recv) holds nothing up: it sits in the queue
 * and whichever thread makes progress on the group fills it, under
 * p2p_mu: a thread waiting for it (c10di_host_recv_wait), the group's own
 * sends while they wait for room and its sync receives, the world's
 * progress thread (work.c) while nobody waits. A message matched to a
 * receive is read straight into its buffer; a kept one costs a copy.
 *
 * A send never waits on its receiver alone: while it waits for room, it
 * reads what every peer is sending this rank (c10di_p2p_drain). Otherwise
 * two ranks that each send the other more than a link holds before
 * receiving (torch's isend-then-irecv ring, batch_isend_irecv) would wait
 * for each other for ever. */
#include "host.h"

#include "c10d_time.h"

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t magic;
    int32_t tag;
    uint64_t len;
} frame;

#define FRAME_MAGIC 0xc10d2b2bu
/* Bytes dropped (a message of the wrong size, one whose receive was
 * cancelled) are read through this much memory at a time. */
#define SINK_BYTES (64u << 10)

_Static_assert(sizeof(frame) == sizeof(((c10di_p2p_partial *)0)->frame), "partial frame size");

c10d_status c10di_p2p_init(c10di_host *h)
{
    h->partial = calloc((size_t)h->n, sizeof *h->partial);
    h->sink = malloc(SINK_BYTES);
    if (!h->partial || !h->sink)
        return c10di_error(C10D_ENOMEM, "out of memory");
    return C10D_OK;
}

static size_t want_of(const c10di_recv *r)
{
    return r->c->count * c10d_dtype_size(r->c->dtype);
}

static int takes(const c10di_recv *r, int src, int tag)
{
    return (r->c->root == C10DI_ANY_SOURCE || r->c->root == src) && r->c->tag == tag;
}

/* r ended (p2p_mu held): the last the backend does with it. */
static void end(c10di_host *h, c10di_recv *r, c10d_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void end(c10di_host *h, c10di_recv *r, c10d_status st, const char *fmt, ...)
{
    r->st = st;
    r->msg[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->msg, sizeof r->msg, fmt, ap);
        va_end(ap);
    }
    int notify = r->c->posted;
    r->state = C10DI_RECV_ENDED;
    atomic_fetch_sub(&h->posted, 1);
    if (notify && h->ctx->hooks->recv_done)
        h->ctx->hooks->recv_done(h->ctx, r);
}

/* A message from `from` goes to r (p2p_mu held). */
static void match(c10di_recv *r, int from)
{
    r->state = C10DI_RECV_MATCHED;
    r->from = from;
}

/* Takes the earliest posted receive for (src, tag) off the queue; NULL if
 * none (p2p_mu held). */
static c10di_recv *take_recv(c10di_host *h, int src, int tag)
{
    for (c10di_recv **pp = &h->recvs, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
        c10di_recv *r = *pp;
        if (!takes(r, src, tag))
            continue;
        *pp = r->next;
        if (h->recvs_tail == r)
            h->recvs_tail = prev;
        r->next = NULL;
        return r;
    }
    return NULL;
}

static void ended_with(c10di_host *h, c10di_recv *r, size_t len, int ok)
{
    if (ok)
        end(h, r, C10D_OK, NULL);
    else
        end(h, r, C10D_EINVAL, "%s of group %s: rank %d sent %zu bytes with tag %d, this recv "
            "expects %zu", r->c->what, h->ctx->group, r->from, len, r->c->tag, want_of(r));
}

/* A whole message for r, matched already (p2p_mu held). */
static void deliver(c10di_host *h, c10di_recv *r, size_t len, const void *data)
{
    int ok = len == want_of(r);
    if (ok && len)
        memcpy(r->c->buf, data, len);
    ended_with(h, r, len, ok);
}

/* The first kept message r can take, off the list (p2p_mu held): from its
 * sender, or the earliest to arrive from anyone. */
static c10di_unexpected *take_kept(c10di_host *h, const c10di_recv *r)
{
    for (c10di_unexpected **pp = &h->unexpected; *pp; pp = &(*pp)->next)
        if (takes(r, (*pp)->src, (*pp)->tag)) {
            c10di_unexpected *u = *pp;
            *pp = u->next;
            return u;
        }
    return NULL;
}

static void keep(c10di_host *h, c10di_unexpected *u)
{
    c10di_unexpected **tail = &h->unexpected;
    while (*tail)
        tail = &(*tail)->next;
    u->next = NULL;
    *tail = u;
}

/* Peer p's frame was read: where its bytes go (p2p_mu held). 0, or -1 to
 * stop reading p for now (no memory yet, or a garbled frame). */
static int place(c10di_host *h, int p, c10di_p2p_partial *s)
{
    frame f;
    memcpy(&f, s->frame, sizeof f);
    if (f.magic != FRAME_MAGIC) {
        /* Nothing from p can be read any more: its receives fail (and
         * the failure breaks the group, front end). */
        for (c10di_recv **pp = &h->recvs; *pp;) {
            c10di_recv *r = *pp;
            if (r->c->root != p) {
                pp = &r->next;
                continue;
            }
            *pp = r->next;
            end(h, r, C10D_EPROTO, "%s of group %s: garbled message from rank %d", r->c->what,
                h->ctx->group, p);
        }
        h->recvs_tail = NULL;
        for (c10di_recv *r = h->recvs; r; r = r->next)
            h->recvs_tail = r;
        return -1;
    }
    c10di_recv *r = take_recv(h, p, f.tag);
    if (r) {
        match(r, p);
        s->to = r;
        s->dst = f.len == want_of(r) ? r->c->buf : NULL;
    } else {
        c10di_unexpected *u = malloc(sizeof *u + (f.len ? f.len : 1));
        if (!u)
            return -1; /* tried again at the next progress */
        u->src = p;
        u->tag = f.tag;
        u->len = f.len;
        u->data = u + 1;
        s->kept = u;
        s->dst = u->data;
    }
    s->placed = 1;
    return 0;
}

/* Peer p's message is whole (p2p_mu held). */
static void complete(c10di_host *h, int p, c10di_p2p_partial *s)
{
    frame f;
    memcpy(&f, s->frame, sizeof f);
    if (s->to) {
        ended_with(h, s->to, f.len, s->dst != NULL);
    } else if (s->kept) {
        /* A receive posted while it came takes it now, else it is kept. */
        c10di_unexpected *u = s->kept;
        c10di_recv *r = take_recv(h, p, f.tag);
        if (r) {
            match(r, p);
            deliver(h, r, u->len, u->data);
            free(u);
        } else {
            keep(h, u);
        }
    } /* else dropped: its receive was cancelled while it came */
    memset(s, 0, sizeof *s);
}

/* Reads what peer p is sending this rank, without waiting (p2p_mu held);
 * 1 if anything moved. */
static int drain_peer(c10di_host *h, int p)
{
    c10di_p2p_partial *s = &h->partial[p];
    int moved = 0;
    for (;;) {
        if (s->got < sizeof(frame)) {
            ssize_t k = c10di_try_read(h, p, CH_P2P, s->frame + s->got, sizeof(frame) - s->got);
            if (k <= 0) /* nothing yet, or the link closed (the wait's check says why) */
                return moved;
            s->got += (size_t)k;
            moved = 1;
            if (s->got < sizeof(frame))
                return moved;
        }
        if (!s->placed && place(h, p, s) != 0)
            return moved;
        frame f;
        memcpy(&f, s->frame, sizeof f);
        while (s->done < f.len) {
            size_t left = f.len - s->done;
            uint8_t *dst = s->dst ? s->dst + s->done : h->sink;
            ssize_t k = c10di_try_read(h, p, CH_P2P, dst,
                                       s->dst || left < SINK_BYTES ? left : SINK_BYTES);
            if (k <= 0)
                return moved;
            s->done += (size_t)k;
            moved = 1;
        }
        complete(h, p, s);
        moved = 1;
    }
}

/* Every linked peer's messages, as far as they came (p2p_mu held). */
static int progress_locked(c10di_host *h)
{
    int moved = 0;
    for (int p = 0; p < h->n; p++)
        if (p != h->me && c10di_tcp_linked(h, p))
            moved |= drain_peer(h, p);
    return moved;
}

int c10di_p2p_drain(c10di_host *h)
{
    if (pthread_mutex_trylock(&h->p2p_mu) != 0)
        return 0; /* another thread is reading: it moves the bytes */
    int moved = progress_locked(h);
    pthread_mutex_unlock(&h->p2p_mu);
    return moved;
}

/* A peer that has not linked to this rank yet, which only it can do (a
 * higher rank dials): taken from the listener when it comes. */
static int awaits_dial(c10di_host *h, int src)
{
    for (int p = h->me + 1; p < h->n; p++)
        if ((src < 0 || src == p) && !c10di_tcp_linked(h, p))
            return 1;
    return 0;
}

c10d_status c10di_host_recv_post(c10di_host *h, c10di_recv *r)
{
    const c10di_coll *c = r->c;
    c10d_status st;
    /* Over TCP a lower rank waits for the higher one to dial it (tcp.c):
     * this rank dials the sender now if it is lower, or every lower peer
     * for a receive from any member (a connect needs nothing of theirs).
     * Higher ones dial it and are taken from its listener meanwhile. */
    for (int p = 0; p < h->me; p++)
        if ((c->root == C10DI_ANY_SOURCE || c->root == p) &&
            (st = c10di_tcp_link(h, p, c)) != C10D_OK)
            return st;
    r->next = NULL;
    r->from = c->root;
    r->st = C10D_OK;
    r->msg[0] = '\0';
    r->state = C10DI_RECV_QUEUED;
    pthread_mutex_lock(&h->p2p_mu);
    atomic_fetch_add(&h->posted, 1);
    c10di_unexpected *u = take_kept(h, r);
    if (u) {
        match(r, u->src);
        deliver(h, r, u->len, u->data);
        free(u);
    } else {
        if (h->recvs_tail)
            h->recvs_tail->next = r;
        else
            h->recvs = r;
        h->recvs_tail = r;
    }
    pthread_mutex_unlock(&h->p2p_mu);
    return C10D_OK;
}

/* r ends with st unless it has (p2p_mu held): off the queue, or its
 * message, if one is arriving, dropped from here on. 1 if it was posted. */
static int detach(c10di_host *h, c10di_recv *r)
{
    if (r->state == C10DI_RECV_QUEUED) {
        for (c10di_recv **pp = &h->recvs, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next)
            if (*pp == r) {
                *pp = r->next;
                if (h->recvs_tail == r)
                    h->recvs_tail = prev;
                break;
            }
    } else if (r->state == C10DI_RECV_MATCHED) {
        for (int p = 0; p < h->n; p++)
            if (h->partial[p].to == r) {
                h->partial[p].to = NULL;
                h->partial[p].dst = NULL;
            }
    }
    return r->state != C10DI_RECV_ENDED;
}

int c10di_host_recv_cancel(c10di_host *h, c10di_recv *r)
{
    pthread_mutex_lock(&h->p2p_mu);
    int was = detach(h, r);
    if (was) {
        r->state = C10DI_RECV_ENDED;
        atomic_fetch_sub(&h->posted, 1);
    }
    pthread_mutex_unlock(&h->p2p_mu);
    return was;
}

void c10di_host_recv_abort(c10di_host *h, c10d_status st, const char *msg)
{
    pthread_mutex_lock(&h->p2p_mu);
    while (h->recvs) {
        c10di_recv *r = h->recvs;
        h->recvs = r->next;
        end(h, r, st, "%s", msg);
    }
    h->recvs_tail = NULL;
    for (int p = 0; p < h->n; p++) {
        c10di_recv *r = h->partial[p].to;
        if (!r)
            continue;
        h->partial[p].to = NULL;
        h->partial[p].dst = NULL;
        end(h, r, st, "%s", msg);
    }
    pthread_mutex_unlock(&h->p2p_mu);
}

/* Takes the connections of peers that dial this rank, if no other thread
 * is making a link (1: one was taken). */
static int accept_links(c10di_host *h, int src)
{
    return awaits_dial(h, src) && c10di_tcp_accept_ready(h);
}

int c10di_host_recv_progress(c10di_host *h)
{
    if (!atomic_load(&h->posted))
        return 0;
    int moved = c10di_p2p_drain(h);
    return accept_links(h, C10DI_ANY_SOURCE) | moved;
}

/* Waits for a peer's bytes: over TCP alone in poll (the sender's p2p
 * socket, every linked peer's for a receive from any, the listener while a
 * peer may still dial); else spinning, yielding, then sleeping. 1 when the
 * caller should check for failures. */
static int idle(c10di_host *h, int src, unsigned n, int64_t until_ms)
{
    struct pollfd fds[65];
    int nfds = 0;
    for (int p = 0; p < h->n; p++) {
        if (p == h->me || (src >= 0 && p != src) || !c10di_tcp_linked(h, p))
            continue;
        if (h->links[p].shm || nfds == 64)
            return c10di_idle_wait(n);
        fds[nfds++] = (struct pollfd){h->links[p].fd[CH_P2P], POLLIN, 0};
    }
    if (awaits_dial(h, src) && h->listen_fd >= 0)
        fds[nfds++] = (struct pollfd){h->listen_fd, POLLIN, 0};
    if (!nfds)
        return c10di_idle_wait(n);
    int64_t left = until_ms - c10d_now_ms();
    poll(fds, (nfds_t)nfds, left < 20 ? (left > 0 ? (int)left : 0) : 20);
    return 1;
}

c10d_status c10di_host_recv_wait(c10di_host *h, c10di_recv *r, const c10di_coll *probe,
                                 int64_t until_ms)
{
    int src = r->c->root;
    c10d_status st = C10D_OK;
    atomic_fetch_add(&h->waiting, 1);
    for (unsigned n = 0;;) {
        pthread_mutex_lock(&h->p2p_mu);
        int moved = progress_locked(h);
        int ended = r->state == C10DI_RECV_ENDED;
        pthread_mutex_unlock(&h->p2p_mu);
        if (ended)
            break;
        if (accept_links(h, src) | moved) {
            n = 0;
            continue;
        }
        if (c10d_now_ms() >= until_ms) {
            st = C10D_ETIMEDOUT;
            break;
        }
        if (!idle(h, src, ++n, until_ms))
            continue;
        c10d_status cst = c10di_be_check(h->ctx, probe, src);
        if (cst != C10D_OK) {
            pthread_mutex_lock(&h->p2p_mu);
            if (detach(h, r))
                end(h, r, cst, "%s", c10d_errmsg());
            pthread_mutex_unlock(&h->p2p_mu);
            break;
        }
    }
    atomic_fetch_sub(&h->waiting, 1);
    return st;
}

c10d_status c10di_host_recv(c10di_host *h, c10di_coll *c)
{
    c10di_recv r;
    r.c = c;
    c10d_status st = c10di_host_recv_post(h, &r);
    if (st == C10D_OK)
        st = c10di_host_recv_wait(h, &r, c, INT64_MAX); /* c's deadline ends it */
    if (st != C10D_OK)
        return st;
    c->root = r.from; /* its sender, once matched (a wrong size too: it is reported) */
    if (r.st != C10D_OK)
        return c10di_error(r.st, "%s", r.msg);
    return C10D_OK;
}

c10d_status c10di_host_send(c10di_host *h, const c10di_coll *c)
{
    size_t bytes = c->count * c10d_dtype_size(c->dtype);
    frame f = {FRAME_MAGIC, c->tag, bytes};
    c10d_status st = c10di_xfer(h, c, CH_P2P, c->root, &f, sizeof f, -1, NULL, 0);
    if (st == C10D_OK && bytes)
        st = c10di_xfer(h, c, CH_P2P, c->root, c->buf, bytes, -1, NULL, 0);
    return st;
}

void c10di_p2p_free(c10di_host *h)
{
    for (c10di_unexpected *u = h->unexpected, *n; u; u = n) {
        n = u->next;
        free(u);
    }
    h->unexpected = NULL;
    if (h->partial)
        for (int p = 0; p < h->n; p++)
            free(h->partial[p].kept);
    free(h->partial);
    h->partial = NULL;
    free(h->sink);
    h->sink = NULL;
}
