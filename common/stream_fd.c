/* Finding the socket beneath an NNG byte stream (stream_fd.h says why). */
#include "stream_fd.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

/* Descriptors claimed by a stream of this process, one bit each: two
 * ipc:// connections to one path are told apart by which is claimed, and
 * a scan among thousands of connections looks only at the new one. */
static pthread_mutex_t claims_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *claims;
static size_t claims_words;

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

/* fd is a connected socket whose ends are loc and rem (TCP), or which has
 * the ipc path as its own name or its peer's (a client's socket is named
 * by its peer, a coordinator's accepted one by itself). */
static int matches(int fd, const nng_sockaddr *loc, const nng_sockaddr *rem, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        return 0;
    struct sockaddr_storage a, b;
    socklen_t la = sizeof a, lb = sizeof b;
    if (getpeername(fd, (struct sockaddr *)&b, &lb) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &la) != 0)
        return 0;
    if (path)
        return unix_name_is(&a, la, path) || unix_name_is(&b, lb, path);
    return same_end(loc, &a) && same_end(rem, &b);
}

int c10dc_stream_fd(nng_stream *s)
{
    nng_sockaddr loc, rem;
    memset(&loc, 0, sizeof loc);
    if (nng_stream_get_addr(s, NNG_OPT_REMADDR, &rem) != 0)
        return -1;
    const char *path = NULL;
    if (rem.s_family == NNG_AF_IPC)
        path = rem.s_ipc.sa_path;
    else if ((rem.s_family != NNG_AF_INET && rem.s_family != NNG_AF_INET6) ||
             nng_stream_get_addr(s, NNG_OPT_LOCADDR, &loc) != 0)
        return -1;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int found = -1, candidates = 0, dir_fd = dirfd(d);
    pthread_mutex_lock(&claims_mu);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name || fd == dir_fd || claimed_locked(fd))
            continue;
        if (matches((int)fd, &loc, &rem, path)) {
            found = (int)fd;
            candidates++;
        }
    }
    /* TCP's two ends name one connection; an ipc path may be shared */
    found = candidates == 1 ? claim_locked(found) : -1;
    pthread_mutex_unlock(&claims_mu);
    closedir(d);
    return found;
}
