/* The control plane's framing over an NNG byte stream (tcp://, ipc://,
 * tls+tcp://): each message is one frame,
 *
 *     u32 length (little endian) of what follows
 *     u64 request id (little endian)
 *     the protobuf message (a Request from a client, a Reply from the
 *     coordinator)
 *
 * The request id sits outside the protobuf so that a client with many
 * requests in flight on one connection can hand each reply to its caller
 * without decoding it, and the coordinator can answer them in any order. */
#ifndef C10D_COMMON_FRAME_H
#define C10D_COMMON_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define C10DC_FRAME_HDR 12u /* length + request id */

static inline void c10dc_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void c10dc_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t c10dc_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t c10dc_get_u64(const uint8_t *p)
{
    return (uint64_t)c10dc_get_u32(p) | (uint64_t)c10dc_get_u32(p + 4) << 32;
}

/* Writes the header for a body of body_len bytes. */
static inline void c10dc_frame_header(uint8_t hdr[C10DC_FRAME_HDR], uint64_t request_id,
                                      size_t body_len)
{
    c10dc_put_u32(hdr, (uint32_t)(body_len + 8));
    c10dc_put_u64(hdr + 4, request_id);
}

#endif
