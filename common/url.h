/* Coordinator URLs (tcp://host:port, tls+tcp://host:port, ipc:///path)
 * and lists of them (a replicated coordinator's, comma-separated): the one
 * reading of their parts, for the client's check of the URL it is given,
 * its dialler, the TLS configuration and diagnosis, and the host backend's
 * choice of the address peers dial. */
#ifndef C10D_COMMON_URL_H
#define C10D_COMMON_URL_H

#include <stddef.h>

/* The coordinator's port when none is named: none of torchrun's (its
 * MASTER_PORT is 29500, --standalone's rendezvous 29400; replicas' raft
 * traffic is conventionally 29600 in our docs), so a
 * coordinator on a rank-0 host and the job's torchrun do not collide. */
#define C10DC_DEFAULT_PORT "29700"

/* 1 when url's scheme is a TCP one (tcp://, tls+tcp://): a URL that
 * names a host and a port, else 0 (ipc://, or no scheme at all). */
int c10dc_url_is_tcp(const char *url);

/* The host and the port of scheme://host:port, an IPv6 host without its
 * brackets ("tcp://[::1]:29500": "::1" and "29500"). Returns 0, or -1
 * (out untouched) when url names no port. */
int c10dc_url_split(const char *url, char *host, size_t hostlen, char *port, size_t portlen);

/* The host of scheme://host:port, as c10dc_url_split finds it; all that
 * follows the scheme when there is no port. */
void c10dc_url_host(const char *url, char *out, size_t outlen);

/* The port of a TCP url as a number from 1 to 65535, or -1 when it has
 * none or it is not one: NNG takes tcp://host:70000 and every dial then
 * fails, which a client would read as "no coordinator". */
long c10dc_url_port(const char *url);

/* A URL list's elements one at a time: *list at the list's start (or
 * NULL). Each call gives the next element (*elem, *len: not
 * NUL-terminated) and moves *list past it; 0 once there is none. An empty
 * element ("a,,b") is given as one of length 0. */
int c10dc_url_list_next(const char **list, const char **elem, size_t *len);

#endif
