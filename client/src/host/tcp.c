/* TCP links between ranks on different hosts (or everywhere, with
 * C10D_HOST_TRANSPORT=tcp). Each group opens its own listener; of each
 * pair the higher rank connects, twice (one connection per channel), and
 * says who it is with a hello carrying the group's cookie, so a stray
 * connection is never taken for a peer. Sockets are non-blocking: the
 * progress loop (xfer.c) sends and receives at once. */
#define _GNU_SOURCE /* accept4 */
#include "host.h"

#include "c10d_time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    uint64_t cookie;
    uint32_t rank, ch;
} hello_msg;

static void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* An address text (IPv4 or IPv6) and port as a socket address; 0 or -1. */
static int sockaddr_of(const char *addr, int port, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *len = sizeof *v4;
        return 0;
    }
    if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *len = sizeof *v6;
        return 0;
    }
    return -1;
}

/* Listens on the address peers are told (h->addr, IPv4 or IPv6), not on
 * every interface; on any address of its family only when that one is not
 * this host's (a C10D_HOST_ADDR behind NAT). */
c10d_status c10di_tcp_listen(c10di_host *h)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (sockaddr_of(h->addr, 0, &ss, &len) != 0)
        sockaddr_of("0.0.0.0", 0, &ss, &len);
    /* Non-blocking: connections are taken until none is queued (tcp.c's
     * admission), never waited for in accept. */
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return c10di_error(C10D_EBACKEND, "socket: %s", strerror(errno));
    int rc = bind(fd, (struct sockaddr *)&ss, len);
    if (rc != 0 && errno == EADDRNOTAVAIL) {
        sockaddr_of(ss.ss_family == AF_INET6 ? "::" : "0.0.0.0", 0, &ss, &len);
        rc = bind(fd, (struct sockaddr *)&ss, len);
    }
    socklen_t sl = sizeof ss;
    if (rc != 0 || listen(fd, 1024) != 0 || getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        c10d_status st = c10di_error(C10D_EBACKEND, "cannot listen for peers on %s: %s", h->addr,
                                     strerror(errno));
        close(fd);
        return st;
    }
    h->listen_fd = fd;
    h->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    return C10D_OK;
}

/* MSG_NOSIGNAL: a peer that closed must fail this call, not kill the
 * user's process with SIGPIPE. The socket may be non-blocking. */
static int write_all(int fd, const void *p, size_t n, int64_t deadline)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pf = {fd, POLLOUT, 0};
            int left = (int)(deadline - c10d_now_ms());
            if (left <= 0)
                return -1;
            poll(&pf, 1, left > 100 ? 100 : left);
            continue;
        }
        if (k <= 0)
            return -1;
        p = (const char *)p + k;
        n -= (size_t)k;
    }
    return 0;
}

/* Starts a non-blocking connect: 0 (done or under way) or an errno. */
static int connect_start(int fd, const struct sockaddr_storage *sa, socklen_t len)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (connect(fd, (const struct sockaddr *)sa, len) == 0 || errno == EINPROGRESS)
        return 0;
    return errno;
}

/* Waits at most ms for a connect under way: 0 connected, EINPROGRESS
 * still under way (the same socket goes on: a handshake may need the
 * SYN resent after a second), or the connect's errno. */
static int connect_wait(int fd, int ms)
{
    struct pollfd p = {fd, POLLOUT, 0};
    int r = poll(&p, 1, ms);
    if (r == 0 || (r < 0 && errno == EINTR))
        return EINPROGRESS;
    if (r < 0)
        return errno;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        return errno;
    return err;
}

/* Connects to sa, waiting in slices of 200 ms so that `check` can end the
 * wait between them (the group's deadline, a peer's loss): a blocking
 * connect to an address that drops packets waits minutes. A refused
 * connect is tried again on a fresh socket (the peer is not listening
 * yet). `who` names the peer in errors ("rank 0 at 10.0.0.1:4000"). */
