// c10d_coord._C: a torch.distributed backend over libc10dclient
// (docs/pytorch.md). Each call converts torch tensors to c10d_tensor views
// (no copies for contiguous CPU tensors) and runs the collective; the Work
// it returns is done (or, with C10D_TORCH_ASYNC=1, completed later by a
// finisher thread). The C library checks each call with the coordinator.
// torch's bindings release the GIL around these methods; the constructor
// releases it itself (c10d_init blocks).
//
// One source for PyTorch 1.13 (Debian 12's) and 2.x: both take a
// c10d::ProcessGroup subclass from a backend's creator (2.x uses it as it
// is), so the differences are few and marked TORCH_VERSION_MAJOR. CUDA
// tensors go to the C library's NCCL data plane where torch was built with
// CUDA (C10D_TORCH_CUDA, set by setup.py); elsewhere they are refused.
//
// Why one file of ~1,300 lines: every translation unit that includes
// torch's headers takes ~35 s to compile here (`bash scripts/build-torch.sh`,
// 2 cores), and setuptools compiles them one after another, in CI's plain
// and sanitizer runs and for torch 2.x; the parts are kept in the order a
// reader needs them instead: errors and tensor views, finished and async
// work, receives, the store, the process group, what c10d-ctl shows, join.
#include <torch/extension.h>
#include <torch/version.h>
#ifdef C10D_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <c10d/c10d.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <string>
#include <vector>

namespace {

// Our report, as torch users see it: torch.distributed.DistBackendError
// (a RuntimeError) where torch has it (2.1+), else a RuntimeError, with
// c10d's message.
std::exception_ptr backend_error(const std::string &msg)
{
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
    return std::make_exception_ptr(
        c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, __LINE__}, msg));
#else
    return std::make_exception_ptr(std::runtime_error(msg));
#endif
}

// "c10d_coord: allreduce: EDESYNC: <the library's report>". A timeout
// says "Timed out" first, as gloo's do ("Timed out waiting 1000ms for
// recv operation"), which torch's tests and users' scripts look for.
std::string report(const std::string &what, c10d_status st, const char *msg)
{
    std::string name = c10d_status_name(st);
    if (st == C10D_ETIMEDOUT)
        name = "Timed out (" + name + ")";
    return "c10d_coord: " + what + ": " + name + ": " + msg;
}

std::string report(const char *what, c10d_status st)
{
    return report(what, st, c10d_errmsg());
}

[[noreturn]] void fail(const char *what, c10d_status st)
{
    std::rethrow_exception(backend_error(report(what, st)));
}

void check(const char *what, c10d_status st)
{
    if (st != C10D_OK)
        fail(what, st);
}

c10d_dtype dtype_of(const at::Tensor &t, bool *is_bool)
{
    *is_bool = false;
    switch (t.scalar_type()) {
    case at::kFloat: return C10D_FLOAT32;
    case at::kDouble: return C10D_FLOAT64;
    case at::kHalf: return C10D_FLOAT16;
    case at::kBFloat16: return C10D_BFLOAT16;
    case at::kChar: return C10D_INT8;
    case at::kByte: return C10D_UINT8;
    case at::kInt: return C10D_INT32;
    case at::kLong: return C10D_INT64;
    case at::kBool: *is_bool = true; return C10D_UINT8; // 0/1 bytes
    default:
        throw std::invalid_argument(std::string("c10d_coord: dtype ") +
                                    c10::toString(t.scalar_type()) + " is not supported");
    }
}

// A reduce op on a dtype; bool reduces as torch's backends do (SUM and MAX
// are a logical or, PRODUCT and MIN a logical and).
c10d_reduce_op op_of(const c10d::ReduceOp &op, bool is_bool)
{
    switch (op) {
    case c10d::ReduceOp::SUM: return is_bool ? C10D_MAX : C10D_SUM;
    case c10d::ReduceOp::PRODUCT: return is_bool ? C10D_MIN : C10D_PROD;
    case c10d::ReduceOp::MIN: return C10D_MIN;
    case c10d::ReduceOp::MAX: return C10D_MAX;
    case c10d::ReduceOp::AVG:
        if (is_bool)
            throw std::invalid_argument("c10d_coord: AVG is not defined on bool tensors");
        return C10D_AVG;
    default: throw std::invalid_argument("c10d_coord: reduce op not supported (SUM, PRODUCT, "
                                         "MIN, MAX and AVG are)");
    }
}

// A tensor the C library can use in place: a contiguous CPU tensor is used
// as it is; anything else through a contiguous copy written back after.
struct View {
    at::Tensor user, work;
    c10d_tensor t;
    bool is_bool = false;

    explicit View(const at::Tensor &u) : user(u)
    {
        t.device = C10D_CPU;
        if (u.is_cuda()) {
#ifdef C10D_TORCH_CUDA
            t.device = u.device().index();
#else
            TORCH_CHECK(false, "c10d_coord: a tensor on ", u.device(), ": this build of the "
                        "backend has no CUDA (the torch it was built against has none); it "
                        "takes CPU tensors");
#endif
        } else {
            TORCH_CHECK(u.device().is_cpu(), "c10d_coord: a tensor on ", u.device(),
                        ": the backend takes CPU and CUDA tensors");
        }
        work = u.is_contiguous() ? u : u.contiguous();
        t.data = work.data_ptr();
        t.dtype = dtype_of(work, &is_bool);
        t.ndim = 1;
        t.shape[0] = work.numel();
    }
    void write_back()
    {
        if (!work.is_same(user)) /* the data only, as gloo writes it: not through autograd */
            user.detach().copy_(work);
    }
};

std::vector<View> views(const std::vector<at::Tensor> &ts)
{
    std::vector<View> v;
    v.reserve(ts.size());
    for (const auto &t : ts)
        v.emplace_back(t);
    return v;
}

std::vector<c10d_tensor> raw(std::vector<View> &v)
{
    std::vector<c10d_tensor> r;
    r.reserve(v.size());
    for (auto &x : v)
        r.push_back(x.t);
    return r;
}

void write_back(std::vector<View> &v)
{
    for (auto &x : v)
        x.write_back();
}

// Done when returned: its future is completed with the output tensors, so
// DDP's comm hooks and then() chains run at once on the caller's thread.
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

c10::intrusive_ptr<c10d::Work> done(c10d::OpType op, std::vector<at::Tensor> out)
{
    return c10::make_intrusive<CoordWork>(op, std::move(out));
}

