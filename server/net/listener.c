/* The coordinator's network side: an NNG stream listener (tcp://, ipc://,
 * tls+tcp://) and, for each client connection, a loop that reads frames
 * (common/frame.h), decodes them and hands them to the engine, and a queue
 * of reply frames written back in the order the engine answers them.
 *
 * This file is the listener itself: accepting connections, starting and
 * closing. A connection's life and its reply queue are connection.c's,
 * its read loop framing.c's (listener_internal.h). */
#include "net/listener_internal.h"
#include "net/tcpstore_wire.h"

#include "config.h"
#include "engine/engine.h"
#include "failure.h"
#include "net/tcpstore_runs.h"

#include "log.h"
#include "stream_fd.h"
#include "tls.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* The engine's replies go on the queue of the connection each request
 * came on (its slot). */
void c10ds_listener_send(void *arg, void *slot, uint64_t request_id, const void *reply,
                         size_t len)
{
    (void)arg;
    if (slot)
        c10ds_conn_queue(slot, request_id, reply, len);
}

/* An accept that failed for want of file descriptors (EMFILE, ENFILE) or
 * memory fails again at once while the shortage lasts: accepting again
 * straight away spun the coordinator (5.6 s of CPU per 5 s at ulimit -n
 * 256). So the next one waits, ACCEPT_PAUSE_MIN_MS at first, doubling up
 * to ACCEPT_PAUSE_MAX_MS, and none again once one succeeds; connections
 * that come meanwhile wait in the kernel's backlog. */
#define ACCEPT_PAUSE_MIN_MS 10
#define ACCEPT_PAUSE_MAX_MS 500
/* While accepting keeps failing, the warning is repeated this often (in
 * failed accepts: about a minute at the longest pause). */
#define ACCEPT_WARN_EVERY 120

static int is_closing(c10ds_listener *l)
{
    nng_mtx_lock(l->mu);
    int closing = l->closing;
    nng_mtx_unlock(l->mu);
    return closing;
}

static int open_connections(c10ds_listener *l)
{
    nng_mtx_lock(l->mu);
    int n = l->nlive;
    nng_mtx_unlock(l->mu);
    return n;
}

static void accept_next(c10ds_listener *l)
{
    nng_stream_listener_accept(l->lst, l->accept_aio);
}

static void accept_later(c10ds_listener *l, int rv)
{
    l->accept_failures++;
    l->backoff_ms = l->backoff_ms ? l->backoff_ms * 2 : ACCEPT_PAUSE_MIN_MS;
    if (l->backoff_ms > ACCEPT_PAUSE_MAX_MS)
        l->backoff_ms = ACCEPT_PAUSE_MAX_MS;
    if (l->accept_failures % ACCEPT_WARN_EVERY == 1) {
        struct rlimit rl;
        long long nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                               ? (long long)rl.rlim_cur : -1;
        c10ds_warn("cannot accept connections: %s (%d open, --max-connections %u, ulimit -n "
                   "%lld); %u attempt(s) failed so far, trying again every %d ms at most",
                   nng_strerror(rv), open_connections(l), l->cfg->max_connections, nofile,
                   l->accept_failures, ACCEPT_PAUSE_MAX_MS);
    }
    c10ds_debug("accept failed (%s), %u in a row: next try in %d ms", nng_strerror(rv),
                l->accept_failures, l->backoff_ms);
    nng_sleep_aio(l->backoff_ms, l->backoff_aio);
}

/* backoff_aio's callback: the pause is over. */
static void backoff_cb(void *arg)
{
    c10ds_listener *l = arg;
    if (nng_aio_result(l->backoff_aio) != 0 || is_closing(l))
        return;
    accept_next(l);
}

/* The client's address, as the log names it ("?" when it cannot be read). */
static void remote_address(nng_stream *s, char *out, size_t outlen)
{
    nng_sockaddr a;
    snprintf(out, outlen, "?");
    if (nng_stream_get_addr(s, NNG_OPT_REMADDR, &a) != 0)
        return;
    if (a.s_family == NNG_AF_INET) {
        const uint8_t *ip = (const uint8_t *)&a.s_in.sa_addr;
        snprintf(out, outlen, "%u.%u.%u.%u:%u", ip[0], ip[1], ip[2], ip[3],
                 (unsigned)ntohs(a.s_in.sa_port));
    } else if (a.s_family == NNG_AF_IPC) {
        snprintf(out, outlen, "%s", a.s_ipc.sa_path);
    }
}

