// The last references of finished calls, dropped on the inner backend's
// threads. torch's gloo frees a finished call (its tensors, and through
// them their Python objects) on its own worker thread, just after the
// call's waiter has woken; a checked call adds its own references there
// (the callback that ends the check). If the interpreter has begun to exit
// by then, taking the GIL to free a Python object ends that thread inside a
// destructor, and the process aborts ("terminate called without an active
// exception"). The backend's shutdown and an exit hook wait for these
// releases, which take microseconds, while Python is still whole.
// torch 2.x only (its Work.hpp), as the checked backend is.
#pragma once

#include "process_group.hpp" /* C10D_TORCH_BACKEND */

#ifdef C10D_TORCH_BACKEND

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

#include <torch/csrc/distributed/c10d/Work.hpp>

namespace c10d_coord {

struct Release {
    Release(const c10::intrusive_ptr<c10d::Work> &in, const c10::intrusive_ptr<c10d::Work> &out)
        : inner(in), outer(out)
    {
    }
    c10::weak_intrusive_ptr<c10d::Work> inner; // the inner backend's work
    c10::weak_intrusive_ptr<c10d::Work> outer; // the checked work that holds it
    // 0: in flight; 1: its completion callback runs; 2: that callback has
    // returned, its references dropped
    std::atomic<int> stage{0};
    // Whether a call in flight will never end: its group was failed by the
    // coordinator's report (a desync, a dead peer). null: it may yet end.
    std::function<bool()> given_up;
};

// What an exit waits at most: a call that its peers never join does not
// end, and a callback that ends a check may wait out c10d_check_end's
// grace (1.5 s) for the coordinator's verdict.
constexpr std::chrono::milliseconds kReleaseBudget{5000};

// Tracks a checked call over an inner work that completes on the inner
// backend's own thread (one with a future).
std::shared_ptr<Release> track_release(const c10::intrusive_ptr<c10d::Work> &inner,
                                       const c10::intrusive_ptr<c10d::Work> &outer);

// Waits, at most budget, until every call has ended and its references are
// dropped everywhere but in the caller's own hands; a call its group gave up
// on is not waited for. Never call it holding the GIL. True: none left.
bool await_releases(std::chrono::milliseconds budget);

} // namespace c10d_coord

#endif
