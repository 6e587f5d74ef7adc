/* Getting the stream beneath the connection to the coordinator
 * (conn_stream_internal.h): a dialer for each URL, with its TLS, a dial,
 * and what to do when a URL fails us: where to dial next and how long to
 * wait first.
 *
 * When the connection breaks (a coordinator restart), whichever caller
 * notices dials again (backing off from 20 to 500 ms) and every waiting
 * call sends its request again, the same bytes with the same request id,
 * until its deadline (the watch is the exception: c10di_call_once), so
 * the coordinator applies a non-idempotent request once however often it
 * arrives.
 *
 * A replicated coordinator (docs/replication.md) is a list of URLs, a
 * dialer each; only the leading replica serves. A dial that fails goes
 * on to the next URL, and the back-off begins once every URL failed us
 * in a row (a round: c->tried). A follower answers every request with
 * C10D_ENOTLEADER, naming the leader when it knows it: dispatch
 * (conn_reader.c) reads each reply's status from the reply it decoded,
 * completes no call with it, and drops the stream as a coordinator
 * restart would (c10di_conn_not_leader), so that every call in flight is
 * sent again (same bytes, same request id), to the leader named (added
 * to the list if it is not there) or else the next URL. Such an answer
 * counts as a failure for the round too: two followers naming each
 * other, or a dead leader, during an election do not make a client dial
 * in a tight loop. */
#include "conn/conn_stream_internal.h"

#include "budgets.h"
#include "c10d_time.h"
#include "stream_fd.h"
#include "tls.h"
#include "url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The next dial waits a little longer (mu held): a coordinator being
 * restarted is usually back soon; a port that is no coordinator's is not,
 * and must not be dialled in a tight loop. */
static void back_off(c10di_conn *c)
{
    static const int backoff[] = {20, 50, 100, 200, 500};
    int k = c->dial_failures < 4 ? c->dial_failures++ : 4;
    c->next_dial_ms = c10d_now_ms() + backoff[k];
}

/* The URL now current failed us (mu held): a dial, a connection
 * broken before any reply, a replica that does not lead. The next dial
 * goes to `hint` (an index, or -1) unless it failed us already this
 * round, else to the next URL that did not; once all did, the round ends
 * with a back-off. One URL: a back-off every time, as ever. */
static void miss(c10di_conn *c, int hint)
{
    c->tried |= 1u << c->cur;
    int next = hint >= 0 && !(c->tried & (1u << hint)) ? hint : -1;
    for (int i = 1; next < 0 && i <= c->n_urls; i++) {
        int k = (c->cur + i) % c->n_urls;
        if (!(c->tried & (1u << k)))
            next = k;
    }
    if (next < 0) {
        c->tried = 0;
        back_off(c);
        next = hint >= 0 ? hint : (c->cur + 1) % c->n_urls;
    } else {
        c->next_dial_ms = c10d_now_ms();
    }
    c->cur = next;
}

/* Drops c's stream s (mu held; s is c->stream): closed now, freed by the
 * next dial once nobody uses it. */
static void retire(c10di_conn *c, nng_stream *s, int rv)
{
    c->stream = NULL;
    c10dc_stream_fd_release(c->retired_fd); /* a stream left allocated (dial) */
    c->retired = s;
    c->retired_fd = c->stream_fd;
    c->stream_fd = -1;
    c->last_err = rv;
    c->err_url = c->urls[c->cur];
    atomic_store(&c->pipes, 0);
    nng_stream_close(s);
    wake_all(c);
}

void c10di_conn_broken(c10di_conn *c, nng_stream *s, int rv)
{
    if (c->stream != s)
        return; /* someone saw it first */
    /* Broken before anything was answered on it: the server took the
     * connection but is no coordinator (or no TLS one). Back off, as for a
     * refused dial; a plain client on a TLS port dialled 1,114 times a
     * second. */
    int unanswered = !c->answered;
    retire(c, s, rv);
    if (unanswered) {
        c->unanswered++;
        c->hung_url = c->urls[c->cur];
        miss(c, -1);
    }
}

