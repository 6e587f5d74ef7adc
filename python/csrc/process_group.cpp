// ProcessGroupCoord's life and the collectives the C library runs as torch
// asks for them (process_group.hpp): one call each, run now or queued.
#include "process_group.hpp"
#include "checked.hpp"

#include "errors.hpp"
#include "recv.hpp"
#include "tensors.hpp"
#include "work.hpp"

#include <pybind11/gil.h>

#include <cstdint>
#include <cstdlib>
#include <thread>

namespace c10d_coord {

ProcessGroupCoord::ProcessGroupCoord(int rank, int size, const std::string &url,
                                     const std::string &job, int timeout_ms)
    : TorchBase(rank, size), unfinished_(std::make_shared<Unfinished>())
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
    if (!(a && std::string(a) == "0"))
        lane_ = Lane::start();
}

ProcessGroupCoord::~ProcessGroupCoord()
{
    /* A then() callback can hold the last reference to its group (torch's
     * PowerSGD hook does): the group then goes on the thread that ran the
     * call, which may be the lane's own, which can neither join itself nor
     * give up the GIL it runs the callback under (taking it back fails
     * once the interpreter exits). Another thread runs what is queued and
     * leaves the group. */
    if (lane_ && lane_->runs_here()) {
        std::thread([lane = lane_, pg = pg_, un = unfinished_, held = held_]() {
            lane->close();
            if (pg)
                c10d_destroy(pg);
            un->prune();
        }).detach();
        return;
    }
    /* Every queued call finishes first. One may need the GIL (dropping
     * the last reference to a tensor made in Python, a Python then()
     * callback): never wait for it while holding it. */
    auto leave = [this] {
        if (lane_)
            lane_->close();
        if (pg_)
            c10d_destroy(pg_);
    };
    if (Py_IsInitialized() && PyGILState_Check()) {
        pybind11::gil_scoped_release nogil;
        leave();
    } else {
        leave();
    }
    unfinished_->prune(); /* every receive ended with the group */
}

void without_gil(const std::function<void()> &f)
{
    if (Py_IsInitialized() && PyGILState_Check()) {
        pybind11::gil_scoped_release nogil;
        f();
    } else {
        f();
    }
}

void ProcessGroupCoord::in_order()
{
    if (!lane_)
        return;
    if (Py_IsInitialized() && PyGILState_Check()) {
        pybind11::gil_scoped_release nogil;
        lane_->drain();
    } else {
        lane_->drain();
    }
}

ProcessGroupCoord *coord_of(const c10::intrusive_ptr<c10d::ProcessGroup> &pg, const char *what)
{
    ProcessGroupCoord *p = nullptr;
#ifdef C10D_TORCH_BACKEND
    if (pg && pg->hasBackends()) {
        try {
            auto *be = pg->getBackend(c10::DeviceType::CPU).get();
            p = dynamic_cast<ProcessGroupCoord *>(be);
            if (auto *c = dynamic_cast<ProcessGroupChecked *>(be))
                p = c->coord(); /* torch's backends under our checks */
        } catch (const std::exception &) { /* no CPU backend */
        }
    }
#else
    p = dynamic_cast<ProcessGroupCoord *>(pg.get());
#endif
    TORCH_CHECK(p, "c10d_coord: ", what, ": the process group is not a 'coord' one (its "
                "backend is ", pg ? pg->getBackendName() : std::string("none"), ")");
    return p;
}

std::string ProcessGroupCoord::job() const
{
    return c10d_pg_job(pg_);
}

