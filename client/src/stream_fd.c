/* Finding the socket beneath an NNG byte stream (stream_fd.h says why). */
#include "stream_fd.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

/* ipc:// sockets claimed by a connection of this process: two connections
 * to one path are told apart by which is already claimed. */
static pthread_mutex_t claims_mu = PTHREAD_MUTEX_INITIALIZER;
static int *claims;
static size_t nclaims, claims_cap;

static int claimed_locked(int fd)
{
    for (size_t i = 0; i < nclaims; i++)
        if (claims[i] == fd)
            return 1;
    return 0;
}

static int claim_locked(int fd)
{
    if (nclaims == claims_cap) {
        size_t cap = claims_cap ? claims_cap * 2 : 8;
        int *n = realloc(claims, cap * sizeof *n);
        if (!n)
            return -1;
        claims = n;
        claims_cap = cap;
    }
    claims[nclaims++] = fd;
    return fd;
}

void c10di_stream_fd_release(int fd)
{
    if (fd < 0)
        return;
    pthread_mutex_lock(&claims_mu);
    for (size_t i = 0; i < nclaims; i++)
        if (claims[i] == fd) {
            claims[i] = claims[--nclaims];
            break;
        }
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

/* fd is a connected socket whose ends are loc and rem (TCP), or whose
 * peer is the ipc path rem_path (ipc://). */
static int matches(int fd, const nng_sockaddr *loc, const nng_sockaddr *rem, const char *rem_path)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        return 0;
    struct sockaddr_storage a, b;
    socklen_t la = sizeof a, lb = sizeof b;
    if (getpeername(fd, (struct sockaddr *)&b, &lb) != 0)
        return 0;
    if (rem_path) {
        const struct sockaddr_un *un = (const struct sockaddr_un *)&b;
        return b.ss_family == AF_UNIX && lb > offsetof(struct sockaddr_un, sun_path) &&
               strncmp(un->sun_path, rem_path, sizeof un->sun_path) == 0;
    }
    return getsockname(fd, (struct sockaddr *)&a, &la) == 0 && same_end(loc, &a) &&
           same_end(rem, &b);
}

int c10di_stream_fd(nng_stream *s)
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
        if (*end || end == e->d_name || fd == dir_fd || (path && claimed_locked((int)fd)))
            continue;
        if (matches((int)fd, &loc, &rem, path)) {
            found = (int)fd;
            candidates++;
        }
    }
    /* TCP's two ends name one connection; an ipc path may be shared */
    if (candidates != 1)
        found = -1;
    else if (path)
        found = claim_locked(found);
    pthread_mutex_unlock(&claims_mu);
    closedir(d);
    return found;
}