/* A replica answered on c->stream that it does not lead, naming the
 * leader's URL (leader: NULL or "" when it knows none) (mu held). The
 * stream is dropped: every call in flight is sent again on the next one,
 * which c10di_conn_dial() makes to the leader named, else to the next
 * URL. The replica is a coordinator: not counted among the servers that
 * hang up unanswered. */
void c10di_conn_not_leader(c10di_conn *c, const char *leader, const char *detail)
{
    free(c->hint);
    c->hint = leader && *leader ? strdup(leader) : NULL;
    /* what the replica said (no leader: an election, or no majority),
     * for the error if no leader is found in time */
    free(c->leaderless_why);
    c->leaderless_why = detail && *detail ? strdup(detail) : NULL;
    c->redirected = 1;
    c->leaderless = 1;
    c->unanswered = 0;
    retire(c, c->stream, NNG_ECLOSED);
}

void c10di_conn_leader_moved(c10di_conn *c, const char *leader)
{
    free(c->hint);
    c->hint = strdup(leader);
    c->redirected = 1;
    c->unanswered = 0;
    retire(c, c->stream, NNG_ECLOSED);
}

/* TCP lets a connection to a free port on this host open to itself, when
 * the port the kernel picks for our end is that same port (simultaneous
 * open). A coordinator bound to a port in the ephemeral range and being
 * restarted is exactly that case, and the client would then hold the port
 * the coordinator needs. Such a connection counts as refused. */
static int connected_to_itself(nng_stream *s)
{
    nng_sockaddr a, b;
    if (nng_stream_get_addr(s, NNG_OPT_LOCADDR, &a) != 0 ||
        nng_stream_get_addr(s, NNG_OPT_REMADDR, &b) != 0 || a.s_family != b.s_family)
        return 0;
    if (a.s_family == NNG_AF_INET)
        return a.s_in.sa_port == b.s_in.sa_port && a.s_in.sa_addr == b.s_in.sa_addr;
    if (a.s_family == NNG_AF_INET6)
        return a.s_in6.sa_port == b.s_in6.sa_port &&
               memcmp(a.s_in6.sa_addr, b.s_in6.sa_addr, sizeof a.s_in6.sa_addr) == 0;
    return 0;
}

/* A dialer for url, with its TLS configuration (c->tls_*) for a
 * tls+tcp:// one, as c->urls[c->n_urls], not yet counted: the caller
 * counts it, under mu. Only a thread that dials, or the opening, adds
 * one. C10D_EINVAL: NNG refuses the URL, or the list is full; C10D_EAUTH:
 * the TLS files. */
static c10d_status add_url(c10di_conn *c, const char *url)
{
    nng_stream_dialer *d = NULL;
    char *copy = NULL;
    int rv, k = c->n_urls;
    c10d_status st = C10D_OK;
    if (k == C10DI_CONN_URLS)
        return c10di_error(C10D_EINVAL, "more than %d coordinator URLs", C10DI_CONN_URLS);
    if (!(copy = strdup(url)))
        return c10di_error(C10D_ENOMEM, "out of memory");
    if ((rv = nng_stream_dialer_alloc(&d, url)) != 0) {
        st = c10di_error(C10D_EINVAL, "bad coordinator URL '%s': %s (tcp://host:port, "
                         "ipc:///path or tls+tcp://host:port)", url, nng_strerror(rv));
        goto fail;
    }
    /* Raw streams leave Nagle on; a request is one small write. */
    nng_stream_dialer_set_bool(d, NNG_OPT_TCP_NODELAY, true);
    if (c10dc_url_is_tls(url)) {
        nng_tls_config *cfg;
        char err[600];
        if (c10dc_tls_client(&cfg, url, c->tls_ca, c->tls_cert, c->tls_key, err,
                             sizeof err) != 0) {
            st = c10di_error(C10D_EAUTH, "%s", err);
            goto fail;
        }
        rv = nng_stream_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
        nng_tls_config_free(cfg); /* the dialer holds its own reference */
        if (rv != 0) {
            st = c10di_error(C10D_EAUTH, "cannot use TLS for %s: %s", url, nng_strerror(rv));
            goto fail;
        }
    }
    c->urls[k] = copy;
    c->dialers[k] = d;
    return C10D_OK;
fail:
    if (d)
        nng_stream_dialer_free(d);
    free(copy);
    return st;
}

