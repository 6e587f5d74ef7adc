/* bench_nng_rtt: the floor under every store call, a bare NNG req/rep
 * round trip on loopback (no protobuf, no engine, no SQLite), with the
 * same socket settings the client and coordinator use. Splits a store
 * call's time into transport and everything else.
 *   bench_nng_rtt [N] */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static nng_socket rep;

static void *echo(void *arg)
{
    for (;;) {
        nng_msg *m;
        if (nng_recvmsg(rep, &m, 0) != 0)
            return NULL;
        if (nng_sendmsg(rep, m, 0) != 0)
            nng_msg_free(m);
    }
}

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

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 5000;
    nng_socket req;
    nng_listener l;
    int port;
    if (nng_rep0_open(&rep) || nng_listen(rep, "tcp://127.0.0.1:0", &l, 0) ||
        nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port)) {
        fprintf(stderr, "bench_nng_rtt: cannot listen\n");
        return 1;
    }
    pthread_t t;
    pthread_create(&t, NULL, echo, NULL);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    nng_req0_open(&req);
    nng_dial(req, url, NULL, 0);
    double *lat = malloc(sizeof(double) * (size_t)n);
    char payload[40] = "a request of about forty bytes.........";
    for (int i = -200; i < n; i++) {
        double a = now_us();
        char *buf;
        size_t len;
        if (nng_send(req, payload, sizeof payload, 0) || nng_recv(req, &buf, &len, NNG_FLAG_ALLOC)) {
            fprintf(stderr, "bench_nng_rtt: round trip failed\n");
            return 1;
        }
        nng_free(buf, len);
        if (i >= 0)
            lat[i] = now_us() - a;
    }
    qsort(lat, (size_t)n, sizeof *lat, cmp);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += lat[i];
    printf("nng req/rep round trip (loopback, 40 B): %.0f/s, mean %.1f us, p50 %.1f us, p99 %.1f us\n",
           n / sum * 1e6, sum / n, lat[n / 2], lat[(int)(n * 0.99)]);
    nng_close(req);
    nng_close(rep);
    return 0;
}
