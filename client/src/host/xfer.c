/* The one progress loop of the host backend: move bytes to one peer and
 * from another at the same time, over shared memory or TCP, so that rings
 * and pairwise exchanges never deadlock on full buffers.
 *
 * Each transfer of a collective starts with a small header naming it (the
 * group, its collective number and the call's fingerprint), checked by the
 * receiver before it takes a byte of data: ranks that disagree about the
 * collective (a barrier against an all_reduce, another size, a rank one
 * collective ahead) fail with C10D_EDESYNC at their first exchange, in
 * every verification mode, instead of completing on each other's bytes.
 *
 * Waiting: spin briefly (a peer on another core answers in a microsecond),
 * then yield (ranks may outnumber cores), then sleep or poll. While
 * waiting, c10di_pg_check is asked every so often whether a member of the
 * group was lost or the deadline passed. */
#include "host.h"

#include "../budgets.h"
#include "c10d_time.h"

#include <errno.h>
#include <stddef.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>


void *c10di_scratch(c10di_host *h, size_t len)
{
    if (len > h->scratch_cap) {
        void *p = realloc(h->scratch, len);
        if (!p)
            return NULL;
        h->scratch = p;
        h->scratch_cap = len;
    }
    return h->scratch;
}

#define HDR_MAGIC 0xc10dc011u

/* What a collective's transfer says it belongs to. Ranks compare the
 * fields up to `joined` (HDR_SAME); the rest is news for the receiver. */
typedef struct {
    uint32_t magic;
    uint8_t kind, dtype, op, device;
    int32_t root;
    uint32_t group; /* the group name's hash */
    uint64_t seq;
    int64_t count;
    /* Join (docs/join.md). joined: the sender has joined, after collective
     * joined-1 (0: it is active), which tells the receiver how many ranks
     * contributed. divisor: what an AVG divides by (0: the group's size),
     * passed on to joined ranks, which learn the call from this header. */
    uint64_t joined;
    int32_t divisor;
    uint32_t region; /* the sender's join region (0: none): a joined rank shadows only its own */
    uint32_t alone;  /* the sender, the last active rank, runs it by itself: no data follows */
    uint32_t spare;
} coll_hdr;

#define HDR_SAME offsetof(coll_hdr, joined)

static coll_hdr hdr_of(const c10di_host *h, const c10di_coll *c)
{
    coll_hdr x;
    memset(&x, 0, sizeof x);
    x.magic = HDR_MAGIC;
    x.kind = (uint8_t)c->fp.kind;
    x.dtype = (uint8_t)c->fp.dtype;
    x.op = (uint8_t)c->fp.op;
    x.device = (uint8_t)c->fp.device;
    x.root = c->fp.root;
    x.group = h->group_hash;
    x.seq = c->seq;
    x.count = c->fp.count;
    h->ctx->hooks->join_mark(h->ctx, &x.joined, &x.region);
    x.divisor = c->divisor;
    x.alone = c->alone && !c->shadow;
    return x;
}

static c10dc_fp fp_of(const coll_hdr *x)
{
    c10dc_fp fp = {x->kind, x->dtype, x->count, x->root, x->op, x->device, 0};
    return fp;
}

/* The bytes of one direction: a header (may be empty), then the data. */
typedef struct {
    const void *hdr;
    size_t hlen;
    void *data;
    size_t len, done;
} span;

static int span_iov(const span *s, struct iovec iov[2])
{
    int n = 0;
    if (s->done < s->hlen)
        iov[n++] = (struct iovec){(uint8_t *)s->hdr + s->done, s->hlen - s->done};
    size_t d = s->done > s->hlen ? s->done - s->hlen : 0;
    if (d < s->len)
        iov[n++] = (struct iovec){(uint8_t *)s->data + d, s->len - d};
    return n;
}

