/* The host backend's entry in the ops table: set up links to a group's
 * members (shared memory with those on this host, TCP with the others),
 * run collectives, tear down. */
#include "host.h"

#include "c10d_hash.h"
#include "c10d_time.h"
#include "url.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

static atomic_int segments_made;


/* The address peers on other hosts should dial: C10D_HOST_ADDR, else the
 * local address this host uses to reach the coordinator. */
static void local_addr(const char *coord_url, char *out, size_t cap)
{
    const char *env = getenv("C10D_HOST_ADDR");
    snprintf(out, cap, "127.0.0.1");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return;
    }
    /* The address this host reaches the coordinator from: tcp:// and
     * tls+tcp:// alike (an ipc:// coordinator is on this host). */
    /* A replicated coordinator's list: its first replica's host will do
     * (the route out of this host to any of them). */
    char name[256], port[16], first[512];
    const char *list = coord_url, *elem = "";
    size_t len = 0;
    (void)c10dc_url_list_next(&list, &elem, &len);
    snprintf(first, sizeof first, "%.*s", (int)len, elem);
    if (!c10dc_url_is_tcp(first) ||
        c10dc_url_split(first, name, sizeof name, port, sizeof port) != 0)
        return;
    /* IPv4 or IPv6, as the coordinator's name resolves (AF_UNSPEC). */
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    if (getaddrinfo(name, port, &hints, &ai) != 0 || !ai)
        return;
    int fd = socket(ai->ai_family, SOCK_DGRAM, 0);
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0) {
        if (sa.ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, out, (socklen_t)cap);
        else
            inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, out, (socklen_t)cap);
    }
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
}

static void host_close(void *state)
{
    c10di_host *h = state;
    if (!h)
        return;
    c10di_tcp_close(h);
    c10di_shm_detach(h);
    c10di_p2p_free(h);
    free(h->links);
    free(h->peer_seg);
    free(h->peer_seg_len);
    free(h->scratch);
    free(h->shadow);
    free(h->heard_joined);
    pthread_mutex_destroy(&h->p2p_mu);
    pthread_mutex_destroy(&h->link_mu);
    free(h);
}

static c10d_status host_open(const c10di_be_ctx *x, void **state, char *buf, size_t cap,
                             size_t *len)
{
    c10di_host *h = calloc(1, sizeof *h);
    c10d_status st;
    if (!h)
        return c10di_error(C10D_ENOMEM, "out of memory");
    h->ctx = x;
    h->group_hash = c10d_fnv1a32(x->group);
    h->n = x->size;
    h->me = x->rank;
    h->listen_fd = -1;
    pthread_mutex_init(&h->p2p_mu, NULL);
    pthread_mutex_init(&h->link_mu, NULL);
    h->links = calloc((size_t)h->n, sizeof *h->links);
    h->peer_seg = calloc((size_t)h->n, sizeof *h->peer_seg);
    h->peer_seg_len = calloc((size_t)h->n, sizeof *h->peer_seg_len);
    h->heard_joined = calloc((size_t)h->n, sizeof *h->heard_joined);
    if (!h->links || !h->peer_seg || !h->peer_seg_len || !h->heard_joined ||
        (h->links && c10di_p2p_init(h) != C10D_OK)) {
        host_close(h);
        return c10di_error(C10D_ENOMEM, "out of memory");
    }
    for (int i = 0; i < h->n; i++)
        h->links[i].fd[0] = h->links[i].fd[1] = -1;
    local_addr(x->coord_url, h->addr, sizeof h->addr); /* what peers are told */
    if ((st = c10di_tcp_listen(h)) != C10D_OK) {
        host_close(h);
        return st;
    }
    char name[96];
    snprintf(name, sizeof name, "/c10d.%016llx.%d.%d",
             (unsigned long long)c10d_fnv1a64(x->group, c10d_fnv1a64(x->job, C10D_FNV64_BASIS)),
             (int)getpid(), atomic_fetch_add(&segments_made, 1));
    /* Made at connect, for the peers found on this host. None when TCP is
     * forced: a peer on this host must not wait for a segment never made. */
    const char *mode = getenv("C10D_HOST_TRANSPORT");
    if (h->n > 1 && !(mode && strcmp(mode, "tcp") == 0))
        snprintf(h->shm_published, sizeof h->shm_published, "%s", name);
    C10dpb__HostEndpoint ep = C10DPB__HOST_ENDPOINT__INIT;
    ep.host = (char *)x->host;
    ep.shm = h->shm_published;
    ep.addr = h->addr;
    ep.has_pid = ep.has_port = 1;
    ep.pid = (int)getpid();
    ep.port = h->port;
    if (c10dpb__host_endpoint__get_packed_size(&ep) > cap) {
        host_close(h);
        return c10di_error(C10D_EINVAL, "group %s: this rank's endpoint does not fit in %zu "
                           "bytes (host name %.64s...)", x->group, cap, x->host);
    }
    *len = c10dpb__host_endpoint__pack(&ep, (uint8_t *)buf);
    *state = h;
    return C10D_OK;
}