// --- async calls (C10D_TORCH_ASYNC=1; docs/pytorch.md) ---
//
// The call is queued on the group's lane in the C library and returns; a
// finisher thread waits for it, writes non-contiguous results back and
// completes the future. A future's then() callbacks run on the thread that
// completes it, and one may issue a collective and wait for its future
// (PowerSGD does): so no finisher is ever the only one left. When none is
// idle, another starts (the pool only grows to what nesting needs).

struct Pending {
    c10d_work *w = nullptr;
    std::vector<View> wb, keep; // written back after; kept alive until done
    std::vector<at::Tensor> out;
    c10::intrusive_ptr<c10::ivalue::Future> fut;
    std::string what;
};

class Finishers {
  public:
    ~Finishers()
    {
        {
            std::lock_guard<std::mutex> g(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto &t : threads_)
            t.join();
    }
    // Whether the caller is one of this pool's threads (which it cannot join).
    bool runs_here()
    {
        std::lock_guard<std::mutex> g(mu_);
        for (auto &t : threads_)
            if (t.get_id() == std::this_thread::get_id())
                return true;
        return false;
    }
    void push(std::unique_ptr<Pending> p)
    {
        std::lock_guard<std::mutex> g(mu_);
        q_.push_back(std::move(p));
        if (idle_ == 0 && threads_.size() < 64)
            threads_.emplace_back([this] { loop(); });
        else
            cv_.notify_one();
    }

  private:
    void loop()
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
    static void finish(Pending &p)
    {
        try {
            finish_or_throw(p);
        } catch (const std::exception &e) { /* nothing may leave a std::thread */
            if (!p.fut->completed())
                p.fut->setError(backend_error(std::string("c10d_coord: ") + p.what + ": " +
                                              e.what()));
        }
    }
    static void finish_or_throw(Pending &p)
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
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Pending>> q_;
    std::vector<std::thread> threads_;
    int idle_ = 0;
    bool stop_ = false;
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

// --- receives ---
//
// A recv is posted in the C library (c10d_recv with async_op): irecv
// returns at once and holds nothing up (the isend after it, the group's
// next collective: torch 1.13's batch_isend_irecv calls every irecv, then
// every isend, and only then waits); the library moves its bytes as they
// come. Its tensor stays alive until the library is done with it: a Work
// dropped before that leaves it to its group's Unfinished, freed once it
// ended (a posted receive still takes its message, as gloo's does).

class Unfinished {
  public:
    void add(c10d_work *w, std::vector<View> keep)
    {
        std::lock_guard<std::mutex> g(mu_);
        prune_locked();
        left_.emplace_back(w, std::move(keep));
    }
    void prune()
    {
        std::lock_guard<std::mutex> g(mu_);
        prune_locked();
    }

  private:
    void prune_locked()
    {
        for (size_t i = 0; i < left_.size();)
            if (c10d_work_is_completed(left_[i].first)) {
                c10d_work_free(left_[i].first);
                left_.erase(left_.begin() + (long)i);
            } else {
                i++;
            }
    }
    std::mutex mu_;
    std::vector<std::pair<c10d_work *, std::vector<View>>> left_;
};

class RecvWork : public c10d::Work {
  public:
    RecvWork(const at::Tensor &t, int src, std::shared_ptr<Unfinished> un)
        : c10d::Work(-1, c10d::OpType::RECV), src_(src), un_(std::move(un))
    {
        v_.emplace_back(t);
        fut_ = c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()));
    }
    ~RecvWork() override
    {
        if (w_ && c10d_work_is_completed(w_))
            c10d_work_free(w_);
        else if (w_)
            un_->add(w_, std::move(v_));
    }
    c10d_tensor *tensor() { return &v_[0].t; }
    int *src_slot() { return &src_; } /* c10d_recv_any writes the sender here, in wait */
    void start(c10d_work *w) { w_ = w; }

    bool isCompleted() override { return settle(C10D_NO_WAIT, nullptr); }
    bool isSuccess() const override
    {
        std::lock_guard<std::mutex> g(mu_);
        return done_ && !err_;
    }
    // torch's timeout (kNoTimeout: the group's) bounds this wait only: past
    // it the receive stays posted, as gloo's does.
    bool wait(std::chrono::milliseconds timeout) override
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
    int sourceRank() const override { return src_; }
    std::vector<at::Tensor> result() override
    {
        wait(kNoTimeout);
        return {v_[0].user};
    }
    // Asking never blocks: a thread (started on the first call, holding
    // this Work) waits for the receive and completes the future.
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
    {
        std::call_once(fut_waiter_, [this] {
            auto self = c10::intrusive_ptr<RecvWork>::unsafe_reclaim_from_nonowning(this);
            std::thread([self] { self->settle(C10D_TIMEOUT_DEFAULT, nullptr); }).detach();
        });
        return fut_;
    }

  private:
    // Waits for the receive up to timeout_ms (C10D_NO_WAIT: looks). True
    // once it ended, its tensor written back or its error kept; false if it
    // had not, with why in *limit. No lock is held while waiting: another
    // thread may ask or wait meanwhile.
    bool settle(int timeout_ms, std::string *limit)
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

void one_tensor(const std::vector<at::Tensor> &ts, const char *what)
{
    TORCH_CHECK(ts.size() == 1, "c10d_coord: ", what, " takes one tensor per rank (got ",
                ts.size(), ")");
}

// A call's options: torch's per-call timeout where its options set one,
// else the group's (init_process_group's timeout, given to c10d_init).
// A CUDA call is ordered after what torch's current stream on that device
// has queued, as torch's NCCL backend does (`on`: the call's first tensor).
c10d_coll_opts copts(std::chrono::milliseconds t, const at::Tensor *on = nullptr)
{
    c10d_coll_opts o = C10D_COLL_OPTS_INIT;
    if (t.count() > 0)
        o.timeout_ms = t.count() > INT32_MAX ? INT32_MAX : (int)t.count();
#ifdef C10D_TORCH_CUDA
    if (on && on->is_cuda())
        o.stream = c10::cuda::getCurrentCUDAStream(on->device().index()).stream();
#else
    (void)on;
#endif
    return o;
}

const at::Tensor *first(const std::vector<at::Tensor> &ts)
{
    return ts.empty() ? nullptr : &ts[0];
}

class ProcessGroupCoord;

// torch's Store on c10d-coord's (durable, on the coordinator): what
// coord:// rendezvous hands torch, so rank 0 hosts no TCPStore. Made from
// a URL it is the coordinator's whole store (for scripts); made for a run
// (run()) it is that run's store only (c10d_run_store: no other run or job
// sees its keys) and holds the run's world group until the backend's
// creator takes it as torch's default group (then destroy_process_group
// leaves the run, as with any backend); with another backend the store
// keeps it, so the ranks stay members of the run while torch uses it.
class StoreCoord : public c10d::Store {
  public:
    StoreCoord(const std::string &url, std::chrono::milliseconds timeout)
        : c10d::Store(timeout)
    {
        c10d_status st;
        {
            pybind11::gil_scoped_release nogil;
            st = c10d_store_connect(&s_, url.c_str(), nullptr);
        }
        ::check("store", st);
    }
    static c10::intrusive_ptr<StoreCoord> run(c10::intrusive_ptr<ProcessGroupCoord> world,
                                              std::chrono::milliseconds timeout);
    ~StoreCoord() override; /* after ProcessGroupCoord: it may drop the world */
    c10d_store *raw_store() const { return s_; }
    // The run's world group, once: torch's default group is made from it.
    c10::intrusive_ptr<ProcessGroupCoord> take_world(int rank, int size);
    // The job whose run this store is ("" for a whole store).
    std::string job() const;

