// The Work a collective returns, when torch's c10d::Work is not the C
// library's c10d_work: finished before it is returned (the default), or
// queued on the group's lane in the C library and completed later by a
// finisher thread (C10D_TORCH_ASYNC=1; docs/pytorch.md). Receives have
// their own (recv.hpp): they are posted, not queued.
#pragma once

#include "tensors.hpp"

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <c10d/c10d.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace c10d_coord {

// Done when returned: its future is completed with the output tensors, so
// DDP's comm hooks and then() chains run at once on the caller's thread.
c10::intrusive_ptr<c10d::Work> done(c10d::OpType op, std::vector<at::Tensor> out);

struct Pending; /* a queued call (work.cpp) */

// A group's finisher threads. A finisher waits for a queued call, writes
// non-contiguous results back and completes the future. A future's then()
// callbacks run on the thread that completes it, and one may issue a
// collective and wait for its future (PowerSGD does): so no finisher is
// ever the only one left. When none is idle, another starts (the pool only
// grows to what nesting needs).
class Finishers {
  public:
    Finishers();
    ~Finishers(); /* finishes what is queued */
    // Whether the caller is one of this pool's threads (which it cannot join).
    bool runs_here();
    // Hands over w, a call made with async_op: wb are written back when it
    // ends and keep kept alive until then. The Work returned completes then
    // (its wait() and future block until it does; errors come back as the
    // library's message, prefixed with `what`).
    c10::intrusive_ptr<c10d::Work> queue(const char *what, c10d::OpType op, c10d_work *w,
                                         std::vector<View> wb, std::vector<View> keep,
                                         std::vector<at::Tensor> out);

  private:
    void push(std::unique_ptr<Pending> p);
    void loop();
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Pending>> q_;
    std::vector<std::thread> threads_;
    int idle_ = 0;
    bool stop_ = false;
};

} // namespace c10d_coord