/* The codec of a listener's dialect. */
static const c10ds_codec *codec_of(c10ds_dialect d)
{
    return d == C10DS_DIALECT_TCPSTORE ? &c10ds_codec_tcpstore : &c10ds_codec_c10d;
}

static void accept_cb(void *arg)
{
    c10ds_listener *l = arg;
    int rv = nng_aio_result(l->accept_aio);
    if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
        return;
    if (is_closing(l)) {
        if (rv == 0)
            nng_stream_free(nng_aio_get_output(l->accept_aio, 0));
        return;
    }
    if (rv == NNG_ENOFILES || rv == NNG_ENOMEM) {
        accept_later(l, rv);
        return;
    }
    if (rv != 0) {
        /* A TLS handshake that failed, a client that vanished: others are
         * unaffected. */
        c10ds_warn("a connection was not accepted: %s", nng_strerror(rv));
        accept_next(l);
        return;
    }
    if (l->accept_failures) {
        c10ds_info("accepting connections again, after %u failed attempt(s)",
                   l->accept_failures);
        l->accept_failures = 0;
        l->backoff_ms = 0;
    }
    int open = open_connections(l);
    if ((uint32_t)open >= l->cfg->max_connections) {
        /* Closed before a byte is read: the client sees its connection
         * close unanswered and dials again after a pause. (An error frame
         * would tell it a coordinator answered, and it would dial again
         * at once.) */
        c10ds_warn("refused a connection: %d are open, the most --max-connections (%u) allows",
                   open, l->cfg->max_connections);
        nng_stream_free(nng_aio_get_output(l->accept_aio, 0));
        accept_next(l);
        return;
    }
    nng_stream *s = nng_aio_get_output(l->accept_aio, 0);
    c10ds_conn *c = calloc(1, sizeof *c);
    if (!c || nng_mtx_alloc(&c->mu) != 0 ||
        nng_aio_alloc(&c->recv_aio, c10ds_conn_recv_cb, c) != 0 ||
        nng_aio_alloc(&c->send_aio, c10ds_conn_send_cb, c) != 0 ||
        nng_aio_alloc(&c->resume_aio, c10ds_conn_resume_cb, c) != 0 ||
        (!c10dc_url_is_tls(l->url) && nng_aio_alloc(&c->now_aio, NULL, NULL) != 0) ||
        (l->ready && nng_aio_alloc(&c->ready_aio, NULL, NULL) != 0) ||
        (c->codec = codec_of(l->dialect), c->codec->open && !(c->codec_state = c->codec->open())) ||
        !(c->rbuf = malloc(C10DS_RBUF_MIN))) {
        c10ds_error("out of memory for a new connection; refused");
        if (c) {
            nng_aio_free(c->recv_aio);
            nng_aio_free(c->send_aio);
            nng_aio_free(c->now_aio);
            nng_aio_free(c->resume_aio);
            nng_aio_free(c->ready_aio);
            if (c->codec_state)
                c->codec->close(c->codec_state);
            if (c->mu)
                nng_mtx_free(c->mu);
            free(c);
        }
        nng_stream_free(s);
        accept_next(l);
        return;
    }
    c->l = l;
    c->s = s;
    /* Read by the readiness loop when its socket can be found: the next
     * accept waits for this, so two ipc:// connections are never told
     * apart by a race. */
    c->fd = l->ready ? c10dc_stream_fd(s) : -1;
    remote_address(s, c->peer, sizeof c->peer);
    c->read_resume = c10ds_conn_read_resume;
    c->rcap = C10DS_RBUF_MIN;
    c->parked.limit = l->cfg->max_conn_parked_bytes;
    c->parked.what = "this connection";
    c->parked.option = "--max-connection-parked-bytes";
    /* TCPStore's client asks one query at a time; a flooder that sends
     * hundreds unread gets them read only as fast as it takes answers. */
    if (l->dialect == C10DS_DIALECT_TCPSTORE)
        c->unanswered_max = (int)l->cfg->ts_max_inflight;
    /* One numbering for every listener's connections: the engine tells
     * them apart by it (a closed connection's ranks and parked requests) */
    c->id = atomic_fetch_add(&l->engine->next_pipe, 1) + 1;
    atomic_init(&c->refs, 1);
    nng_stream_set_bool(s, NNG_OPT_TCP_NODELAY, true);
    nng_mtx_lock(l->mu);
    c->next = l->live;
    l->live = c;
    l->nlive++;
    nng_mtx_unlock(l->mu);
    atomic_fetch_add(&l->engine->clients, 1);
    c10ds_conn_recv_start(c);
    accept_next(l);
}

