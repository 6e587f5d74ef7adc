/* Tells the service manager how the coordinator stands: systemd's
 * sd_notify protocol (Type=notify units, deploy/), spoken here without
 * libsystemd: one datagram of "KEY=value" lines to the AF_UNIX socket
 * named by $NOTIFY_SOCKET (a path, or "@name" for an abstract one). */
#ifndef C10DS_NOTIFY_H
#define C10DS_NOTIFY_H

/* Sends the state fmt makes (e.g. "READY=1\nSTATUS=serving on %s") to $NOTIFY_SOCKET.
 * Returns 1 when sent, 0 when there is no $NOTIFY_SOCKET (not started by
 * a service manager that listens: nothing to do), -1 when it could not be
 * sent (logged as a warning: the service manager, not the coordinator, is
 * the worse for it). */
int c10ds_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