    void set(const std::string &key, const std::vector<uint8_t> &value) override
    {
        ::check("store set", c10d_store_set(s_, k(key), value.data(), value.size()));
    }
    std::vector<uint8_t> get(const std::string &key) override
    {
        void *v = nullptr;
        size_t len = 0;
        ::check("store get", c10d_store_get(s_, k(key), &v, &len, ms(timeout_)));
        std::vector<uint8_t> out((uint8_t *)v, (uint8_t *)v + len);
        c10d_free(v);
        return out;
    }
    std::vector<uint8_t> compareSet(const std::string &key, const std::vector<uint8_t> &expected,
                                    const std::vector<uint8_t> &desired) override
    {
        void *cur = nullptr;
        size_t len = 0;
        c10d_status st = c10d_store_compare_set(s_, k(key), expected.data(), expected.size(),
                                                desired.data(), desired.size(), &cur, &len);
        if (st == C10D_ENOTFOUND) /* as TCPStore: a missing key answers `expected` */
            return expected;
        ::check("store compare_set", st);
        std::vector<uint8_t> out((uint8_t *)cur, (uint8_t *)cur + len);
        c10d_free(cur);
        return out;
    }
    int64_t add(const std::string &key, int64_t value) override
    {
        int64_t r = 0;
        ::check("store add", c10d_store_add(s_, k(key), value, &r));
        return r;
    }
    bool deleteKey(const std::string &key) override
    {
        int deleted = 0;
        ::check("store delete_key", c10d_store_delete_key(s_, k(key), &deleted));
        return deleted != 0;
    }
    bool check(const std::vector<std::string> &keys) override
    {
        auto k = cstrs(keys);
        int all = 0;
        ::check("store check", c10d_store_check(s_, k.data(), k.size(), &all));
        return all != 0;
    }
    int64_t getNumKeys() override
    {
        int64_t n = 0;
        ::check("store num_keys", c10d_store_num_keys(s_, &n));
        return n;
    }
    void wait(const std::vector<std::string> &keys) override { wait(keys, timeout_); }
    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &t) override
    {
        auto k = cstrs(keys);
        ::check("store wait", c10d_store_wait(s_, k.data(), k.size(), ms(t)));
    }

    // Over a store handle of the library's (owned from here on).
    StoreCoord(c10d_store *s, std::chrono::milliseconds timeout) : c10d::Store(timeout), s_(s) {}

  private:
    /* Keys are C strings on c10d-coord: one with a NUL byte would be cut
     * at it (setting "a\0b" overwrote "a"), so it is refused. */
    static const char *k(const std::string &key)
    {
        if (key.find('\0') != std::string::npos)
            throw std::invalid_argument("c10d_coord: store key contains a NUL byte (keys are C "
                                        "strings on c10d-coord; NUL is refused)");
        return key.c_str();
    }
    /* torch's 0 (kNoTimeout) and unset (negative) timeouts are the store's
     * own here (C10D_TIMEOUT_DEFAULT: c10d/common.h) */
    static int ms(std::chrono::milliseconds t)
    {
        return t.count() <= 0 || t.count() > INT32_MAX ? C10D_TIMEOUT_DEFAULT : (int)t.count();
    }
    static std::vector<const char *> cstrs(const std::vector<std::string> &keys)
    {
        std::vector<const char *> k;
        for (const auto &x : keys)
            k.push_back(StoreCoord::k(x));
        return k;
    }
    c10d_store *s_ = nullptr;
    c10::intrusive_ptr<ProcessGroupCoord> world_; /* a run's world group, until taken */
    std::string job_;                             /* a run's job */
};

