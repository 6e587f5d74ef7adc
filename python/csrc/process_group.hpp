// ProcessGroupCoord: torch's c10d::ProcessGroup over one c10d_pg of the C
// library, which checks each call with the coordinator. Each call converts
// torch's tensors (tensors.hpp) and queues the collective on the group's
// Lane, returning at once with a Work that completes later, as gloo's does
// (or, with C10D_TORCH_ASYNC=0, runs it and returns it done: work.hpp);
// receives are posted (recv.hpp). torch's bindings release the GIL around these
// methods; the constructor releases it itself (c10d_init blocks).
//
// One class for PyTorch 1.13 (Debian 12's) and 2.x. On 1.13 it is a
// c10d::ProcessGroup, which a backend's creator returns. On 2.x it is a
// c10d::Backend, which torch puts under a ProcessGroup of its own for the
// CPU (and CUDA) device, as it does gloo: torch 2.x's ProcessGroup sends
// much through its dispatcher to the device's Backend (2.13 renamed the
// ProcessGroup methods: all_gather_single, ...; the Backend's kept their
// names), and DeviceMesh, split_group, coalescing and the group's name
// are torch's own there. The collectives the C library runs directly are in
// process_group.cpp; those torch has and the library has not, composed of
// the library's, in composed.cpp.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define C10D_TORCH_BACKEND 1
#endif
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <c10d/c10d.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace c10d_coord {

struct View;       /* tensors.hpp */
class Lane;        /* work.hpp */
class Unfinished;  /* recv.hpp */

#ifdef C10D_TORCH_BACKEND
using TorchBase = c10d::Backend;
#else
using TorchBase = c10d::ProcessGroup;
#endif

class ProcessGroupCoord : public TorchBase {
  public:
    // Joins the group (c10d_init): url "" is C10D_COORD's, job "" the
    // default job, timeout_ms 0 the library's default.
    ProcessGroupCoord(int rank, int size, const std::string &url, const std::string &job,
                      int timeout_ms);
    ~ProcessGroupCoord() override;
    const std::string getBackendName() const override { return "coord"; }
    c10d_pg *pg() const { return pg_; }
    // Until every queued call of this group has run: before anything that
    // is not queued, so calls reach the library in the order they were
    // made (work.hpp, Lane).
    void in_order();
    // The job this group is part of on the coordinator.
    std::string job() const;
    // Keeps p until the group's c10d_pg is destroyed (what its callbacks
    // reach: checked.hpp's Alarm).
    void hold(std::shared_ptr<void> p) { held_.push_back(std::move(p)); }

    // The library's own (process_group.cpp).
    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &ts,
                                             const c10d::BroadcastOptions &o) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &ts,
                                             const c10d::AllreduceOptions &o) override;
    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
        std::vector<at::Tensor> &ts, const c10d::AllreduceCoalescedOptions &o) override;
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &ts,
                                          const c10d::ReduceOptions &o) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outs,
                                             std::vector<at::Tensor> &ins,
                                             const c10d::AllgatherOptions &o) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out, at::Tensor &in,
                                                   const c10d::AllgatherOptions &opt) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outs,
                                          std::vector<at::Tensor> &ins,
                                          const c10d::GatherOptions &o) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outs,
                                           std::vector<std::vector<at::Tensor>> &ins,
                                           const c10d::ScatterOptions &o) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outs,
                                                  std::vector<std::vector<at::Tensor>> &ins,
                                                  const c10d::ReduceScatterOptions &o) override;
    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
        at::Tensor &out, at::Tensor &in, const c10d::ReduceScatterOptions &o) override;
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in,
                                                 std::vector<int64_t> &out_splits,
                                                 std::vector<int64_t> &in_splits,
                                                 const c10d::AllToAllOptions &o) override;
    void monitoredBarrier(const c10d::BarrierOptions &o, bool wait_all_ranks) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &ts, int dst, int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &ts, int src, int tag) override;
    // torch's recv without src: the Work's sourceRank() is the sender's.
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &ts, int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &o) override;

    // Composed of the library's (composed.cpp).
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outs,
                                                       std::vector<at::Tensor> &ins,
                                                       const c10d::AllgatherOptions &o) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outs,
                                            std::vector<at::Tensor> &ins,
                                            const c10d::AllToAllOptions &o) override;

#ifdef C10D_TORCH_BACKEND
    // torch 2.x's: the group's collective count, as gloo's, which torch's
    // checking wrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL) puts in its
    // fingerprints (the coordinator numbers collectives on its own).
    void setSequenceNumberForGroup() override { seq_ = 0; }
    uint64_t getSequenceNumberForGroup() override { return seq_; }
    // torch 2.x's: _coalescing_manager's fast path (one call per tensor,
    // in order), and its device form, whose calls run as they come (each
    // is complete when it returns, so the coalesced Work is too).
    c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
        std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
        const c10d::AllgatherOptions &o) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
        std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
        const c10d::ReduceScatterOptions &o) override;
    void startCoalescing() override {}
    c10::intrusive_ptr<c10d::Work> endCoalescing() override;
#endif

  private:
    // process_group.cpp
    c10::intrusive_ptr<c10d::Work> post_recv(const at::Tensor &t, int src, int tag, bool any);
    c10::intrusive_ptr<c10d::Work> submit(const char *what, c10d::OpType op,
                                          std::vector<View> &wb, std::vector<View> &keep,
                                          std::vector<at::Tensor> out,
                                          std::chrono::milliseconds timeout, bool queue,
                                          std::function<c10d_status(const c10d_coll_opts *)> call);
    // composed.cpp
    c10::intrusive_ptr<c10d::Work> allreduce_sparse(at::Tensor &t,
                                                    const c10d::AllreduceOptions &o);
    at::Tensor gathered(const at::Tensor &t, const c10d_coll_opts &co);
    c10::intrusive_ptr<c10d::Work> alltoall_splits(at::Tensor &out, at::Tensor &in,
                                                   std::vector<int64_t> out_splits,
                                                   std::vector<int64_t> in_splits,
                                                   const c10d_coll_opts &co);
    std::vector<at::Tensor> exchange_padded(const char *what, const std::vector<at::Tensor> &blocks,
                                            const std::vector<int64_t> &want,
                                            const at::TensorOptions &to, const c10d_coll_opts &co);

    c10d_pg *pg_ = nullptr;
    std::shared_ptr<Lane> lane_; /* null with C10D_TORCH_ASYNC=0 */
    std::atomic<uint64_t> seq_{0}; /* collectives called (getSequenceNumberForGroup) */
    std::shared_ptr<Unfinished> unfinished_;
    std::vector<std::shared_ptr<void>> held_;
};

// Runs f without the GIL, if this thread holds it (f may wait for a
// thread that needs it).
void without_gil(const std::function<void()> &f);

// The coord group behind torch's group pg (on 2.x, its CPU Backend), or
// an error saying pg is not a coord one; `what` names the caller.
ProcessGroupCoord *coord_of(const c10::intrusive_ptr<c10d::ProcessGroup> &pg, const char *what);

} // namespace c10d_coord
