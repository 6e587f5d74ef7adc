// ProcessGroupChecked: torch's own backends (ProcessGroupGloo,
// ProcessGroupNCCL) under the coordinator's checks (docs/pytorch.md,
// "Keep your backend, add the checks"). torch 2.x only.
//
// One Backend for every device of a group, as torch registers "coord":
// each call goes to the data plane chosen for its tensors' device
// (C10D_DATA_PLANE=cpu:gloo,cuda:nccl). Where that is torch's, the call is
// described and checked by the coordinator through the C library's checked
// calls (c10d/checked.h) on the coord group's c10d_pg, then issued on the
// inner backend; the Work returned is a thin CheckedWork over the inner
// one, asynchronous as the inner one is, that also fails, on every rank,
// with the coordinator's report when the coordinator finds that the call
// can never complete (ASYNC: a desync, a dead peer, a stall). Where it is
// ours ("coord"), the call goes to the ProcessGroupCoord unchanged.
#pragma once

#include "process_group.hpp"

#ifdef C10D_TORCH_BACKEND

#include <ATen/core/ivalue.h>

#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>

namespace c10d_coord {

class CheckedWork;

// What the coordinator found against the group (told by the C library's
// watcher: c10d_data_plane.on_alert), and the calls it must fail. Shared
// with the C library's callbacks, so it outlives whichever of the two
// holders (the group, the coord group's c10d_pg) goes first.
class ProcessGroupChecked;

struct Alarm : std::enable_shared_from_this<Alarm> {
    std::mutex mu;
    c10d_status st = C10D_OK;
    std::string report;
    std::list<c10::weak_intrusive_ptr<CheckedWork>> outstanding;
    ProcessGroupChecked *owner = nullptr; /* for a joined rank's shadows; null once destroyed */
    // The inner backends, to abort where torch can (nccl); a gloo group
    // cannot be aborted, and is abandoned rather than destroyed (its
    // threads would wait in the collective that never completes).
    std::vector<c10::weak_intrusive_ptr<c10d::Backend>> inner; /* the group's own */
    std::exception_ptr error(); /* the report, as torch raises it */
    c10d_status status();
};

class CheckedWork : public c10d::Work {
  public:
    CheckedWork(c10::intrusive_ptr<c10d::Work> inner, c10d_checked *h,
                std::shared_ptr<Alarm> alarm, c10::intrusive_ptr<ProcessGroupCoord> coord,
                c10d::OpType op, const char *what);
    ~CheckedWork() override;
    void release_resources() override;
    // Attaches to the inner work's completion (or, where the inner work
    // has no future, to its wait).
    void start(const c10::intrusive_ptr<CheckedWork> &self);
    bool isCompleted() override;
    bool isSuccess() const override;
    std::exception_ptr exception() const override;
    int sourceRank() const override { return inner_->sourceRank(); }
    std::vector<at::Tensor> result() override { return inner_->result(); }
    bool wait(std::chrono::milliseconds timeout) override;
    void abort() override { inner_->abort(); }
    void synchronize() override { inner_->synchronize(); }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
    // The first of the two ends the call: the inner work finished (e:
    // its error, or null), or the coordinator's report.
    void finished(std::exception_ptr e, const c10::IValue *value);
    void alarmed(std::exception_ptr e, c10d_status st);
    // Run once the inner work succeeded, before the call is done (a
    // composed call's copy into the caller's tensors). Set before start.
    void then_run(std::function<void()> f) { after_ = std::move(f); }

