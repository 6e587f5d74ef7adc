/* The coordinator's network side: an NNG stream listener on the configured
 * URL (tcp://, ipc://, tls+tcp://), framed requests in, framed replies out
 * (common/frame.h). Decodes requests, hands them to the engine, sends the
 * engine's replies on the connection each came on. Undecodable requests get
 * a protocol-error reply; a frame over --max-message-bytes, or a client
 * that lets --max-connection-buffer of replies pile up, gets its connection
 * closed. Either way, others are unaffected. */
#ifndef C10DS_LISTENER_H
#define C10DS_LISTENER_H

#include "c10d_time.h"

#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_config c10ds_config;
typedef struct c10ds_engine c10ds_engine;
typedef struct c10ds_listener c10ds_listener;

/* What a listener's clients speak: our framed protobuf (docs/protocol.md),
 * or PyTorch TCPStore's protocol (--tcpstore-listen, server/net/tcpstore.c),
 * whose queries become the same requests to the engine. */
typedef enum { C10DS_DIALECT_C10D, C10DS_DIALECT_TCPSTORE } c10ds_dialect;

/* Listens on url and starts receiving. url_out receives the URL actually
 * bound (port 0 resolved). NULL on failure, why in c10ds_failure()
 * (failure.h). */
c10ds_listener *c10ds_listener_new(const c10ds_config *cfg, c10ds_engine *engine,
                                   const char *url, c10ds_dialect dialect, char *url_out,
                                   size_t url_len);
/* The engine's c10ds_send_fn. */
void c10ds_listener_send(void *arg, void *slot, uint64_t request_id, const void *reply,
                         size_t len);
/* Waits up to timeout_ms for replies handed to NNG to be sent. */
void c10ds_listener_drain(c10ds_listener *l, c10d_ms timeout_ms);
/* Closes the listener and every connection and frees l. Returns -1,
 * leaving l allocated, when a connection is still held (by the engine or
 * an NNG callback) after timeout_ms. */
int c10ds_listener_close(c10ds_listener *l, c10d_ms timeout_ms);

#endif
