/* bench_rtt: the floor under everything the coordinator does, measured
 * side by side in one run. A 40-byte round trip between two processes on
 * loopback, alternating kinds over several rounds (the minimum of each
 * round's median is printed):
 *
 *   raw TCP           blocking read/write ping-pong, TCP_NODELAY
 *   nng req/rep       an echoing rep socket (the transport c10d used first)
 *   nng stream        NNG's own floor for what we build on: a byte-stream
 *                     echo, both ends waiting on aios with no callback
 *   nng stream cb     the same echo server completing its aios in callbacks,
 *                     as the coordinator does (the client still waits)
 *   c10d control      a real c10d-coord answering Hello through its engine,
 *                     over our framed NNG streams (client: libc10dclient)
 *
 * on tcp://, ipc:// and tls+tcp:// (TLS with a throwaway openssl CA). For
 * the control plane it also prints the context switches per round trip,
 * in the client (every thread) and in the coordinator (every thread),
 * from the last round: each is a thread woken, the cost that separates
 * a round trip here from a raw one. With BENCH_RTT_THREADS set, the
 * switches of each thread, by name, so each hop can be told apart.
 *   bench_rtt [N] [ROUNDS] */
#include "coord_proc.h"
#include "conn/conn.h"
#include "internal.h"
#include "tls.h"
#include "tls_certs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef int (*trip_fn)(void *ctx);

/* The median of n round trips (after 100 to warm up), in us; -1 on error. */
static double median(trip_fn f, void *ctx, int n)
{
    double *lat = malloc(sizeof(double) * (size_t)n), m;
    for (int i = -100; i < n; i++) {
        double a = now_us();
        if (f(ctx) != 0) {
            free(lat);
            return -1;
        }
        if (i >= 0)
            lat[i] = now_us() - a;
    }
    qsort(lat, (size_t)n, sizeof *lat, cmp);
    m = lat[n / 2];
    free(lat);
    return m;
}

/* --- raw TCP --- */

static int full_io(int fd, char *buf, size_t len, int wr)
{
    for (size_t off = 0; off < len;) {
        ssize_t k = wr ? write(fd, buf + off, len - off) : read(fd, buf + off, len - off);
        if (k <= 0)
            return -1;
        off += (size_t)k;
    }
    return 0;
}

static pid_t raw_server(int *port)
{
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t al = sizeof a;
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&a, &al))
        return -1;
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = accept(l, NULL, NULL);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        char buf[40];
        while (full_io(fd, buf, sizeof buf, 0) == 0 && full_io(fd, buf, sizeof buf, 1) == 0)
            ;
        _exit(0);
    }
    close(l);
    return pid;
}

static int raw_trip(void *ctx)
{
    int fd = *(int *)ctx;
    char buf[40] = "a request of about forty bytes.........";
    return full_io(fd, buf, sizeof buf, 1) || full_io(fd, buf, sizeof buf, 0);
}

/* --- NNG req/rep --- */

static nng_tls_config *tls_for(const char *url, const tls_certs *c, int server)
{
    nng_tls_config *cfg = NULL;
    char err[512];
    if (!c10dc_url_is_tls(url))
        return NULL;
    if ((server ? c10dc_tls_server(&cfg, c->cert, c->key, NULL, err, sizeof err)
                : c10dc_tls_client(&cfg, url, c->ca, NULL, NULL, err, sizeof err)) != 0)
        fprintf(stderr, "bench_rtt: %s\n", err);
    return cfg;
}

/* The echoing rep socket runs in a fresh program: NNG refuses to run in
 * a child forked after the parent used it. */
static int reqrep_serve(const char *url, const char *cert, const char *key)
{
    nng_socket rep;
    nng_listener l;
    tls_certs c = {0};
    snprintf(c.cert, sizeof c.cert, "%s", cert);
    snprintf(c.key, sizeof c.key, "%s", key);
    nng_rep0_open(&rep);
    nng_listener_create(&l, rep, url);
    nng_tls_config *cfg = tls_for(url, &c, 1);
    if (cfg)
        nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, cfg);
    nng_listener_set_bool(l, NNG_OPT_TCP_NODELAY, true);
    if (nng_listener_start(l, 0) != 0)
        return 1;
    for (;;) {
        nng_msg *m;
        if (nng_recvmsg(rep, &m, 0) != 0)
            return 0;
        if (nng_sendmsg(rep, m, 0) != 0)
            nng_msg_free(m);
    }
}

