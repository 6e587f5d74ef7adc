/* Finding the socket beneath an NNG byte stream (stream_fd.h says why). */
#include "stream_fd.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

/* Descriptors claimed by a stream of this process, one bit each: two
 * ipc:// connections to one path are told apart by which is claimed, and
 * a scan among thousands of connections looks only at the new one. */
static pthread_mutex_t claims_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *claims;
static size_t claims_words;
static int claims_hi = -1; /* the highest descriptor ever claimed */

static int claimed_locked(long fd)
{
    return (size_t)fd / 64 < claims_words && (claims[fd / 64] >> (fd % 64) & 1);
}

static int claim_locked(int fd)
{
    size_t word = (size_t)fd / 64;
    if (word >= claims_words) {
        size_t n = claims_words ? claims_words : 16;
        while (n <= word)
            n *= 2;
        uint64_t *grown = realloc(claims, n * sizeof *grown);
        if (!grown)
            return -1;
        memset(grown + claims_words, 0, (n - claims_words) * sizeof *grown);
        claims = grown;
        claims_words = n;
    }
    claims[word] |= (uint64_t)1 << (fd % 64);
    if (fd > claims_hi)
        claims_hi = fd;
    return fd;
}

void c10dc_stream_fd_release(int fd)
{
    if (fd < 0)
        return;
    pthread_mutex_lock(&claims_mu);
    if ((size_t)fd / 64 < claims_words)
        claims[fd / 64] &= ~((uint64_t)1 << (fd % 64));
    pthread_mutex_unlock(&claims_mu);
}

/* a (an NNG address) names the same end as the socket address b. */
static int same_end(const nng_sockaddr *a, const struct sockaddr_storage *b)
{
    if (a->s_family == NNG_AF_INET && b->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)b;
        return a->s_in.sa_port == in->sin_port && a->s_in.sa_addr == in->sin_addr.s_addr;
    }
    if (a->s_family == NNG_AF_INET6 && b->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)b;
        return a->s_in6.sa_port == in6->sin6_port &&
               memcmp(a->s_in6.sa_addr, &in6->sin6_addr, 16) == 0;
    }
    return 0;
}

static int unix_name_is(const struct sockaddr_storage *a, socklen_t len, const char *path)
{
    const struct sockaddr_un *un = (const struct sockaddr_un *)a;
    return a->ss_family == AF_UNIX && len > offsetof(struct sockaddr_un, sun_path) &&
           strncmp(un->sun_path, path, sizeof un->sun_path) == 0;
}

/* What is being looked for: a TCP connection's two ends, or an ipc path. */
typedef struct {
    nng_sockaddr loc, rem;
    const char *path;
} wanted;

/* fd is a connected stream socket, not shut down, whose ends are w's
 * (TCP), or which has w's ipc path as its own name or its peer's (a
 * client's socket is named by its peer, a coordinator's accepted one by
 * itself). Only socket calls: no descriptor's file system is touched (an
 * fstat of a file on NFS may wait for its dirty pages to be written). A
 * socket shut down is one NNG closed and has yet to free (a stream
 * retired, a connection being reaped): never the new one. */
__attribute__((noinline)) /* named in tests/tsan.supp */
static int stream_fd_probe(int fd, const wanted *w)
{
    int type = 0;
    socklen_t tl = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM)
        return 0;
    struct sockaddr_storage a, b;
    socklen_t la = sizeof a, lb = sizeof b;
    if (getpeername(fd, (struct sockaddr *)&b, &lb) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &la) != 0)
        return 0;
    int match = w->path ? unix_name_is(&a, la, w->path) || unix_name_is(&b, lb, w->path)
                        : same_end(&w->loc, &a) && same_end(&w->rem, &b);
    if (!match)
        return 0;
    struct pollfd p = {fd, 0, 0};
    return !(poll(&p, 1, 0) == 1 && (p.revents & POLLHUP));
}

/* Looks at one unclaimed descriptor: counts a match in *candidates.
 * Returns 1 when the search is over (a TCP connection's ends are unique). */
static int look_at(int fd, const wanted *w, int *found, int *candidates)
{
    if (!stream_fd_probe(fd, w))
        return 0;
    *found = fd;
    (*candidates)++;
    return !w->path;
}

/* The unclaimed descriptor numbers up to a little past the highest ever
 * claimed: a new socket takes the lowest free number, so it is nearly
 * always there, and the numbers claimed (every other connection's) cost
 * nothing. (claims_mu held.) */
static void look_at_numbers(const wanted *w, int *found, int *candidates)
{
    int hi = claims_hi + 256;
    for (int fd = 0; fd <= hi; fd++)
        if (!claimed_locked(fd) && look_at(fd, w, found, candidates))
            return;
}

/* Every descriptor /proc/self/fd lists (claims_mu held). */
static void look_at_all(const wanted *w, int *found, int *candidates)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    int dir_fd = dirfd(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name || fd == dir_fd || claimed_locked(fd))
            continue;
        if (look_at((int)fd, w, found, candidates))
            break;
    }
    closedir(d);
}

int c10dc_stream_fd(nng_stream *s)
{
    wanted w;
    memset(&w, 0, sizeof w);
    if (nng_stream_get_addr(s, NNG_OPT_REMADDR, &w.rem) != 0)
        return -1;
    if (w.rem.s_family == NNG_AF_IPC)
        w.path = w.rem.s_ipc.sa_path;
    else if ((w.rem.s_family != NNG_AF_INET && w.rem.s_family != NNG_AF_INET6) ||
             nng_stream_get_addr(s, NNG_OPT_LOCADDR, &w.loc) != 0)
        return -1;
    int found = -1, candidates = 0;
    pthread_mutex_lock(&claims_mu);
    look_at_numbers(&w, &found, &candidates);
    if (candidates == 0)
        look_at_all(&w, &found, &candidates); /* past the numbers looked at */
    /* TCP's two ends name one connection; an ipc path may be shared */
    found = candidates == 1 ? claim_locked(found) : -1;
    pthread_mutex_unlock(&claims_mu);
    return found;
}