/* After a replica said it does not lead (mu held, c->dialing): makes the
 * leader it named current, adding its URL when the list lacks it (a
 * replica may spell its host otherwise than the list: a leader named is
 * dialled, not matched), or else the next URL; a URL that cannot be ours
 * (TLS where the list is plain, or the other way; a bad one) is passed
 * over. Returns 0 when a round ended (back off before dialling), else 1. */
static int redirect(c10di_conn *c)
{
    char *hint = c->hint, url[C10DI_URL_MAX];
    c->hint = NULL;
    c->redirected = 0;
    int k = -1;
    if (hint && c10di_url_element(hint, strlen(hint), url, sizeof url) == C10D_OK &&
        !c10dc_url_is_tls(url) == !c->rx_async) {
        for (int i = 0; i < c->n_urls && k < 0; i++)
            if (!strcmp(c->urls[i], url))
                k = i;
        if (k < 0) {
            pthread_mutex_unlock(&c->mu);
            int added = add_url(c, url) == C10D_OK; /* it reads files for TLS: not under mu */
            pthread_mutex_lock(&c->mu);
            if (added)
                k = c->n_urls++;
        }
    }
    free(hint);
    miss(c, k);
    return c10d_now_ms() >= c->next_dial_ms && !c->closing;
}

/* ipc:// dials of this process, one at a time with the look for their
 * socket: two new connections to one path would be told apart by nothing
 * (common/stream_fd.h). */
static pthread_mutex_t ipc_dial_mu = PTHREAD_MUTEX_INITIALIZER;

void c10di_conn_dial(c10di_conn *c, int64_t deadline)
{
    c->dialing = 1;
    /* The old stream is freed once nobody uses it: closing it ended their
     * operations, so this is short. Should NNG never finish one of them,
     * the stream is left allocated rather than freed under its user, and
     * the dial goes on. */
    int64_t give_up = c10d_now_ms() + C10DI_CONN_RETIRE_MS;
    while (c->retired && c->users > 0 && c10d_now_ms() < give_up && !c->closing)
        wait_change(c, 0, c10d_now_ms() + 50);
    nng_stream *old = c->users > 0 ? NULL : c->retired;
    c->retired = NULL;
    c10dc_stream_fd_release(c->retired_fd); /* before its number can be reused */
    c->retired_fd = -1;
    if (c->redirected && !redirect(c)) {
        /* a round of URLs failed us: dial after the back-off */
        c->dialing = 0;
        wake_all(c);
        pthread_mutex_unlock(&c->mu);
        if (old)
            nng_stream_free(old);
        pthread_mutex_lock(&c->mu);
        return;
    }
    const char *url = c->urls[c->cur];
    nng_stream_dialer *dialer = c->dialers[c->cur];
    int64_t attempt = c->n_urls > 1 ? C10DI_CONN_LIST_DIAL_ATTEMPT_MS : C10DI_CONN_DIAL_ATTEMPT_MS;
    pthread_mutex_unlock(&c->mu);
    if (old)
        nng_stream_free(old);
    int64_t left = deadline - c10d_now_ms();
    nng_aio_set_timeout(c->dial_aio, c10d_nng_ms(left > attempt ? attempt : left));
    int ipc = strncmp(url, "ipc://", 6) == 0;
    if (ipc)
        pthread_mutex_lock(&ipc_dial_mu);
    nng_stream_dialer_dial(dialer, c->dial_aio);
    nng_aio_wait(c->dial_aio);
    int rv = nng_aio_result(c->dial_aio);
    if (rv == 0 && connected_to_itself(nng_aio_get_output(c->dial_aio, 0))) {
        nng_stream_free(nng_aio_get_output(c->dial_aio, 0));
        rv = NNG_ECONNREFUSED;
    }
    int fd = rv == 0 && !c->rx_async && c->wake_fd >= 0
                 ? c10dc_stream_fd(nng_aio_get_output(c->dial_aio, 0))
                 : -1;
    if (ipc)
        pthread_mutex_unlock(&ipc_dial_mu);
    pthread_mutex_lock(&c->mu);
    c->dialing = 0;
    if (rv == 0 && !c->closing) {
        c->stream = nng_aio_get_output(c->dial_aio, 0);
        c->stream_fd = fd;
        c->epoch++;
        c->rlen = 0;
        c->last_err = 0;
        c->answered = 0; /* the back-off and the outage end at a reply, not at a connect */
        c->dialed_ms = c10d_now_ms();
        atomic_store(&c->pipes, 1);
        /* TLS: the caller arms the new stream's receive before it lets
         * mu go (conn_stream_internal.h: the dial calls no reader) */
    } else {
        c10dc_stream_fd_release(fd);
        if (rv == 0)
            nng_stream_free(nng_aio_get_output(c->dial_aio, 0));
        c->last_err = rv ? rv : NNG_ECLOSED;
        c->err_url = url;
        miss(c, -1);
    }
    wake_all(c);
}