static const char *self;

static pid_t reqrep_server(const char *url, const tls_certs *c)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "--rep", url, c->cert, c->key, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int reqrep_trip(void *ctx)
{
    nng_socket req = *(nng_socket *)ctx;
    char payload[40] = "a request of about forty bytes.........", *buf;
    size_t len;
    if (nng_send(req, payload, sizeof payload, 0) || nng_recv(req, &buf, &len, NNG_FLAG_ALLOC))
        return -1;
    nng_free(buf, len);
    return 0;
}

/* --- NNG byte streams --- */

/* aio with no callback: the operation completes where it ends (the
 * poller, or the calling thread) and wakes its waiter directly. */
static int stream_io(nng_stream *s, nng_aio *aio, char *buf, size_t len, int wr)
{
    for (size_t off = 0; off < len;) {
        nng_iov iov = {buf + off, len - off};
        nng_aio_set_iov(aio, 1, &iov);
        if (wr)
            nng_stream_send(s, aio);
        else
            nng_stream_recv(s, aio);
        nng_aio_wait(aio);
        if (nng_aio_result(aio) != 0)
            return -1;
        off += nng_aio_count(aio);
    }
    return 0;
}

/* The same echo with callbacks, as the coordinator reads and writes: NNG
 * runs each completion on one of its task threads, which the poller
 * thread wakes. Its floor is the coordinator's (its requests arrive
 * through recv callbacks, its replies complete through send callbacks). */
static struct {
    nng_stream *s;
    nng_aio *rx, *tx;
    char buf[40];
    size_t got;
} cbs;

static void cbs_recv(void)
{
    nng_iov iov = {cbs.buf + cbs.got, sizeof cbs.buf - cbs.got};
    nng_aio_set_iov(cbs.rx, 1, &iov);
    nng_stream_recv(cbs.s, cbs.rx);
}

static void cbs_rx_done(void *arg)
{
    (void)arg;
    if (nng_aio_result(cbs.rx) != 0)
        return;
    cbs.got += nng_aio_count(cbs.rx);
    if (cbs.got < sizeof cbs.buf) {
        cbs_recv();
        return;
    }
    cbs.got = 0;
    nng_iov iov = {cbs.buf, sizeof cbs.buf};
    nng_aio_set_iov(cbs.tx, 1, &iov);
    nng_stream_send(cbs.s, cbs.tx);
}

static void cbs_tx_done(void *arg)
{
    (void)arg;
    if (nng_aio_result(cbs.tx) == 0) /* a 40-byte send completes whole */
        cbs_recv();
}

/* The echo server, in a fresh program (as reqrep_serve): waiting on its
 * aios, or (callbacks) completing them in callbacks. */
static int stream_serve(const char *url, const char *cert, const char *key, int callbacks)
{
    tls_certs c = {0};
    snprintf(c.cert, sizeof c.cert, "%s", cert);
    snprintf(c.key, sizeof c.key, "%s", key);
    nng_stream_listener *l;
    nng_aio *aio;
    if (nng_stream_listener_alloc(&l, url) != 0 || nng_aio_alloc(&aio, NULL, NULL) != 0)
        return 1;
    nng_tls_config *cfg = tls_for(url, &c, 1);
    if (cfg)
        nng_stream_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, cfg);
    nng_stream_listener_set_bool(l, NNG_OPT_TCP_NODELAY, true);
    if (nng_stream_listener_listen(l) != 0)
        return 1;
    nng_stream_listener_accept(l, aio);
    nng_aio_wait(aio);
    if (nng_aio_result(aio) != 0)
        return 1;
    nng_stream *s = nng_aio_get_output(aio, 0);
    if (callbacks) {
        cbs.s = s;
        if (nng_aio_alloc(&cbs.rx, cbs_rx_done, NULL) != 0 ||
            nng_aio_alloc(&cbs.tx, cbs_tx_done, NULL) != 0)
            return 1;
        cbs_recv();
        for (;;)
            pause(); /* killed when done */
    }
    char buf[40];
    while (stream_io(s, aio, buf, sizeof buf, 0) == 0 && stream_io(s, aio, buf, sizeof buf, 1) == 0)
        ;
    return 0;
}

