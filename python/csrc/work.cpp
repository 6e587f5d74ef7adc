// Finished and queued Work (work.hpp): the Work classes torch sees and the
// group's Lane that runs queued calls in order.
#include "work.hpp"

#include "errors.hpp"

#include <pybind11/gil.h>

#include <chrono>
#include <string>

namespace c10d_coord {

namespace {

// How long a lane thread woken from idle leaves a new call to its caller
// (who runs it on its own thread if it waits at once, ~2-5 us after the
// call returned): far below a DDP step's compute between two buckets.
constexpr auto kGrace = std::chrono::microseconds(30);

c10::intrusive_ptr<c10::ivalue::Future> tensor_list_future()
{
    return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

class CoordWork : public c10d::Work {
  public:
    CoordWork(c10d::OpType op, std::vector<at::Tensor> out)
        : c10d::Work(-1, op), out_(std::move(out)), fut_(tensor_list_future())
    {
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

// A queued call: wait() runs what is ahead of it and then it (Lane), so it
// never waits to be woken by a busy thread; errors come back as the
// library's message.
class QueuedWork : public c10d::Work {
  public:
    QueuedWork(c10d::OpType op, std::shared_ptr<Lane> lane, std::shared_ptr<Pending> p)
        : c10d::Work(-1, op), lane_(std::move(lane)), p_(std::move(p)), fut_(p_->fut),
          out_(p_->out)
    {
    }
    bool isCompleted() override { return fut_->completed(); }
    bool isSuccess() const override { return fut_->completed() && !fut_->hasError(); }
    bool wait(std::chrono::milliseconds) override
    {
        if (!fut_->completed()) {
            if (Py_IsInitialized() && PyGILState_Check()) { /* another thread's call may need it */
                pybind11::gil_scoped_release nogil;
                settle();
            } else {
                settle();
            }
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
    void settle()
    {
        lane_->wait_for(p_);
        fut_->wait(); /* its runner completes it just after marking it run */
    }
    std::shared_ptr<Lane> lane_;
    std::shared_ptr<Pending> p_;
    c10::intrusive_ptr<c10::ivalue::Future> fut_;
    std::vector<at::Tensor> out_;
};

// Runs a call; its outcome goes to its future afterwards (complete()).
std::exception_ptr execute(Pending &p)
{
    try {
        c10d_status st = p.call(&p.opts);
        if (st != C10D_OK)
            return backend_error(report(p.what, st, c10d_errmsg()));
        for (auto &v : p.wb)
            v.write_back();
        return nullptr;
    } catch (...) { /* nothing may leave the progress thread */
        return std::current_exception();
    }
}

void complete(Pending &p, std::exception_ptr err)
{
    try {
        if (err)
            p.fut->setError(err);
        else
            p.fut->markCompleted(c10::IValue(p.out));
    } catch (const std::exception &e) { /* a then() callback's; torch logs its own */
        (void)e;
    }
}

} // namespace

c10::intrusive_ptr<c10d::Work> done(c10d::OpType op, std::vector<at::Tensor> out)
{
    return c10::make_intrusive<CoordWork>(op, std::move(out));
}

std::shared_ptr<Lane> Lane::start()
{
    std::shared_ptr<Lane> l(new Lane());
    std::lock_guard<std::mutex> g(l->mu_);
    l->spawn_locked(l);
    return l;
}

void Lane::spawn_locked(std::shared_ptr<Lane> self)
{
    idle_++; /* from now: a call queued before it waits is its to run */
    threads_.emplace_back([self]() mutable {
        self->loop();
        self.reset(); /* may be the last: ~Lane then runs here */
    });
}

Lane::~Lane()
{
    /* Only on a lane thread itself, as it ends (close() joined the rest,
     * or they have ended too): none of them touches the lane again. */
    for (auto &t : threads_)
        if (t.joinable())
            t.detach();
}

bool Lane::runs_here()
{
    std::lock_guard<std::mutex> g(mu_);
    for (auto &t : threads_)
        if (t.get_id() == std::this_thread::get_id())
            return true;
    return false;
}

c10::intrusive_ptr<c10d::Work>
Lane::queue(std::shared_ptr<Lane> self, const char *what, c10d::OpType op,
            std::function<c10d_status(const c10d_coll_opts *)> call, const c10d_coll_opts &opts,
            std::vector<View> wb, std::vector<View> keep, std::vector<at::Tensor> out)
{
    auto p = std::make_shared<Pending>();
    p->call = std::move(call);
    p->opts = opts;
    p->wb = std::move(wb);
    p->keep = std::move(keep);
    p->out = std::move(out);
    p->what = what;
    p->fut = tensor_list_future();
    {
        std::lock_guard<std::mutex> g(mu_);
        TORCH_CHECK(!stop_, "c10d_coord: ", what, ": the process group was destroyed");
        q_.push_back(p);
        if (idle_ == 0 && calling_ == 0 && threads_.size() < 64)
            spawn_locked(self); /* none will come for it: each is in a callback */
    }
    cv_.notify_one();
    return c10::make_intrusive<QueuedWork>(op, std::move(self), std::move(p));
}

bool Lane::run_head(std::unique_lock<std::mutex> &g, bool lane)
{
    if (running_ || q_.empty())
        return false;
    std::shared_ptr<Pending> p = std::move(q_.front());
    q_.pop_front();
    running_ = true;
    runs_++;
    calling_ += lane;
    g.unlock();
    std::exception_ptr err = execute(*p);
    g.lock();
    running_ = false;
    calling_ -= lane;
    p->finished = true;
    g.unlock();
    /* The next call may start before this one's callbacks run, as on
     * gloo's threads; a callback that queues and waits moves the lane
     * on itself. */
    finished_.notify_all();
    cv_.notify_one();
    complete(*p, err);
    p->keep.clear(); /* the tensors go before the lock is taken again */
    p->wb.clear();
    p->call = nullptr;
    g.lock();
    return true;
}

void Lane::wait_for(const std::shared_ptr<Pending> &p)
{
    std::unique_lock<std::mutex> g(mu_);
    while (!p->finished)
        if (!run_head(g))
            finished_.wait(g);
}

void Lane::drain()
{
    std::unique_lock<std::mutex> g(mu_);
    while (running_ || !q_.empty())
        if (!run_head(g))
            finished_.wait(g);
}

void Lane::loop()
{
    std::unique_lock<std::mutex> g(mu_);
    for (;;) {
        cv_.wait(g, [this] { return (!q_.empty() && !running_) || (stop_ && q_.empty()); });
        if (q_.empty()) {
            idle_--;
            return; /* stopping, nothing left */
        }
        /* Its caller's first, for a moment (kGrace): spinning with the
         * lock released, yielding the core to whoever wants it. */
        uint64_t seen = runs_.load();
        g.unlock();
        auto until = std::chrono::steady_clock::now() + kGrace;
        while (runs_.load() == seen && std::chrono::steady_clock::now() < until)
            std::this_thread::yield();
        g.lock();
        idle_--;
        /* Then the whole burst, back to back. */
        while (run_head(g, true)) {
        }
        idle_++;
    }
}

void Lane::close()
{
    std::vector<std::thread> others;
    {
        std::lock_guard<std::mutex> g(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    drain();
    {
        std::lock_guard<std::mutex> g(mu_);
        for (auto &t : threads_)
            if (t.get_id() != std::this_thread::get_id())
                others.push_back(std::move(t));
    }
    for (auto &t : others)
        t.join();
}

} // namespace c10d_coord