  private:
    bool claim();    // the one that ends the call: first caller only
    void unlist();   // off the alarm's list
    // c10d_check_end (known: the coordinator's verdict, if that is why): what it failed with
    std::exception_ptr end_check(std::exception_ptr e, c10d_status known = C10D_OK);
    void settle(std::exception_ptr e, const c10::IValue *value);
    c10::intrusive_ptr<c10d::Work> inner_;
    c10d_checked *h_;
    std::shared_ptr<Alarm> alarm_;
    c10::intrusive_ptr<ProcessGroupCoord> coord_; // its c10d_pg outlives the handle
    const char *what_;
    c10::intrusive_ptr<c10::ivalue::Future> fut_; // null: the inner work has none
    mutable std::mutex mu_;
    std::condition_variable cv_;
    bool claimed_ = false, settled_ = false;
    std::exception_ptr err_;
    std::function<void()> after_;
    bool listed_ = false; // under the alarm's mu
    std::list<c10::weak_intrusive_ptr<CheckedWork>>::iterator at_;
};

class ProcessGroupChecked : public c10d::Backend {
  public:
    // cpu, cuda: torch's backend for that device; null: the coord group's
    // own (ours), or none.
    ProcessGroupChecked(c10::intrusive_ptr<ProcessGroupCoord> coord,
                        c10::intrusive_ptr<c10d::Backend> cpu,
                        c10::intrusive_ptr<c10d::Backend> cuda);
    ~ProcessGroupChecked() override;
    const std::string getBackendName() const override { return "coord"; }
    ProcessGroupCoord *coord() const { return coord_.get(); }
    // "cpu:gloo,cuda:nccl", as chosen.
    std::string data_plane() const;

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
                                                   const c10d::AllgatherOptions &o) override;
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outs,
                                                       std::vector<at::Tensor> &ins,
                                                       const c10d::AllgatherOptions &o) override;
    c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
        std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
        const c10d::AllgatherOptions &o) override;
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
    c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
        std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
        const c10d::ReduceScatterOptions &o) override;
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in,
                                                 std::vector<int64_t> &out_splits,
                                                 std::vector<int64_t> &in_splits,
                                                 const c10d::AllToAllOptions &o) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outs,
                                            std::vector<at::Tensor> &ins,
                                            const c10d::AllToAllOptions &o) override;
    void monitoredBarrier(const c10d::BarrierOptions &o, bool wait_all_ranks) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &ts, int dst, int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &ts, int src, int tag) override;
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &ts, int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &o) override;

    void setSequenceNumberForGroup() override { seq_ = 0; }
    uint64_t getSequenceNumberForGroup() override { return seq_; }
    void startCoalescing() override;
    c10::intrusive_ptr<c10d::Work> endCoalescing() override;
    // (torch 2.6's Backend has none of these: setup.py's macros)
#ifdef C10D_TORCH_BACKEND_SUPPORTS_COALESCING
    bool supportsCoalescing() const override;
#endif
#ifdef C10D_TORCH_BACKEND_SET_TIMEOUT
    void setTimeout(std::chrono::milliseconds timeout) override;
#endif
#ifdef C10D_TORCH_BACKEND_ABORT
    void abort() override;
#endif
#ifdef C10D_TORCH_BACKEND_SHUTDOWN
    void shutdown() override;
#endif

    // c10d_data_plane.shadow: a joined rank's part in a call of the
    // others', issued on the inner backend with identity contributions.
    c10d_status shadow(const c10d_check_opts *call);

  private:
    // Where a call on device `dev` (CPU: -1) goes: torch's backend (be),
    // or ours (null).
    c10d::Backend *inner_for(int dev) const;
    c10d::Backend *inner_for(const at::Tensor &t) const;
    // Checks call co with the coordinator, then issues it (issue() gives
    // the inner work) and wraps what it returns.
    c10::intrusive_ptr<c10d::Work>
    checked(const char *what, c10d::OpType op, const c10d_check_opts &co,
            const std::function<c10::intrusive_ptr<c10d::Work>()> &issue,
            std::function<void()> after = nullptr);

    c10::intrusive_ptr<ProcessGroupCoord> coord_;
    c10::intrusive_ptr<c10d::Backend> cpu_, cuda_;
    std::shared_ptr<Alarm> alarm_;
    std::atomic<uint64_t> seq_{0};
};

// The checked group behind torch's group pg, or null.
ProcessGroupChecked *checked_of(const c10::intrusive_ptr<c10d::ProcessGroup> &pg);

} // namespace c10d_coord

#endif
