/* What else a server might be, when it is not answering as a coordinator
 * does (server_probe.c): a client pointed at the wrong port should be told
 * within a second what it reached, not retry for its whole timeout. The
 * common mix-ups: torchrun's MASTER_ADDR:MASTER_PORT (a PyTorch TCPStore),
 * a coordinator's own --tcpstore-listen port (the same protocol), an HTTP
 * port (a metrics endpoint, a notebook), an SSH port. TLS is told by
 * tls_inspect.h. */
#ifndef C10D_COMMON_SERVER_PROBE_H
#define C10D_COMMON_SERVER_PROBE_H

#include <stddef.h>

/* Asks the server at url (tcp://host:port) in the protocols it might
 * speak instead, each on a connection of its own and within about a
 * second in all: a greeting of its own, HTTP, PyTorch TCPStore (both of
 * its numberings). Returns 1 with what it is in out ("a PyTorch TCPStore
 * (torch 2.2 or later)", "an HTTP server (it answered 'HTTP/1.0 404 File
 * not found')"), else 0 (nothing recognised, not a TCP URL, no
 * connection). A coordinator asked so closes each of these connections. */
int c10dc_identify_server(const char *url, char *out, size_t outlen);

#endif
