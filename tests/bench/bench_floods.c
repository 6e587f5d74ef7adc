/* A normal client's get latency while each flood runs against
 * a real coordinator, one after the other, beside none:
 *
 *   bench_floods [PROBES]
 *
 * Floods: frames that would decode to hundreds of MB (8 MB of empty
 * multi_get keys); a 16 MiB value named 4,096 times in one multi_get;
 * waits parked by the hundred thousand; clients that send gets of a 1 MiB
 * value and never read the replies; a hundred connections whose 12-byte
 * headers promise 16 MiB frames; and on the TCPStore port, which checks
 * no token, 32 connections each pipelining 200 GETs of a 16 MiB value,
 * never reading, and 12 connections of WAITs of 4,096 keys of 4 KB
 * (16.8 MB each) that nobody sets. Each flood runs in threads of raw
 * sockets (tests/support/raw_client.c) while the probe makes PROBES
 * (default 300) gets of a small key, 5 ms apart, through the library.
 * Printed per flood: the probe's median and worst latency, its errors,
 * the flood's requests and refusals, and the coordinator's RSS during
 * it and 2 s after its connections closed.
 * A probe gives up after 5 s (an error), and a flood's probing after 30 s
 * (a coordinator without the limits on them answers nothing for minutes
 * under some of them).
 *
 * C10D_TEST_COORD_BIN=path runs the floods against another c10d-coord
 * binary (an older build, for a before/after in one run). C10D_FLOODS=
 * "0,1,3" runs only those of the table (0 is none): the unread-replies
 * flood took a coordinator without those limits past 14 GB. */
#include "coord_proc.h"
#include "raw_client.h"

#include <c10d/c10d.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct flood {
    const char *url;
    const char *ts_url; /* the coordinator's TCPStore port */
    atomic_int stop;
    atomic_long sent, refused;
} flood;

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One request the flood sends again and again, framed once. */
static uint8_t *frame_multi_get(const char *key, size_t n, uint64_t id, size_t *len)
{
    char **keys = malloc(n * sizeof *keys);
    if (!keys)
        return NULL;
    for (size_t i = 0; i < n; i++)
        keys[i] = (char *)key;
    C10dpb__StoreMultiGet mg = C10DPB__STORE_MULTI_GET__INIT;
    mg.n_keys = n;
    mg.keys = keys;
    C10dpb__Request rq = C10DPB__REQUEST__INIT;
    rq.op_case = C10DPB__REQUEST__OP_MULTI_GET;
    rq.multi_get = &mg;
    uint8_t *buf = raw_frame(&rq, id, len);
    free(keys);
    return buf;
}

/* Sends frame on fresh connections, reading each answer, until stopped. */
static void send_and_read(flood *f, const uint8_t *frame, size_t len, int same_conn)
{
    int fd = -1;
    while (!atomic_load(&f->stop)) {
        if (fd < 0 && (fd = raw_connect(f->url)) < 0) {
            pause_ms(10);
            continue;
        }
        if (raw_write_all(fd, frame, len) != 0) {
            close(fd), fd = -1;
            continue;
        }
        atomic_fetch_add(&f->sent, 1);
        C10dpb__Reply *rep = raw_read_reply(fd, 30000, NULL);
        if (rep && rep->status != C10D_OK)
            atomic_fetch_add(&f->refused, 1);
        if (rep)
            c10dpb__reply__free_unpacked(rep, NULL);
        if (!rep || !same_conn)
            close(fd), fd = -1;
    }
    if (fd >= 0)
        close(fd);
}

static void *decode_bomb(void *arg)
{
    size_t len;
    uint8_t *frame = frame_multi_get("", 4u << 20, 1, &len); /* 8 MB of empty keys */
    if (frame)
        send_and_read(arg, frame, len, 0);
    free(frame);
    return NULL;
}

static void *big_key_repeats(void *arg)
{
    size_t len;
    uint8_t *frame = frame_multi_get("big", 4096, 1, &len); /* 45 KB */
    if (frame)
        send_and_read(arg, frame, len, 1);
    free(frame);
    return NULL;
}

