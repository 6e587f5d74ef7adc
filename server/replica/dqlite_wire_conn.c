/* The connection to a dqlite node (dqlite_wire.h): dialing it (an
 * abstract unix socket or IPv4 TCP) with every call bounded by the
 * connection's timeout, the handshake, and one request's exchange: the
 * 8-byte header framed and sent, the response read whole, a FAILURE
 * taken into the connection's code and its message recorded (failure.h).
 * Apart from dqlite_wire.c, which builds each request's body and decodes
 * each response's: this file is the socket, that one the messages, and
 * neither needs the other's details beyond dqlite_wire_internal.h. */
#include "replica/dqlite_wire.h"

#include "failure.h"
#include "replica/dqlite_wire_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define PROTOCOL_VERSION 1
/* A response larger than this is taken for garbage, not allocated. */
#define MAX_BODY (UINT64_C(1) << 30)

/* --- the connection's state and its errors --- */

int c10ds_dq_wire_error(c10ds_dq *d, const char *fmt, ...)
{
    char msg[C10DS_FAILURE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    d->code = 0;
    return c10ds_failed(C10D_ERROR, "%s", msg);
}

uint64_t c10ds_dq_code(const c10ds_dq *d)
{
    return d->code;
}

/* Why a read or write failed: SO_RCVTIMEO and SO_SNDTIMEO end a blocked
 * call with EAGAIN, which strerror calls "Resource temporarily
 * unavailable". */
static const char *io_why(void)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return "timed out (the node did not answer within the connection's timeout)";
    return errno ? strerror(errno) : "the node closed the connection";
}

/* Moves all n bytes: sends them (writing) or receives them; -1 when the
 * socket fails, times out or (receiving) the node closed it (errno 0). */