class ProcessGroupCoord : public c10d::ProcessGroup {
  public:
    ProcessGroupCoord(int rank, int size, const std::string &url, const std::string &job,
                      int timeout_ms)
        : c10d::ProcessGroup(rank, size)
    {
        c10d_init_opts o = C10D_INIT_OPTS_INIT;
        o.coord_url = url.empty() ? nullptr : url.c_str();
        o.rank = rank;
        o.world_size = size;
        o.job = job.empty() ? nullptr : job.c_str();
        o.timeout_ms = timeout_ms;
#ifdef C10D_TORCH_CUDA
        o.backend = C10D_BACKEND_AUTO; /* CUDA tensors on NCCL, CPU ones on the host's */
#else
        o.backend = C10D_BACKEND_HOST;
#endif
        c10d_status st;
        {
            pybind11::gil_scoped_release nogil;
            st = c10d_init(&pg_, &o);
        }
        check("init_process_group", st);
        const char *a = std::getenv("C10D_TORCH_ASYNC");
        async_ = a && *a && std::string(a) != "0";
        if (async_)
            finishers_.reset(new Finishers());
    }
    ~ProcessGroupCoord() override
    {
        /* A then() callback can hold the last reference to its group (torch's
         * PowerSGD hook does): the group then goes on a finisher, which can
         * neither join itself nor give up the GIL it runs the callback
         * under (taking it back fails once the interpreter exits). Another
         * thread finishes the queue and leaves the group. */
        if (finishers_ && finishers_->runs_here()) {
            std::unique_ptr<Finishers> f = std::move(finishers_);
            c10d_pg *pg = pg_;
            std::thread([f = std::move(f), pg, un = unfinished_]() mutable {
                f.reset();
                if (pg)
                    c10d_destroy(pg);
                un->prune();
            }).detach();
            return;
        }
        /* Every queued call finishes first. A finisher may need the GIL
         * (dropping the last reference to a tensor made in Python, a
         * Python then() callback): never wait for it while holding it. */
        if (Py_IsInitialized() && PyGILState_Check()) {
            pybind11::gil_scoped_release nogil;
            finishers_.reset();
            if (pg_)
                c10d_destroy(pg_);
        } else {
            finishers_.reset();
            if (pg_)
                c10d_destroy(pg_);
        }
        unfinished_->prune(); /* every receive ended with the group */
    }
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
    std::string job() const { return c10d_pg_job(pg_); }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &ts,
                                             const c10d::BroadcastOptions &o) override
    {
        one_tensor(ts, "broadcast");
        auto v = views(ts);
        std::vector<View> none;
        c10d_tensor *t = &v[0].t;
        int root = (int)o.rootRank;
        return submit("broadcast", c10d::OpType::BROADCAST, v, none, ts, o.timeout,
                      [&](const c10d_coll_opts *co, c10d_work **w) {
                          return c10d_broadcast(pg_, t, root, co, w);
                      });
    }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &ts,
                                             const c10d::AllreduceOptions &o) override
    {
        one_tensor(ts, "allreduce");
        if (ts[0].is_sparse())
            return allreduce_sparse(ts[0], o);
        auto v = views(ts);
        std::vector<View> none;
        c10d_tensor *t = &v[0].t;
        c10d_reduce_op op = op_of(o.reduceOp, v[0].is_bool);
        return submit("allreduce", c10d::OpType::ALLREDUCE, v, none, ts, o.timeout,
                      [&](const c10d_coll_opts *co, c10d_work **w) {
                          return c10d_all_reduce(pg_, t, op, co, w);
                      });
    }

    // Sparse COO, SUM (gloo's only one): every rank's coalesced indices
    // and values are gathered (their counts first, then both padded to the
    // largest) and summed in rank order, then coalesced, as gloo does: the
    // same operations in the same order, so the result is gloo's.
    c10::intrusive_ptr<c10d::Work> allreduce_sparse(at::Tensor &t,
                                                    const c10d::AllreduceOptions &o)
    {
        TORCH_CHECK(o.reduceOp == c10d::ReduceOp::SUM,
                    "c10d_coord: sparse all_reduce supports SUM only (as gloo)");
        TORCH_CHECK(t.device().is_cpu(), "c10d_coord: sparse all_reduce takes CPU tensors");
        int n = getSize();
        at::Tensor in = t.coalesce();
        int64_t nnz = in._nnz();
        std::vector<int64_t> meta = {nnz, in.sparse_dim(), in.dense_dim()};
        for (auto d : in.sizes())
            meta.push_back(d);
        c10d_coll_opts co = copts(o.timeout, &t);
        /* a rank of another dimensionality sends another count: a desync */
        at::Tensor metas = gathered(at::tensor(meta, at::kLong), co);
        int64_t most = 0;
        for (int r = 0; r < n; r++) {
            at::Tensor m = metas[r];
            for (size_t k = 1; k < meta.size(); k++)
                TORCH_CHECK(m[(int64_t)k].item<int64_t>() == meta[k], "c10d_coord: sparse "
                            "all_reduce: rank ", r, "'s tensor has other sizes or sparse/dense "
                            "dimensions than rank ", getRank(), "'s ", in.sizes());
            most = std::max(most, m[0].item<int64_t>());
        }
        at::Tensor idx = at::zeros({in.sparse_dim(), most}, at::kLong);
        idx.narrow(1, 0, nnz).copy_(in._indices());
        std::vector<int64_t> vshape = in._values().sizes().vec();
        vshape[0] = most;
        at::Tensor val = at::zeros(vshape, in._values().options());
        val.narrow(0, 0, nnz).copy_(in._values());
        at::Tensor idxs = gathered(idx, co), vals = gathered(val, co);
        at::Tensor out;
        for (int r = 0; r < n; r++) {
            int64_t k = metas[r][0].item<int64_t>();
            at::Tensor part = at::sparse_coo_tensor(idxs[r].narrow(1, 0, k),
                                                    vals[r].narrow(0, 0, k), in.sizes(),
                                                    in.options());
            if (r == 0)
                out = part;
            else
                out += part;
        }
        t.copy_(out.coalesce());
        return done(c10d::OpType::ALLREDUCE, {t});
    }

    // Every rank's t, stacked: a new leading dimension of the group's size.
    at::Tensor gathered(const at::Tensor &t, const c10d_coll_opts &co)
    {
        std::vector<int64_t> shape = t.sizes().vec();
        shape.insert(shape.begin(), getSize());
        at::Tensor out = at::empty(shape, t.options());
        View vo(out), vi(t);
        check("allreduce (sparse)", c10d_all_gather_into_tensor(pg_, &vo.t, &vi.t, &co, nullptr));
        return out;
    }

    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
        std::vector<at::Tensor> &ts, const c10d::AllreduceCoalescedOptions &o) override
    {
        c10d_coll_opts co = copts(o.timeout, first(ts));
        for (auto &t : ts) {
            View v(t);
            check("allreduce_coalesced",
                  c10d_all_reduce(pg_, &v.t, op_of(o.reduceOp, v.is_bool), &co, nullptr));
            v.write_back();
        }
        return done(c10d::OpType::ALLREDUCE_COALESCED, ts);
    }

    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &ts,
                                          const c10d::ReduceOptions &o) override
    {
        one_tensor(ts, "reduce");
        auto v = views(ts);
        std::vector<View> none;
        c10d_tensor *t = &v[0].t;
        c10d_reduce_op op = op_of(o.reduceOp, v[0].is_bool);
        int root = (int)o.rootRank;
        return submit("reduce", c10d::OpType::REDUCE, v, none, ts, o.timeout,
                      [&](const c10d_coll_opts *co, c10d_work **w) {
                          return c10d_reduce(pg_, t, root, op, co, w);
                      });
    }

    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outs,
                                             std::vector<at::Tensor> &ins,
                                             const c10d::AllgatherOptions &o) override
    {
        one_tensor(ins, "allgather");
        TORCH_CHECK(outs.size() == 1 && (int)outs[0].size() == getSize(),
                    "c10d_coord: allgather wants one list of ", getSize(), " tensors");
        auto in = views(ins);
        auto out = views(outs[0]);
        auto r = raw(out);
        c10d_tensor *ti = &in[0].t;
        return submit("allgather", c10d::OpType::ALLGATHER, out, in, outs[0], o.timeout,
                      [&](const c10d_coll_opts *co, c10d_work **w) {
                          return c10d_all_gather(pg_, r.data(), ti, co, w);
                      });
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out, at::Tensor &in,
                                                   const c10d::AllgatherOptions &opt) override
    {
        std::vector<View> o, i;
        o.emplace_back(out);
        i.emplace_back(in);
        c10d_tensor *to = &o[0].t, *ti = &i[0].t;
        return submit("all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, o, i, {out},
                      opt.timeout,
                      [&](const c10d_coll_opts *co, c10d_work **w) {
                          return c10d_all_gather_into_tensor(pg_, to, ti, co, w);
                      });
    }

    // torch's (deprecated) all_gather_coalesced: every input flattened
    // into one buffer, one all_gather of it (one verified collective, as
    // gloo runs one), split into the outputs. outs[i][j] gets rank i's
    // ins[j]; every rank's inputs must add up alike (else a desync).
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outs,
                                                       std::vector<at::Tensor> &ins,
                                                       const c10d::AllgatherOptions &o) override
    {
        int n = getSize();
        TORCH_CHECK(!ins.empty(), "c10d_coord: allgather_coalesced takes one or more tensors");
        TORCH_CHECK((int)outs.size() == n, "c10d_coord: allgather_coalesced wants ", n,
                    " output lists (one per rank), got ", outs.size());
        std::vector<at::Tensor> flat, all;
        for (const auto &t : ins) {
            TORCH_CHECK(t.scalar_type() == ins[0].scalar_type(), "c10d_coord: "
                        "allgather_coalesced wants one dtype in every tensor (",
                        c10::toString(ins[0].scalar_type()), ")");
            flat.push_back(t.reshape({-1}));
        }
        for (int i = 0; i < n; i++) {
            TORCH_CHECK(outs[i].size() == ins.size(), "c10d_coord: allgather_coalesced: output "
                        "list ", i, " has ", outs[i].size(), " tensors, the input list ",
                        ins.size());
            for (size_t j = 0; j < ins.size(); j++)
                TORCH_CHECK(outs[i][j].sizes() == ins[j].sizes() &&
                                outs[i][j].scalar_type() == ins[j].scalar_type(),
                            "c10d_coord: allgather_coalesced: output ", i, ",", j,
                            " is not shaped like input ", j, " ", ins[j].sizes());
        }
        at::Tensor in = at::cat(flat);
        at::Tensor out = at::empty({n * in.numel()}, in.options());
        View vo(out), vi(in);
        c10d_coll_opts co = copts(o.timeout, &in);
        check("allgather_coalesced", c10d_all_gather_into_tensor(pg_, &vo.t, &vi.t, &co, nullptr));
        for (int i = 0; i < n; i++) {
            int64_t off = i * in.numel();
            for (size_t j = 0; j < ins.size(); j++) {
                int64_t k = ins[j].numel();
                outs[i][j].detach().copy_(out.narrow(0, off, k).view(ins[j].sizes()));
                off += k;
                all.push_back(outs[i][j]);
            }
        }
        return done(c10d::OpType::ALLGATHER_COALESCED, all);
    }

    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outs,
                                          std::vector<at::Tensor> &ins,
                                          const c10d::GatherOptions &o) override
    {
        one_tensor(ins, "gather");
        auto in = views(ins);
        std::vector<View> out;
        std::vector<c10d_tensor> r;
        if (getRank() == o.rootRank) {
            TORCH_CHECK(outs.size() == 1 && (int)outs[0].size() == getSize(),
                        "c10d_coord: gather wants one list of ", getSize(),
                        " tensors on the root");
            out = views(outs[0]);
            r = raw(out);
        }
        c10d_coll_opts co = copts(o.timeout, first(ins));
        check("gather", c10d_gather(pg_, r.empty() ? nullptr : r.data(), &in[0].t,
                                    (int)o.rootRank, &co, nullptr));
        write_back(out);
        return done(c10d::OpType::GATHER, outs.empty() ? std::vector<at::Tensor>() : outs[0]);
    }

    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outs,
                                           std::vector<std::vector<at::Tensor>> &ins,
                                           const c10d::ScatterOptions &o) override
    {
        one_tensor(outs, "scatter");
        auto out = views(outs);
        std::vector<View> in;
        std::vector<c10d_tensor> r;
        if (getRank() == o.rootRank) {
            TORCH_CHECK(ins.size() == 1 && (int)ins[0].size() == getSize(),
                        "c10d_coord: scatter wants one list of ", getSize(),
                        " tensors on the root");
            in = views(ins[0]);
            r = raw(in);
        }
        c10d_coll_opts co = copts(o.timeout, first(outs));
        check("scatter", c10d_scatter(pg_, &out[0].t, r.empty() ? nullptr : r.data(),
                                      (int)o.rootRank, &co, nullptr));
        write_back(out);
        return done(c10d::OpType::SCATTER, outs);
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outs,
                                                  std::vector<std::vector<at::Tensor>> &ins,
                                                  const c10d::ReduceScatterOptions &o) override
    {
        one_tensor(outs, "reduce_scatter");
        TORCH_CHECK(ins.size() == 1 && (int)ins[0].size() == getSize(),
                    "c10d_coord: reduce_scatter wants one list of ", getSize(), " tensors");
        auto out = views(outs);
        auto in = views(ins[0]);
        auto r = raw(in);
        c10d_coll_opts co = copts(o.timeout, first(outs));
        check("reduce_scatter", c10d_reduce_scatter(pg_, &out[0].t, r.data(),
                                                    op_of(o.reduceOp, out[0].is_bool), &co,
                                                    nullptr));
        write_back(out);
        return done(c10d::OpType::REDUCE_SCATTER, outs);
    }

    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
        at::Tensor &out, at::Tensor &in, const c10d::ReduceScatterOptions &o) override
    {
        std::vector<View> vo, vi;
        vo.emplace_back(out);
        vi.emplace_back(in);
        c10d_tensor *to = &vo[0].t, *ti = &vi[0].t;
        c10d_reduce_op op = op_of(o.reduceOp, vo[0].is_bool);
        return submit("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, vo, vi, {out},
                      o.timeout,
                      [&](const c10d_coll_opts *co, c10d_work **w) {
                          return c10d_reduce_scatter_tensor(pg_, to, ti, op, co, w);
                      });
    }

    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in,
                                                 std::vector<int64_t> &out_splits,
                                                 std::vector<int64_t> &in_splits,
                                                 const c10d::AllToAllOptions &o) override
    {
        c10d_coll_opts co = copts(o.timeout, &in);
        if (!out_splits.empty() || !in_splits.empty())
            return alltoall_splits(out, in, out_splits, in_splits, co);
        View vo(out), vi(in);
        check("all_to_all_single", c10d_all_to_all_single(pg_, &vo.t, &vi.t, &co, nullptr));
        vo.write_back();
        return done(c10d::OpType::ALLTOALL_BASE, {out});
    }

    // Split sizes (rows of dim 0): blocks of rows, exchanged padded.
    c10::intrusive_ptr<c10d::Work> alltoall_splits(at::Tensor &out, at::Tensor &in,
                                                   std::vector<int64_t> out_splits,
                                                   std::vector<int64_t> in_splits,
                                                   const c10d_coll_opts &co)
    {
        int n = getSize();
        auto even = [n](std::vector<int64_t> &sp, const at::Tensor &t) {
            if (sp.empty())
                sp.assign(n, t.size(0) / n);
        };
        even(out_splits, out);
        even(in_splits, in);
        TORCH_CHECK((int)out_splits.size() == n && (int)in_splits.size() == n,
                    "c10d_coord: all_to_all_single wants ", n, " split sizes");
        TORCH_CHECK(in.dim() >= 1 && out.dim() >= 1,
                    "c10d_coord: all_to_all_single with split sizes wants tensors of 1+ dims");
        int64_t row = 1, sum_in = 0, sum_out = 0;
        for (int64_t d = 1; d < in.dim(); d++)
            row *= in.size(d);
        for (auto v : in_splits)
            sum_in += v;
        for (auto v : out_splits)
            sum_out += v;
        /* Checked before any collective: a bad split must not strand the peers. */
        TORCH_CHECK(sum_in == in.size(0) && sum_out == out.size(0),
                    "c10d_coord: all_to_all_single: split sizes add up to ", sum_in, " and ",
                    sum_out, ", the tensors have ", in.size(0), " and ", out.size(0), " rows");
        at::Tensor flat_in = in.reshape({-1});
        std::vector<at::Tensor> blocks;
        std::vector<int64_t> want;
        int64_t off = 0;
        for (int i = 0; i < n; i++) {
            blocks.push_back(flat_in.narrow(0, off, in_splits[i] * row));
            off += in_splits[i] * row;
            want.push_back(out_splits[i] * row);
        }
        auto got = exchange_padded("all_to_all_single (split sizes)", blocks, want, in.options(),
                                   co);
        out.detach().copy_(at::cat(got).view(out.sizes()));
        return done(c10d::OpType::ALLTOALL_BASE, {out});
    }

    // Lists: ins[i] goes to rank i, outs[i] comes from it; sizes may differ
    // (each outs[i] as large as rank i's ins[this rank]).
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outs,
                                            std::vector<at::Tensor> &ins,
                                            const c10d::AllToAllOptions &o) override
    {
        int n = getSize();
        TORCH_CHECK((int)outs.size() == n && (int)ins.size() == n, "c10d_coord: all_to_all wants ",
                    n, " tensors in and out");
        for (int i = 0; i < n; i++)
            TORCH_CHECK(ins[i].scalar_type() == ins[0].scalar_type() &&
                            outs[i].scalar_type() == ins[0].scalar_type(),
                        "c10d_coord: all_to_all wants one dtype in every tensor (",
                        c10::toString(ins[0].scalar_type()), ")");
        std::vector<at::Tensor> blocks;
        std::vector<int64_t> want;
        for (int i = 0; i < n; i++) {
            blocks.push_back(ins[i].reshape({-1}));
            want.push_back(outs[i].numel());
        }
        auto got = exchange_padded("all_to_all", blocks, want, ins[0].options(), copts(o.timeout, first(ins)));
        for (int i = 0; i < n; i++)
            outs[i].detach().copy_(got[i].view(outs[i].sizes()));
        return done(c10d::OpType::ALLTOALL, outs);
    }

    // Blocks of any sizes, blocks[i] to rank i, and want[i] elements from
    // rank i. First each rank tells every other what it sends it and the
    // largest block it has (an all_to_all of sizes): so every rank pads to
    // the same size, and a rank expecting another size than its peer sends
    // learns it. Then one verified all_to_all_single of equal padded blocks.
    // A size mismatch is raised after the exchange, on the rank that sees
    // it: its peers' calls complete rather than being stranded.
    std::vector<at::Tensor> exchange_padded(const char *what, const std::vector<at::Tensor> &blocks,
                                            const std::vector<int64_t> &want,
                                            const at::TensorOptions &to, const c10d_coll_opts &co)
    {
        int n = getSize();
        int64_t mine = 0;
        for (int i = 0; i < n; i++)
            mine = std::max({mine, blocks[i].numel(), want[i]});
        at::Tensor told = at::empty({2 * n}, at::kLong), heard = at::empty({2 * n}, at::kLong);
        for (int i = 0; i < n; i++) {
            told[2 * i] = blocks[i].numel();
            told[2 * i + 1] = mine;
        }
        View vt(told), vh(heard);
        check(what, c10d_all_to_all_single(pg_, &vh.t, &vt.t, &co, nullptr));
        int64_t pad = 0;
        for (int i = 0; i < n; i++)
            pad = std::max(pad, heard[2 * i + 1].item<int64_t>());
        at::Tensor send = at::zeros({n * pad}, to), recv = at::empty({n * pad}, to);
        for (int i = 0; i < n; i++)
            send.narrow(0, i * pad, blocks[i].numel()).copy_(blocks[i]);
        View vs(send), vr(recv);
        check(what, c10d_all_to_all_single(pg_, &vr.t, &vs.t, &co, nullptr));
        std::vector<at::Tensor> got;
        for (int i = 0; i < n; i++) {
            int64_t sent = heard[2 * i].item<int64_t>();
            TORCH_CHECK(sent == want[i], "c10d_coord: ", what, ": rank ", i, " sent ", sent,
                        " elements to rank ", getRank(), ", which expected ", want[i]);
            got.push_back(recv.narrow(0, i * pad, want[i]));
        }
        return got;
    }

    void monitoredBarrier(const c10d::BarrierOptions &o, bool wait_all_ranks) override
    {
        /* torch's unset timeout (kUnsetTimeout, negative) is the group's;
         * 0 gives up at once, as gloo's does (C's 0 is the default) */
        long long t = o.timeout.count();
        int ms = t < 0 || t > INT32_MAX ? C10D_TIMEOUT_DEFAULT : t == 0 ? 1 : (int)t;
        c10d_status st = c10d_monitored_barrier(pg_, ms, wait_all_ranks);
        if (st == C10D_ETIMEDOUT && getRank() == 0) /* gloo's words first, then ours */
            std::rethrow_exception(backend_error(
                "c10d_coord: monitored_barrier: Rank 0 timed out in monitoredBarrier after " +
                (t < 0 ? std::string("the group's timeout") : std::to_string(t) + " ms") +
                " (ETIMEDOUT): " + c10d_errmsg()));
        check("monitored_barrier", st);
    }

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &ts, int dst, int tag) override
    {
        one_tensor(ts, "send");
        auto v = views(ts);
        c10d_coll_opts co = copts(kNoTimeout, first(ts));
        check("send", c10d_send(pg_, &v[0].t, dst, tag, &co, nullptr));
        return done(c10d::OpType::SEND, ts);
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &ts, int src, int tag) override
    {
        one_tensor(ts, "recv");
        return post_recv(ts[0], src, tag, false);
    }

    // torch's recv without src: the Work's sourceRank() is the sender's.
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &ts, int tag) override
    {
        one_tensor(ts, "recv");
        return post_recv(ts[0], -1, tag, true);
    }

    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &o) override
    {
        std::vector<View> none, none2;
        return submit("barrier", c10d::OpType::BARRIER, none, none2, {}, o.timeout,
                      [&](const c10d_coll_opts *co, c10d_work **w) {
                          return c10d_barrier(pg_, co, w);
                      });
    }

  private:
    // A receive, posted (see RecvWork).
    c10::intrusive_ptr<c10d::Work> post_recv(const at::Tensor &t, int src, int tag, bool any)
    {
        unfinished_->prune();
        auto rw = c10::make_intrusive<RecvWork>(t, src, unfinished_);
        c10d_coll_opts co = copts(kNoTimeout, &t);
        co.async_op = 1;
        c10d_work *w = nullptr;
        check(any ? "recv (any source)" : "recv",
              any ? c10d_recv_any(pg_, rw->tensor(), tag, rw->src_slot(), &co, &w)
                  : c10d_recv(pg_, rw->tensor(), src, tag, &co, &w));
        rw->start(w);
        return rw;
    }

    // Runs call (a C collective given its opts and a place for the work
    // handle) now, or queued with C10D_TORCH_ASYNC; wb are written back
    // and keep kept alive until it finished.
    template <typename F>
    c10::intrusive_ptr<c10d::Work> submit(const char *what, c10d::OpType op,
                                          std::vector<View> &wb, std::vector<View> &keep,
                                          std::vector<at::Tensor> out,
                                          std::chrono::milliseconds timeout, F call)
    {
        const at::Tensor *on = !wb.empty() ? &wb[0].user : !keep.empty() ? &keep[0].user : nullptr;
        c10d_coll_opts o = copts(timeout, on);
        if (!async_) {
            check(what, call(&o, nullptr));
            write_back(wb);
            return done(op, std::move(out));
        }
        o.async_op = 1;
        c10d_work *w = nullptr;
        check(what, call(&o, &w));
        auto p = std::unique_ptr<Pending>(new Pending());
        p->w = w;
        p->wb = std::move(wb);
        p->keep = std::move(keep);
        p->out = out;
        p->what = what;
        p->fut = c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()));
        auto fut = p->fut;
        finishers_->push(std::move(p));
        return c10::make_intrusive<AsyncWork>(op, fut, std::move(out));
    }

    c10d_pg *pg_ = nullptr;
    bool async_ = false;
    std::string group_name_, group_desc_;
    std::unique_ptr<Finishers> finishers_;
    std::shared_ptr<Unfinished> unfinished_ = std::make_shared<Unfinished>();
};

