/* The sd_notify protocol (notify.h), so that c10d-coord needs no
 * libsystemd: systemd reads one datagram per notification, whose
 * sender it identifies by the socket's credentials (hence NotifyAccess=
 * in a unit whose notifications come from a child process). */
#include "notify.h"

#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int c10ds_notify(const char *fmt, ...)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    char state[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(state, sizeof state, fmt, ap);
    va_end(ap);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof sa.sun_path) {
        c10ds_warn("NOTIFY_SOCKET=%s is neither a path nor an @abstract name (of at most %zu "
                   "bytes): the service manager is not told", path, sizeof sa.sun_path - 1);
        return -1;
    }
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@') /* abstract: a leading NUL, and no NUL at the end counted */
        sa.sun_path[0] = '\0';
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
                                (path[0] == '/' ? 1 : 0));
    int rc = -1, fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 &&
        sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) >= 0)
        rc = 1;
    else
        c10ds_warn("cannot tell the service manager (NOTIFY_SOCKET=%s) %.*s: %s", path,
                   (int)strcspn(state, "\n"), state, strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}
