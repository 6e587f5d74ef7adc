// What the files of ProcessGroupChecked (checked.hpp) share: a call as the
// coordinator compares it (checked_describe.cpp), for the collectives
// (checked_collectives.cpp) and a joined rank's shadows (checked.cpp).
// torch 2.x only, as the checked backend is.
#pragma once

#include "checked.hpp"

#ifdef C10D_TORCH_BACKEND

#include <chrono>
#include <cstdint>
#include <vector>

namespace c10d_coord {

// The data plane's device of t: its CUDA index, or C10D_CPU.
int plane_device(const at::Tensor &t);
// kind of n elements like t (one rank's block), rooted at root, reducing with op.
c10d_check_opts describe(c10d_coll_kind kind, const at::Tensor *t, int64_t n, int root,
                         const c10d::ReduceOp *op, std::chrono::milliseconds timeout);
int64_t numel_of(const std::vector<at::Tensor> &ts);
// The fingerprint's dtypes and reduce ops as torch's (a shadow's tensors).
at::ScalarType scalar_of(c10d_dtype d);
c10d::ReduceOp torch_op(c10d_reduce_op op);

} // namespace c10d_coord

#endif