typedef struct stream_client {
    nng_stream *s;
    nng_aio *aio;
} stream_client;

static int stream_open(stream_client *sc, const char *url, const tls_certs *certs)
{
    nng_stream_dialer *d;
    if (nng_stream_dialer_alloc(&d, url) != 0 || nng_aio_alloc(&sc->aio, NULL, NULL) != 0)
        return -1;
    nng_tls_config *cfg = tls_for(url, certs, 0);
    if (cfg) {
        nng_stream_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
        nng_tls_config_free(cfg);
    }
    nng_stream_dialer_set_bool(d, NNG_OPT_TCP_NODELAY, true);
    for (int tries = 0; tries < 200; tries++) {
        nng_stream_dialer_dial(d, sc->aio);
        nng_aio_wait(sc->aio);
        if (nng_aio_result(sc->aio) == 0) {
            sc->s = nng_aio_get_output(sc->aio, 0);
            nng_stream_dialer_free(d); /* the stream outlives its dialer */
            return 0;
        }
        usleep(10000);
    }
    nng_stream_dialer_free(d);
    return -1;
}

static int stream_trip(void *ctx)
{
    stream_client *sc = ctx;
    char buf[40] = "a request of about forty bytes.........";
    return stream_io(sc->s, sc->aio, buf, sizeof buf, 1) ||
           stream_io(sc->s, sc->aio, buf, sizeof buf, 0);
}

/* --- context switches: each a thread put to sleep or woken --- */

/* Per thread of a process: its id, name and switches (voluntary and not). */
typedef struct thread_sw {
    int tid;
    char name[32];
    long long n;
} thread_sw;

static int threads_of(pid_t pid, thread_sw *out, int cap)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    int k = 0;
    for (struct dirent *e; d && k < cap && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char path[384], line[256];
        snprintf(path, sizeof path, "%s/%s/status", dir, e->d_name);
        FILE *f = fopen(path, "r");
        thread_sw *t = &out[k];
        t->tid = atoi(e->d_name);
        t->n = 0;
        t->name[0] = '\0';
        while (f && fgets(line, sizeof line, f)) {
            long long v;
            if (sscanf(line, "voluntary_ctxt_switches: %lld", &v) == 1 ||
                sscanf(line, "nonvoluntary_ctxt_switches: %lld", &v) == 1)
                t->n += v;
            else
                sscanf(line, "Name: %31s", t->name);
        }
        if (f) {
            fclose(f);
            k++;
        }
    }
    if (d)
        closedir(d);
    return k;
}

/* With BENCH_RTT_THREADS set: each thread's switches a trip between two
 * snapshots, where it is woken (who does what: a hop per wake-up). */
static void print_threads(const char *who, const thread_sw *a, int na, const thread_sw *b,
                          int nb, int trips)
{
    for (int i = 0; i < nb; i++) {
        long long before = 0;
        for (int j = 0; j < na; j++)
            if (a[j].tid == b[i].tid)
                before = a[j].n;
        double per = (double)(b[i].n - before) / trips;
        if (per >= 0.05)
            printf("    %s thread %-16s %5.2f switches a trip\n", who, b[i].name, per);
    }
}

/* Of every thread of process pid, from /proc (voluntary and not). */
static long long switches_of(pid_t pid)
{
    thread_sw t[256];
    long long total = 0;
    for (int k = 0, n = threads_of(pid, t, 256); k < n; k++)
        total += t[k].n;
    return total;
}

/* --- the c10d control plane --- */

