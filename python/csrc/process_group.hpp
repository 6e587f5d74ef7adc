// ProcessGroupCoord: torch's c10d::ProcessGroup over one c10d_pg of the C
// library, which checks each call with the coordinator. Each call converts
// torch's tensors (tensors.hpp) and runs the collective; the Work it
// returns is done, or queued with C10D_TORCH_ASYNC=1 (work.hpp); receives
// are posted (recv.hpp). torch's bindings release the GIL around these
// methods; the constructor releases it itself (c10d_init blocks).
//
// One class for PyTorch 1.13 (Debian 12's) and 2.x: both take a
// c10d::ProcessGroup subclass from a backend's creator (2.x uses it as it
// is). The collectives the C library runs directly are in
// process_group.cpp; those torch has and the library has not, composed of
// the library's, in composed.cpp.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <c10d/c10d.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace c10d_coord {

struct View;       /* tensors.hpp */
class Finishers;   /* work.hpp */
class Unfinished;  /* recv.hpp */

class ProcessGroupCoord : public c10d::ProcessGroup {
  public:
    // Joins the group (c10d_init): url "" is C10D_COORD's, job "" the
    // default job, timeout_ms 0 the library's default.
    ProcessGroupCoord(int rank, int size, const std::string &url, const std::string &job,
                      int timeout_ms);
    ~ProcessGroupCoord() override;
    const std::string getBackendName() const override { return "coord"; }
#ifdef C10D_TORCH_GROUP_NAME
    /* torch 2.x keeps these in a group's registered Backend; this group
     * is its own backend (python/setup.py). */
    const std::string &getGroupName() const override { return group_name_; }
    void setGroupName(const std::string &name) override { group_name_ = name; }
    const std::string &getGroupDesc() const override { return group_desc_; }
    void setGroupDesc(const std::string &desc) override { group_desc_ = desc; }
#endif
    c10d_pg *pg() const { return pg_; }
    // The job this group is part of on the coordinator.
    std::string job() const;

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

  private:
    // process_group.cpp
    c10::intrusive_ptr<c10d::Work> post_recv(const at::Tensor &t, int src, int tag, bool any);
    template <typename F>
    c10::intrusive_ptr<c10d::Work> submit(const char *what, c10d::OpType op,
                                          std::vector<View> &wb, std::vector<View> &keep,
                                          std::vector<at::Tensor> out,
                                          std::chrono::milliseconds timeout, F call);
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
    bool async_ = false;
    std::string group_name_, group_desc_;
    std::unique_ptr<Finishers> finishers_;
    std::shared_ptr<Unfinished> unfinished_;
};

} // namespace c10d_coord
