/* Telling what a server is that does not answer as a coordinator
 * (server_probe.h). Plain sockets, each question on a fresh connection:
 * a server confused by one question must not spoil the next. */
#include "server_probe.h"

#include "url.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "c10d_time.h"

#define CONNECT_MS 300
/* A server that speaks first (SSH, SMTP) does so at once. */
#define GREETING_MS 100
/* Each answer: a local or LAN server answers in well under this. */
#define ANSWER_MS 250
/* PyTorch TCPStore (torch 2.2 on) opens with VALIDATE (0) and this. */
#define TS_MAGIC 0x3C85F7CEu

static int connect_to(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
            close(fd);
            fd = -1;
            continue;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t len = sizeof err;
        if (poll(&p, 1, CONNECT_MS) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
            err != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

static int send_all(int fd, const void *b, size_t n)
{
    const uint8_t *p = b;
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EAGAIN) {
            struct pollfd q = {.fd = fd, .events = POLLOUT};
            if (poll(&q, 1, ANSWER_MS) != 1)
                return -1;
            continue;
        }
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Reads up to n bytes within ms (fewer at the end of the stream or the
 * time); returns how many. */
static size_t read_for(int fd, uint8_t *b, size_t n, int ms)
{
    size_t got = 0;
    int64_t until = c10d_now_ms() + ms;
    while (got < n) {
        int64_t left = until - c10d_now_ms();
        struct pollfd q = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&q, 1, (int)left) != 1)
            break;
        ssize_t k = recv(fd, b + got, n - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    return got;
}

/* The printable start of b (up to its first line's end), for a message. */
static void first_line(const uint8_t *b, size_t n, char *out, size_t outlen)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < outlen && b[i] != '\r' && b[i] != '\n'; i++)
        out[k++] = b[i] >= 0x20 && b[i] < 0x7f ? (char)b[i] : '?';
    out[k] = '\0';
}

/* A greeting, then HTTP's answer to a GET, on one connection. */
static int speaks_first_or_http(const char *host, const char *port, char *out, size_t outlen)
{
    int fd = connect_to(host, port);
    if (fd < 0)
        return 0;
    uint8_t b[256];
    char line[96];
    int found = 0;
    size_t n = read_for(fd, b, sizeof b, GREETING_MS);
    if (n) {
        first_line(b, n, line, sizeof line);
        if (!strncmp(line, "SSH-", 4))
            snprintf(out, outlen, "an SSH server (it greets with '%s')", line);
        else
            snprintf(out, outlen, "a server that speaks first, as a coordinator does not "
                     "(it greets with '%s')", line);
        found = 1;
    } else {
        char get[320];
        int k = snprintf(get, sizeof get, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", host);
        if (k > 0 && (size_t)k < sizeof get && send_all(fd, get, (size_t)k) == 0 &&
            (n = read_for(fd, b, 12, ANSWER_MS)) >= 5 && !memcmp(b, "HTTP/", 5)) {
            n += read_for(fd, b + n, sizeof b - n, 20);
            first_line(b, n, line, sizeof line);
            snprintf(out, outlen, "an HTTP server (it answered '%s')", line);
            found = 1;
        }
    }
    close(fd);
    return found;
}

/* Sends q on a fresh connection; 1 when want bytes come back
 * within ANSWER_MS (and, with expect, those bytes). */
static int answers(const char *host, const char *port, const uint8_t *q, size_t qlen,
                   size_t want, const uint8_t *expect)
{
    int fd = connect_to(host, port);
    if (fd < 0)
        return 0;
    uint8_t a[16];
    int found = send_all(fd, q, qlen) == 0 && read_for(fd, a, want, ANSWER_MS) == want &&
                (!expect || !memcmp(a, expect, want));
    close(fd);
    return found;
}

/* torch 2.2 on: VALIDATE, then PING, which is answered with its nonce. */
static int tcpstore_v2(const char *host, const char *port)
{
    uint8_t q[10] = {0};
    uint32_t magic = TS_MAGIC, nonce = 0x63313064u; /* "d01c" */
    memcpy(q + 1, &magic, 4); /* TCPStore's integers: the host's order */
    q[5] = 13;                /* PING */
    memcpy(q + 6, &nonce, 4);
    return answers(host, port, q, sizeof q, 4, q + 6);
}

/* torch up to 2.1: GETNUMKEYS (6), answered with a 64-bit count. */
static int tcpstore_v1(const char *host, const char *port)
{
    const uint8_t q = 6;
    return answers(host, port, &q, 1, 8, NULL);
}

int c10dc_identify_server(const char *url, char *out, size_t outlen)
{
    char host[256], port[16];
    if (strncmp(url, "tcp://", 6) != 0 ||
        c10dc_url_split(url, host, sizeof host, port, sizeof port) != 0)
        return 0;
    /* HTTP first: a TCPStore closes at once on a GET; an HTTP server
     * would sit on TCPStore's bytes waiting for a line. */
    if (speaks_first_or_http(host, port, out, outlen))
        return 1;
    if (tcpstore_v2(host, port)) {
        snprintf(out, outlen, "a PyTorch TCPStore (torch 2.2 or later)");
        return 1;
    }
    if (tcpstore_v1(host, port)) {
        snprintf(out, outlen, "a PyTorch TCPStore (torch 2.1 or earlier)");
        return 1;
    }
    return 0;
}