c10::intrusive_ptr<StoreCoord> StoreCoord::run(c10::intrusive_ptr<ProcessGroupCoord> world,
                                               std::chrono::milliseconds timeout)
{
    c10d_store *s = nullptr;
    ::check("store", c10d_run_store(&s, world->pg()));
    c10::intrusive_ptr<StoreCoord> st;
    try {
        st = c10::make_intrusive<StoreCoord>(s, timeout);
    } catch (...) {
        c10d_store_close(s);
        throw;
    }
    st->job_ = world->job();
    st->world_ = std::move(world);
    return st;
}

StoreCoord::~StoreCoord()
{
    c10d_store_close(s_);
}

c10::intrusive_ptr<ProcessGroupCoord> StoreCoord::take_world(int rank, int size)
{
    if (!world_ || world_->getRank() != rank || world_->getSize() != size)
        return {};
    return std::move(world_);
}

std::string StoreCoord::job() const
{
    return job_;
}

// The StoreCoord under torch's PrefixStores (torch wraps the rendezvous's
// store in one per group), or null when the store is not ours (file://,
// tcp:// rendezvous).
StoreCoord *run_store_under(const c10::intrusive_ptr<c10d::Store> &store)
{
    c10d::Store *s = store.get();
    while (auto *p = dynamic_cast<c10d::PrefixStore *>(s))
        s = p->getUnderlyingStore().get();
    return dynamic_cast<StoreCoord *>(s);
}

