/* The one progress loop of the host backend: move bytes to one peer and
 * from another at the same time, over shared memory or TCP, so that rings
 * and pairwise exchanges never deadlock on full buffers.
 *
 * Waiting: spin briefly (a peer on another core answers in a microsecond),
 * then yield (ranks may outnumber cores), then sleep or poll. While
 * waiting, c10di_pg_check is asked every so often whether a member of the
 * group was lost or the deadline passed. */
#include "host.h"

#include "c10d_time.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

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

static ssize_t try_send(c10di_link *l, int ch, const void *p, size_t len)
{
    if (l->shm)
        return c10di_ring_write(&l->out[ch], p, len);
    ssize_t k = send(l->fd[ch], p, len, MSG_NOSIGNAL);
    if (k < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    return k;
}

static ssize_t try_recv(c10di_link *l, int ch, void *p, size_t len)
{
    if (l->shm)
        return c10di_ring_read(&l->in[ch], p, len);
    ssize_t k = recv(l->fd[ch], p, len, 0);
    if (k == 0)
        return -1; /* the peer closed */
    if (k < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    return k;
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
        c10d_status st = c10di_pg_check(h->pg, &probe, peer);
        if (st != C10D_OK)
            return st;
        usleep(5000);
    }
    return c10di_error(C10D_EPEERLOST, "%s of group %s (rank %d) failed: the connection to rank "
                       "%d (host %s, pid %d) closed", c->what, h->pg->name, h->me, peer,
                       h->links[peer].host, h->links[peer].pid);
}

c10d_status c10di_xfer(c10di_host *h, const c10di_coll *c, int ch, int to, const void *sbuf,
                       size_t slen, int from, void *rbuf, size_t rlen)
{
    c10di_link *lt = to >= 0 ? &h->links[to] : NULL, *lf = from >= 0 ? &h->links[from] : NULL;
    size_t sent = lt ? 0 : slen, got = lf ? 0 : rlen;
    int tcp_only = (!lt || !lt->shm) && (!lf || !lf->shm);
    unsigned idle = 0;
    while (sent < slen || got < rlen) {
        int moved = 0;
        if (sent < slen) {
            ssize_t k = try_send(lt, ch, (const uint8_t *)sbuf + sent, slen - sent);
            if (k < 0)
                return peer_gone(h, c, to);
            sent += (size_t)k;
            moved |= k > 0;
        }
        if (got < rlen) {
            ssize_t k = try_recv(lf, ch, (uint8_t *)rbuf + got, rlen - got);
            if (k < 0)
                return peer_gone(h, c, from);
            got += (size_t)k;
            moved |= k > 0;
        }
        if (moved) {
            idle = 0;
            continue;
        }
        idle++;
        if (tcp_only) {
            struct pollfd p[2];
            int np = 0;
            if (sent < slen)
                p[np++] = (struct pollfd){lt->fd[ch], POLLOUT, 0};
            if (got < rlen)
                p[np++] = (struct pollfd){lf->fd[ch], POLLIN, 0};
            poll(p, (nfds_t)np, 20);
        } else if (idle < 256) {
            cpu_relax();
            continue;
        } else if (idle < 4096) {
            sched_yield();
            if (idle % 64)
                continue;
        } else {
            struct timespec ts = {0, idle < 8192 ? 20000 : 200000};
            nanosleep(&ts, NULL);
        }
        c10d_status st = c10di_pg_check(h->pg, c, got < rlen ? from : to);
        if (st != C10D_OK)
            return st;
    }
    return C10D_OK;
}
