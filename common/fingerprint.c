#include "fingerprint.h"

#include <stdio.h>

static const char *const kinds[C10DC_KIND_COUNT] = {
    "ALL_REDUCE", "BROADCAST", "REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL",
    "GATHER",     "SCATTER",   "SEND",   "RECV",       "BARRIER",        "MONITORED_BARRIER",
};

/* In the order of c10d_dtype and c10d_reduce_op (client/include/c10d/tensor.h). */
static const char *const dtypes[] = {"float32", "float64", "float16", "bfloat16",
                                     "int8",    "uint8",   "int32",   "int64"};
static const char *const ops[] = {"SUM", "PROD", "MIN", "MAX", "AVG"};

const char *c10dc_kind_name(uint32_t kind)
{
    return kind < C10DC_KIND_COUNT ? kinds[kind] : "?";
}

const char *c10dc_dtype_name(uint32_t dtype)
{
    return dtype < sizeof dtypes / sizeof dtypes[0] ? dtypes[dtype] : "?";
}

const char *c10dc_op_name(uint32_t op)
{
    return op < sizeof ops / sizeof ops[0] ? ops[op] : "?";
}

static int has_data(uint32_t kind)
{
    return kind != C10DC_BARRIER && kind != C10DC_MONITORED_BARRIER;
}

char *c10dc_fp_format(const c10dc_fp *fp, char *buf, size_t cap)
{
    int k = snprintf(buf, cap, "%s", c10dc_kind_name(fp->kind));
    if (has_data(fp->kind) && k >= 0 && (size_t)k < cap)
        k += snprintf(buf + k, cap - (size_t)k, " %s[%lld]", c10dc_dtype_name(fp->dtype),
                      (long long)fp->count);
    if (fp->op != C10DC_NO_OP && k >= 0 && (size_t)k < cap)
        k += snprintf(buf + k, cap - (size_t)k, " %s", c10dc_op_name(fp->op));
    if (fp->root != C10DC_NO_ROOT && k >= 0 && (size_t)k < cap)
        k += snprintf(buf + k, cap - (size_t)k, " %s %d",
                      fp->kind == C10DC_SEND ? "to" : fp->kind == C10DC_RECV ? "from" : "root",
                      fp->root);
    else if (fp->kind == C10DC_RECV && k >= 0 && (size_t)k < cap) /* c10d_recv_any's */
        k += snprintf(buf + k, cap - (size_t)k, " from any");
    if (has_data(fp->kind) && fp->device == C10DC_DEV_CUDA && k >= 0 && (size_t)k < cap)
        snprintf(buf + k, cap - (size_t)k, " on cuda");
    return buf;
}

const char *c10dc_fp_diff(const c10dc_fp *a, const c10dc_fp *b)
{
    if (a->kind != b->kind)
        return "operation";
    if (!has_data(a->kind))
        return NULL;
    if (a->dtype != b->dtype)
        return "dtype";
    if (a->count != b->count)
        return "shape";
    if (a->root != b->root)
        return "root";
    if (a->op != b->op)
        return "reduce op";
    if (a->device != b->device)
        return "device";
    return NULL;
}