// For the backend's creator: the world group the rendezvous formed for
// this run, if `store` is a run's (once; None otherwise).
py::object formed_world(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size)
{
    StoreCoord *s = run_store_under(store);
    auto w = s ? s->take_world(rank, size) : c10::intrusive_ptr<ProcessGroupCoord>();
    return w ? py::cast(w) : py::none();
}

// The job of the run whose store `store` is ("" when it is not a run's).
std::string run_job(const c10::intrusive_ptr<c10d::Store> &store)
{
    StoreCoord *s = run_store_under(store);
    return s ? s->job() : std::string();
}

std::string default_job()
{
    char job[C10D_MAX_JOB_BYTES + 2];
    check("default_job", c10d_default_job(job, sizeof job));
    return job;
}

// What c10d-ctl shows (c10d/jobs.h), as Python lists of dicts, for scripts.
const char *opt(const std::string &s)
{
    return s.empty() ? nullptr : s.c_str();
}

py::list jobs_of(StoreCoord &st, const std::string &job)
{
    c10d_job_info *jobs = nullptr;
    size_t n = 0;
    c10d_status rc;
    {
        py::gil_scoped_release nogil;
        rc = c10d_store_jobs(st.raw_store(), opt(job), &jobs, &n);
    }
    check("jobs", rc);
    py::list out;
    for (size_t i = 0; i < n; i++) {
        const c10d_job_info &j = jobs[i];
        py::list members, groups;
        for (size_t k = 0; k < j.n_members; k++) {
            const c10d_member_info &m = j.members[k];
            py::dict d;
            d["rank"] = m.rank;
            d["state"] = c10d_member_state_name(m.state);
            d["host"] = m.host;
            d["pid"] = m.pid;
            d["reason"] = m.reason;
            d["activity"] = m.activity;
            members.append(d);
        }
        for (size_t k = 0; k < j.n_groups; k++) {
            const c10d_group_info &g = j.groups[k];
            py::dict d;
            d["name"] = g.name;
            d["size"] = g.size;
            d["ranks"] = std::vector<int>(g.ranks, g.ranks + g.size);
            d["formed"] = g.formed != 0;
            groups.append(d);
        }
        py::dict d;
        d["job"] = j.job;
        d["generation"] = j.generation;
        d["world_size"] = j.world_size;
        d["formed"] = j.formed != 0;
        d["members"] = members;
        d["groups"] = groups;
        out.append(d);
    }
    c10d_free(jobs);
    return out;
}