/* A rank started before its coordinator, or pointed at the wrong place,
 * says so on stderr once it has tried for a second, and every 10 s after,
 * rather than waiting out C10D_TIMEOUT_MS in silence. Short waits (a
 * c10d-ctl call) stay quiet: their error says it. c->mu held. */
void c10di_conn_notice_unreachable(c10di_conn *c, int64_t now, int64_t deadline)
{
    if (!c->last_err && !c->leaderless) {
        c->down_since_ms = 0;
        return;
    }
    if (!c->down_since_ms) {
        c->down_since_ms = now;
        c->next_notice_ms = now + C10DI_CONN_NOTICE_AFTER_MS;
    }
    if (now < c->next_notice_ms || deadline - c->down_since_ms < C10DI_CONN_NOTICE_MIN_WAIT_MS)
        return;
    c->next_notice_ms = now + C10DI_CONN_NOTICE_EVERY_MS;
    /* A coordinator that is down refuses connections; one that takes them
     * and hangs up on our handshake is some other server (a TCPStore). */
    const char *other = c->last_err == NNG_ECONNSHUT
                            ? ": the server there accepts connections and closes them without "
                              "answering, as a c10d-coord would not; is it another server, "
                              "such as torchrun's TCPStore?"
                            : "";
    const char *from = c->timeout_from ? c->timeout_from : "the call's timeout";
    if (c->leaderless)
        fprintf(stderr, "c10d: pid %d: no leader found among the coordinator's replicas at %s "
                "yet (those that answer do not lead: an election?), after %lld s; still "
                "trying, for up to %lld s more (%s)\n", (int)getpid(),
                c->url_list, (long long)(now - c->down_since_ms) / 1000,
                (long long)(deadline - now) / 1000, from);
    else
        fprintf(stderr, "c10d: pid %d: no coordinator answers at %s yet (%s%s), after %lld s; "
                "still trying, for up to %lld s more (%s)\n", (int)getpid(),
                c->url_list, nng_strerror(c->last_err), other,
                (long long)(now - c->down_since_ms) / 1000, (long long)(deadline - now) / 1000,
                from);
}

c10d_status c10di_conn_stream_dialer(c10di_conn *c)
{
    /* c10di_resolve_url checked each URL, and that all are TLS or none */
    c->rx_async = c10dc_url_is_tls(c->url_list);
    const char *p = c->url_list, *elem;
    size_t len;
    while (c10dc_url_list_next(&p, &elem, &len)) {
        char url[C10DI_URL_MAX];
        snprintf(url, sizeof url, "%.*s", (int)len, elem);
        c10d_status st = add_url(c, url);
        if (st != C10D_OK)
            return st;
        c->n_urls++;
    }
    return C10D_OK;
}

const char *c10di_conn_current_url(c10di_conn *c)
{
    pthread_mutex_lock(&c->mu);
    const char *url = c->n_urls ? c->urls[c->cur] : c->url_list;
    pthread_mutex_unlock(&c->mu);
    return url;
}
