// A call as the coordinator compares it (checked_internal.hpp): the
// fingerprint of torch's tensors, reduce ops and options.
#include "checked_internal.hpp"

#ifdef C10D_TORCH_BACKEND

#include <algorithm>

namespace c10d_coord {
namespace {

// dtypes the fingerprint names; any other is compared by its bytes.
bool fingerprint_dtype(const at::Tensor &t, c10d_dtype *out)
{
    switch (t.scalar_type()) {
    case at::kFloat: *out = C10D_FLOAT32; return true;
    case at::kDouble: *out = C10D_FLOAT64; return true;
    case at::kHalf: *out = C10D_FLOAT16; return true;
    case at::kBFloat16: *out = C10D_BFLOAT16; return true;
    case at::kChar: *out = C10D_INT8; return true;
    case at::kByte: *out = C10D_UINT8; return true;
    case at::kInt: *out = C10D_INT32; return true;
    case at::kLong: *out = C10D_INT64; return true;
    case at::kBool: *out = C10D_UINT8; return true;
    default: *out = C10D_UINT8; return false;
    }
}

// torch's reduce ops as the fingerprint names them; the bitwise ones and
// PREMUL_SUM are compared as SUM (docs/pytorch.md).
c10d_reduce_op fingerprint_op(const c10d::ReduceOp &op)
{
    switch (op) {
    case c10d::ReduceOp::PRODUCT: return C10D_PROD;
    case c10d::ReduceOp::MIN: return C10D_MIN;
    case c10d::ReduceOp::MAX: return C10D_MAX;
    case c10d::ReduceOp::AVG: return C10D_AVG;
    default: return C10D_SUM;
    }
}

} // namespace

at::ScalarType scalar_of(c10d_dtype d)
{
    switch (d) {
    case C10D_FLOAT32: return at::kFloat;
    case C10D_FLOAT64: return at::kDouble;
    case C10D_FLOAT16: return at::kHalf;
    case C10D_BFLOAT16: return at::kBFloat16;
    case C10D_INT8: return at::kChar;
    case C10D_UINT8: return at::kByte;
    case C10D_INT32: return at::kInt;
    case C10D_INT64: return at::kLong;
    }
    return at::kByte;
}

c10d::ReduceOp torch_op(c10d_reduce_op op)
{
    switch (op) {
    case C10D_PROD: return c10d::ReduceOp::PRODUCT;
    case C10D_MIN: return c10d::ReduceOp::MIN;
    case C10D_MAX: return c10d::ReduceOp::MAX;
    case C10D_AVG: return c10d::ReduceOp::AVG;
    default: return c10d::ReduceOp::SUM;
    }
}

int plane_device(const at::Tensor &t)
{
    return t.is_cuda() ? t.device().index() : C10D_CPU;
}

// kind of n elements like t (one rank's block), rooted at root, reducing with op.
c10d_check_opts describe(c10d_coll_kind kind, const at::Tensor *t, int64_t n, int root,
                         const c10d::ReduceOp *op, std::chrono::milliseconds timeout)
{
    c10d_check_opts co = C10D_CHECK_OPTS_INIT;
    co.kind = kind;
    co.root = root;
    if (t) {
        if (!fingerprint_dtype(*t, &co.dtype))
            n *= (int64_t)t->element_size();
        co.count = n;
        co.device = plane_device(*t);
    }
    if (op)
        co.op = fingerprint_op(*op);
    if (timeout.count() > 0)
        co.timeout_ms = (int)std::min<int64_t>(timeout.count(), INT32_MAX);
    return co;
}

int64_t numel_of(const std::vector<at::Tensor> &ts)
{
    int64_t n = 0;
    for (auto &t : ts)
        n += t.numel();
    return n;
}

} // namespace c10d_coord

#endif
