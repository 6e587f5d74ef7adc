#include "raw_client.h"

#include "frame.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int raw_connect(const char *url)
{
    const char *hp = strstr(url, "://") ? strstr(url, "://") + 3 : url;
    char host[128];
    const char *colon = strrchr(hp, ':');
    if (!colon)
        return -1;
    snprintf(host, sizeof host, "%.*s", (int)(colon - hp), hp);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int raw_write_all(int fd, const void *buf, size_t len)
{
    for (size_t off = 0; off < len;) {
        ssize_t n = send(fd, (const char *)buf + off, len - off, MSG_NOSIGNAL);
        if (n <= 0)
            return -1;
        off += (size_t)n;
    }
    return 0;
}

uint8_t *raw_frame(const C10dpb__Request *req, uint64_t id, size_t *len)
{
    size_t n = c10dpb__request__get_packed_size(req);
    uint8_t *buf = malloc(C10DC_FRAME_HDR + n);
    if (!buf)
        return NULL;
    c10dc_frame_header(buf, id, n);
    c10dpb__request__pack(req, buf + C10DC_FRAME_HDR);
    *len = C10DC_FRAME_HDR + n;
    return buf;
}

int raw_send(int fd, const C10dpb__Request *req, uint64_t id)
{
    size_t len;
    uint8_t *buf = raw_frame(req, id, &len);
    int rc = buf ? raw_write_all(fd, buf, len) : -1;
    free(buf);
    return rc;
}

static int read_full(int fd, uint8_t *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

C10dpb__Reply *raw_read_reply(int fd, int timeout_ms, uint64_t *id)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t hdr[C10DC_FRAME_HDR];
    if (read_full(fd, hdr, sizeof hdr) != 0 || c10dc_get_u32(hdr) < 8)
        return NULL;
    size_t len = c10dc_get_u32(hdr) - 8;
    uint8_t *body = malloc(len ? len : 1);
    if (!body || read_full(fd, body, len) != 0) {
        free(body);
        return NULL;
    }
    if (id)
        *id = c10dc_get_u64(hdr + 4);
    C10dpb__Reply *rep = c10dpb__reply__unpack(NULL, len, body);
    free(body);
    return rep;
}