/* A --max-connections the file descriptor limit cannot reach is the
 * operator's to know at start, not at the first refused accept. */
static void warn_if_over_nofile(const c10ds_config *cfg)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        (rlim_t)cfg->max_connections < rl.rlim_cur)
        return;
    c10ds_warn("--max-connections %u is not below the file descriptor limit (ulimit -n %llu): "
               "short of it, new connections wait until others close (raise ulimit -n, "
               "LimitNOFILE= under systemd)",
               cfg->max_connections, (unsigned long long)rl.rlim_cur);
}

/* Writes into out the URL actually bound: the same as asked, but with the
 * port filled in when the caller asked for port 0. */
static void bound_url(c10ds_listener *l, const char *url, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", url);
    int port = 0;
    if (strstr(url, "tcp://") == NULL ||
        nng_stream_listener_get_int(l->lst, NNG_OPT_TCP_BOUND_PORT, &port) != 0)
        return;
    const char *colon = strrchr(url, ':');
    if (colon && colon > strstr(url, "://") + 2)
        snprintf(out, outlen, "%.*s:%d", (int)(colon - url), url, port);
}

c10ds_listener *c10ds_listener_new(const c10ds_config *cfg, c10ds_engine *engine,
                                   const char *url, c10ds_dialect dialect, char *url_out,
                                   size_t url_len)
{
    c10ds_listener *l = calloc(1, sizeof *l);
    int rv;
    if (!l || nng_mtx_alloc(&l->mu) != 0 || !(l->url = strdup(url))) {
        c10ds_failed(C10D_ERROR, "out of memory");
        if (l && l->mu)
            nng_mtx_free(l->mu);
        free(l);
        return NULL;
    }
    l->dialect = dialect;
    l->cfg = cfg;
    l->parked.limit = cfg->ts_max_parked_bytes;
    l->parked.what = "the TCPStore port";
    l->parked.option = "--tcpstore-max-parked-bytes";
    l->quota.b.limit = cfg->ts_quota_bytes;
    l->quota.b.what = "the TCPStore port";
    l->quota.b.option = "--tcpstore-quota-bytes";
    l->quota.prefix = C10DS_TS_KEY_PREFIX;
    l->engine = engine;
    if ((dialect == C10DS_DIALECT_TCPSTORE &&
         !(l->ts_runs = c10ds_ts_runs_new(engine->ts_keys.base))) ||
        nng_cv_alloc(&l->cv, l->mu) != 0 || nng_aio_alloc(&l->accept_aio, accept_cb, l) != 0 ||
        nng_aio_alloc(&l->backoff_aio, backoff_cb, l) != 0 ||
        nng_thread_create(&l->reaper, c10ds_conn_reaper, l) != 0) {
        c10ds_failed(C10D_ERROR, "out of memory");
        goto fail;
    }
    if ((rv = nng_stream_listener_alloc(&l->lst, url)) != 0) {
        c10ds_failed(C10D_ERROR, "cannot listen on %s: %s (tcp://host:port, ipc:///path or "
                     "tls+tcp://host:port)", url, nng_strerror(rv));
        goto fail;
    }
    nng_stream_listener_set_bool(l->lst, NNG_OPT_TCP_NODELAY, true);
    if (c10dc_url_is_tls(url)) {
        nng_tls_config *tls;
        char why[C10DS_FAILURE_MAX]; /* common/ (the client's too) says why in a buffer */
        if (c10dc_tls_server(&tls, cfg->tls_cert, cfg->tls_key, cfg->tls_ca, why,
                             sizeof why) != 0) {
            c10ds_failed(C10D_ERROR, "%s", why);
            goto fail;
        }
        rv = nng_stream_listener_set_ptr(l->lst, NNG_OPT_TLS_CONFIG, tls);
        nng_tls_config_free(tls); /* the listener holds its own reference */
        if (rv != 0) {
            c10ds_failed(C10D_ERROR, "cannot use TLS on %s: %s", url, nng_strerror(rv));
            goto fail;
        }
    }
    if ((rv = nng_stream_listener_listen(l->lst)) != 0) {
        c10ds_failed(C10D_ERROR, "cannot listen on %s: %s%s", url, nng_strerror(rv),
                     rv == NNG_EADDRINUSE ? " (another coordinator, or another program, has "
                                            "this port; pick another with --listen)"
                                          : "");
        goto fail;
    }
    bound_url(l, url, url_out, url_len);
    char *bound = strdup(url_out); /* what the log names: the port picked for port 0 */
    if (bound) {
        free(l->url);
        l->url = bound;
    }
    warn_if_over_nofile(cfg);
    const char *no_loop = getenv("C10D_NO_READINESS");
    if (!c10dc_url_is_tls(url) && !(no_loop && *no_loop && strcmp(no_loop, "0") != 0))
        l->ready = c10ds_readiness_start(l, &c10ds_framing_ready_ops);
    nng_stream_listener_accept(l->lst, l->accept_aio);
    return l;
fail:
    c10ds_listener_close(l, C10DS_LISTENER_CLOSE_MS);
    return NULL;
}