c10d_status c10di_tcp_dial(const struct sockaddr_storage *sa, socklen_t salen, const char *who,
                           c10di_dial_check check, void *arg, int *out)
{
    int fd = -1, err = ECONNREFUSED;
    for (;;) {
        if (err == ECONNREFUSED) {
            if (fd >= 0)
                close(fd);
            if ((fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
                return c10di_error(C10D_EBACKEND, "socket: %s", strerror(errno));
            err = connect_start(fd, sa, salen);
        }
        if (err == 0 && (err = connect_wait(fd, 200)) == 0)
            break;
        c10d_status st = check(arg);
        if (st != C10D_OK) {
            close(fd);
            return st;
        }
        if (err == EINPROGRESS) {
            err = 0; /* the same connect goes on */
        } else if (err == ECONNREFUSED) {
            usleep(10000);
        } else {
            close(fd);
            return c10di_error(C10D_EBACKEND, "cannot connect to %s: %s", who, strerror(err));
        }
    }
    tune(fd);
    *out = fd;
    return C10D_OK;
}

int c10di_tcp_linked(const c10di_host *h, int peer)
{
    const c10di_link *l = &h->links[peer];
    return peer == h->me || l->shm || (l->fd[CH_COLL] >= 0 && l->fd[CH_P2P] >= 0);
}

/* Admission. A peer dials, then writes its hello at once; a stranger
 * (a port scanner, a stale peer of another job) may write nothing. So
 * connections are taken from the listener without waiting, and their
 * hellos read as they come, beside every other wait: a silent one costs
 * a slot for at most HELLO_DEADLINE_MS, and when the slots are full the
 * oldest goes, so strangers never hold a peer's link up (nine silent
 * connections delayed new_group by 45 s when each was read with a 5 s
 * wait of its own). All of it under link_mu. */
#define HELLO_DEADLINE_MS 2000

_Static_assert(sizeof(hello_msg) == sizeof(((struct c10di_admitting *)0)->hello), "hello size");

static void drop_admitting(c10di_host *h, int i)
{
    close(h->admitting[i].fd);
    h->admitting[i] = h->admitting[--h->n_admitting];
}

/* The hello came whole: a link of ours, or closed. */
static void admit(c10di_host *h, int i)
{
    hello_msg m;
    memcpy(&m, h->admitting[i].hello, sizeof m);
    if (m.cookie != h->cookie || m.rank >= (uint32_t)h->n || (int)m.rank <= h->me ||
        m.ch >= CH_COUNT || h->links[m.rank].fd[m.ch] >= 0) {
        drop_admitting(h, i); /* not one of ours */
        return;
    }
    int fd = h->admitting[i].fd;
    h->admitting[i] = h->admitting[--h->n_admitting];
    tune(fd);
    h->links[m.rank].fd[m.ch] = fd;
}

/* Reads what the sockets being admitted have sent, without waiting; 1 if
 * a link was made. */
static int read_hellos(c10di_host *h)
{
    int linked = 0;
    int64_t now = c10d_now_ms();
    for (int i = h->n_admitting - 1; i >= 0; i--) {
        struct c10di_admitting *a = &h->admitting[i];
        ssize_t k = read(a->fd, a->hello + a->got, sizeof a->hello - a->got);
        if (k > 0)
            a->got += (size_t)k;
        if (a->got == sizeof a->hello) {
            admit(h, i);
            linked = 1;
        } else if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR) ||
                   now > a->deadline_ms) {
            drop_admitting(h, i);
        }
    }
    return linked;
}

