/* What unpacking a request would cost, read off the wire before
 * protobuf-c unpacks it. protobuf-c allocates for each field it meets (an
 * array slot, a string copy, a message struct, its own scratch record) far
 * more than the field's bytes on the wire: an empty string of a repeated
 * field is 2 bytes on the wire and some 80 bytes unpacked, so a 17 MiB
 * frame of them took ~330 MB before any handler could count the keys.
 * Walking the wire against the message's descriptor costs no memory and
 * tells how much unpacking would take (--max-decode-bytes). */
#ifndef C10DS_DECODE_BUDGET_H
#define C10DS_DECODE_BUDGET_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_decode_cost {
    size_t bytes;      /* about what protobuf-c would allocate (so far, when over) */
    const char *field; /* the field met most often in one message ("" if none) */
    size_t repeats;    /* how often */
    /* A string field whose bytes hold a NUL (NULL if none): protobuf-c
     * would hand it on cut there, and the key "a\0b" would write "a". */
    const char *nul_field;
} c10ds_decode_cost;

/* Adds up what unpacking buf as a message of type d would allocate.
 * Returns -1 as soon as that passes budget, else 0. Bytes it cannot walk
 * (not protobuf, a wire type the field cannot have) end the walk with
 * what was counted: protobuf-c refuses them itself, with no more memory
 * than counted. */
int c10ds_decode_cost_check(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
                            size_t budget, c10ds_decode_cost *out);

#endif