void c10ds_listener_drain(c10ds_listener *l, c10d_ms timeout_ms)
{
    for (int waited = 0; atomic_load(&l->sends_in_flight) > 0 && waited < timeout_ms; waited++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Closes every live connection. Not under l->mu: closing a paused one may
 * drop its last reference, and the reaper's hand-off takes l->mu. */
static void close_all(c10ds_listener *l)
{
    /* No connection is to be resumed from here on (and the fallback
     * below closes them under l->mu, which resuming takes). */
    atomic_store(&l->resumes_off, 1);
    nng_mtx_lock(l->mu);
    size_t n = 0;
    for (c10ds_conn *c = l->live; c; c = c->next)
        n++;
    c10ds_conn **all = malloc((n ? n : 1) * sizeof *all);
    n = 0;
    for (c10ds_conn *c = l->live; all && c; c = c->next) {
        /* Only one still referenced: a connection whose last reference
         * just went is still listed until its unref takes l->mu to hand
         * it to the reaper, and taking one more then revived it to be
         * freed under us (SIGTERM as 4,000 clients hung up: the main
         * thread stuck on a freed connection's lock). */
        int refs = atomic_load(&c->refs);
        while (refs > 0 && !atomic_compare_exchange_weak(&c->refs, &refs, refs + 1))
            ;
        if (refs > 0)
            all[n++] = c;
    }
    nng_mtx_unlock(l->mu);
    if (!all) { /* out of memory at shutdown: as before, under the lock */
        nng_mtx_lock(l->mu);
        for (c10ds_conn *c = l->live; c; c = c->next)
            c10ds_conn_close(c, NULL);
        nng_mtx_unlock(l->mu);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        c10ds_conn_close(all[i], NULL);
        c10ds_conn_unref(all[i]);
    }
    free(all);
}

int c10ds_listener_close(c10ds_listener *l, c10d_ms timeout_ms)
{
    if (!l)
        return 0;
    nng_mtx_lock(l->mu);
    l->closing = 1;
    nng_mtx_unlock(l->mu);
    if (l->lst)
        nng_stream_listener_close(l->lst);
    /* The pause first: its callback would start another accept. */
    if (l->backoff_aio)
        nng_aio_stop(l->backoff_aio);
    if (l->accept_aio)
        nng_aio_stop(l->accept_aio);
    /* Close every connection (closing only aborts their I/O; the callbacks
     * run on NNG's threads). Each is freed once its I/O has ended and the
     * engine - stopped before this - has let go of its requests. */
    close_all(l);
    int left = 0;
    for (int waited = 0; waited <= timeout_ms; waited++) {
        nng_mtx_lock(l->mu);
        left = l->nlive;
        nng_mtx_unlock(l->mu);
        if (!left)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (left)
        return -1; /* a connection still held: leave everything allocated */
    if (l->reaper) {
        nng_mtx_lock(l->mu);
        l->reaper_stop = 1;
        nng_cv_wake(l->cv);
        nng_mtx_unlock(l->mu);
        nng_thread_destroy(l->reaper); /* joins it, after the last frees */
    }
    /* after the reaper: freeing a connection takes its socket out of the
     * loop's set */
    c10ds_readiness_stop(l->ready);
    nng_aio_free(l->accept_aio);
    nng_aio_free(l->backoff_aio);
    if (l->lst)
        nng_stream_listener_free(l->lst);
    if (l->cv)
        nng_cv_free(l->cv);
    nng_mtx_free(l->mu);
    c10ds_ts_runs_free(l->ts_runs); /* after the last connection (the reaper's) */
    free(l->url);
    free(l);
    return 0;
}
