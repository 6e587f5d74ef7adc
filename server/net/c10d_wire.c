/* Our own protocol's wire: frames cut, requests decoded (c10d_wire.h). */
#include "net/c10d_wire.h"

#include "failure.h"
#include "net/decode_budget.h"
#include "net/tcpstore_wire.h"

#include "frame.h"

#include <stdio.h>

c10ds_frame_result c10ds_frame_cut(const uint8_t *b, size_t len, uint64_t max, c10ds_frame *f,
                                   size_t *used)
{
    *used = C10DC_FRAME_HDR;
    if (len < C10DC_FRAME_HDR)
        return C10DS_FRAME_SHORT;
    uint32_t n = c10dc_get_u32(b);
    if (n < 8 || n - 8 > max) {
        c10ds_failed(C10D_ETOOBIG, "a frame of %u bytes (limit %llu, --max-message-bytes)", n,
                     (unsigned long long)max);
        return C10DS_FRAME_BAD;
    }
    *used = 4 + (size_t)n;
    if (len < *used)
        return C10DS_FRAME_SHORT;
    f->id = c10dc_get_u64(b + 4);
    f->body = b + C10DC_FRAME_HDR;
    f->body_len = n - 8;
    return C10DS_FRAME_WHOLE;
}

/* A handshake record (0x16, version 3.x, a length) holding a client
 * hello (type 1, then version 3.x at byte 9). */
int c10ds_tls_client_hello(const uint8_t *b, size_t len)
{
    return len >= 11 && b[0] == 0x16 && b[1] == 3 && b[2] <= 4 && b[5] == 1 && b[9] == 3 &&
           b[10] <= 4;
}

c10ds_stranger c10ds_c10d_stranger(const uint8_t *b, size_t len, const c10ds_config *cfg)
{
    if (c10ds_tls_client_hello(b, len))
        return C10DS_STRANGER_TLS;
    if (c10ds_ts_client_hello(b, len, cfg))
        return C10DS_STRANGER_TCPSTORE;
    return C10DS_STRANGER_NONE;
}

/* Refuses, before unpacking, a request whose unpacking would take more
 * than budget (a frame of empty repeated keys grew ~19x), or whose
 * strings hold a NUL (protobuf-c would cut them there: a set of "a\0b"
 * overwrote "a"). */
static int refused_before_decoding(const c10ds_frame *f, uint64_t budget,
                                   c10ds_decode_refusal *why, c10d_status *st)
{
    c10ds_decode_cost cost;
    int over = c10ds_decode_cost_check(&c10dpb__request__descriptor, f->body, f->body_len,
                                       budget, &cost);
    if (!over && cost.nul_field) {
        *why = C10DS_DECODE_NUL;
        *st = c10ds_failed(C10D_EINVAL, "field '%s' of the request holds a NUL byte: keys, job "
                           "and group names are C strings on c10d-coord (it would be cut at "
                           "the NUL, and another key written)", cost.nul_field);
        return -1;
    }
    if (!over)
        return 0;
    *why = C10DS_DECODE_OVER_BUDGET;
    *st = c10ds_failed(C10D_ETOOBIG, "request of %zu bytes would take more than %llu bytes to "
                       "decode (--max-decode-bytes; field '%s' repeats at least %zu times); "
                       "send fewer keys at once",
                       f->body_len, (unsigned long long)budget, cost.field, cost.repeats);
    return -1;
}

C10dpb__Request *c10ds_c10d_decode(const c10ds_frame *f, uint64_t budget,
                                   c10ds_decode_refusal *why, c10d_status *st)
{
    if (refused_before_decoding(f, budget, why, st) != 0)
        return NULL;
    C10dpb__Request *pb = c10dpb__request__unpack(NULL, f->body_len, f->body);
    if (!pb) {
        *why = C10DS_DECODE_GARBLED;
        *st = c10ds_failed(C10D_EPROTO, "the coordinator could not decode this request (not a "
                           "c10d protocol message, or truncated)");
        return NULL;
    }
    if (pb->op_case == C10DPB__REQUEST__OP__NOT_SET) {
        c10dpb__request__free_unpacked(pb, NULL);
        *why = C10DS_DECODE_NO_OP;
        *st = c10ds_failed(C10D_EPROTO, "request names no operation (is the client newer than "
                           "the coordinator?)");
        return NULL;
    }
    pb->request_id = f->id;
    return pb;
}
