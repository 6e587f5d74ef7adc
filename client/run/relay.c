/* Each line of a rank goes out in one write(2), prefix and all, so that
 * two ranks' lines never interleave: a rank's partial line waits in its
 * buffer until its newline (or its end), whatever the others print
 * meanwhile. */
#define _GNU_SOURCE /* pipe2 */
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

int relay_open(relay *r, int dst, const char *prefix, const char *log_path)
{
    int p[2];
    r->fd = r->child_fd = r->log = -1;
    r->dst = dst;
    r->prefix = prefix;
    r->len = 0;
    if (pipe2(p, O_CLOEXEC) != 0) {
        fprintf(stderr, "c10d-run: pipe: %s\n", strerror(errno));
        return -1;
    }
    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
    r->fd = p[0];
    r->child_fd = p[1];
    if (log_path &&
        (r->log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        fprintf(stderr, "c10d-run: --log-dir: cannot open %s: %s\n", log_path, strerror(errno));
        relay_close(r);
        return -1;
    }
    return 0;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* a closed stdout (EPIPE): the rank's output is dropped, not the job */
        p += w, n -= (size_t)w;
    }
}

/* One line (without its newline), prefixed, ended, in one write. */
static void emit(const relay *r, const char *p, size_t n)
{
    struct iovec v[3] = {{(void *)r->prefix, strlen(r->prefix)}, {(void *)p, n}, {"\n", 1}};
    size_t total = v[0].iov_len + n + 1;
    ssize_t w;
    do
        w = writev(r->dst, v, 3);
    while (w < 0 && errno == EINTR);
    if (w >= 0 && (size_t)w < total) { /* short write (a pipe near full): the rest, in order */
        char buf[RELAY_LINE_MAX + 64];
        size_t off = 0;
        for (int i = 0; i < 3; i++)
            memcpy(buf + off, v[i].iov_base, v[i].iov_len), off += v[i].iov_len;
        write_all(r->dst, buf + w, total - (size_t)w);
    }
}

int relay_read(relay *r)
{
    /* A few reads a call: a rank that prints without pause must not keep
     * the launcher from the other ranks, reaping and its signals. */
    for (int reads = 0; r->fd >= 0 && reads < 16; reads++) {
        ssize_t n = read(r->fd, r->line + r->len, sizeof r->line - r->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) /* EAGAIN: nothing more now */
            return 0;
        if (n == 0) {
            relay_close(r);
            return 1;
        }
        if (r->log >= 0)
            write_all(r->log, r->line + r->len, (size_t)n);
        size_t end = r->len + (size_t)n, start = 0;
        for (size_t i = r->len; i < end; i++)
            if (r->line[i] == '\n') {
                emit(r, r->line + start, i - start);
                start = i + 1;
            }
        if (start == 0 && end == sizeof r->line) { /* a line longer than the buffer */
            emit(r, r->line, end);
            start = end;
        }
        memmove(r->line, r->line + start, end - start);
        r->len = end - start;
    }
    return 1;
}

void relay_close(relay *r)
{
    if (r->len)
        emit(r, r->line, r->len);
    r->len = 0;
    if (r->fd >= 0)
        close(r->fd);
    if (r->child_fd >= 0)
        close(r->child_fd);
    if (r->log >= 0)
        close(r->log);
    r->fd = r->child_fd = r->log = -1;
}
