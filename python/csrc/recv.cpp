// Posted receives and the ones left unfinished (recv.hpp).
#include "recv.hpp"

#include "errors.hpp"

#include <pybind11/gil.h>

#include <cstdint>
#include <thread>

namespace c10d_coord {

void Unfinished::add(c10d_work *w, std::vector<View> keep)
{
    std::lock_guard<std::mutex> g(mu_);
    prune_locked();
    left_.emplace_back(w, std::move(keep));
}

void Unfinished::prune()
{
    std::lock_guard<std::mutex> g(mu_);
    prune_locked();
}

void Unfinished::prune_locked()
{
    for (size_t i = 0; i < left_.size();)
        if (c10d_work_is_completed(left_[i].first)) {
            c10d_work_free(left_[i].first);
            left_.erase(left_.begin() + (long)i);
        } else {
            i++;
        }
}

RecvWork::RecvWork(const at::Tensor &t, int src, std::shared_ptr<Unfinished> un)
    : c10d::Work(-1, c10d::OpType::RECV), src_(src), un_(std::move(un))
{
    v_.emplace_back(t);
    fut_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()));
}

RecvWork::~RecvWork()
{
    if (w_ && c10d_work_is_completed(w_))
        c10d_work_free(w_);
    else if (w_)
        un_->add(w_, std::move(v_));
}

bool RecvWork::isCompleted()
{
    return settle(C10D_NO_WAIT, nullptr);
}

bool RecvWork::isSuccess() const
{
    std::lock_guard<std::mutex> g(mu_);
    return done_ && !err_;
}

bool RecvWork::wait(std::chrono::milliseconds timeout)
{
    int ms = timeout.count() <= 0 || timeout.count() > INT32_MAX ? C10D_TIMEOUT_DEFAULT
                                                                 : (int)timeout.count();
    std::string limit;
    if (!settle(ms, &limit))
        std::rethrow_exception(backend_error(limit));
    std::lock_guard<std::mutex> g(mu_);
    if (err_)
        std::rethrow_exception(err_);
    return true;
}

std::vector<at::Tensor> RecvWork::result()
{
    wait(kNoTimeout);
    return {v_[0].user};
}

c10::intrusive_ptr<c10::ivalue::Future> RecvWork::getFuture()
{
    std::call_once(fut_waiter_, [this] {
        auto self = c10::intrusive_ptr<RecvWork>::unsafe_reclaim_from_nonowning(this);
        std::thread([self] { self->settle(C10D_TIMEOUT_DEFAULT, nullptr); }).detach();
    });
    return fut_;
}

// Waits for the receive up to timeout_ms (C10D_NO_WAIT: looks). True once
// it ended, its tensor written back or its error kept; false if it had
// not, with why in *limit. No lock is held while waiting: another thread
// may ask or wait meanwhile.
bool RecvWork::settle(int timeout_ms, std::string *limit)
{
    {
        std::lock_guard<std::mutex> g(mu_);
        if (done_)
            return true;
    }
    c10d_status st;
    if (timeout_ms == C10D_NO_WAIT) {
        if (!c10d_work_is_completed(w_))
            return false;
        st = c10d_work_wait(w_, C10D_TIMEOUT_DEFAULT); /* it ended: returns at once */
    } else if (Py_IsInitialized() && PyGILState_Check()) {
        pybind11::gil_scoped_release nogil;
        st = c10d_work_wait(w_, timeout_ms);
    } else {
        st = c10d_work_wait(w_, timeout_ms);
    }
    std::string msg = st == C10D_OK ? "" : report("recv", st);
    if (st == C10D_ETIMEDOUT && timeout_ms != C10D_TIMEOUT_DEFAULT &&
        !c10d_work_is_completed(w_)) {
        if (limit)
            *limit = msg;
        return false;
    }
    {
        std::lock_guard<std::mutex> g(mu_);
        if (done_)
            return true;
        if (st == C10D_OK)
            v_[0].write_back();
        else
            err_ = backend_error(msg);
        done_ = true;
    }
    // Outside the lock: a callback may ask this Work how it stands.
    if (st == C10D_OK)
        fut_->markCompleted(c10::IValue(std::vector<at::Tensor>{v_[0].user}));
    else
        fut_->setError(err_);
    return true;
}

} // namespace c10d_coord
