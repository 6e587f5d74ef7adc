// Receives. A recv is posted in the C library (c10d_recv with async_op):
// irecv returns at once and holds nothing up (the isend after it, the
// group's next collective: torch 1.13's batch_isend_irecv calls every
// irecv, then every isend, and only then waits); the library moves its
// bytes as they come. Its tensor stays alive until the library is done
// with it: a Work dropped before that leaves it to its group's Unfinished,
// freed once it ended (a posted receive still takes its message, as
// gloo's does).
#pragma once

#include "tensors.hpp"

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <c10d/c10d.h>

#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace c10d_coord {

// A group's receives whose Work was dropped before they ended.
class Unfinished {
  public:
    void add(c10d_work *w, std::vector<View> keep);
    // Frees those that ended.
    void prune();

  private:
    void prune_locked();
    std::mutex mu_;
    std::vector<std::pair<c10d_work *, std::vector<View>>> left_;
};

// A posted receive: made first, then the call posted with tensor() (and
// src_slot() for any source), then start() given its handle.
class RecvWork : public c10d::Work {
  public:
    RecvWork(const at::Tensor &t, int src, std::shared_ptr<Unfinished> un);
    ~RecvWork() override;
    c10d_tensor *tensor() { return &v_[0].t; }
    int *src_slot() { return &src_; } /* c10d_recv_any writes the sender here, in wait */
    void start(c10d_work *w) { w_ = w; }

    bool isCompleted() override;
    bool isSuccess() const override;
    // torch's timeout (kNoTimeout: the group's) bounds this wait only: past
    // it the receive stays posted, as gloo's does.
    bool wait(std::chrono::milliseconds timeout) override;
    int sourceRank() const override { return src_; }
    std::vector<at::Tensor> result() override;
    // Asking never blocks: a thread (started on the first call, holding
    // this Work) waits for the receive and completes the future.
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  private:
    bool settle(int timeout_ms, std::string *limit);
    mutable std::mutex mu_;
    c10d_work *w_ = nullptr;
    std::vector<View> v_;
    int src_;
    bool done_ = false;
    std::exception_ptr err_;
    c10::intrusive_ptr<c10::ivalue::Future> fut_;
    std::once_flag fut_waiter_;
    std::shared_ptr<Unfinished> un_;
};

} // namespace c10d_coord
