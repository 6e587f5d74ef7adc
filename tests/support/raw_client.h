/* A client of the coordinator over a plain socket, speaking the framing
 * of docs/protocol.md by hand: what attackers and floods in the tests and
 * benchmarks send, which the library would never (frames it refuses to
 * build, replies it never reads). */
#ifndef C10D_TEST_RAW_CLIENT_H
#define C10D_TEST_RAW_CLIENT_H

#include "c10d.pb-c.h"

#include <stddef.h>
#include <stdint.h>

/* A connected socket to tcp://host:port, or -1. */
int raw_connect(const char *url);
/* Writes all of buf; 0, or -1 when the peer hung up. */
int raw_write_all(int fd, const void *buf, size_t len);
/* req framed under id, in a buffer the caller frees; *len its size. */
uint8_t *raw_frame(const C10dpb__Request *req, uint64_t id, size_t *len);
/* Frames and writes req; 0 or -1. */
int raw_send(int fd, const C10dpb__Request *req, uint64_t id);
/* Reads one reply, waiting up to timeout_ms; NULL on a close or timeout.
 * *id (may be NULL) is the frame's request id. Free with
 * c10dpb__reply__free_unpacked. */
C10dpb__Reply *raw_read_reply(int fd, int timeout_ms, uint64_t *id);

#endif