/* Waits for keys nobody sets, never read: up to 300,000 on one connection. */
static void *parked_waits(void *arg)
{
    flood *f = arg;
    int fd = raw_connect(f->url);
    char key[32];
    char *k = key;
    C10dpb__StoreWait w = C10DPB__STORE_WAIT__INIT;
    w.n_keys = 1;
    w.keys = &k;
    w.has_timeout_ms = 1;
    w.timeout_ms = 600000;
    C10dpb__Request rq = C10DPB__REQUEST__INIT;
    rq.op_case = C10DPB__REQUEST__OP_WAIT;
    rq.wait = &w;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (long i = 0; fd >= 0 && i < 300000 && !atomic_load(&f->stop); i++) {
        snprintf(key, sizeof key, "never/%ld", i);
        size_t len;
        uint8_t *buf = raw_frame(&rq, (uint64_t)i + 1, &len);
        size_t off = 0;
        while (buf && off < len && !atomic_load(&f->stop)) {
            ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
            if (n > 0)
                off += (size_t)n;
            else
                pause_ms(1); /* the coordinator stopped reading us */
        }
        free(buf);
        atomic_fetch_add(&f->sent, 1);
    }
    while (!atomic_load(&f->stop))
        pause_ms(10);
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* Gets of a 1 MiB value whose replies are never read. */
static void *unread_replies(void *arg)
{
    flood *f = arg;
    C10dpb__StoreGet g = C10DPB__STORE_GET__INIT;
    g.key = "big1m";
    C10dpb__Request rq = C10DPB__REQUEST__INIT;
    rq.op_case = C10DPB__REQUEST__OP_GET;
    rq.get = &g;
    size_t len;
    uint8_t *frame = raw_frame(&rq, 1, &len);
    int fd = raw_connect(f->url);
    if (fd >= 0)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    while (frame && fd >= 0 && !atomic_load(&f->stop)) {
        if (send(fd, frame, len, MSG_NOSIGNAL) == (ssize_t)len)
            atomic_fetch_add(&f->sent, 1);
        else
            pause_ms(1); /* (a frame cut short just makes this client's stream junk) */
    }
    free(frame);
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* Connections whose header promises 16 MiB, then a KiB a tenth of a second. */
static void *huge_headers(void *arg)
{
    flood *f = arg;
    enum { N = 100 };
    int fds[N];
    uint8_t hdr[12] = {0}, junk[1024] = {0};
    uint32_t n = (16u << 20) + 8;
    memcpy(hdr, &n, 4); /* little-endian, as common/frame.h writes it */
    for (int i = 0; i < N; i++) {
        fds[i] = raw_connect(f->url);
        if (fds[i] >= 0 && raw_write_all(fds[i], hdr, sizeof hdr) == 0)
            atomic_fetch_add(&f->sent, 1);
    }
    while (!atomic_load(&f->stop)) {
        for (int i = 0; i < N; i++)
            if (fds[i] >= 0 && send(fds[i], junk, sizeof junk, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
                close(fds[i]), fds[i] = -1;
        pause_ms(100);
    }
    for (int i = 0; i < N; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return NULL;
}

/* --- the TCPStore port: its wire in torch 2.1's numbering (docs/tcpstore.md) --- */

static size_t ts_put(uint8_t *p, const void *b, size_t n)
{
    uint64_t len = n;
    memcpy(p, &len, 8); /* the host's order, as TCPStore's */
    if (b)
        memcpy(p + 8, b, n);
    return 8 + n;
}

/* Stores "big" (16 MiB) through the TCPStore port and knows it is there
 * (CHECK answered); the connection returned keeps the run it is in. */
static int ts_keeper(const char *url)
{
    size_t big = 16u << 20;
    uint8_t *q = calloc(1, 1 + 8 + 3 + 8 + big), check[32], ready = 1;
    int fd = raw_connect(url);
    size_t o = 0;
    q[o++] = 0; /* SET */
    o += ts_put(q + o, "big", 3);
    o += ts_put(q + o, NULL, big);
    size_t c = 0;
    check[c++] = 4; /* CHECK */
    uint64_t one = 1;
    memcpy(check + c, &one, 8), c += 8;
    c += ts_put(check + c, "big", 3);
    if (fd < 0 || raw_write_all(fd, q, o) != 0 || raw_write_all(fd, check, c) != 0 ||
        recv(fd, &ready, 1, MSG_WAITALL) != 1 || ready != 0) {
        fprintf(stderr, "bench_floods: could not store a value through the TCPStore port\n");
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    free(q);
    return fd;
}

/* 32 connections, each pipelining 200 GETs of the 16 MiB value, never
 * reading a reply. */
static void *ts_get_flood(void *arg)
{
    flood *f = arg;
    enum { CONNS = 32, GETS = 200 };
    int keeper = ts_keeper(f->ts_url), fds[CONNS];
    uint8_t one[16], gets[16 * GETS];
    size_t ql = 0;
    one[ql++] = 2; /* GET */
    ql += ts_put(one + ql, "big", 3);
    for (int i = 0; i < GETS; i++)
        memcpy(gets + (size_t)i * ql, one, ql);
    for (int i = 0; i < CONNS; i++) {
        fds[i] = keeper >= 0 ? raw_connect(f->ts_url) : -1;
        if (fds[i] >= 0 && raw_write_all(fds[i], gets, ql * GETS) == 0)
            atomic_fetch_add(&f->sent, GETS);
    }
    while (!atomic_load(&f->stop))
        pause_ms(10);
    for (int i = 0; i < CONNS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (keeper >= 0)
        close(keeper);
    return NULL;
}

/* A connection of WAITs of 4,096 keys of 4 KB nobody sets (one thread
 * each), up to 100, never read. */
static void *ts_parked_waits(void *arg)
{
    flood *f = arg;
    static atomic_int next;
    int me = atomic_fetch_add(&next, 1);
    enum { KEYS = 4096, KEY = 4000 };
    uint8_t *q = malloc(1 + 8 + (size_t)KEYS * (8 + KEY)), key[KEY];
    int fd = raw_connect(f->ts_url);
    for (int w = 0; q && fd >= 0 && w < 100 && !atomic_load(&f->stop); w++) {
        size_t o = 0;
        uint64_t n = KEYS;
        q[o++] = 5; /* WAIT */
        memcpy(q + o, &n, 8), o += 8;
        for (int i = 0; i < KEYS; i++) {
            memset(key, 'k', KEY);
            int l = snprintf((char *)key, KEY, "never/%d/%d/%d", me, w, i);
            key[l] = 'k';
            o += ts_put(q + o, key, KEY);
        }
        if (raw_write_all(fd, q, o) != 0) {
            atomic_fetch_add(&f->refused, 1); /* closed by a limit */
            break;
        }
        atomic_fetch_add(&f->sent, 1);
    }
    free(q);
    while (!atomic_load(&f->stop))
        pause_ms(10);
    if (fd >= 0)
        close(fd);
    return NULL;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static long rss_kib(pid_t pid, const char *what)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, what, strlen(what)))
            v = atol(line + strlen(what));
    if (f)
        fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    int probes = argc > 1 ? atoi(argv[1]) : 300;
    coord_proc c;
    coord_init(&c);
    /* a TCPStore port on a port free now */
    int pfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    bind(pfd, (struct sockaddr *)&a, sizeof a);
    getsockname(pfd, (struct sockaddr *)&a, &al);
    close(pfd);
    char port[16], ts_url[64];
    snprintf(port, sizeof port, "%d", ntohs(a.sin_port));
    snprintf(ts_url, sizeof ts_url, "tcp://127.0.0.1:%s", port);
    const char *args[] = {"--tcpstore-listen", port, NULL};
    if (coord_start(&c, NULL, args, NULL) != 0) {
        fprintf(stderr, "bench_floods: the coordinator did not start (log %s)\n", c.log);
        return 1;
    }
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 60000;
    o.connect_timeout_ms = 10000;
    c10d_store *s = NULL;
    if (c10d_store_connect(&s, c.url, &o) != C10D_OK) {
        fprintf(stderr, "bench_floods: %s\n", c10d_errmsg());
        return 1;
    }
    size_t big = (16u << 20) - 4096, mib = 1u << 20;
    char *value = calloc(1, big);
    c10d_store *probe = NULL; /* its calls give up after 5 s */
    o.timeout_ms = 5000;
    if (!value || c10d_store_connect(&probe, c.url, &o) != C10D_OK ||
        c10d_store_set(s, "probe", "ok", 2) != C10D_OK ||
        c10d_store_set(s, "big", value, big) != C10D_OK ||
        c10d_store_set(s, "big1m", value, mib) != C10D_OK) {
        fprintf(stderr, "bench_floods: setup: %s\n", c10d_errmsg());
        return 1;
    }
    free(value);
    static const struct {
        const char *name;
        void *(*fn)(void *);
        int threads;
    } floods[] = {
        {"none", NULL, 0},
        {"decode bombs (8 MB of empty keys)", decode_bomb, 2},
        {"a 16 MiB key named 4,096 times", big_key_repeats, 2},
        {"parked waits (up to 300,000)", parked_waits, 1},
        {"unread replies (8 clients, 1 MiB gets)", unread_replies, 8},
        {"headers promising 16 MiB (100 conns)", huge_headers, 1},
        {"TCPStore: 32 conns x 200 unread 16 MiB GETs", ts_get_flood, 1},
        {"TCPStore: 12 conns of 16.8 MB WAITs", ts_parked_waits, 12},
    };
    double *lat = malloc((size_t)probes * sizeof *lat);
    printf("bench_floods: %d probe gets per flood, 5 ms apart; coordinator %s\n", probes,
           getenv("C10D_TEST_COORD_BIN") ? getenv("C10D_TEST_COORD_BIN") : C10D_COORD_BIN);
    printf("%-44s %9s %9s %7s %10s %9s %9s %9s\n", "flood", "p50 ms", "worst ms", "errors",
           "flood reqs", "refused", "RSS MiB", "after");
    const char *only = getenv("C10D_FLOODS");
    for (size_t k = 0; k < sizeof floods / sizeof floods[0]; k++) {
        char idx[8];
        snprintf(idx, sizeof idx, "%zu", k);
        if (only && *only && !strstr(only, idx))
            continue;
        flood f = {c.url, ts_url, 0, 0, 0};
        pthread_t th[12];
        for (int t = 0; t < floods[k].threads; t++)
            pthread_create(&th[t], NULL, floods[k].fn, &f);
        pause_ms(500); /* let it build up (a benchmark: no state to wait on) */
        int errors = 0, n = 0;
        double until = now_ms() + 30000;
        for (int i = 0; i < probes && now_ms() < until; i++, n++) {
            double t0 = now_ms();
            void *v = NULL;
            size_t len;
            if (c10d_store_get(probe, "probe", &v, &len, C10D_NO_WAIT) != C10D_OK)
                errors++;
            c10d_free(v);
            lat[i] = now_ms() - t0;
            pause_ms(5);
        }
        long rss = rss_kib(c.pid, "VmRSS:");
        atomic_store(&f.stop, 1);
        for (int t = 0; t < floods[k].threads; t++)
            pthread_join(th[t], NULL);
        pause_ms(2000); /* what stays once the flood closed */
        long after = rss_kib(c.pid, "VmRSS:");
        qsort(lat, (size_t)n, sizeof *lat, cmp_double);
        printf("%-44s %9.2f %9.2f %7d %10ld %9ld %9.0f %9.0f%s\n", floods[k].name, lat[n / 2],
               lat[n - 1], errors, atomic_load(&f.sent), atomic_load(&f.refused),
               (double)rss / 1024, (double)after / 1024,
               n < probes ? " (probing cut at 30 s)" : "");
        fflush(stdout);
    }
    printf("coordinator peak RSS (VmHWM): %.0f MiB\n", (double)rss_kib(c.pid, "VmHWM:") / 1024);
    free(lat);
    c10d_store_close(probe);
    c10d_store_close(s);
    coord_cleanup(&c);
    return 0;
}
