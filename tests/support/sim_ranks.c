#define _GNU_SOURCE
#include "sim_ranks.h"

#include "coord_proc.h"
#include "frame.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct sim_conn {
    sim_loop *loop;
    int fd;
    uint64_t client_id, next_id; /* request ids 1, 2, ...: tags[id - 1] */
    void **tags;
    size_t ntags, tcap;
    uint8_t *out;
    size_t olen, ocap, osent;
    uint8_t *in;
    size_t ilen, icap;
    int want_out; /* EPOLLOUT registered */
};

struct sim_loop {
    int ep;
    sim_on_reply cb;
    void *arg;
    sim_conn **conns;
    size_t n, cap;
};

double sim_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

sim_loop *sim_loop_new(sim_on_reply cb, void *arg)
{
    sim_loop *L = calloc(1, sizeof *L);
    if (!L)
        return NULL;
    L->ep = epoll_create1(EPOLL_CLOEXEC);
    L->cb = cb;
    L->arg = arg;
    return L;
}

static void conn_free(sim_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->tags);
    free(c->out);
    free(c->in);
    free(c);
}

void sim_loop_free(sim_loop *L)
{
    if (!L)
        return;
    for (size_t i = 0; i < L->n; i++)
        conn_free(L->conns[i]);
    free(L->conns);
    close(L->ep);
    free(L);
}

sim_conn *sim_connect(sim_loop *L, const char *url)
{
    char host[256];
    const char *p = strstr(url, "tcp://");
    if (!p)
        return NULL;
    snprintf(host, sizeof host, "%s", p + 6);
    char *colon = strrchr(host, ':');
    if (!colon)
        return NULL;
    *colon = '\0';
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
        return NULL;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return NULL;
    }
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    sim_conn *c = calloc(1, sizeof *c);
    if (!c || (L->n == L->cap && !(L->conns = realloc(L->conns, (L->cap = L->cap ? L->cap * 2 : 64) *
                                                                      sizeof *L->conns)))) {
        close(fd);
        free(c);
        return NULL;
    }
    c->loop = L;
    c->fd = fd;
    c->next_id = 1;
    c->client_id = ((uint64_t)rand() << 32) ^ (uint64_t)rand() ^ ((uint64_t)fd << 48) ^ 1;
    L->conns[L->n++] = c;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(L->ep, EPOLL_CTL_ADD, fd, &ev);
    return c;
}

static int grow(uint8_t **b, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    uint8_t *nb = realloc(*b, n);
    if (!nb)
        return -1;
    *b = nb;
    *cap = n;
    return 0;
}

