/* Which operations the coordinator records with their reply, so that a
 * resent copy is answered from the record instead of being applied twice
 * (docs/protocol.md, Envelope): those that are not idempotent. One list
 * for both ends: the coordinator's engine flags these (it refuses to
 * start when its tables disagree), and the client tells the coordinator,
 * on each of these, which of its records it no longer needs
 * (Request.acked_below). */
#ifndef C10D_COMMON_RECORDED_OPS_H
#define C10D_COMMON_RECORDED_OPS_H

#include "c10d.pb-c.h"

static inline int c10dc_op_is_recorded(int op_case)
{
    switch (op_case) {
    case C10DPB__REQUEST__OP_ADD:
    case C10DPB__REQUEST__OP_COMPARE_SET:
    case C10DPB__REQUEST__OP_DELETE_KEY:
    case C10DPB__REQUEST__OP_APPEND:
        return 1;
    default:
        return 0;
    }
}

#endif