// Queues call (a C collective, run sync with the opts it is given) on the
// lane, or runs it now with C10D_TORCH_ASYNC=0; wb are written back and
// keep kept alive until it finished.
c10::intrusive_ptr<c10d::Work>
ProcessGroupCoord::submit(const char *what, c10d::OpType op, std::vector<View> &wb,
                          std::vector<View> &keep, std::vector<at::Tensor> out,
                          std::chrono::milliseconds timeout, bool queue,
                          std::function<c10d_status(const c10d_coll_opts *)> call)
{
    const at::Tensor *on = !wb.empty() ? &wb[0].user : !keep.empty() ? &keep[0].user : nullptr;
    c10d_coll_opts o = copts(timeout, on);
    seq_++;
    if (!lane_ || !queue) {
        in_order();
        check(what, call(&o));
        write_back(wb);
        return done(op, std::move(out));
    }
    return lane_->queue(lane_, what, op, std::move(call), o, std::move(wb), std::move(keep),
                        std::move(out));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::broadcast(std::vector<at::Tensor> &ts,
                                                            const c10d::BroadcastOptions &o)
{
    one_tensor(ts, "broadcast");
    auto v = views(ts);
    std::vector<View> none;
    c10d_tensor *t = &v[0].t;
    int root = (int)o.rootRank;
    return submit("broadcast", c10d::OpType::BROADCAST, v, none, ts, o.timeout, queued(o),
                  [=, pg = pg_](const c10d_coll_opts *co) {
                      return c10d_broadcast(pg, t, root, co, nullptr);
                  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::allreduce(std::vector<at::Tensor> &ts,
                                                            const c10d::AllreduceOptions &o)
{
    one_tensor(ts, "allreduce");
    if (ts[0].is_sparse())
        return allreduce_sparse(ts[0], o);
    auto v = views(ts);
    std::vector<View> none;
    c10d_tensor *t = &v[0].t;
    c10d_reduce_op op = op_of(o.reduceOp, v[0].is_bool);
    return submit("allreduce", c10d::OpType::ALLREDUCE, v, none, ts, o.timeout, queued(o),
                  [=, pg = pg_](const c10d_coll_opts *co) {
                      return c10d_all_reduce(pg, t, op, co, nullptr);
                  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCoord::allreduce_coalesced(std::vector<at::Tensor> &ts,
                                       const c10d::AllreduceCoalescedOptions &o)
{
    auto v = views(ts);
    std::vector<View> none;
    std::vector<c10d_tensor *> t;
    std::vector<c10d_reduce_op> op;
    for (auto &x : v) {
        t.push_back(&x.t);
        op.push_back(op_of(o.reduceOp, x.is_bool));
    }
    return submit("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, v, none, ts, o.timeout, queued(o),
                  [=, pg = pg_](const c10d_coll_opts *co) {
                      for (size_t i = 0; i < t.size(); i++) {
                          c10d_status st = c10d_all_reduce(pg, t[i], op[i], co, nullptr);
                          if (st != C10D_OK)
                              return st;
                      }
                      return C10D_OK;
                  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::reduce(std::vector<at::Tensor> &ts,
                                                         const c10d::ReduceOptions &o)
{
    one_tensor(ts, "reduce");
    auto v = views(ts);
    std::vector<View> none;
    c10d_tensor *t = &v[0].t;
    c10d_reduce_op op = op_of(o.reduceOp, v[0].is_bool);
    int root = (int)o.rootRank;
    return submit("reduce", c10d::OpType::REDUCE, v, none, ts, o.timeout, queued(o),
                  [=, pg = pg_](const c10d_coll_opts *co) {
                      return c10d_reduce(pg, t, root, op, co, nullptr);
                  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCoord::allgather(std::vector<std::vector<at::Tensor>> &outs,
                             std::vector<at::Tensor> &ins, const c10d::AllgatherOptions &o)
{
    one_tensor(ins, "allgather");
    TORCH_CHECK(outs.size() == 1 && (int)outs[0].size() == getSize(),
                "c10d_coord: allgather wants one list of ", getSize(), " tensors");
    auto in = views(ins);
    auto out = views(outs[0]);
    auto r = raw(out);
    c10d_tensor *ti = &in[0].t;
    return submit("allgather", c10d::OpType::ALLGATHER, out, in, outs[0], o.timeout, queued(o),
                  [=, pg = pg_](const c10d_coll_opts *co) mutable {
                      return c10d_all_gather(pg, r.data(), ti, co, nullptr);
                  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::_allgather_base(at::Tensor &out, at::Tensor &in,
                                                                  const c10d::AllgatherOptions &opt)
{
    std::vector<View> o, i;
    o.emplace_back(out);
    i.emplace_back(in);
    c10d_tensor *to = &o[0].t, *ti = &i[0].t;
    return submit("all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, o, i, {out},
                  opt.timeout, queued(opt),
                  [=, pg = pg_](const c10d_coll_opts *co) {
                      return c10d_all_gather_into_tensor(pg, to, ti, co, nullptr);
                  });
}

namespace {

/* gather's outputs, scatter's inputs: one list of n tensors on the root,
 * none elsewhere. Their views, and the views' c10d_tensors in r (left
 * empty off the root, where the C call is given NULL). */
std::vector<View> root_list(std::vector<std::vector<at::Tensor>> &lists, bool is_root, int n,
                            const char *what, std::vector<c10d_tensor> &r)
{
    if (!is_root)
        return {};
    TORCH_CHECK(lists.size() == 1 && (int)lists[0].size() == n, "c10d_coord: ", what,
                " wants one list of ", n, " tensors on the root");
    std::vector<View> v = views(lists[0]);
    r = raw(v);
    return v;
}

} // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::gather(std::vector<std::vector<at::Tensor>> &outs,
                                                         std::vector<at::Tensor> &ins,
                                                         const c10d::GatherOptions &o)
{
    one_tensor(ins, "gather");
    auto in = views(ins);
    std::vector<c10d_tensor> r;
    auto out = root_list(outs, getRank() == o.rootRank, getSize(), "gather", r);
    c10d_tensor *ti = &in[0].t;
    int root = (int)o.rootRank;
    /* written back: the root's list; kept: the input */
    return submit("gather", c10d::OpType::GATHER, out, in,
                  outs.empty() ? std::vector<at::Tensor>() : outs[0], o.timeout, queued(o),
                  [=, pg = pg_](const c10d_coll_opts *co) mutable {
                      return c10d_gather(pg, r.empty() ? nullptr : r.data(), ti, root, co,
                                         nullptr);
                  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCoord::scatter(std::vector<at::Tensor> &outs,
                           std::vector<std::vector<at::Tensor>> &ins, const c10d::ScatterOptions &o)
{
    one_tensor(outs, "scatter");
    auto out = views(outs);
    std::vector<c10d_tensor> r;
    auto in = root_list(ins, getRank() == o.rootRank, getSize(), "scatter", r);
    c10d_tensor *to = &out[0].t;
    int root = (int)o.rootRank;
    return submit("scatter", c10d::OpType::SCATTER, out, in, outs, o.timeout, queued(o),
                  [=, pg = pg_](const c10d_coll_opts *co) mutable {
                      return c10d_scatter(pg, to, r.empty() ? nullptr : r.data(), root, co,
                                          nullptr);
                  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCoord::reduce_scatter(std::vector<at::Tensor> &outs,
                                  std::vector<std::vector<at::Tensor>> &ins,
                                  const c10d::ReduceScatterOptions &o)
{
    one_tensor(outs, "reduce_scatter");
    TORCH_CHECK(ins.size() == 1 && (int)ins[0].size() == getSize(),
                "c10d_coord: reduce_scatter wants one list of ", getSize(), " tensors");
    auto out = views(outs);
    auto in = views(ins[0]);
    auto r = raw(in);
    c10d_tensor *to = &out[0].t;
    c10d_reduce_op op = op_of(o.reduceOp, out[0].is_bool);
    return submit("reduce_scatter", c10d::OpType::REDUCE_SCATTER, out, in, outs, o.timeout, queued(o),
                  [=, pg = pg_](const c10d_coll_opts *co) mutable {
                      return c10d_reduce_scatter(pg, to, r.data(), op, co, nullptr);
                  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCoord::_reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                                        const c10d::ReduceScatterOptions &o)
{
    std::vector<View> vo, vi;
    vo.emplace_back(out);
    vi.emplace_back(in);
    c10d_tensor *to = &vo[0].t, *ti = &vi[0].t;
    c10d_reduce_op op = op_of(o.reduceOp, vo[0].is_bool);
    return submit("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, vo, vi, {out},
                  o.timeout, queued(o),
                  [=, pg = pg_](const c10d_coll_opts *co) {
                      return c10d_reduce_scatter_tensor(pg, to, ti, op, co, nullptr);
                  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::alltoall_base(at::Tensor &out, at::Tensor &in,
                                                                std::vector<int64_t> &out_splits,
                                                                std::vector<int64_t> &in_splits,
                                                                const c10d::AllToAllOptions &o)
{
    if (!out_splits.empty() || !in_splits.empty()) {
        seq_++;
        in_order();
        return alltoall_splits(out, in, out_splits, in_splits, copts(o.timeout, &in));
    }
    std::vector<View> vo, vi;
    vo.emplace_back(out);
    vi.emplace_back(in);
    c10d_tensor *to = &vo[0].t, *ti = &vi[0].t;
    return submit("all_to_all_single", c10d::OpType::ALLTOALL_BASE, vo, vi, {out}, o.timeout, queued(o),
                  [=, pg = pg_](const c10d_coll_opts *co) {
                      return c10d_all_to_all_single(pg, to, ti, co, nullptr);
                  });
}

void ProcessGroupCoord::monitoredBarrier(const c10d::BarrierOptions &o, bool wait_all_ranks)
{
    /* torch's unset timeout (kUnsetTimeout, negative) is the group's;
     * 0 gives up at once, as gloo's does (C's 0 is the default) */
    long long t = o.timeout.count();
    int ms = t < 0 || t > INT32_MAX ? C10D_TIMEOUT_DEFAULT : t == 0 ? 1 : (int)t;
    in_order();
    c10d_status st = c10d_monitored_barrier(pg_, ms, wait_all_ranks);
    if (st == C10D_ETIMEDOUT && getRank() == 0) /* gloo's words first, then ours */
        std::rethrow_exception(backend_error(
            "c10d_coord: monitored_barrier: Rank 0 timed out in monitoredBarrier after " +
            (t < 0 ? std::string("the group's timeout") : std::to_string(t) + " ms") +
            " (ETIMEDOUT): " + c10d_errmsg()));
    check("monitored_barrier", st);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::send(std::vector<at::Tensor> &ts, int dst,
                                                       int tag)
{
    one_tensor(ts, "send");
    in_order();
    auto v = views(ts);
    c10d_coll_opts co = copts(kNoTimeout, first(ts));
    check("send", c10d_send(pg_, &v[0].t, dst, tag, &co, nullptr));
    return done(c10d::OpType::SEND, ts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::recv(std::vector<at::Tensor> &ts, int src,
                                                       int tag)
{
    one_tensor(ts, "recv");
    return post_recv(ts[0], src, tag, false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::recvAnysource(std::vector<at::Tensor> &ts,
                                                                int tag)
{
    one_tensor(ts, "recv");
    return post_recv(ts[0], -1, tag, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::barrier(const c10d::BarrierOptions &o)
{
    std::vector<View> none, none2;
    return submit("barrier", c10d::OpType::BARRIER, none, none2, {}, o.timeout, queued(o),
                  [=, pg = pg_](const c10d_coll_opts *co) {
                      return c10d_barrier(pg, co, nullptr);
                  });
}

// A receive, posted (recv.hpp).
c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::post_recv(const at::Tensor &t, int src, int tag,
                                                            bool any)
{
    in_order();
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

} // namespace c10d_coord
