// torch's own backends under the coordinator's checks (checked.hpp).
#include "checked.hpp"

#ifdef C10D_TORCH_BACKEND

#include "errors.hpp"
#include "releases.hpp"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <thread>

namespace c10d_coord {
namespace {

// --- a call as the coordinator compares it ---

// dtypes the fingerprint names; any other is compared by its bytes.
bool fingerprint_dtype(const at::Tensor &t, c10d_dtype *out)
{
    switch (t.scalar_type()) {
    case at::kFloat: *out = C10D_FLOAT32; return true;
    case at::kDouble: *out = C10D_FLOAT64; return true;
    case at::kHalf: *out = C10D_FLOAT16; return true;
    case at::kBFloat16: *out = C10D_BFLOAT16; return true;
    case at::kChar: *out = C10D_INT8; return true;
    case at::kByte: *out = C10D_UINT8; return true;
    case at::kInt: *out = C10D_INT32; return true;
    case at::kLong: *out = C10D_INT64; return true;
    case at::kBool: *out = C10D_UINT8; return true;
    default: *out = C10D_UINT8; return false;
    }
}

at::ScalarType scalar_of(c10d_dtype d)
{
    switch (d) {
    case C10D_FLOAT32: return at::kFloat;
    case C10D_FLOAT64: return at::kDouble;
    case C10D_FLOAT16: return at::kHalf;
    case C10D_BFLOAT16: return at::kBFloat16;
    case C10D_INT8: return at::kChar;
    case C10D_UINT8: return at::kByte;
    case C10D_INT32: return at::kInt;
    case C10D_INT64: return at::kLong;
    }
    return at::kByte;
}

// torch's reduce ops as the fingerprint names them; the bitwise ones and
// PREMUL_SUM are compared as SUM (docs/pytorch.md).
c10d_reduce_op fingerprint_op(const c10d::ReduceOp &op)
{
    switch (op) {
    case c10d::ReduceOp::PRODUCT: return C10D_PROD;
    case c10d::ReduceOp::MIN: return C10D_MIN;
    case c10d::ReduceOp::MAX: return C10D_MAX;
    case c10d::ReduceOp::AVG: return C10D_AVG;
    default: return C10D_SUM;
    }
}

c10d::ReduceOp torch_op(c10d_reduce_op op)
{
    switch (op) {
    case C10D_PROD: return c10d::ReduceOp::PRODUCT;
    case C10D_MIN: return c10d::ReduceOp::MIN;
    case C10D_MAX: return c10d::ReduceOp::MAX;
    case C10D_AVG: return c10d::ReduceOp::AVG;
    default: return c10d::ReduceOp::SUM;
    }
}

int plane_device(const at::Tensor &t)
{
    return t.is_cuda() ? t.device().index() : C10D_CPU;
}

// kind of n elements like t (one rank's block), rooted at root, reducing with op.
c10d_check_opts describe(c10d_coll_kind kind, const at::Tensor *t, int64_t n, int root,
                         const c10d::ReduceOp *op, std::chrono::milliseconds timeout)
{
    c10d_check_opts co = C10D_CHECK_OPTS_INIT;
    co.kind = kind;
    co.root = root;
    if (t) {
        if (!fingerprint_dtype(*t, &co.dtype))
            n *= (int64_t)t->element_size();
        co.count = n;
        co.device = plane_device(*t);
    }
    if (op)
        co.op = fingerprint_op(*op);
    if (timeout.count() > 0)
        co.timeout_ms = (int)std::min<int64_t>(timeout.count(), INT32_MAX);
    return co;
}

int64_t numel_of(const std::vector<at::Tensor> &ts)
{
    int64_t n = 0;
    for (auto &t : ts)
        n += t.numel();
    return n;
}

// gloo's groups cannot be aborted: one whose thread waits in a collective
// that never completes is kept, never destroyed (its destructor would join
// that thread), until the process exits.
void abandon(const c10::intrusive_ptr<c10d::Backend> &b)
{
    static std::mutex mu;
    static auto *kept = new std::vector<c10::intrusive_ptr<c10d::Backend>>();
    std::lock_guard<std::mutex> g(mu);
    kept->push_back(b);
}

void tell(std::shared_ptr<Alarm> a, c10d_status st, const char *report);

// c10d_data_plane.on_alert, on the C library's watcher thread: the calls
// in flight fail with the report, on a thread of their own (their
// futures' callbacks may be Python's, and must not run on the watcher).
void on_alert(void *arg, c10d_pg *, c10d_status st, const char *report) noexcept
{
    try {
        tell(static_cast<Alarm *>(arg)->shared_from_this(), st, report);
    } catch (...) { /* the calls fail anyway: their checks see the finding */
    }
}

void tell(std::shared_ptr<Alarm> a, c10d_status st, const char *report)
{
    {
        std::lock_guard<std::mutex> g(a->mu);
        a->st = st;
        a->report = report;
    }
    std::thread([a] {
        std::vector<c10::intrusive_ptr<CheckedWork>> ws;
        std::vector<c10::intrusive_ptr<c10d::Backend>> inner;
        {
            std::lock_guard<std::mutex> g(a->mu);
            for (auto &w : a->outstanding)
                if (auto s = w.lock())
                    ws.push_back(std::move(s));
            for (auto &b : a->inner)
                if (auto s = b.lock())
                    inner.push_back(std::move(s));
        }
        auto e = a->error();
        for (auto &w : ws)
            w->alarmed(e, a->status());
        for (auto &b : inner) {
#ifdef C10D_TORCH_BACKEND_ABORT
            if (b->getBackendName() == "nccl") {
                try {
                    b->abort();
                } catch (const std::exception &) {
                }
                continue;
            }
#endif
            abandon(b); /* gloo; and nccl too where torch's Backend has no abort (< 2.7) */
        }
    }).detach();
}

c10d_status on_shadow(void *arg, c10d_pg *, const c10d_check_opts *call)
{
    auto *a = static_cast<Alarm *>(arg);
    ProcessGroupChecked *g;
    {
        std::lock_guard<std::mutex> l(a->mu);
        g = a->owner;
    }
    return g ? g->shadow(call) : C10D_EABORTED;
}

} // namespace

c10d_status Alarm::status()
{
    std::lock_guard<std::mutex> g(mu);
    return st;
}

std::exception_ptr Alarm::error()
{
    std::lock_guard<std::mutex> g(mu);
    return backend_error(c10d_coord::report("checked call", st, report.c_str()));
}

// --- the work ---

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

// --- the group ---

ProcessGroupChecked::ProcessGroupChecked(c10::intrusive_ptr<ProcessGroupCoord> coord,
                                         c10::intrusive_ptr<c10d::Backend> cpu,
                                         c10::intrusive_ptr<c10d::Backend> cuda)
    : c10d::Backend(coord->getRank(), coord->getSize()), coord_(std::move(coord)),
      cpu_(std::move(cpu)), cuda_(std::move(cuda)), alarm_(std::make_shared<Alarm>())
{
    alarm_->owner = this;
    if (cpu_)
        alarm_->inner.emplace_back(cpu_);
    if (cuda_)
        alarm_->inner.emplace_back(cuda_);
    c10d_data_plane dp = C10D_DATA_PLANE_INIT;
    dp.devices = (cpu_ ? C10D_DATA_PLANE_CPU : 0u) | (cuda_ ? C10D_DATA_PLANE_CUDA : 0u);
    dp.on_alert = on_alert;
    dp.shadow = on_shadow;
    dp.arg = alarm_.get();
    if (dp.devices) {
        check("data plane", c10d_data_plane_set(coord_->pg(), &dp));
        coord_->hold(alarm_); /* the library calls back until its group is destroyed */
    }
}

ProcessGroupChecked::~ProcessGroupChecked()
{
    {
        std::lock_guard<std::mutex> g(alarm_->mu);
        alarm_->owner = nullptr;
    }
    /* gloo's destructor joins its threads, which may still be freeing the
     * last call's tensors, and that needs the GIL: never hold it here. */
    without_gil([this] {
        cpu_.reset();
        cuda_.reset();
    });
}

std::string ProcessGroupChecked::data_plane() const
{
    auto name = [&](const c10::intrusive_ptr<c10d::Backend> &b) {
        return b ? b->getBackendName() : std::string("coord");
    };
    return "cpu:" + name(cpu_) + ",cuda:" + name(cuda_);
}

c10d::Backend *ProcessGroupChecked::inner_for(int dev) const
{
    return dev == C10D_CPU ? cpu_.get() : cuda_.get();
}

c10d::Backend *ProcessGroupChecked::inner_for(const at::Tensor &t) const
{
    return inner_for(plane_device(t));
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupChecked::checked(const char *what, c10d::OpType op, const c10d_check_opts &co,
                             const std::function<c10::intrusive_ptr<c10d::Work>()> &issue,
                             std::function<void()> after)
{
    seq_++;
    coord_->in_order(); /* our own calls on the other device come first */
    c10d_checked *h = nullptr;
    check(what, c10d_check_begin(coord_->pg(), &co, &h));
    c10::intrusive_ptr<c10d::Work> inner;
    try {
        inner = issue();
    } catch (const std::exception &e) {
        /* refused before it started (gloo's own argument checks): the
         * group stays usable, as it does on gloo */
        (void)c10d_check_end(h, C10D_EINVAL, e.what());
        throw;
    }
    if (!inner) { /* queued under startCoalescing (nccl): endCoalescing's work is the one */
        (void)c10d_check_end(h, C10D_OK, nullptr);
        return inner;
    }
    auto w = c10::make_intrusive<CheckedWork>(std::move(inner), h, alarm_, coord_, op, what);
    if (after)
        w->then_run(std::move(after));
    w->start(w);
    return w;
}

// Each call: ours where the device's data plane is ours, else checked,
// then the inner backend's.
#define ROUTE(dev, ours)                                                                           \
    c10d::Backend *be = inner_for(dev);                                                            \
    if (!be)                                                                                       \
        return ours;

c10::intrusive_ptr<c10d::Work> ProcessGroupChecked::broadcast(std::vector<at::Tensor> &ts,
                                                              const c10d::BroadcastOptions &o)
{
    TORCH_CHECK(ts.size() == 1, "c10d_coord: broadcast takes one tensor");
    ROUTE(plane_device(ts[0]), coord_->broadcast(ts, o));
    auto co = describe(C10D_COLL_BROADCAST, &ts[0], ts[0].numel(), (int)o.rootRank, nullptr,
                       o.timeout);
    return checked("broadcast", c10d::OpType::BROADCAST, co, [&] { return be->broadcast(ts, o); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChecked::allreduce(std::vector<at::Tensor> &ts,
                                                              const c10d::AllreduceOptions &o)
{
    TORCH_CHECK(ts.size() == 1, "c10d_coord: allreduce takes one tensor");
    ROUTE(plane_device(ts[0]), coord_->allreduce(ts, o));
    auto co = describe(C10D_COLL_ALL_REDUCE, &ts[0], ts[0].numel(), 0, &o.reduceOp, o.timeout);
    return checked("allreduce", c10d::OpType::ALLREDUCE, co, [&] { return be->allreduce(ts, o); });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupChecked::allreduce_coalesced(std::vector<at::Tensor> &ts,
                                         const c10d::AllreduceCoalescedOptions &o)
{
    TORCH_CHECK(!ts.empty(), "c10d_coord: allreduce_coalesced of no tensors");
    ROUTE(plane_device(ts[0]), coord_->allreduce_coalesced(ts, o));
    auto co = describe(C10D_COLL_ALL_REDUCE, &ts[0], numel_of(ts), 0, &o.reduceOp, o.timeout);
    return checked("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, co,
                   [&] { return be->allreduce_coalesced(ts, o); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChecked::reduce(std::vector<at::Tensor> &ts,
                                                           const c10d::ReduceOptions &o)
{
    TORCH_CHECK(ts.size() == 1, "c10d_coord: reduce takes one tensor");
    ROUTE(plane_device(ts[0]), coord_->reduce(ts, o));
    auto co = describe(C10D_COLL_REDUCE, &ts[0], ts[0].numel(), (int)o.rootRank, &o.reduceOp,
                       o.timeout);
    return checked("reduce", c10d::OpType::REDUCE, co, [&] { return be->reduce(ts, o); });
}

// A list of size() views of one flat buffer, in rank order: the flat
// tensor they are views of (the seed PR's point: no copy into a list).
// Only for nccl, whose flat collectives work in place: gloo's gather
// through a buffer of their own and copy out (and its
// _reduce_scatter_base reduces the whole input), so on gloo the flat
// path saved nothing and cost more memory (docs/benchmarks.md).
static bool flat_of(const c10d::Backend *be, const std::vector<at::Tensor> &list,
                    const at::Tensor &block, at::Tensor *flat)
{
    if (be->getBackendName() != "nccl" || list.empty() || !list[0].is_contiguous() ||
        !block.is_contiguous())
        return false;
    int64_t n = block.numel();
    auto base = list[0];
    char *p0 = static_cast<char *>(base.data_ptr());
    size_t bytes = (size_t)n * base.element_size();
    for (size_t i = 0; i < list.size(); i++) {
        const auto &t = list[i];
        if (t.numel() != n || t.scalar_type() != block.scalar_type() ||
            t.device() != block.device() || !t.is_contiguous() ||
            static_cast<char *>(t.data_ptr()) != p0 + i * bytes ||
            t.storage().data() != base.storage().data())
            return false;
    }
    /* a view of the list's own storage, which it keeps alive (the caching
     * allocator's: nccl records its stream on it) */
    *flat = at::empty({0}, base.options())
                .set_(base.storage(), base.storage_offset(), {(int64_t)list.size() * n}, {1});
    return true;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupChecked::allgather(std::vector<std::vector<at::Tensor>> &outs,
                               std::vector<at::Tensor> &ins, const c10d::AllgatherOptions &o)
{
    TORCH_CHECK(ins.size() == 1 && outs.size() == 1,
                "c10d_coord: allgather takes one input tensor and one list");
    ROUTE(plane_device(ins[0]), coord_->allgather(outs, ins, o));
    auto co = describe(C10D_COLL_ALL_GATHER, &ins[0], ins[0].numel(), 0, nullptr, o.timeout);
    at::Tensor flat;
    if (flat_of(be, outs[0], ins[0], &flat)) {
        // keep the list's tensors alive with the call: the flat view borrows their storage
        auto keep = outs[0];
        return checked("allgather", c10d::OpType::ALLGATHER, co, [&, keep] {
            at::Tensor in = ins[0].reshape({-1});
            return be->_allgather_base(flat, in, o);
        });
    }
    return checked("allgather", c10d::OpType::ALLGATHER, co,
                   [&] { return be->allgather(outs, ins, o); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChecked::_allgather_base(at::Tensor &out,
                                                                    at::Tensor &in,
                                                                    const c10d::AllgatherOptions &o)
{
    ROUTE(plane_device(in), coord_->_allgather_base(out, in, o));
    auto co = describe(C10D_COLL_ALL_GATHER, &in, in.numel(), 0, nullptr, o.timeout);
    return checked("_allgather_base", c10d::OpType::_ALLGATHER_BASE, co,
                   [&] { return be->_allgather_base(out, in, o); });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupChecked::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outs,
                                         std::vector<at::Tensor> &ins,
                                         const c10d::AllgatherOptions &o)
{
    TORCH_CHECK(!ins.empty(), "c10d_coord: allgather_coalesced of no tensors");
    ROUTE(plane_device(ins[0]), coord_->allgather_coalesced(outs, ins, o));
    auto co = describe(C10D_COLL_ALL_GATHER, &ins[0], numel_of(ins), 0, nullptr, o.timeout);
    return checked("allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED, co,
                   [&] { return be->allgather_coalesced(outs, ins, o); });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupChecked::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outs,
                                                     std::vector<at::Tensor> &ins,
                                                     const c10d::AllgatherOptions &o)
{
    TORCH_CHECK(!ins.empty(), "c10d_coord: allgather_into_tensor_coalesced of no tensors");
    ROUTE(plane_device(ins[0]), coord_->allgather_into_tensor_coalesced(outs, ins, o));
    auto co = describe(C10D_COLL_ALL_GATHER, &ins[0], numel_of(ins), 0, nullptr, o.timeout);
    return checked("allgather_into_tensor_coalesced", c10d::OpType::COALESCED, co,
                   [&] { return be->allgather_into_tensor_coalesced(outs, ins, o); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChecked::gather(std::vector<std::vector<at::Tensor>> &outs,
                                                           std::vector<at::Tensor> &ins,
                                                           const c10d::GatherOptions &o)
{
    TORCH_CHECK(ins.size() == 1, "c10d_coord: gather takes one input tensor");
    ROUTE(plane_device(ins[0]), coord_->gather(outs, ins, o));
    auto co = describe(C10D_COLL_GATHER, &ins[0], ins[0].numel(), (int)o.rootRank, nullptr,
                       o.timeout);
    return checked("gather", c10d::OpType::GATHER, co, [&] { return be->gather(outs, ins, o); });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupChecked::scatter(std::vector<at::Tensor> &outs,
                             std::vector<std::vector<at::Tensor>> &ins,
                             const c10d::ScatterOptions &o)
{
    TORCH_CHECK(outs.size() == 1, "c10d_coord: scatter takes one output tensor");
    ROUTE(plane_device(outs[0]), coord_->scatter(outs, ins, o));
    auto co = describe(C10D_COLL_SCATTER, &outs[0], outs[0].numel(), (int)o.rootRank, nullptr,
                       o.timeout);
    return checked("scatter", c10d::OpType::SCATTER, co, [&] { return be->scatter(outs, ins, o); });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupChecked::reduce_scatter(std::vector<at::Tensor> &outs,
                                    std::vector<std::vector<at::Tensor>> &ins,
                                    const c10d::ReduceScatterOptions &o)
{
    TORCH_CHECK(outs.size() == 1 && ins.size() == 1,
                "c10d_coord: reduce_scatter takes one output tensor and one list");
    ROUTE(plane_device(outs[0]), coord_->reduce_scatter(outs, ins, o));
    auto co = describe(C10D_COLL_REDUCE_SCATTER, &outs[0], outs[0].numel(), 0, &o.reduceOp,
                       o.timeout);
    at::Tensor flat;
    if (flat_of(be, ins[0], outs[0], &flat)) {
        auto keep = ins[0];
        return checked("reduce_scatter", c10d::OpType::REDUCE_SCATTER, co, [&, keep] {
            at::Tensor out = outs[0];
            return be->_reduce_scatter_base(out, flat, o);
        });
    }
    return checked("reduce_scatter", c10d::OpType::REDUCE_SCATTER, co,
                   [&] { return be->reduce_scatter(outs, ins, o); });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupChecked::_reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                                          const c10d::ReduceScatterOptions &o)
{
    ROUTE(plane_device(out), coord_->_reduce_scatter_base(out, in, o));
    auto co = describe(C10D_COLL_REDUCE_SCATTER, &out, out.numel(), 0, &o.reduceOp, o.timeout);
    return checked("_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE, co,
                   [&] { return be->_reduce_scatter_base(out, in, o); });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupChecked::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outs,
                                                     std::vector<at::Tensor> &ins,
                                                     const c10d::ReduceScatterOptions &o)
{
    TORCH_CHECK(!outs.empty(), "c10d_coord: reduce_scatter_tensor_coalesced of no tensors");
    ROUTE(plane_device(outs[0]), coord_->reduce_scatter_tensor_coalesced(outs, ins, o));
    auto co = describe(C10D_COLL_REDUCE_SCATTER, &outs[0], numel_of(outs), 0, &o.reduceOp,
                       o.timeout);
    return checked("reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED, co,
                   [&] { return be->reduce_scatter_tensor_coalesced(outs, ins, o); });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupChecked::alltoall_base(at::Tensor &out, at::Tensor &in,
                                   std::vector<int64_t> &out_splits,
                                   std::vector<int64_t> &in_splits, const c10d::AllToAllOptions &o)
{
    ROUTE(plane_device(in), coord_->alltoall_base(out, in, out_splits, in_splits, o));
    // Uneven splits differ between ranks by design: the call's kind, dtype
    // and device are compared, its size only when the splits are even.
    int64_t n = out_splits.empty() && in_splits.empty() ? in.numel() : 0;
    auto co = describe(C10D_COLL_ALL_TO_ALL, &in, n, 0, nullptr, o.timeout);
    return checked("alltoall_base", c10d::OpType::ALLTOALL_BASE, co,
                   [&] { return be->alltoall_base(out, in, out_splits, in_splits, o); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChecked::alltoall(std::vector<at::Tensor> &outs,
                                                             std::vector<at::Tensor> &ins,
                                                             const c10d::AllToAllOptions &o)
{
    TORCH_CHECK(!ins.empty(), "c10d_coord: alltoall of no tensors");
    ROUTE(plane_device(ins[0]), coord_->alltoall(outs, ins, o));
    auto co = describe(C10D_COLL_ALL_TO_ALL, &ins[0], 0, 0, nullptr, o.timeout);
#ifndef C10D_TORCH_GLOO_ALLTOALL
    if (be->getBackendName() == "gloo") {
        /* this torch's gloo has no list form: one flat all_to_all of the
         * concatenated blocks, split by their sizes, copied out after */
        std::vector<at::Tensor> flat_ins;
        std::vector<int64_t> in_splits, out_splits;
        for (auto &t : ins) {
            flat_ins.push_back(t.reshape({-1}));
            in_splits.push_back(t.numel());
        }
        int64_t total = 0;
        for (auto &t : outs) {
            out_splits.push_back(t.numel());
            total += t.numel();
        }
        at::Tensor in = at::cat(flat_ins);
        at::Tensor out = at::empty({total}, ins[0].options());
        auto keep_outs = outs;
        return checked(
            "alltoall", c10d::OpType::ALLTOALL, co,
            [&] { return be->alltoall_base(out, in, out_splits, in_splits, o); },
            [out, keep_outs, out_splits] {
                int64_t at = 0;
                for (size_t i = 0; i < keep_outs.size(); i++) {
                    keep_outs[i].copy_(out.narrow(0, at, out_splits[i]).view_as(keep_outs[i]));
                    at += out_splits[i];
                }
            });
    }
#endif
    return checked("alltoall", c10d::OpType::ALLTOALL, co,
                   [&] { return be->alltoall(outs, ins, o); });
}

void ProcessGroupChecked::monitoredBarrier(const c10d::BarrierOptions &o, bool wait_all_ranks)
{
    if (!cpu_)
        return coord_->monitoredBarrier(o, wait_all_ranks);
    auto co = describe(C10D_COLL_MONITORED_BARRIER, nullptr, 0, 0, nullptr, o.timeout);
    seq_++;
    coord_->in_order();
    c10d_checked *h = nullptr;
    check("monitored_barrier", c10d_check_begin(coord_->pg(), &co, &h));
    try {
        cpu_->monitoredBarrier(o, wait_all_ranks);
    } catch (const std::exception &e) {
        /* gloo's report names the missing ranks; the group stays usable, as on gloo */
        (void)c10d_check_end(h, C10D_EINVAL, e.what());
        throw;
    }
    (void)c10d_check_end(h, C10D_OK, nullptr);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChecked::send(std::vector<at::Tensor> &ts, int dst,
                                                         int tag)
{
    TORCH_CHECK(ts.size() == 1, "c10d_coord: send takes one tensor");
    ROUTE(plane_device(ts[0]), coord_->send(ts, dst, tag));
    auto co = describe(C10D_COLL_SEND, &ts[0], ts[0].numel(), dst, nullptr,
                       std::chrono::milliseconds(0));
    co.tag = tag;
    return checked("send", c10d::OpType::SEND, co, [&] { return be->send(ts, dst, tag); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChecked::recv(std::vector<at::Tensor> &ts, int src,
                                                         int tag)
{
    TORCH_CHECK(ts.size() == 1, "c10d_coord: recv takes one tensor");
    ROUTE(plane_device(ts[0]), coord_->recv(ts, src, tag));
    auto co = describe(C10D_COLL_RECV, &ts[0], ts[0].numel(), src, nullptr,
                       std::chrono::milliseconds(0));
    co.tag = tag;
    return checked("recv", c10d::OpType::RECV, co, [&] { return be->recv(ts, src, tag); });
}

// From whichever member sends first: the peer is known only once it has
// arrived, so the inner backend's receive runs unchecked (docs/pytorch.md).
c10::intrusive_ptr<c10d::Work> ProcessGroupChecked::recvAnysource(std::vector<at::Tensor> &ts,
                                                                  int tag)
{
    TORCH_CHECK(ts.size() == 1, "c10d_coord: recv takes one tensor");
    ROUTE(plane_device(ts[0]), coord_->recvAnysource(ts, tag));
    return be->recvAnysource(ts, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChecked::barrier(const c10d::BarrierOptions &o)
{
    c10d::Backend *be = cpu_ ? cpu_.get() : cuda_.get();
    if (!be)
        return coord_->barrier(o);
    auto co = describe(C10D_COLL_BARRIER, nullptr, 0, 0, nullptr, o.timeout);
    co.device = be == cpu_.get() ? C10D_CPU : 0;
    return checked("barrier", c10d::OpType::BARRIER, co, [&] { return be->barrier(o); });
}

#ifdef C10D_TORCH_BACKEND_SUPPORTS_COALESCING
bool ProcessGroupChecked::supportsCoalescing() const
{
    return (cpu_ && cpu_->supportsCoalescing()) || (cuda_ && cuda_->supportsCoalescing());
}
#endif

void ProcessGroupChecked::startCoalescing()
{
    if (cuda_)
        cuda_->startCoalescing();
    else if (cpu_)
        cpu_->startCoalescing();
    else
        coord_->startCoalescing();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChecked::endCoalescing()
{
    if (cuda_)
        return cuda_->endCoalescing();
    if (cpu_)
        return cpu_->endCoalescing();
    return coord_->endCoalescing();
}

#ifdef C10D_TORCH_BACKEND_SET_TIMEOUT
void ProcessGroupChecked::setTimeout(std::chrono::milliseconds timeout)
{
    if (cpu_)
        cpu_->setTimeout(timeout);
    if (cuda_)
        cuda_->setTimeout(timeout);
}
#endif

#ifdef C10D_TORCH_BACKEND_ABORT
void ProcessGroupChecked::abort()
{
    for (auto *b : {cpu_.get(), cuda_.get()})
        if (b)
            b->abort();
}
#endif

#ifdef C10D_TORCH_BACKEND_SHUTDOWN
void ProcessGroupChecked::shutdown()
{
    {
        std::lock_guard<std::mutex> g(alarm_->mu);
        if (alarm_->st != C10D_OK)
            return; /* abandoned: its threads may be inside a call that never ends */
    }
    /* a finished call's last references, still on gloo's threads */
    without_gil([] { (void)await_releases(kReleaseBudget); });
    for (auto *b : {cpu_.get(), cuda_.get()})
        if (b)
            b->shutdown();
}
#endif

c10d_status ProcessGroupChecked::shadow(const c10d_check_opts *call)
{
    int dev = call->device;
    at::TensorOptions to = at::TensorOptions().dtype(scalar_of(call->dtype));
    if (dev != C10D_CPU)
        to = to.device(at::Device(at::kCUDA, dev >= 0 ? dev : 0));
    c10d::Backend *be = inner_for(dev == C10D_CPU ? C10D_CPU : 0);
    if (!be)
        return C10D_EINVAL;
    try {
        at::Tensor t;
        c10::intrusive_ptr<c10d::Work> w;
        int64_t n = call->count;
        switch (call->kind) {
        case C10D_COLL_ALL_REDUCE:
        case C10D_COLL_REDUCE: {
            t = at::empty({n}, to);
            c10d_reduce_op op = call->op;
            if (t.is_cuda()) { /* identities are filled on the host */
                auto h = at::empty({n}, to.device(at::kCPU));
                check("shadow", c10d_identity_fill(h.data_ptr(), n, call->dtype, op));
                t.copy_(h);
            } else {
                check("shadow", c10d_identity_fill(t.data_ptr(), n, call->dtype, op));
            }
            std::vector<at::Tensor> ts{t};
            if (call->kind == C10D_COLL_ALL_REDUCE) {
                c10d::AllreduceOptions o;
                o.reduceOp = torch_op(op);
                w = be->allreduce(ts, o);
            } else {
                c10d::ReduceOptions o;
                o.reduceOp = torch_op(op);
                o.rootRank = call->root;
                w = be->reduce(ts, o);
            }
            break;
        }
        case C10D_COLL_BROADCAST: {
            std::vector<at::Tensor> ts{at::empty({n}, to)};
            c10d::BroadcastOptions o;
            o.rootRank = call->root;
            w = be->broadcast(ts, o);
            break;
        }
        case C10D_COLL_REDUCE_SCATTER: {
            at::Tensor out = at::empty({n}, to);
            at::Tensor in = at::empty({n * getSize()}, to);
            auto h = at::empty({n * getSize()}, to.device(at::kCPU));
            check("shadow", c10d_identity_fill(h.data_ptr(), n * getSize(), call->dtype, call->op));
            in.copy_(h);
            c10d::ReduceScatterOptions o;
            o.reduceOp = torch_op(call->op);
            w = be->_reduce_scatter_base(out, in, o);
            break;
        }
        case C10D_COLL_BARRIER: {
            c10d::BarrierOptions o;
            w = be->barrier(o);
            break;
        }
        default: return C10D_EJOINED;
        }
        w->wait();
    } catch (const std::exception &) {
        return C10D_EBACKEND;
    }
    return C10D_OK;
}

ProcessGroupChecked *checked_of(const c10::intrusive_ptr<c10d::ProcessGroup> &pg)
{
    if (!pg || !pg->hasBackends())
        return nullptr;
    try {
        return dynamic_cast<ProcessGroupChecked *>(pg->getBackend(c10::DeviceType::CPU).get());
    } catch (const std::exception &) {
        return nullptr;
    }
}

} // namespace c10d_coord

#endif
