/* GET /metrics on NNG's HTTP server (metrics.h). NNG runs the handler on
 * its own threads; the text is made there from atomics (exposition.c),
 * so a scrape costs the engine nothing but its gauges' reading once a
 * second (counters.c). */
#include "metrics/metrics.h"

#include "engine/engine.h"
#include "failure.h"

#include <arpa/inet.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <nng/supplemental/util/platform.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct c10ds_metrics {
    nng_http_server *server;
    c10ds_engine *engine;
    char role[16];
    /* Scrapes under way, and whether the endpoint is stopping: NNG may
     * still run a handler after its server is stopped, and the engine
     * it reads goes right after c10ds_metrics_stop. */
    atomic_int serving, stopping;
};

/* The stopped endpoint, kept (reachable) to the process's end. */
static c10ds_metrics *stopped;

static void serve(nng_aio *aio)
{
    c10ds_metrics *m = nng_http_handler_get_data(nng_aio_get_input(aio, 1));
    nng_http_res *res = NULL;
    size_t len = 0;
    atomic_fetch_add(&m->serving, 1);
    char *text = atomic_load(&m->stopping) ? NULL : c10ds_metrics_render(m->engine, m->role, &len);
    atomic_fetch_sub(&m->serving, 1);
    int rv = text ? nng_http_res_alloc(&res) : NNG_ENOMEM;
    if (rv == 0)
        rv = nng_http_res_set_header(res, "Content-Type", "text/plain; version=0.0.4; "
                                                          "charset=utf-8");
    if (rv == 0)
        rv = nng_http_res_copy_data(res, text, len);
    free(text);
    if (rv != 0) {
        nng_http_res_free(res);
        nng_aio_finish(aio, rv); /* NNG answers 500 */
        return;
    }
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

c10ds_metrics *c10ds_metrics_start(const char *url, c10ds_engine *e, const char *role,
                                   char *bound, size_t n)
{
    c10ds_metrics *m = calloc(1, sizeof *m);
    nng_url *u = NULL;
    nng_http_handler *h = NULL;
    nng_sockaddr sa;
    int rv = m ? nng_url_parse(&u, url) : NNG_ENOMEM;
    if (rv == 0)
        rv = nng_http_server_hold(&m->server, u);
    if (rv == 0)
        rv = nng_http_handler_alloc(&h, "/metrics", serve);
    if (rv == 0 && (rv = nng_http_handler_set_method(h, "GET")) == 0 &&
        (rv = nng_http_handler_set_data(h, m, NULL)) == 0 &&
        (rv = nng_http_server_add_handler(m->server, h)) == 0)
        h = NULL; /* the server's now */
    if (rv == 0) {
        m->engine = e;
        snprintf(m->role, sizeof m->role, "%s", role);
        /* before the first scrape can come: the engine starts reading its gauges */
        atomic_store(&e->counters.wanted, 1);
        rv = nng_http_server_start(m->server);
    }
    if (rv == 0 && (rv = nng_http_server_get_addr(m->server, &sa)) == 0) {
        char host[INET6_ADDRSTRLEN] = "";
        unsigned port = 0;
        if (sa.s_family == NNG_AF_INET) {
            inet_ntop(AF_INET, &sa.s_in.sa_addr, host, sizeof host);
            port = ntohs(sa.s_in.sa_port);
            snprintf(bound, n, "http://%s:%u/metrics", host, port);
        } else if (sa.s_family == NNG_AF_INET6) {
            inet_ntop(AF_INET6, sa.s_in6.sa_addr, host, sizeof host);
            port = ntohs(sa.s_in6.sa_port);
            snprintf(bound, n, "http://[%s]:%u/metrics", host, port);
        } else {
            snprintf(bound, n, "%s/metrics", url);
        }
    }
    nng_url_free(u);
    if (h)
        nng_http_handler_free(h);
    if (rv != 0) {
        c10ds_failed(C10D_ERROR, "cannot serve metrics on %s: %s", url, nng_strerror(rv));
        if (m && m->server)
            nng_http_server_release(m->server);
        free(m);
        return NULL;
    }
    return m;
}

void c10ds_metrics_stop(c10ds_metrics *m)
{
    if (!m)
        return;
    atomic_store(&m->stopping, 1);
    nng_http_server_stop(m->server);
    /* a scrape that began before the flag: its reading ends in
     * microseconds; bounded, should NNG's thread be stuck elsewhere */
    for (int i = 0; i < 2000 && atomic_load(&m->serving); i++)
        nng_msleep(1);
    nng_http_server_release(m->server);
    stopped = m; /* not freed: a handler NNG starts late still reads it */
}
