// ProcessGroupChecked's collectives and point-to-point calls (checked.hpp):
// each described for the coordinator and checked (checked.cpp), then
// issued on the inner backend of its tensors' device, or ours.
#include "checked_internal.hpp"

#ifdef C10D_TORCH_BACKEND

#include "errors.hpp"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>

namespace c10d_coord {

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

} // namespace c10d_coord

#endif