py::list health_of(StoreCoord &st, const std::string &job, const std::string &group)
{
    c10d_group_health *gs = nullptr;
    size_t n = 0;
    c10d_status rc;
    {
        py::gil_scoped_release nogil;
        rc = c10d_store_health(st.raw_store(), opt(job), opt(group), &gs, &n);
    }
    check("health", rc);
    py::list out;
    for (size_t i = 0; i < n; i++) {
        const c10d_group_health &g = gs[i];
        py::list ranks;
        for (size_t k = 0; k < g.n_ranks; k++) {
            py::dict r;
            r["rank"] = g.ranks[k].rank;
            r["global_rank"] = g.ranks[k].global_rank;
            r["entered"] = g.ranks[k].entered;
            r["completed"] = g.ranks[k].completed;
            r["last"] = g.ranks[k].last;
            ranks.append(r);
        }
        py::dict d;
        d["job"] = g.job;
        d["generation"] = g.generation;
        d["group"] = g.group;
        d["size"] = g.size;
        d["status"] = c10d_status_name(g.status);
        d["report"] = g.report;
        d["ranks"] = ranks;
        out.append(d);
    }
    c10d_free(gs);
    return out;
}

py::list trace_of(StoreCoord &st, const std::string &job, const std::string &group, int rank,
                  unsigned limit)
{
    c10d_trace_row *rows = nullptr;
    size_t n = 0;
    c10d_status rc;
    {
        py::gil_scoped_release nogil;
        rc = c10d_store_trace(st.raw_store(), opt(job), opt(group), rank, limit, &rows, &n);
    }
    check("trace", rc);
    py::list out;
    for (size_t i = 0; i < n; i++) {
        py::dict d;
        d["first_seq"] = rows[i].first_seq;
        d["last_seq"] = rows[i].last_seq;
        d["what"] = rows[i].what;
        d["state"] = rows[i].state;
        out.append(d);
    }
    c10d_free(rows);
    return out;
}

