// CheckedWork (checked.hpp): the inner backend's Work, which also fails
// with the coordinator's report.
#include "checked.hpp"

#ifdef C10D_TORCH_BACKEND

#include "errors.hpp"
#include "releases.hpp"

namespace c10d_coord {

CheckedWork::CheckedWork(c10::intrusive_ptr<c10d::Work> inner, c10d_checked *h,
                         std::shared_ptr<Alarm> alarm, c10::intrusive_ptr<ProcessGroupCoord> coord,
                         c10d::OpType op, const char *what)
    : c10d::Work(-1, op), inner_(std::move(inner)), h_(h), alarm_(std::move(alarm)),
      coord_(std::move(coord)), what_(what)
{
}

CheckedWork::~CheckedWork() = default;

// When the last strong reference goes (the alarm's list holds weak ones,
// which keep the destructor from running until they are gone too).
void CheckedWork::release_resources()
{
    unlist();
    if (h_) { /* never ended: a send or recv freed before its wait */
        (void)c10d_check_end(h_, C10D_OK, nullptr);
        h_ = nullptr;
    }
    /* Weak references (the alarm's list, an exit's) keep this object, not
     * the inner work and its tensors. */
    inner_.reset();
    fut_.reset();
    after_ = nullptr;
}

void CheckedWork::unlist()
{
    std::lock_guard<std::mutex> g(alarm_->mu);
    if (listed_) {
        alarm_->outstanding.erase(at_);
        listed_ = false;
    }
}

void CheckedWork::start(const c10::intrusive_ptr<CheckedWork> &self)
{
    /* fut_ first: once listed, the coordinator's report may settle it */
    c10::intrusive_ptr<c10::ivalue::Future> inner_fut;
    try {
        inner_fut = inner_->getFuture();
    } catch (const std::exception &) { /* gloo's send and recv: ended in wait() */
    }
    if (inner_fut)
        fut_ = c10::make_intrusive<c10::ivalue::Future>(inner_fut->elementType(),
                                                         inner_fut->devices());
    bool found;
    {
        std::lock_guard<std::mutex> g(alarm_->mu);
        at_ = alarm_->outstanding.insert(alarm_->outstanding.end(),
                                         c10::weak_intrusive_ptr<CheckedWork>(self));
        listed_ = true;
        found = alarm_->st != C10D_OK;
    }
    if (inner_fut) {
        auto release = track_release(inner_, self);
        release->given_up = [a = std::weak_ptr<Alarm>(alarm_)] {
            auto s = a.lock();
            return !s || s->status() != C10D_OK;
        };
        inner_fut->addCallback([self, release](c10::ivalue::Future &f) mutable {
            release->stage.store(1, std::memory_order_release);
            {
                /* every reference this thread holds goes before stage 2 */
                auto me = std::move(self);
                if (f.hasError()) {
                    me->finished(f.exception_ptr(), nullptr);
                } else {
                    c10::IValue v = f.value();
                    me->finished(nullptr, &v);
                }
            }
            release->stage.store(2, std::memory_order_release);
        });
    }
    if (found)
        alarmed(alarm_->error(), alarm_->status());
}

bool CheckedWork::claim()
{
    std::lock_guard<std::mutex> g(mu_);
    if (claimed_)
        return false;
    claimed_ = true;
    return true;
}

std::exception_ptr CheckedWork::end_check(std::exception_ptr e, c10d_status known)
{
    unlist();
    std::string why;
    if (e) {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception &x) {
            why = x.what();
        } catch (...) {
            why = "unknown error";
        }
    }
    c10d_checked *h = h_;
    h_ = nullptr;
    /* known: the coordinator's verdict, which c10d_check_end does not wait for */
    c10d_status outcome = !e ? C10D_OK : known != C10D_OK ? known : C10D_EBACKEND;
    c10d_status st = c10d_check_end(h, outcome, e ? why.c_str() : nullptr);
    if (st == C10D_OK)
        return nullptr;
    // The inner backend's own error stands (its words: "Timed out ..."),
    // unless the coordinator knows why it failed.
    if (e && st == C10D_EBACKEND)
        return e;
    return backend_error(report(what_, st));
}

// The future first, then the waiters, as gloo's own works do: a waiter
// that has woken finds the future's callbacks run.
void CheckedWork::settle(std::exception_ptr e, const c10::IValue *value)
{
    if (fut_) {
        if (e)
            fut_->setError(e);
        else
            fut_->markCompleted(value ? *value : c10::IValue());
    }
    {
        std::lock_guard<std::mutex> g(mu_);
        err_ = e;
        settled_ = true;
    }
    cv_.notify_all();
}

void CheckedWork::finished(std::exception_ptr e, const c10::IValue *value)
{
    if (!claim())
        return; /* the coordinator's report came first */
    if (!e && after_) {
        try {
            after_();
        } catch (...) {
            e = std::current_exception();
        }
    }
    settle(end_check(e), value);
}

void CheckedWork::alarmed(std::exception_ptr e, c10d_status st)
{
    if (!claim())
        return;
    std::exception_ptr out = end_check(e, st);
    settle(out ? out : e, nullptr);
    if (!fut_) /* a send or recv: its wait returns, failed */
        try {
            inner_->abort();
        } catch (const std::exception &) {
        }
}

bool CheckedWork::isCompleted()
{
    std::lock_guard<std::mutex> g(mu_);
    return settled_ || (!fut_ && inner_->isCompleted());
}

bool CheckedWork::isSuccess() const
{
    std::lock_guard<std::mutex> g(mu_);
    return settled_ && !err_;
}

std::exception_ptr CheckedWork::exception() const
{
    std::lock_guard<std::mutex> g(mu_);
    return err_;
}

c10::intrusive_ptr<c10::ivalue::Future> CheckedWork::getFuture()
{
    return fut_ ? fut_ : inner_->getFuture();
}

bool CheckedWork::wait(std::chrono::milliseconds timeout)
{
    if (!fut_) { /* the inner work ends in its wait: a send or recv */
        std::exception_ptr e;
        bool ok = true;
        try {
            ok = inner_->wait(timeout);
        } catch (...) {
            e = std::current_exception();
        }
        if (!e && after_) {
            try {
                after_();
            } catch (...) {
                e = std::current_exception();
            }
        }
        if (claim())
            settle(end_check(e), nullptr);
        std::lock_guard<std::mutex> g(mu_);
        if (err_)
            std::rethrow_exception(err_);
        return ok;
    }
    {
        std::unique_lock<std::mutex> l(mu_);
        if (timeout.count() <= 0) {
            cv_.wait(l, [&] { return settled_; });
        } else if (!cv_.wait_for(l, timeout, [&] { return settled_; })) {
            std::rethrow_exception(backend_error(
                "c10d_coord: " + std::string(what_) + ": Timed out waiting " +
                std::to_string(timeout.count()) + "ms for the operation to complete"));
        }
        if (err_)
            std::rethrow_exception(err_);
    }
    return inner_->wait(timeout); /* nccl: the current stream waits for the call */
}

} // namespace c10d_coord

#endif
