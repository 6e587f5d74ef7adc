/* What identifies a collective call, shared by the client (which reports
 * it) and the coordinator (which compares it across ranks and words the
 * reports), so both describe a call the same way:
 *   "ALL_REDUCE float32[2] SUM", "BROADCAST float32[5] root 0",
 *   "ALL_GATHER bfloat16[1024] on cuda". */
#ifndef C10D_COMMON_FINGERPRINT_H
#define C10D_COMMON_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    C10DC_ALL_REDUCE,
    C10DC_BROADCAST,
    C10DC_REDUCE,
    C10DC_ALL_GATHER,
    C10DC_REDUCE_SCATTER,
    C10DC_ALL_TO_ALL,
    C10DC_GATHER,
    C10DC_SCATTER,
    C10DC_SEND,
    C10DC_RECV,
    C10DC_BARRIER,
    C10DC_MONITORED_BARRIER,
    C10DC_KIND_COUNT
} c10dc_kind;

#define C10DC_NO_ROOT (-1)
#define C10DC_NO_OP 0xff

typedef struct c10dc_fp {
    uint32_t kind;  /* c10dc_kind */
    uint32_t dtype; /* c10d_dtype; ignored for barriers */
    int64_t count;  /* elements of one rank's block */
    int32_t root;   /* root or peer (group rank), or C10DC_NO_ROOT */
    uint32_t op;    /* c10d_reduce_op, or C10DC_NO_OP */
    uint32_t device; /* C10DC_DEV_CPU or C10DC_DEV_CUDA: which data plane runs it */
    uint32_t spare;  /* 0: keeps the struct free of padding (compared with memcmp) */
} c10dc_fp;

#define C10DC_DEV_CPU 0
#define C10DC_DEV_CUDA 1

const char *c10dc_kind_name(uint32_t kind);
const char *c10dc_dtype_name(uint32_t dtype);
const char *c10dc_op_name(uint32_t op);
/* Writes the call's description into buf; returns buf. */
char *c10dc_fp_format(const c10dc_fp *fp, char *buf, size_t cap);
/* NULL when a and b are the same call; else the first field that differs:
 * "operation", "dtype", "shape", "root", "reduce op", "device". */
const char *c10dc_fp_diff(const c10dc_fp *a, const c10dc_fp *b);


#endif