static int c10d_trip(void *ctx)
{
    C10dpb__Hello hello = C10DPB__HELLO__INIT;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_HELLO;
    req.hello = &hello;
    C10dpb__Reply *rep = NULL;
    if (c10di_call(ctx, &req, 0, 10000, &rep) != C10D_OK)
        return -1;
    c10dpb__reply__free_unpacked(rep, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    self = "/proc/self/exe";
    if (argc == 5 && strcmp(argv[1], "--rep") == 0)
        return reqrep_serve(argv[2], argv[3], argv[4]);
    if (argc == 5 && strcmp(argv[1], "--stream") == 0)
        return stream_serve(argv[2], argv[3], argv[4], 0);
    if (argc == 5 && strcmp(argv[1], "--stream-cb") == 0)
        return stream_serve(argv[2], argv[3], argv[4], 1);
    int n = argc > 1 ? atoi(argv[1]) : 3000, rounds = argc > 2 ? atoi(argv[2]) : 3;
    signal(SIGPIPE, SIG_IGN);
    coord_proc dirs;
    coord_init(&dirs); /* a temporary directory for the certificates and sockets */
    tls_certs certs;
    int have_tls = tls_make_certs(dirs.dir, &certs) == 0;
    const char *schemes[] = {"tcp", "ipc", "tls+tcp"};
    enum { KINDS = 13 };
    /* per kind from 4 on: control, stream, stream with callbacks (x3 schemes) */
    double best[KINDS], sw_client[9] = {0}, sw_coord[9] = {0};
    for (int k = 0; k < KINDS; k++)
        best[k] = 1e18;
    const char *names[KINDS] = {"raw TCP ping-pong",       "nng req/rep tcp://",
                                "nng req/rep ipc://",      "nng req/rep tls+tcp://",
                                "c10d control tcp://",     "c10d control ipc://",
                                "c10d control tls+tcp://", "nng stream tcp://",
                                "nng stream ipc://",       "nng stream tls+tcp://",
                                "nng stream cb tcp://",    "nng stream cb ipc://",
                                "nng stream cb tls+tcp://"};
    for (int round = 0; round < rounds; round++) {
        /* raw TCP */
        int port = 0, one = 1;
        pid_t pid = raw_server(&port);
        /* after the fork: a copy in the server would keep it from seeing EOF */
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        if (pid < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            fprintf(stderr, "bench_rtt: raw TCP setup failed\n");
            return 1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        double m = median(raw_trip, &fd, n);
        best[0] = m >= 0 && m < best[0] ? m : best[0];
        close(fd);
        waitpid(pid, NULL, 0);
        for (int s = 0; s < 3; s++) {
            if (s == 2 && !have_tls)
                continue;
            char url[600];
            if (s == 1)
                snprintf(url, sizeof url, "ipc://%s/rr.sock", dirs.dir);
            else
                snprintf(url, sizeof url, "%s://127.0.0.1:%d", schemes[s], 31000 + round * 10 + s);
            /* NNG req/rep */
            pid = reqrep_server(url, &certs);
            nng_socket req;
            nng_dialer d;
            nng_req0_open(&req);
            nng_dialer_create(&d, req, url);
            nng_tls_config *cfg = tls_for(url, &certs, 0);
            if (cfg)
                nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
            nng_dialer_set_bool(d, NNG_OPT_TCP_NODELAY, true);
            for (int tries = 0; nng_dialer_start(d, 0) != 0 && tries < 200; tries++)
                usleep(10000);
            nng_socket_set_ms(req, NNG_OPT_RECVTIMEO, 5000);
            m = median(reqrep_trip, &req, n);
            best[1 + s] = m >= 0 && m < best[1 + s] ? m : best[1 + s];
            nng_close(req);
            if (cfg)
                nng_tls_config_free(cfg);
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            /* NNG stream echo: the server waiting on its aios, then with callbacks */
            for (int cb = 0; cb < 2; cb++) {
                int k = 7 + 3 * cb + s;
                if (s == 1)
                    snprintf(url, sizeof url, "ipc://%s/st%d.sock", dirs.dir, cb);
                else
                    snprintf(url, sizeof url, "%s://127.0.0.1:%d", schemes[s],
                             32000 + round * 10 + cb * 5 + s);
                pid = fork();
                if (pid == 0) {
                    execl(self, self, cb ? "--stream-cb" : "--stream", url, certs.cert, certs.key,
                          (char *)NULL);
                    _exit(127);
                }
                stream_client sc = {0};
                if (stream_open(&sc, url, &certs) == 0) {
                    struct rusage ru0, ru1;
                    getrusage(RUSAGE_SELF, &ru0);
                    long long srv0 = switches_of(pid);
                    m = median(stream_trip, &sc, n);
                    long long srv1 = switches_of(pid);
                    getrusage(RUSAGE_SELF, &ru1);
                    sw_client[k - 4] = (double)(ru1.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nvcsw -
                                                ru0.ru_nivcsw) / (n + 100);
                    sw_coord[k - 4] = (double)(srv1 - srv0) / (n + 100);
                    best[k] = m >= 0 && m < best[k] ? m : best[k];
                    nng_stream_close(sc.s);
                    nng_stream_free(sc.s);
                }
                if (sc.aio)
                    nng_aio_free(sc.aio);
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
            }
            /* c10d-coord */
            coord_proc coord;
            coord_init(&coord);
            char listen[600];
            if (s == 1)
                snprintf(listen, sizeof listen, "ipc://%s/coord.sock", coord.dir);
            else
                snprintf(listen, sizeof listen, "%s://127.0.0.1:0", schemes[s]);
            const char *tls_args[] = {"--tls-cert", certs.cert, "--tls-key", certs.key, NULL};
            const char *db_mem[] = {NULL};
            if (coord_start(&coord, listen, s == 2 ? tls_args : db_mem, NULL) != 0) {
                fprintf(stderr, "bench_rtt: c10d-coord did not start on %s\n", listen);
                return 1;
            }
            c10di_conn *conn;
            c10di_tls_files tls = {s == 2 ? certs.ca : NULL, NULL, NULL};
            if (c10di_conn_open(&conn, coord.url, NULL, &tls, 10000, NULL) !=
                C10D_OK) {
                fprintf(stderr, "bench_rtt: %s\n", c10d_errmsg());
                return 1;
            }
            struct rusage ru0, ru1;
            thread_sw ct0[64], ct1[64], me0[64], me1[64];
            int nct0 = threads_of(coord.pid, ct0, 64), nme0 = threads_of(getpid(), me0, 64);
            getrusage(RUSAGE_SELF, &ru0);
            long long coord0 = switches_of(coord.pid);
            m = median(c10d_trip, conn, n);
            long long coord1 = switches_of(coord.pid);
            getrusage(RUSAGE_SELF, &ru1);
            if (getenv("BENCH_RTT_THREADS") && round == rounds - 1) {
                int nct1 = threads_of(coord.pid, ct1, 64), nme1 = threads_of(getpid(), me1, 64);
                printf("  c10d control %s, last round, by thread:\n", schemes[s]);
                print_threads("client", me0, nme0, me1, nme1, n + 100);
                print_threads("coordinator", ct0, nct0, ct1, nct1, n + 100);
            }
            best[4 + s] = m >= 0 && m < best[4 + s] ? m : best[4 + s];
            int trips = n + 100; /* with the warm-up */
            sw_client[s] = (double)(ru1.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nvcsw - ru0.ru_nivcsw) /
                           trips;
            sw_coord[s] = (double)(coord1 - coord0) / trips;
            c10di_conn_unref(conn);
            coord_cleanup(&coord);
        }
    }
    printf("round trip, 40 B, loopback, two processes (median; best of %d rounds of %d):\n",
           rounds, n);
    const int order[KINDS] = {0, 1, 2, 3, 7, 8, 9, 10, 11, 12, 4, 5, 6};
    for (int i = 0; i < KINDS; i++) {
        int k = order[i];
        if (best[k] >= 1e17)
            continue;
        printf("  %-26s %8.1f us  %5.2fx raw TCP", names[k], best[k], best[k] / best[0]);
        if (k >= 7)
            printf("                    context switches a trip: client %.1f, server %.1f",
                   sw_client[k - 4], sw_coord[k - 4]);
        if (k >= 4 && k <= 6 && best[k + 3] < 1e17)
            printf("  %5.2fx nng stream;  context switches a trip: client %.1f, coordinator %.1f",
                   best[k] / best[k + 3], sw_client[k - 4], sw_coord[k - 4]);
        printf("\n");
    }
    coord_cleanup(&dirs);
    return 0;
}
