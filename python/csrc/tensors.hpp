// What torch hands the backend, as the C library takes it: tensors as
// c10d_tensor views (no copy for a contiguous CPU tensor), torch's reduce
// ops as c10d_reduce_op, a call's options as c10d_coll_opts. Every
// collective of the process group and the work that finishes it go
// through these, so torch's types stop here.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <c10d/c10d.h>

#include <chrono>
#include <type_traits>
#include <utility>
#include <vector>

namespace c10d_coord {

// A tensor the C library can use in place: a contiguous CPU tensor is used
// as it is; anything else through a contiguous copy written back after.
// CUDA tensors go to the C library's NCCL data plane where torch was built
// with CUDA (C10D_TORCH_CUDA, set by setup.py); elsewhere they are refused.
struct View {
    at::Tensor user, work;
    c10d_tensor t;
    bool is_bool = false;

    explicit View(const at::Tensor &u);
    void write_back();
};

std::vector<View> views(const std::vector<at::Tensor> &ts);
std::vector<c10d_tensor> raw(std::vector<View> &v);
void write_back(std::vector<View> &v);

// A reduce op on a dtype; bool reduces as torch's backends do (SUM and MAX
// are a logical or, PRODUCT and MIN a logical and).
c10d_reduce_op op_of(const c10d::ReduceOp &op, bool is_bool);

// Refuses a list of other than one tensor, naming the call.
void one_tensor(const std::vector<at::Tensor> &ts, const char *what);

// A call's options: torch's per-call timeout where its options set one,
// else the group's (init_process_group's timeout, given to c10d_init).
// A CUDA call is ordered after what torch's current stream on that device
// has queued, as torch's NCCL backend does (`on`: the call's first tensor).
c10d_coll_opts copts(std::chrono::milliseconds t, const at::Tensor *on = nullptr);

// Whether a call goes on the group's lane (work.hpp): torch 2.x says in a
// call's options whether its caller waits at once (asyncOp false: a plain
// dist.all_reduce), and such a call runs now, in order, costing no
// hand-off; torch 1.13 (and options of 2.x's without the field) never
// says, so every call is queued.
template <typename O, typename = void> struct has_async_op : std::false_type {};
template <typename O>
struct has_async_op<O, decltype((void)std::declval<const O &>().asyncOp)> : std::true_type {};
template <typename O> bool queued(const O &o, std::true_type) { return o.asyncOp; }
template <typename O> bool queued(const O &, std::false_type) { return true; }
template <typename O> bool queued(const O &o) { return queued(o, has_async_op<O>{}); }

// The first tensor of a list, or null: copts' `on`.
const at::Tensor *first(const std::vector<at::Tensor> &ts);

} // namespace c10d_coord
