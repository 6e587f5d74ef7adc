/* Our own protocol's wire, apart from any connection (protocol.md): the
 * byte stream cut into frames (a u32 length, the u64 request id, the
 * protobuf: common/frame.h), and a frame's body decoded into the request
 * the engine runs, with the checks that come before protobuf-c unpacks
 * it. No socket, connection or engine: framing.c's read loop runs these,
 * and tests/unit/server/test_c10d_wire.c feeds them split and malformed
 * bytes alone. */
#ifndef C10DS_C10D_WIRE_H
#define C10DS_C10D_WIRE_H

#include "c10d.pb-c.h"

#include <c10d/errors.h>
#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_config c10ds_config;

typedef struct c10ds_frame {
    uint64_t id;         /* the request id the client routes its reply by */
    const uint8_t *body; /* the protobuf, pointing into the bytes cut */
    size_t body_len;
} c10ds_frame;

typedef enum {
    C10DS_FRAME_WHOLE, /* *f is the frame of *used bytes at the start */
    C10DS_FRAME_SHORT, /* more bytes needed: *used is how many the frame takes at least */
    C10DS_FRAME_BAD,   /* not a frame, or one over max: c10ds_failure() says which */
} c10ds_frame_result;

/* The frame at b (len bytes: one frame, its start, or several); its body
 * at most max bytes (--max-message-bytes). */
c10ds_frame_result c10ds_frame_cut(const uint8_t *b, size_t len, uint64_t max, c10ds_frame *f,
                                   size_t *used);

/* Whether a connection's first bytes are a TLS client hello: a client
 * dialling tls+tcp:// a plain listener. Read as a frame, its first four
 * bytes promise some 16.8 MB, and the client would wait for an answer to
 * a hello the coordinator was still "receiving". */
int c10ds_tls_client_hello(const uint8_t *b, size_t len);

/* What a connection's first bytes are, before any frame of ours: a
 * client of another protocol is closed with words that name its
 * mistake, where read as a frame it would wait for the rest of one. */
typedef enum {
    C10DS_STRANGER_NONE,     /* perhaps ours: cut frames */
    C10DS_STRANGER_TLS,      /* a TLS client hello (c10ds_tls_client_hello) */
    C10DS_STRANGER_TCPSTORE, /* a PyTorch TCPStore client's first query */
} c10ds_stranger;
c10ds_stranger c10ds_c10d_stranger(const uint8_t *b, size_t len, const c10ds_config *cfg);

/* Why a frame's request was refused before the engine saw it. */
typedef enum {
    C10DS_DECODE_OVER_BUDGET, /* unpacking would take more than --max-decode-bytes: ETOOBIG */
    C10DS_DECODE_NUL,         /* a string field holds a NUL (protobuf-c would cut it): EINVAL */
    C10DS_DECODE_GARBLED,     /* bytes that are no request, or truncated: EPROTO */
    C10DS_DECODE_NO_OP,       /* a request naming no operation (a newer client): EPROTO */
} c10ds_decode_refusal;

/* Frame f's request, decoded by protobuf-c, its request_id the frame's
 * (the one the engine deduplicates by and the one the client routes by
 * must agree). NULL when refused: *why says which, *st the status to
 * answer with, and the detail to answer with is recorded (failure.h). */
C10dpb__Request *c10ds_c10d_decode(const c10ds_frame *f, uint64_t budget,
                                   c10ds_decode_refusal *why, c10d_status *st);

#endif