static void want_out(sim_conn *c, int on)
{
    if (c->want_out == on || c->fd < 0)
        return;
    c->want_out = on;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(c->loop->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void flush(sim_conn *c)
{
    while (c->osent < c->olen) {
        ssize_t k = send(c->fd, c->out + c->osent, c->olen - c->osent, MSG_NOSIGNAL);
        if (k <= 0)
            break;
        c->osent += (size_t)k;
    }
    if (c->osent == c->olen)
        c->osent = c->olen = 0;
    want_out(c, c->olen > 0);
}

/* Packs req as client/request id and queues it. */
static int queue(sim_conn *c, C10dpb__Request *req, uint64_t client_id, uint64_t request_id)
{
    if (c->fd < 0)
        return -1;
    C10dpb__Identity who = C10DPB__IDENTITY__INIT;
    who.has_client_id = 1;
    who.client_id = client_id;
    req->who = &who;
    req->request_id = request_id;
    size_t len = c10dpb__request__get_packed_size(req);
    if (grow(&c->out, &c->ocap, c->olen + C10DC_FRAME_HDR + len) != 0) {
        req->who = NULL;
        return -1;
    }
    c10dc_frame_header(c->out + c->olen, req->request_id, len);
    c10dpb__request__pack(req, c->out + c->olen + C10DC_FRAME_HDR);
    c->olen += C10DC_FRAME_HDR + len;
    req->who = NULL;
    flush(c);
    return 0;
}

int sim_send(sim_conn *c, C10dpb__Request *req, void *tag)
{
    if (c->ntags == c->tcap) {
        size_t n = c->tcap ? c->tcap * 2 : 16;
        void **nt = realloc(c->tags, n * sizeof *nt);
        if (!nt)
            return -1;
        c->tags = nt;
        c->tcap = n;
    }
    if (queue(c, req, c->client_id, c->next_id) != 0)
        return -1;
    c->next_id++;
    c->tags[c->ntags++] = tag;
    return 0;
}

int sim_send_as(sim_conn *c, C10dpb__Request *req, void *tag, uint64_t client_id,
                uint64_t request_id)
{
    (void)tag; /* replies are matched to tags by sim_send's own ids */
    return queue(c, req, client_id, request_id);
}

void sim_close(sim_conn *c)
{
    if (c->fd < 0)
        return;
    epoll_ctl(c->loop->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
}

static void broke(sim_conn *c)
{
    sim_close(c);
    c->loop->cb(c, NULL, NULL, c->loop->arg);
}

static void readable(sim_conn *c)
{
    for (;;) {
        if (grow(&c->in, &c->icap, c->ilen + 65536) != 0)
            return broke(c);
        ssize_t k = recv(c->fd, c->in + c->ilen, c->icap - c->ilen, 0);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
            return broke(c);
        if (k < 0)
            break;
        c->ilen += (size_t)k;
        if ((size_t)k < 65536)
            break;
    }
    size_t off = 0;
    while (c->ilen - off >= C10DC_FRAME_HDR) {
        uint32_t n = c10dc_get_u32(c->in + off);
        if (c->ilen - off < 4 + (size_t)n)
            break;
        uint64_t id = c10dc_get_u64(c->in + off + 4);
        C10dpb__Reply *rep =
            c10dpb__reply__unpack(NULL, n - 8, c->in + off + C10DC_FRAME_HDR);
        void *tag = id >= 1 && id <= c->ntags ? c->tags[id - 1] : NULL;
        if (rep) {
            c->loop->cb(c, tag, rep, c->loop->arg);
            c10dpb__reply__free_unpacked(rep, NULL);
        }
        off += 4 + (size_t)n;
        if (c->fd < 0)
            return; /* the callback closed it */
    }
    memmove(c->in, c->in + off, c->ilen - off);
    c->ilen -= off;
}

int sim_run(sim_loop *L, int (*done)(void *arg), void *arg, int64_t deadline_ms)
{
    struct epoll_event ev[256];
    while (!done(arg)) {
        double left = (double)deadline_ms - sim_now_ms();
        if (left <= 0)
            return -1;
        int k = epoll_wait(L->ep, ev, 256, left > 100 ? 100 : (int)left + 1);
        for (int i = 0; i < k; i++) {
            sim_conn *c = ev[i].data.ptr;
            if (c->fd < 0)
                continue;
            if (ev[i].events & EPOLLOUT)
                flush(c);
            if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                readable(c);
        }
    }
    return 0;
}

/* One request, one reply, blocking: for a single question outside a loop. */
long sim_parked(const char *url)
{
    sim_loop *L = sim_loop_new(NULL, NULL);
    sim_conn *c = L ? sim_connect(L, url) : NULL;
    long parked = -1;
    C10dpb__CoordStatus st = C10DPB__COORD_STATUS__INIT;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_STATUS;
    req.status = &st;
    if (!c || sim_send(c, &req, NULL) != 0) {
        sim_loop_free(L);
        return -1;
    }
    int fl = fcntl(c->fd, F_GETFL);
    fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK);
    while (c->osent < c->olen) { /* what sim_send could not write at once */
        ssize_t k = send(c->fd, c->out + c->osent, c->olen - c->osent, MSG_NOSIGNAL);
        if (k <= 0)
            break;
        c->osent += (size_t)k;
    }
    uint8_t hdr[C10DC_FRAME_HDR];
    if (recv(c->fd, hdr, sizeof hdr, MSG_WAITALL) == (ssize_t)sizeof hdr) {
        size_t n = c10dc_get_u32(hdr) - 8;
        uint8_t *body = malloc(n ? n : 1);
        if (body && recv(c->fd, body, n, MSG_WAITALL) == (ssize_t)n) {
            C10dpb__Reply *rep = c10dpb__reply__unpack(NULL, n, body);
            if (rep && rep->result_case == C10DPB__REPLY__RESULT_STATUS_INFO)
                parked = (long)rep->status_info->parked;
            if (rep)
                c10dpb__reply__free_unpacked(rep, NULL);
        }
        free(body);
    }
    sim_loop_free(L);
    return parked;
}

int sim_sizes(int argc, char **argv, const char *flag, int *flag_on, int *sizes, int n_default)
{
    int first = 1, ns = n_default;
    *flag_on = argc > 1 && flag && strcmp(argv[1], flag) == 0;
    if (*flag_on)
        first = 2;
    if (argc > first)
        for (ns = 0; ns < argc - first && ns < 16; ns++)
            sizes[ns] = atoi(argv[ns + first]);
    return ns;
}

int sim_coord_start(struct coord_proc *c)
{
    coord_init(c);
    const char *extra[] = {"--max-world-size", "65536", NULL};
    if (coord_start(c, NULL, extra, NULL) != 0) {
        fprintf(stderr, "cannot start the coordinator\n");
        return -1;
    }
    return 0;
}