/* What peer's endpoint says; NULL if it is not one (unpacked: free it). */
static C10dpb__HostEndpoint *endpoint_of(const ProtobufCBinaryData *ep)
{
    C10dpb__HostEndpoint *e = c10dpb__host_endpoint__unpack(NULL, ep->len, ep->data);
    if (e && (!e->host || !e->shm || !e->addr)) { /* proto2 strings: absent is NULL */
        c10dpb__host_endpoint__free_unpacked(e, NULL);
        e = NULL;
    }
    return e;
}

static c10d_status not_an_endpoint(c10di_host *h, int peer, const ProtobufCBinaryData *ep)
{
    return c10di_error(C10D_EPROTO, "group %s: the endpoint of rank %d (%zu bytes) is not a "
                       "host backend's", h->ctx->group, peer, ep->len);
}

static void learn(c10di_host *h, int peer, const C10dpb__HostEndpoint *e)
{
    c10di_link *l = &h->links[peer];
    snprintf(l->host, sizeof l->host, "%.63s", e->host);
    snprintf(l->addr, sizeof l->addr, "%s", e->addr);
    l->pid = e->pid;
    l->port = e->port;
}

c10d_status c10di_host_learn(c10di_host *h, int peer, const ProtobufCBinaryData *ep)
{
    C10dpb__HostEndpoint *e = endpoint_of(ep);
    if (!e)
        return not_an_endpoint(h, peer, ep);
    learn(h, peer, e);
    c10dpb__host_endpoint__free_unpacked(e, NULL);
    return C10D_OK;
}

