// torch's own backends under the coordinator's checks (checked.hpp): the
// alarm that fails the calls in flight, the group (its inner backends,
// where a call goes, the check around each call, coalescing, abort and
// shutdown) and a joined rank's shadows. The work is checked_work.cpp's,
// the collectives checked_collectives.cpp's, a call's description
// checked_describe.cpp's.
#include "checked_internal.hpp"

#ifdef C10D_TORCH_BACKEND

#include "errors.hpp"
#include "releases.hpp"

#include <ATen/ops/empty.h>

#include <thread>

namespace c10d_coord {
namespace {

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
