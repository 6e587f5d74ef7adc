/* The cost of unpacking a request, counted on the wire (decode_budget.h).
 * The figures follow protobuf-c 1.4's unpacker: one scratch record per
 * field met (its ScannedMember), the message struct, for a repeated field
 * its array slot, and a copy of each string, bytes and unknown field. They
 * err high: a client that sends a field twice pays for both. */
#include "net/decode_budget.h"

#include <string.h>

/* malloc's header and rounding, paid by every allocation */
#define ALLOC_OVERHEAD 16u
/* protobuf-c's record of each field it scanned */
#define SCRATCH_PER_FIELD 32u
/* Our messages nest a few levels; deeper is not a request of ours. */
#define MAX_DEPTH 16
/* Fields per message tracked for the "most repeated" in the message. */
#define TRACKED_FIELDS 64

typedef struct walk {
    size_t budget;
    c10ds_decode_cost *out;
} walk;

enum { WALKED = 0, OVER = -1, UNWALKABLE = 1 };

static int read_varint(const uint8_t *p, size_t len, size_t *off, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64 && *off < len; shift += 7) {
        uint8_t b = p[(*off)++];
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static int add(walk *w, size_t n)
{
    w->out->bytes += n;
    return w->out->bytes > w->budget ? OVER : WALKED;
}

/* A repeated field's array slot, as protobuf-c sizes it. */
static size_t slot_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_BOOL:
    case PROTOBUF_C_TYPE_ENUM:
        return 4;
    }
    return 8;
}

static int walk_message(walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *p,
                        size_t len, int depth);

/* What one field occurrence costs beyond its scratch record: payload is
 * its length-delimited bytes (wire type 2), else NULL. */
static int field_cost(walk *w, const ProtobufCFieldDescriptor *f, int wire_type,
                      const uint8_t *payload, size_t plen, int depth)
{
    if (!f) /* kept as an unknown field: a record and a copy of its bytes */
        return add(w, sizeof(ProtobufCMessageUnknownField) + plen + ALLOC_OVERHEAD);
    size_t slot = f->label == PROTOBUF_C_LABEL_REPEATED ? slot_size(f->type) : 0;
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING:
        if (payload && plen && !w->out->nul_field && memchr(payload, 0, plen))
            w->out->nul_field = f->name;
        return add(w, slot + plen + 1 + ALLOC_OVERHEAD);
    case PROTOBUF_C_TYPE_BYTES:
        return add(w, slot + plen + ALLOC_OVERHEAD);
    case PROTOBUF_C_TYPE_MESSAGE:
        if (wire_type != 2)
            return UNWALKABLE;
        if (add(w, slot) == OVER)
            return OVER;
        return walk_message(w, f->descriptor, payload, plen, depth + 1);
    default:
        /* A packed run: at least a byte an element. */
        return add(w, wire_type == 2 ? plen * slot_size(f->type) : slot);
    }
}

static int walk_message(walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *p,
                        size_t len, int depth)
{
    if (depth > MAX_DEPTH)
        return UNWALKABLE;
    if (add(w, d->sizeof_message + ALLOC_OVERHEAD) == OVER)
        return OVER;
    size_t seen[TRACKED_FIELDS] = {0};
    int rc = WALKED;
    for (size_t off = 0; off < len && rc == WALKED;) {
        uint64_t tag, n = 0;
        if (read_varint(p, len, &off, &tag) != 0)
            return UNWALKABLE;
        int wire_type = (int)(tag & 7);
        const uint8_t *payload = NULL;
        switch (wire_type) {
        case 0:
            if (read_varint(p, len, &off, &n) != 0)
                return UNWALKABLE;
            n = 0;
            break;
        case 1:
        case 5:
            n = wire_type == 1 ? 8 : 4;
            if (len - off < n)
                return UNWALKABLE;
            off += n;
            n = 0;
            break;
        case 2:
            if (read_varint(p, len, &off, &n) != 0 || n > len - off)
                return UNWALKABLE;
            payload = p + off;
            off += n;
            break;
        default: /* groups: protobuf-c refuses them */
            return UNWALKABLE;
        }
        if (add(w, SCRATCH_PER_FIELD) == OVER)
            rc = OVER;
        const ProtobufCFieldDescriptor *f =
            tag >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3))
                                   : NULL;
        if (f) {
            size_t i = (size_t)(f - d->fields);
            if (i < TRACKED_FIELDS && ++seen[i] > w->out->repeats) {
                w->out->repeats = seen[i];
                w->out->field = f->name;
            }
        }
        if (rc == WALKED)
            rc = field_cost(w, f, wire_type, payload, (size_t)n, depth);
    }
    return rc;
}

int c10ds_decode_cost_check(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
                            size_t budget, c10ds_decode_cost *out)
{
    memset(out, 0, sizeof *out);
    out->field = "";
    walk w = {budget, out};
    return walk_message(&w, d, buf, len, 0) == OVER ? -1 : 0;
}