static int move_all(int fd, uint8_t *p, size_t n, int writing)
{
    while (n) {
        errno = 0;
        ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    return move_all(fd, (uint8_t *)p, n, 1);
}

static int read_all(int fd, uint8_t *p, size_t n)
{
    return move_all(fd, p, n, 0);
}

/* Reads one response into d->in. */
int c10ds_dq_recv_response(c10ds_dq *d)
{
    uint8_t h[8];
    if (read_all(d->fd, h, 8) != 0)
        return c10ds_dq_wire_error(d, "reading a response: %s", io_why());
    uint64_t len = (uint64_t)c10ds_dq_get_u32(h) * 8;
    if (len > MAX_BODY)
        return c10ds_dq_wire_error(d, "a response of %llu bytes: not dqlite's protocol",
                                   (unsigned long long)len);
    free(d->in);
    d->in = malloc(len ? len : 1);
    if (!d->in)
        return c10ds_dq_wire_error(d, "out of memory reading a %llu-byte response",
                                   (unsigned long long)len);
    if (read_all(d->fd, d->in, len) != 0)
        return c10ds_dq_wire_error(d, "reading a response: %s", io_why());
    d->in_len = len;
    d->in_type = h[4];
    return 0;
}

/* Sends the request built (of type `type`) and reads its response, which
 * must be `want`: a FAILURE is C10DS_DQ_FAILED with its code and message. */
int c10ds_dq_roundtrip(c10ds_dq *d, uint8_t type, uint8_t want)
{
    c10ds_dq_pad(d);
    size_t body = d->out_len - 8;
    if (body == 0) { /* every request has a body: an empty one is a zero word */
        c10ds_dq_put_u64(d, 0);
        body = 8;
    }
    uint8_t *h = d->out;
    uint32_t words = (uint32_t)(body / 8);
    for (int i = 0; i < 4; i++)
        h[i] = (uint8_t)(words >> (8 * i));
    h[4] = type;
    h[5] = h[6] = h[7] = 0;
    if (write_all(d->fd, d->out, d->out_len) != 0)
        return c10ds_dq_wire_error(d, "sending a request: %s", io_why());
    if (c10ds_dq_recv_response(d) != 0)
        return -1;
    if (d->in_type == C10DS_DQ_RES_FAILURE) {
        if (d->in_len < 8)
            return c10ds_dq_wire_error(d, "a FAILURE response of %zu bytes", d->in_len);
        size_t off = 8;
        const char *m = c10ds_dq_get_text(d->in, d->in_len, &off);
        d->code = c10ds_dq_get_u64(d->in);
        c10ds_failed(C10D_ERROR, "%s", m ? m : "(no message)");
        return C10DS_DQ_FAILED;
    }
    if (d->in_type != want)
        return c10ds_dq_wire_error(d, "response type %u to request type %u (wanted %u)",
                                   d->in_type, type, want);
    d->code = 0;
    return 0;
}

/* --- connecting --- */

/* Bounds every call on fd, connect included (Linux applies SO_SNDTIMEO
 * to a blocking connect): a node on a host that does not answer fails
 * in timeout_ms, not in the kernel's two minutes. */
static void set_timeouts(int fd, c10d_ms timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int dial(const char *address, c10d_ms timeout_ms)
{
    int fd;
    if (address[0] == '@') {
        struct sockaddr_un u;
        memset(&u, 0, sizeof u);
        u.sun_family = AF_UNIX;
        size_t n = strlen(address + 1);
        if (n + 1 > sizeof u.sun_path)
            return c10ds_failed(C10D_ERROR, "abstract socket name %s is too long", address);
        memcpy(u.sun_path + 1, address + 1, n); /* sun_path[0] = 0: abstract */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0)
            set_timeouts(fd, timeout_ms);
        if (fd >= 0 &&
            connect(fd, (struct sockaddr *)&u, (socklen_t)(sizeof(sa_family_t) + 1 + n)) == 0)
            return fd;
    } else {
        char host[64];
        const char *colon = strrchr(address, ':');
        struct sockaddr_in in;
        memset(&in, 0, sizeof in);
        in.sin_family = AF_INET;
        if (!colon || (size_t)(colon - address) >= sizeof host)
            return c10ds_failed(C10D_ERROR, "%s: want @name or an IPv4 address:port", address);
        memcpy(host, address, (size_t)(colon - address));
        host[colon - address] = '\0';
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (*end || port <= 0 || port > 65535 || inet_pton(AF_INET, host, &in.sin_addr) != 1)
            return c10ds_failed(C10D_ERROR, "%s: want @name or an IPv4 address:port", address);
        in.sin_port = htons((uint16_t)port);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        /* small requests, answered one by one: no Nagle delay */
        if (fd >= 0) {
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            set_timeouts(fd, timeout_ms);
        }
        if (fd >= 0 && connect(fd, (struct sockaddr *)&in, sizeof in) == 0)
            return fd;
    }
    c10ds_failed(C10D_ERROR, "cannot connect to dqlite node %s: %s", address,
                 errno == EAGAIN || errno == EINPROGRESS ? "timed out" : strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

int c10ds_dq_connect(c10ds_dq **out, const char *address, c10d_ms timeout_ms)
{
    *out = NULL;
    /* every call is bounded: a node that stops answering fails it */
    int fd = dial(address, timeout_ms);
    if (fd < 0)
        return -1;
    uint8_t hello[8] = {PROTOCOL_VERSION, 0, 0, 0, 0, 0, 0, 0};
    c10ds_dq *d = calloc(1, sizeof *d);
    if (!d || write_all(fd, hello, sizeof hello) != 0) {
        c10ds_failed(C10D_ERROR, "dqlite node %s: %s", address,
                     d ? strerror(errno) : "out of memory");
        free(d);
        close(fd);
        return -1;
    }
    d->fd = fd;
    *out = d;
    return 0;
}

void c10ds_dq_interrupt(c10ds_dq *d)
{
    if (d)
        shutdown(d->fd, SHUT_RDWR);
}

void c10ds_dq_close(c10ds_dq *d)
{
    if (!d)
        return;
    close(d->fd);
    free(d->out);
    free(d->in);
    free(d);
}