static ssize_t try_send(c10di_link *l, int ch, const span *sp)
{
    struct iovec iov[2];
    int n = span_iov(sp, iov);
    if (l->shm) {
        ssize_t total = 0;
        for (int i = 0; i < n; i++) {
            ssize_t k = c10di_ring_write(&l->out[ch], iov[i].iov_base, iov[i].iov_len);
            total += k;
            if ((size_t)k < iov[i].iov_len)
                break;
        }
        return total;
    }
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t k = sendmsg(l->fd[ch], &m, MSG_NOSIGNAL);
    if (k < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    return k;
}

static ssize_t try_recv(c10di_link *l, int ch, const span *sp)
{
    struct iovec iov[2];
    int n = span_iov(sp, iov);
    if (l->shm) {
        ssize_t total = 0;
        for (int i = 0; i < n; i++) {
            ssize_t k = c10di_ring_read(&l->in[ch], iov[i].iov_base, iov[i].iov_len);
            total += k;
            if ((size_t)k < iov[i].iov_len)
                break;
        }
        return total;
    }
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t k = recvmsg(l->fd[ch], &m, 0);
    if (k == 0)
        return -1; /* the peer closed */
    if (k < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    return k;
}

ssize_t c10di_try_read(c10di_host *h, int peer, int ch, void *buf, size_t len)
{
    span sp = {NULL, 0, buf, len, 0};
    return try_recv(&h->links[peer], ch, &sp);
}

/* The peer's header says it is in another collective: both are named the
 * way the coordinator names a desync, lower rank first. */
static c10d_status mismatch(c10di_host *h, const c10di_coll *c, int peer, const coll_hdr *got)
{
    const c10di_be_ctx *x = h->ctx;
    char mine[160], theirs[160], a[192], b[192], report[1024];
    /* With verification on, the coordinator has both ranks' reports and
     * names the cause better (a rank that ran ahead only shows the next
     * collective here): give its finding a moment to arrive. */
    for (int64_t until = c10d_now_ms() + (!x->verify_off ? C10DI_HOST_FINDING_GRACE_MS : 0);
         c10d_now_ms() < until; usleep(2000)) {
        c10d_status st = c10di_be_failure(x, c->seq, report, sizeof report);
        if (st != C10D_OK)
            return c10di_error(st, "%s of group %s (rank %d) did not run: %s", c->what,
                               x->group, h->me, report);
    }
    c10dc_fp fp = fp_of(got);
    if (got->magic != HDR_MAGIC || got->group != h->group_hash)
        snprintf(report, sizeof report, "desync in group %s (job %s) at collective #%llu: rank "
                 "%d received bytes from rank %d that are not %s (the two are in "
                 "different operations; seen by rank %d's data plane)", x->group, x->job,
                 (unsigned long long)c->seq, h->me, peer,
                 got->magic != HDR_MAGIC ? "a collective's" : "this group's", h->me);
    else {
        c10dc_fp_format(&c->fp, mine, sizeof mine);
        c10dc_fp_format(&fp, theirs, sizeof theirs);
        const char *field = got->seq != c->seq ? "collective number"
                                                : c10dc_fp_diff(&c->fp, &fp);
        if (got->seq != c->seq) {
            snprintf(a, sizeof a, "rank %d is in #%llu %s", h->me, (unsigned long long)c->seq,
                     mine);
            snprintf(b, sizeof b, "rank %d in #%llu %s", peer, (unsigned long long)got->seq,
                     theirs);
        } else {
            snprintf(a, sizeof a, "rank %d called %s", h->me, mine);
            snprintf(b, sizeof b, "rank %d called %s", peer, theirs);
        }
        snprintf(report, sizeof report, "desync in group %s (job %s) at collective #%llu: %s, %s "
                 "(different %s) — seen by rank %d's data plane", x->group, x->job,
                 (unsigned long long)(got->seq < c->seq ? got->seq : c->seq),
                 h->me < peer ? a : b, h->me < peer ? b : a, field ? field : "call", h->me);
    }
    c10di_be_alert(x, C10D_EDESYNC, report);
    return c10di_error(C10D_EDESYNC, "%s of group %s (rank %d) did not run: %s", c->what,
                       x->group, h->me, report);
}

/* A TCP peer closed its end. Its process most likely died or left: give
 * the watcher a moment to learn why from the coordinator, so the report
 * names the cause, not just the socket. */
static c10d_status peer_gone(c10di_host *h, const c10di_coll *c, int peer)
{
    int64_t until = c10d_now_ms() + 3000;
    c10di_coll probe = *c;
    probe.deadline_ms = INT64_MAX;
    while (c10d_now_ms() < until) {
        c10d_status st = c10di_be_check(h->ctx, &probe, peer);
        if (st != C10D_OK)
            return st;
        usleep(5000);
    }
    return c10di_error(C10D_EPEERLOST, "%s of group %s (rank %d) failed: the connection to rank "
                       "%d (host %s, pid %d) closed", c->what, h->ctx->group, h->me, peer,
                       h->links[peer].host, h->links[peer].pid);
}

static c10d_status xfer(c10di_host *h, const c10di_coll *c, int ch, int to, const void *sbuf,
                        size_t slen, int from, void *rbuf, size_t rlen)
{
    c10d_status lst;
    /* TCP links are made at first use (tcp.c) */
    if ((lst = c10di_tcp_link(h, to, c)) != C10D_OK ||
        (lst = c10di_tcp_link(h, from, c)) != C10D_OK)
        return lst;
    c10di_link *lt = to >= 0 ? &h->links[to] : NULL, *lf = from >= 0 ? &h->links[from] : NULL;
    coll_hdr mine, theirs;
    size_t hl = ch == CH_COLL ? sizeof(coll_hdr) : 0;
    if (hl)
        mine = hdr_of(h, c);
    span out = {&mine, lt ? hl : 0, (void *)sbuf, slen, lt ? 0 : slen + hl};
    span in = {&theirs, lf ? hl : 0, rbuf, rlen, lf ? 0 : rlen + hl};
    size_t send_total = out.hlen + slen, recv_total = in.hlen + rlen;
    /* A p2p send reads what peers send this rank while it waits for room:
     * two ranks sending each other (an isend-then-recv ring) both go on. */
    int drain = ch == CH_P2P && lt && !lf;
    int tcp_only = !drain && (!lt || !lt->shm) && (!lf || !lf->shm), checked = !in.hlen;
    unsigned idle = 0;
    while (out.done < send_total || in.done < recv_total) {
        int moved = 0;
        if (out.done < send_total) {
            ssize_t k = try_send(lt, ch, &out);
            if (k < 0)
                return peer_gone(h, c, to);
            out.done += (size_t)k;
            moved |= k > 0;
        }
        if (in.done < recv_total) {
            /* Nothing of the data is read before the header is checked:
             * a stranger's bytes never land in rbuf. */
            span head = in;
            head.len = checked ? in.len : 0;
            ssize_t k = try_recv(lf, ch, &head);
            if (k < 0)
                return peer_gone(h, c, from);
            in.done += (size_t)k;
            moved |= k > 0;
            if (!checked && in.done >= in.hlen) {
                coll_hdr want = hdr_of(h, c);
                if (memcmp(&theirs, &want, HDR_SAME) != 0)
                    return mismatch(h, c, from, &theirs);
                if ((theirs.alone != 0) != (c->shadow && c->alone))
                    return c10di_error(C10D_EPROTO, "%s of group %s (rank %d): rank %d %s (an "
                                       "internal error of join: the two disagree on who "
                                       "joined)", c->what, h->ctx->group, h->me, from,
                                       theirs.alone ? "ran it alone, taking this rank for joined"
                                                    : "sent data where its header alone was due");

                if (theirs.joined != h->heard_joined[from]) {
                    h->heard_joined[from] = theirs.joined;
                    if (theirs.joined)
                        h->ctx->hooks->join_heard(h->ctx, from, theirs.joined - 1);
                }
                checked = 1;
            }
        }
        if (!moved && drain)
            moved = c10di_p2p_drain(h);
        if (moved) {
            idle = 0;
            continue;
        }
        idle++;
        if (tcp_only) {
            struct pollfd p[2];
            int np = 0;
            if (out.done < send_total)
                p[np++] = (struct pollfd){lt->fd[ch], POLLOUT, 0};
            if (in.done < recv_total)
                p[np++] = (struct pollfd){lf->fd[ch], POLLIN, 0};
            poll(p, (nfds_t)np, 20);
        } else if (!c10di_idle_wait(idle)) {
            continue;
        }
        c10d_status st = c10di_be_check(h->ctx, c, in.done < recv_total ? from : to);
        if (st != C10D_OK)
            return st;
    }
    return C10D_OK;
}

c10d_status c10di_xfer(c10di_host *h, const c10di_coll *c, int ch, int to, const void *sbuf,
                       size_t slen, int from, void *rbuf, size_t rlen)
{
    h->in_xfer++;
    c10d_status st = xfer(h, c, ch, to, sbuf, slen, from, rbuf, rlen);
    h->in_xfer--;
    return st;
}

/* --- join: what a joined rank waits for --- */

/* The first bytes waiting on peer's collective channel, not consumed:
 * how many (0: none yet), or -1 if the peer closed. */
static ssize_t peek_link(c10di_link *l, void *p, size_t len)
{
    if (l->shm)
        return c10di_ring_peek(&l->in[CH_COLL], p, len);
    ssize_t k = recv(l->fd[CH_COLL], p, len, MSG_PEEK | MSG_DONTWAIT);
    if (k == 0)
        return -1;
    if (k < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    return k;
}

/* A joined rank waiting to shadow collective seq found something else at
 * the front of peer's channel. */
static c10d_status stray(c10di_host *h, uint64_t seq, int peer, const coll_hdr *got)
{
    const c10di_be_ctx *x = h->ctx;
    char f[160], report[1024];
    c10dc_fp fp = fp_of(got);
    if (got->magic != HDR_MAGIC || got->group != h->group_hash)
        snprintf(report, sizeof report, "desync in group %s (job %s): rank %d, which joined, "
                 "waits to shadow collective #%llu, but received bytes from rank %d that are not "
                 "%s", x->group, x->job, h->me, (unsigned long long)seq, peer,
                 got->magic != HDR_MAGIC ? "a collective's" : "this group's");
    else
        snprintf(report, sizeof report, "desync in group %s (job %s) at collective #%llu: rank "
                 "%d, which joined, waits to shadow #%llu, but rank %d sent #%llu %s, which "
                 "this rank has passed", x->group, x->job, (unsigned long long)got->seq,
                 h->me, (unsigned long long)seq, peer, (unsigned long long)got->seq,
                 c10dc_fp_format(&fp, f, sizeof f));
    c10di_be_alert(x, C10D_EDESYNC, report);
    return c10di_error(C10D_EDESYNC, "join_end of group %s (rank %d): %s", x->group, h->me,
                       report);
}

static c10d_status gone_while_peeking(c10di_host *h, uint64_t seq, int peer)
{
    c10di_coll probe;
    memset(&probe, 0, sizeof probe);
    probe.seq = seq;
    probe.deadline_ms = INT64_MAX;
    snprintf(probe.what, sizeof probe.what, "#%llu (shadowed: this rank joined)",
             (unsigned long long)seq);
    return peer_gone(h, &probe, peer);
}

c10d_status c10di_host_peek(c10di_host *h, uint64_t seq, int *found, c10di_peeked *out)
{
    *found = 0;
    c10di_tcp_accept_ready(h); /* a higher rank that links to this one to send it a header */
    for (int k = 1; k < h->n; k++) {
        int peer = (h->me + h->n - k) % h->n; /* the left neighbour first: rings start there */
        if (!c10di_tcp_linked(h, peer)) {
            /* A lower rank waits for this one to dial: a joined rank dials
             * every lower peer it has no link to, once, as it starts to
             * listen for headers. */
            if (peer > h->me)
                continue;
            c10di_coll probe;
            memset(&probe, 0, sizeof probe);
            probe.seq = seq;
            probe.deadline_ms = c10d_now_ms() + h->ctx->timeout_ms;
            snprintf(probe.what, sizeof probe.what, "#%llu (shadowed: this rank joined)",
                     (unsigned long long)seq);
            c10d_status st = c10di_tcp_link(h, peer, &probe);
            if (st != C10D_OK)
                return st;
        }
        coll_hdr x;
        ssize_t got = peek_link(&h->links[peer], &x, sizeof x);
        if (got < 0)
            return gone_while_peeking(h, seq, peer);
        if ((size_t)got < sizeof x)
            continue;
        int ours = x.magic == HDR_MAGIC && x.group == h->group_hash;
        if (ours && x.seq > seq)
            continue; /* a later collective: another peer's header for seq comes first */
        if (ours && x.kind == C10DC_MONITORED_BARRIER) {
            /* Only ever announced (it meets through the store): taken now.
             * Every active rank announces it; the copies of one already
             * met are dropped. */
            span sp = {&x, sizeof x, NULL, 0, 0};
            while (sp.done < sizeof x) {
                ssize_t r = try_recv(&h->links[peer], CH_COLL, &sp);
                if (r < 0)
                    return gone_while_peeking(h, seq, peer);
                sp.done += (size_t)r;
            }
            if (x.seq < seq) {
                k--; /* this peer again */
                continue;
            }
        } else if (!ours || x.seq < seq) {
            return stray(h, seq, peer, &x);
        }
        out->fp = fp_of(&x);
        out->divisor = x.divisor;
        out->from = peer;
        out->region = x.region;
        out->alone = x.alone != 0;
        *found = 1;
        if (x.joined != h->heard_joined[peer]) {
            h->heard_joined[peer] = x.joined;
            if (x.joined)
                h->ctx->hooks->join_heard(h->ctx, peer, x.joined - 1);
        }
        return C10D_OK;
    }
    return C10D_OK;
}

void c10di_host_announce(c10di_host *h, const c10di_coll *c, int to)
{
    if (to < 0 || to >= h->n || to == h->me)
        return;
    if (h->in_xfer) {
        /* Found while waiting in a transfer (c10di_pg_check): the link may
         * hold half of that transfer's bytes, and the group fails anyway.
         * Whole or not at all, without waiting for room. */
        coll_hdr x = hdr_of(h, c);
        span sp = {&x, sizeof x, NULL, 0, 0};
        c10di_link *l = &h->links[to];
        if (!c10di_tcp_linked(h, to) || (l->shm && c10di_ring_room(&l->out[CH_COLL]) < sizeof x))
            return;
        for (int i = 0; i < 10000 && sp.done < sizeof x; i++) {
            ssize_t k = try_send(l, CH_COLL, &sp);
            if (k < 0)
                return;
            sp.done += (size_t)k;
            if (!k)
                usleep(100);
        }
        return;
    }
    /* The header alone, whole, as any transfer: it waits for room (a
     * joined rank may still be taking the headers of calls the last active
     * rank ran alone) until the call's deadline or the peer's loss. As a
     * shadow's wait, so that it does not check c against the joins again
     * (that check is what refused c and called this). */
    c10di_coll probe = *c;
    probe.shadow = 1;
    probe.alone = 0;
    (void)c10di_xfer(h, &probe, CH_COLL, to, NULL, 0, -1, NULL, 0);
}