static c10d_status host_connect(void *state, const c10di_peers *peers)
{
    c10di_host *h = state;
    const c10di_be_ctx *x = h->ctx;
    const char *mode = getenv("C10D_HOST_TRANSPORT");
    int force_tcp = mode && strcmp(mode, "tcp") == 0;
    c10d_status st = C10D_OK;
    /* The members on this host (the rendezvous sent their endpoints, in
     * rank order): shared memory with each that published a segment.
     * Every one of them sees the same list, so all agree on the slots. */
    size_t n = peers->n;
    char(*shms)[96] = calloc(n ? n : 1, sizeof *shms);
    int *local = calloc(n ? n : 1, sizeof *local), nlocal = 0;
    if (!shms || !local) {
        st = c10di_error(C10D_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        int j = peers->ranks[i];
        C10dpb__HostEndpoint *e = endpoint_of(&peers->eps[i]);
        if (!e) {
            st = not_an_endpoint(h, j, &peers->eps[i]);
            goto out;
        }
        learn(h, j, e);
        snprintf(shms[i], sizeof shms[i], "%s", e->shm);
        local[i] = !force_tcp && strcmp(e->host, x->host) == 0 && shms[i][0] &&
                   h->shm_published[0];
        c10dpb__host_endpoint__free_unpacked(e, NULL);
        nlocal += local[i] && j != h->me;
    }
    for (size_t i = 0, seen = 0; i < n; i++) {
        int j = peers->ranks[i];
        if (!local[i] || j == h->me)
            continue;
        /* j's slot in our segment: its place among our local peers; ours
         * in j's: our place among j's (every local rank but j). */
        h->links[j].slot = (int)seen++;
        int before = 0;
        for (size_t k = 0; k < n && peers->ranks[k] < h->me; k++)
            before += local[k] && peers->ranks[k] != j;
        h->links[j].their_slot = before;
    }
    c10di_coll setup0 = {0};
    snprintf(setup0.what, sizeof setup0.what, "mapping the shared memory of the group's peers");
    setup0.deadline_ms = c10d_now_ms() + x->timeout_ms;
    if (nlocal && (st = c10di_shm_create(h, h->shm_published, nlocal)) != C10D_OK)
        goto out;
    for (size_t i = 0; i < n; i++)
        if (local[i] && peers->ranks[i] != h->me &&
            (st = c10di_shm_attach(h, peers->ranks[i], shms[i], &setup0)) != C10D_OK)
            goto out;
    /* Admission to the group's links: the random secret the coordinator
     * handed every member in the (authenticated) rendezvous. A coordinator
     * older than schema 6 sends none: then the old, guessable, hash. */
    h->cookie = x->secret;
    if (!h->cookie) {
        char cookie_src[256];
        snprintf(cookie_src, sizeof cookie_src, "%s/%llu/%s", x->job,
                 (unsigned long long)x->generation, x->group);
        h->cookie = c10d_fnv1a64(cookie_src, C10D_FNV64_BASIS);
    }
    /* Once every member has mapped our segment, its name can go: nothing
     * is left behind in /dev/shm if this process is killed later. The
     * barrier also makes this rank's first TCP links (log2 N of them). */
    c10di_coll setup = {0};
    snprintf(setup.what, sizeof setup.what, "the group's setup barrier");
    setup.deadline_ms = c10d_now_ms() + x->timeout_ms;
    if ((st = c10di_host_barrier(h, &setup)) != C10D_OK)
        goto out;
    if (h->shm_name[0]) {
        shm_unlink(h->shm_name);
        h->shm_name[0] = '\0';
    }
out:
    free(shms);
    free(local);
    return st;
}

static c10d_status host_run(void *state, c10di_coll *c)
{
    if (c->kind == C10DC_RECV && !c->shadow)
        return c10di_host_recv(state, c); /* from any member, it learns the sender */
    return c10di_host_run(state, c);
}

static c10d_status host_recv_post(void *state, c10di_recv *r)
{
    return c10di_host_recv_post(state, r);
}

static c10d_status host_recv_wait(void *state, c10di_recv *r, const c10di_coll *probe,
                                  int64_t until_ms)
{
    return c10di_host_recv_wait(state, r, probe, until_ms);
}

static int host_recv_progress(void *state)
{
    return c10di_host_recv_progress(state);
}

static int host_recv_cancel(void *state, c10di_recv *r)
{
    return c10di_host_recv_cancel(state, r);
}

static void host_recv_abort(void *state, c10d_status st, const char *msg)
{
    c10di_host_recv_abort(state, st, msg);
}

static c10d_status host_peek(void *state, uint64_t seq, int *found, c10di_peeked *out)
{
    return c10di_host_peek(state, seq, found, out);
}

static void host_announce(void *state, const c10di_coll *c, int to)
{
    c10di_host_announce(state, c, to);
}

const c10di_backend_ops c10di_host_backend = {
    .name = "host",
    .kind = C10DI_DEV_CPU,
    .open = host_open,
    .connect = host_connect,
    .run_call = host_run,
    .close = host_close,
    .peek = host_peek,
    .announce = host_announce,
    .recv_post = host_recv_post,
    .recv_wait = host_recv_wait,
    .recv_progress = host_recv_progress,
    .recv_cancel = host_recv_cancel,
    .recv_abort = host_recv_abort,
};
