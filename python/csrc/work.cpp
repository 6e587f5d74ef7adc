// Finished and queued Work (work.hpp): the Work classes torch sees and the
// finisher threads that complete queued calls.
#include "work.hpp"

#include "errors.hpp"

#include <pybind11/gil.h>

#include <string>

namespace c10d_coord {

struct Pending {
    c10d_work *w = nullptr;
    std::vector<View> wb, keep; // written back after; kept alive until done
    std::vector<at::Tensor> out;
    c10::intrusive_ptr<c10::ivalue::Future> fut;
    std::string what;
};

namespace {

class CoordWork : public c10d::Work {
  public:
    CoordWork(c10d::OpType op, std::vector<at::Tensor> out)
        : c10d::Work(-1, op), out_(std::move(out))
    {
        fut_ = c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()));
        fut_->markCompleted(c10::IValue(out_));
        finish();
    }
    bool isCompleted() override { return true; }
    bool isSuccess() const override { return true; }
    bool wait(std::chrono::milliseconds) override { return true; }
    std::vector<at::Tensor> result() override { return out_; }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return fut_; }

  private:
    std::vector<at::Tensor> out_;
    c10::intrusive_ptr<c10::ivalue::Future> fut_;
};

// A call still running: wait() and the future block until a finisher
// completes it; errors come back as the library's message.
class AsyncWork : public c10d::Work {
  public:
    AsyncWork(c10d::OpType op, c10::intrusive_ptr<c10::ivalue::Future> fut,
              std::vector<at::Tensor> out)
        : c10d::Work(-1, op), fut_(std::move(fut)), out_(std::move(out))
    {
    }
    bool isCompleted() override { return fut_->completed(); }
    bool isSuccess() const override { return fut_->completed() && !fut_->hasError(); }
    bool wait(std::chrono::milliseconds) override
    {
        if (Py_IsInitialized() && PyGILState_Check()) { /* a finisher may need it */
            pybind11::gil_scoped_release nogil;
            fut_->wait();
        } else {
            fut_->wait();
        }
        if (fut_->hasError())
            std::rethrow_exception(fut_->exception_ptr());
        return true;
    }
    std::vector<at::Tensor> result() override
    {
        wait(kNoTimeout);
        return out_;
    }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return fut_; }

  private:
    c10::intrusive_ptr<c10::ivalue::Future> fut_;
    std::vector<at::Tensor> out_;
};

void finish_or_throw(Pending &p)
{
    c10d_status st = c10d_work_wait(p.w, C10D_TIMEOUT_DEFAULT);
    std::string msg = st == C10D_OK ? "" : c10d_errmsg();
    c10d_work_free(p.w);
    if (st != C10D_OK) {
        p.fut->setError(backend_error(report(p.what, st, msg.c_str())));
        return;
    }
    for (auto &v : p.wb)
        v.write_back();
    p.fut->markCompleted(c10::IValue(p.out));
}

void finish(Pending &p)
{
    try {
        finish_or_throw(p);
    } catch (const std::exception &e) { /* nothing may leave a std::thread */
        if (!p.fut->completed())
            p.fut->setError(backend_error(std::string("c10d_coord: ") + p.what + ": " +
                                          e.what()));
    }
}

} // namespace

c10::intrusive_ptr<c10d::Work> done(c10d::OpType op, std::vector<at::Tensor> out)
{
    return c10::make_intrusive<CoordWork>(op, std::move(out));
}

Finishers::Finishers() = default;

Finishers::~Finishers()
{
    {
        std::lock_guard<std::mutex> g(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    for (auto &t : threads_)
        t.join();
}

bool Finishers::runs_here()
{
    std::lock_guard<std::mutex> g(mu_);
    for (auto &t : threads_)
        if (t.get_id() == std::this_thread::get_id())
            return true;
    return false;
}

c10::intrusive_ptr<c10d::Work> Finishers::queue(const char *what, c10d::OpType op, c10d_work *w,
                                                std::vector<View> wb, std::vector<View> keep,
                                                std::vector<at::Tensor> out)
{
    auto p = std::unique_ptr<Pending>(new Pending());
    p->w = w;
    p->wb = std::move(wb);
    p->keep = std::move(keep);
    p->out = out;
    p->what = what;
    p->fut = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()));
    auto fut = p->fut;
    push(std::move(p));
    return c10::make_intrusive<AsyncWork>(op, fut, std::move(out));
}

void Finishers::push(std::unique_ptr<Pending> p)
{
    std::lock_guard<std::mutex> g(mu_);
    q_.push_back(std::move(p));
    if (idle_ == 0 && threads_.size() < 64)
        threads_.emplace_back([this] { loop(); });
    else
        cv_.notify_one();
}

void Finishers::loop()
{
    std::unique_lock<std::mutex> g(mu_);
    for (;;) {
        idle_++;
        cv_.wait(g, [this] { return stop_ || !q_.empty(); });
        idle_--;
        if (q_.empty())
            return; /* stopping, nothing left */
        std::unique_ptr<Pending> p = std::move(q_.front());
        q_.pop_front();
        g.unlock();
        finish(*p);
        p.reset(); /* the tensors go before the lock is taken again */
        g.lock();
    }
}

} // namespace c10d_coord
