// The Work a collective returns, when torch's c10d::Work is not the C
// library's c10d_work: finished before it is returned (C10D_TORCH_ASYNC=0),
// or queued on the group's Lane and completed later (the default, as
// gloo's Work is; docs/pytorch.md, "Asynchronous calls"). Receives have
// their own (recv.hpp): they are posted, not queued.
#pragma once

#include "tensors.hpp"

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <c10d/c10d.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace c10d_coord {

// Done when returned: its future is completed with the output tensors, so
// DDP's comm hooks and then() chains run at once on the caller's thread.
c10::intrusive_ptr<c10d::Work> done(c10d::OpType op, std::vector<at::Tensor> out);

// A queued call: the C library's call (sync, on the group), what it writes
// back after and keeps alive until then, and the future it completes.
struct Pending {
    std::function<c10d_status(const c10d_coll_opts *)> call;
    c10d_coll_opts opts;
    std::vector<View> wb, keep;
    std::vector<at::Tensor> out;
    c10::intrusive_ptr<c10::ivalue::Future> fut;
    const char *what = "";
    bool finished = false; /* under the Lane's lock */
};

// A group's calls in the order they were made, run one at a time, each
// after the one before it has finished (the C library's order rule). The
// lane's threads run them as they come, so a call returns at once and
// overlaps what the caller does next (DDP's gradient all_reduces overlap
// backward). Whoever waits for a call through its Work runs the calls
// ahead of it and then it on its own thread, instead of waiting to be
// woken: a call waited for at once (async_op=True and wait()) costs a
// queue push over running it directly, not two thread hand-offs. For that
// an idle lane thread woken by a call gives its caller a moment (kGrace)
// to come for it first; a burst of calls (DDP's buckets) is run back to
// back without it.
//
// A future's then() callbacks run on the thread that completes it, and
// one may queue a call and wait for its future (PowerSGD's do, with
// Future.wait, which cannot run anything): so a lane thread that is busy
// is never the only one left to run what comes next. When a call is
// queued and no lane thread is idle, another starts (the lane only grows
// to what nesting needs; one thread otherwise).
class Lane {
  public:
    // A lane and its first thread; each thread holds the lane until it
    // ends (close()).
    static std::shared_ptr<Lane> start();
    ~Lane();
    // Queues a call; the Work returned completes when it has run (its
    // errors come back as the library's message, prefixed with `what`).
    c10::intrusive_ptr<c10d::Work> queue(std::shared_ptr<Lane> self, const char *what,
                                         c10d::OpType op,
                                         std::function<c10d_status(const c10d_coll_opts *)> call,
                                         const c10d_coll_opts &opts, std::vector<View> wb,
                                         std::vector<View> keep, std::vector<at::Tensor> out);
    // Until p has run, running what is ahead of it here.
    void wait_for(const std::shared_ptr<Pending> &p);
    // Until every queued call has run: before a call that is not queued
    // (a send, a posted receive, a join, a monitored barrier), so the
    // group's calls still happen in the order they were made.
    void drain();
    // Runs what is queued, then ends the lane's threads.
    void close();
    // Whether the caller is one of the lane's threads (which cannot join
    // itself).
    bool runs_here();

  private:
    Lane() = default;
    void spawn_locked(std::shared_ptr<Lane> self);
    // Runs the head if none runs now: false when there was none to take.
    // lane: the caller is a lane thread's loop.
    bool run_head(std::unique_lock<std::mutex> &g, bool lane = false);
    void loop();
    std::mutex mu_;
    std::condition_variable cv_;       /* the lane's threads': work queued, or stop */
    std::condition_variable finished_; /* a call finished */
    std::deque<std::shared_ptr<Pending>> q_;
    bool running_ = false, stop_ = false;
    std::atomic<uint64_t> runs_{0}; /* calls taken to run, by anyone */
    int idle_ = 0;    /* lane threads waiting for work */
    int calling_ = 0; /* lane threads in a call (they come back; one in a callback may not) */
    std::vector<std::thread> threads_;
};

} // namespace c10d_coord
