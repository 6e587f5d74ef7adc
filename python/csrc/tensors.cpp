// torch's tensors, reduce ops and call options as the C library's
// (tensors.hpp).
#include "tensors.hpp"

#ifdef C10D_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <cstdint>
#include <stdexcept>
#include <string>

namespace c10d_coord {
namespace {

c10d_dtype dtype_of(const at::Tensor &t, bool *is_bool)
{
    *is_bool = false;
    switch (t.scalar_type()) {
    case at::kFloat: return C10D_FLOAT32;
    case at::kDouble: return C10D_FLOAT64;
    case at::kHalf: return C10D_FLOAT16;
    case at::kBFloat16: return C10D_BFLOAT16;
    case at::kChar: return C10D_INT8;
    case at::kByte: return C10D_UINT8;
    case at::kInt: return C10D_INT32;
    case at::kLong: return C10D_INT64;
    case at::kBool: *is_bool = true; return C10D_UINT8; // 0/1 bytes
    default:
        throw std::invalid_argument(std::string("c10d_coord: dtype ") +
                                    c10::toString(t.scalar_type()) + " is not supported");
    }
}

} // namespace

c10d_reduce_op op_of(const c10d::ReduceOp &op, bool is_bool)
{
    switch (op) {
    case c10d::ReduceOp::SUM: return is_bool ? C10D_MAX : C10D_SUM;
    case c10d::ReduceOp::PRODUCT: return is_bool ? C10D_MIN : C10D_PROD;
    case c10d::ReduceOp::MIN: return C10D_MIN;
    case c10d::ReduceOp::MAX: return C10D_MAX;
    case c10d::ReduceOp::AVG:
        if (is_bool)
            throw std::invalid_argument("c10d_coord: AVG is not defined on bool tensors");
        return C10D_AVG;
    default: throw std::invalid_argument("c10d_coord: reduce op not supported (SUM, PRODUCT, "
                                         "MIN, MAX and AVG are)");
    }
}

View::View(const at::Tensor &u) : user(u)
{
    t.device = C10D_CPU;
    if (u.is_cuda()) {
#ifdef C10D_TORCH_CUDA
        t.device = u.device().index();
#else
        TORCH_CHECK(false, "c10d_coord: a tensor on ", u.device(), ": this build of the "
                    "backend has no CUDA (the torch it was built against has none); it "
                    "takes CPU tensors");
#endif
    } else {
        TORCH_CHECK(u.device().is_cpu(), "c10d_coord: a tensor on ", u.device(),
                    ": the backend takes CPU and CUDA tensors");
    }
    work = u.is_contiguous() ? u : u.contiguous();
    t.data = work.data_ptr();
    t.dtype = dtype_of(work, &is_bool);
    t.ndim = 1;
    t.shape[0] = work.numel();
}

void View::write_back()
{
    if (!work.is_same(user)) /* the data only, as gloo writes it: not through autograd */
        user.detach().copy_(work);
}

std::vector<View> views(const std::vector<at::Tensor> &ts)
{
    std::vector<View> v;
    v.reserve(ts.size());
    for (const auto &t : ts)
        v.emplace_back(t);
    return v;
}

std::vector<c10d_tensor> raw(std::vector<View> &v)
{
    std::vector<c10d_tensor> r;
    r.reserve(v.size());
    for (auto &x : v)
        r.push_back(x.t);
    return r;
}

void write_back(std::vector<View> &v)
{
    for (auto &x : v)
        x.write_back();
}

void one_tensor(const std::vector<at::Tensor> &ts, const char *what)
{
    TORCH_CHECK(ts.size() == 1, "c10d_coord: ", what, " takes one tensor per rank (got ",
                ts.size(), ")");
}

c10d_coll_opts copts(std::chrono::milliseconds t, const at::Tensor *on)
{
    c10d_coll_opts o = C10D_COLL_OPTS_INIT;
    if (t.count() > 0)
        o.timeout_ms = t.count() > INT32_MAX ? INT32_MAX : (int)t.count();
#ifdef C10D_TORCH_CUDA
    if (on && on->is_cuda())
        o.stream = c10::cuda::getCurrentCUDAStream(on->device().index()).stream();
#else
    (void)on;
#endif
    return o;
}

const at::Tensor *first(const std::vector<at::Tensor> &ts)
{
    return ts.empty() ? nullptr : &ts[0];
}

} // namespace c10d_coord