/* Takes every queued connection from the listener, without waiting. */
static void take_queued(c10di_host *h)
{
    for (;;) {
        int fd = accept4(h->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return; /* none queued (or out of fds: the next call tries again) */
        if (h->n_admitting == C10DI_ADMITTING) {
            int oldest = 0;
            for (int i = 1; i < h->n_admitting; i++)
                if (h->admitting[i].deadline_ms < h->admitting[oldest].deadline_ms)
                    oldest = i;
            drop_admitting(h, oldest);
        }
        h->admitting[h->n_admitting++] =
            (struct c10di_admitting){fd, 0, {0}, c10d_now_ms() + HELLO_DEADLINE_MS};
    }
}

/* link_mu held. */
static int admit_ready(c10di_host *h)
{
    take_queued(h);
    return read_hellos(h);
}

int c10di_tcp_accept_ready(c10di_host *h)
{
    if (h->listen_fd < 0 || pthread_mutex_trylock(&h->link_mu) != 0)
        return 0;
    int any = admit_ready(h);
    pthread_mutex_unlock(&h->link_mu);
    return any;
}

int c10di_tcp_admission_fds(c10di_host *h, struct pollfd *fds)
{
    if (h->listen_fd < 0)
        return 0;
    int n = 0;
    fds[n++] = (struct pollfd){h->listen_fd, POLLIN, 0};
    pthread_mutex_lock(&h->link_mu);
    for (int i = 0; i < h->n_admitting; i++)
        fds[n++] = (struct pollfd){h->admitting[i].fd, POLLIN, 0};
    pthread_mutex_unlock(&h->link_mu);
    return n;
}

typedef struct {
    c10di_host *h;
    const c10di_coll *c;
    int peer;
} link_check;

static c10d_status check_link(void *arg)
{
    link_check *k = arg;
    return c10di_be_check(k->h->ctx, k->c, k->peer);
}

/* This rank dials peer (a lower rank) on every channel not yet up
 * (link_mu held: the wait is for a connect, never for the peer). */
static c10d_status dial(c10di_host *h, int peer, const c10di_coll *c)
{
    c10di_link *l = &h->links[peer];
    c10d_status st;
    if (!l->port) {
        ProtobufCBinaryData ep = {0, NULL};
        int left = (int)(c->deadline_ms - c10d_now_ms());
        if ((st = h->ctx->hooks->fetch_endpoints(h->ctx, &peer, 1, &ep,
                                                 left > 1000 ? left : 1000)) != C10D_OK)
            return st;
        st = c10di_host_learn(h, peer, &ep);
        free(ep.data);
        if (st != C10D_OK)
            return st;
        if (!l->port)
            return c10di_error(C10D_EBACKEND, "rank %d of group %s published no TCP address",
                               peer, h->ctx->group);
    }
    struct sockaddr_storage sa;
    socklen_t salen;
    if (sockaddr_of(l->addr, l->port, &sa, &salen) != 0)
        return c10di_error(C10D_EBACKEND, "rank %d published a bad address '%s'", peer, l->addr);
    char who[128];
    snprintf(who, sizeof who, "rank %d at %s:%d", peer, l->addr, l->port);
    for (int ch = 0; ch < CH_COUNT; ch++) {
        if (l->fd[ch] >= 0)
            continue;
        link_check k = {h, c, peer};
        int fd;
        if ((st = c10di_tcp_dial(&sa, salen, who, check_link, &k, &fd)) != C10D_OK)
            return st;
        hello_msg m = {h->cookie, (uint32_t)h->me, (uint32_t)ch};
        if (write_all(fd, &m, sizeof m, c->deadline_ms) != 0) {
            close(fd);
            return c10di_error(C10D_EBACKEND, "%s closed the connection", who);
        }
        l->fd[ch] = fd;
    }
    return C10D_OK;
}

c10d_status c10di_tcp_link(c10di_host *h, int peer, const c10di_coll *c)
{
    if (peer < 0 || c10di_tcp_linked(h, peer))
        return C10D_OK;
    if (peer < h->me) {
        pthread_mutex_lock(&h->link_mu);
        c10d_status st = c10di_tcp_linked(h, peer) ? C10D_OK : dial(h, peer, c);
        pthread_mutex_unlock(&h->link_mu);
        return st;
    }
    /* The higher rank dials: wait for it, taking whoever else comes. */
    int drain = c->kind == C10DC_SEND;
    while (!c10di_tcp_linked(h, peer)) {
        if (h->listen_fd < 0)
            return c10di_error(C10D_EBACKEND, "group %s has no listener for rank %d's link",
                               h->ctx->group, peer);
        pthread_mutex_lock(&h->link_mu); /* another thread may be admitting too */
        int linked = admit_ready(h);
        pthread_mutex_unlock(&h->link_mu);
        if (linked)
            continue;
        struct pollfd fds[1 + C10DI_ADMITTING];
        int nfds = c10di_tcp_admission_fds(h, fds);
        if (poll(fds, (nfds_t)nfds, drain ? 5 : 50) > 0)
            continue;
        if (drain)
            c10di_p2p_drain(h);
        c10d_status st = c10di_be_check(h->ctx, c, peer);
        if (st != C10D_OK)
            return st;
    }
    return C10D_OK;
}

void c10di_tcp_close(c10di_host *h)
{
    for (int j = 0; h->links && j < h->n; j++)
        for (int ch = 0; ch < CH_COUNT; ch++)
            if (h->links[j].fd[ch] >= 0) {
                close(h->links[j].fd[ch]);
                h->links[j].fd[ch] = -1;
            }
    while (h->n_admitting > 0)
        drop_admitting(h, 0);
    if (h->listen_fd >= 0) {
        close(h->listen_fd);
        h->listen_fd = -1;
    }
}