void join_begin(const c10::intrusive_ptr<c10d::ProcessGroup> &pg, bool throw_early,
                bool divide_initial)
{
    auto *p = dynamic_cast<ProcessGroupCoord *>(pg.get());
    TORCH_CHECK(p, "c10d_coord.join: the process group is not a 'coord' one");
    c10d_join_opts o = C10D_JOIN_OPTS_INIT;
    o.throw_on_early_termination = throw_early;
    o.divide_by_initial_world_size = divide_initial;
    c10d_status st;
    {
        pybind11::gil_scoped_release nogil;
        st = c10d_join_begin(p->pg(), &o);
    }
    check("join_begin", st);
}

int join_end(const c10::intrusive_ptr<c10d::ProcessGroup> &pg)
{
    auto *p = dynamic_cast<ProcessGroupCoord *>(pg.get());
    TORCH_CHECK(p, "c10d_coord.join: the process group is not a 'coord' one");
    int last = -1;
    c10d_status st;
    {
        pybind11::gil_scoped_release nogil;
        st = c10d_join_end(p->pg(), &last);
    }
    check("join_end", st);
    return last;
}

int active_ranks(const c10::intrusive_ptr<c10d::ProcessGroup> &pg)
{
    auto *p = dynamic_cast<ProcessGroupCoord *>(pg.get());
    TORCH_CHECK(p, "c10d_coord: the process group is not a 'coord' one");
    return c10d_active_ranks(p->pg());
}

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    m.doc() = "c10d-coord's torch.distributed backend (docs/pytorch.md)";
#ifdef C10D_TORCH_CUDA
    m.attr("has_cuda") = true;
#else
    m.attr("has_cuda") = false;
#endif
    py::class_<ProcessGroupCoord, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupCoord>>(
        m, "ProcessGroupCoord")
        .def(py::init<int, int, const std::string &, const std::string &, int>(),
             py::arg("rank"), py::arg("size"), py::arg("url") = "", py::arg("job") = "",
             py::arg("timeout_ms") = 0)
        .def_property_readonly("job", &ProcessGroupCoord::job,
                               "The job this group is part of on the coordinator");
    py::class_<StoreCoord, c10d::Store, c10::intrusive_ptr<StoreCoord>>(m, "StoreCoord")
        .def(py::init([](const std::string &url, int timeout_ms) {
                 return c10::make_intrusive<StoreCoord>(url,
                                                        std::chrono::milliseconds(timeout_ms));
             }),
             py::arg("url"), py::arg("timeout_ms") = 300000)
        .def_static("run", [](c10::intrusive_ptr<ProcessGroupCoord> world, int timeout_ms) {
                        return StoreCoord::run(std::move(world),
                                               std::chrono::milliseconds(timeout_ms));
                    },
                    py::arg("world"), py::arg("timeout_ms") = 300000,
                    "The store of world's run (its keys only; removed when the run is over)")
        .def("jobs", &jobs_of, py::arg("job") = "",
             "Jobs on the coordinator: members (state, host, pid, reason, activity) and groups")
        .def("health", &health_of, py::arg("job") = "", py::arg("group") = "",
             "Verification state per group: status, the finding's report, each rank's progress")
        .def("trace", &trace_of, py::arg("job"), py::arg("group"), py::arg("rank"),
             py::arg("limit") = 50, "A rank's recent collectives, as runs of the same call");
    m.def("formed_world", &formed_world, py::arg("store"), py::arg("rank"), py::arg("size"));
    m.def("run_job", &run_job, py::arg("store"));
    m.def("default_job", &default_job,
          "The job name the library uses when none is given (C10D_JOB, torchrun's run id, ...)");
    m.def("join_begin", &join_begin, py::arg("pg"), py::arg("throw_on_early_termination"),
          py::arg("divide_by_initial_world_size"));
    m.def("join_end", &join_end, py::arg("pg"));
    m.def("active_ranks", &active_ranks, py::arg("pg"));
}
