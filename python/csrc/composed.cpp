// The collectives torch has and the C library has not, composed of the
// library's (process_group.hpp): sparse all_reduce, all_gather_coalesced
// and all_to_all of any sizes. Each is built so its result is gloo's and
// so a rank that disagrees with its peers learns it without stranding
// them: sizes are exchanged first, mismatches raised after.
#include "process_group.hpp"

#include "errors.hpp"
#include "tensors.hpp"
#include "work.hpp"

#include <algorithm>

namespace c10d_coord {

// Sparse COO, SUM (gloo's only one): every rank's coalesced indices
// and values are gathered (their counts first, then both padded to the
// largest) and summed in rank order, then coalesced, as gloo does: the
// same operations in the same order, so the result is gloo's.
c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::allreduce_sparse(at::Tensor &t,
                                                                   const c10d::AllreduceOptions &o)
{
    TORCH_CHECK(o.reduceOp == c10d::ReduceOp::SUM,
                "c10d_coord: sparse all_reduce supports SUM only (as gloo)");
    TORCH_CHECK(t.device().is_cpu(), "c10d_coord: sparse all_reduce takes CPU tensors");
    seq_++;
    in_order();
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
        at::Tensor part = at::sparse_coo_tensor(idxs[r].narrow(1, 0, k), vals[r].narrow(0, 0, k),
                                                in.sizes(), in.options());
        if (r == 0)
            out = part;
        else
            out += part;
    }
    t.copy_(out.coalesce());
    return done(c10d::OpType::ALLREDUCE, {t});
}

// Every rank's t, stacked: a new leading dimension of the group's size.
at::Tensor ProcessGroupCoord::gathered(const at::Tensor &t, const c10d_coll_opts &co)
{
    std::vector<int64_t> shape = t.sizes().vec();
    shape.insert(shape.begin(), getSize());
    at::Tensor out = at::empty(shape, t.options());
    View vo(out), vi(t);
    check("allreduce (sparse)", c10d_all_gather_into_tensor(pg_, &vo.t, &vi.t, &co, nullptr));
    return out;
}

// torch's (deprecated) all_gather_coalesced: every input flattened
// into one buffer, one all_gather of it (one verified collective, as
// gloo runs one), split into the outputs. outs[i][j] gets rank i's
// ins[j]; every rank's inputs must add up alike (else a desync).
c10::intrusive_ptr<c10d::Work>
ProcessGroupCoord::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outs,
                                       std::vector<at::Tensor> &ins,
                                       const c10d::AllgatherOptions &o)
{
    int n = getSize();
    seq_++;
    in_order();
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

// all_to_all_single's split sizes (rows of dim 0): blocks of rows,
// exchanged padded.
c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::alltoall_splits(at::Tensor &out, at::Tensor &in,
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
    auto got = exchange_padded("all_to_all_single (split sizes)", blocks, want, in.options(), co);
    out.detach().copy_(at::cat(got).view(out.sizes()));
    return done(c10d::OpType::ALLTOALL_BASE, {out});
}

// Lists: ins[i] goes to rank i, outs[i] comes from it; sizes may differ
// (each outs[i] as large as rank i's ins[this rank]).
c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::alltoall(std::vector<at::Tensor> &outs,
                                                           std::vector<at::Tensor> &ins,
                                                           const c10d::AllToAllOptions &o)
{
    int n = getSize();
    seq_++;
    in_order();
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
    auto got = exchange_padded("all_to_all", blocks, want, ins[0].options(),
                               copts(o.timeout, first(ins)));
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
std::vector<at::Tensor> ProcessGroupCoord::exchange_padded(const char *what,
                                                           const std::vector<at::Tensor> &blocks,
                                                           const std::vector<int64_t> &want,
                                                           const at::TensorOptions &to,
                                                           const c10d_coll_opts &co)
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

#ifdef C10D_TORCH_BACKEND
// One queued call running one collective per tensor, in order (one Work).
c10::intrusive_ptr<c10d::Work>
ProcessGroupCoord::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outs,
                                                   std::vector<at::Tensor> &ins,
                                                   const c10d::AllgatherOptions &o)
{
    TORCH_CHECK(outs.size() == ins.size(), "c10d_coord: all_gather_into_tensor (coalesced) wants "
                "as many outputs as inputs, not ", outs.size(), " and ", ins.size());
    auto vo = views(outs), vi = views(ins);
    std::vector<std::pair<c10d_tensor *, c10d_tensor *>> t;
    for (size_t i = 0; i < vo.size(); i++)
        t.emplace_back(&vo[i].t, &vi[i].t);
    return submit("all_gather_into_tensor (coalesced)", c10d::OpType::COALESCED, vo, vi, outs,
                  o.timeout, queued(o), [=, pg = pg_](const c10d_coll_opts *co) {
                      for (auto &x : t) {
                          c10d_status st =
                              c10d_all_gather_into_tensor(pg, x.first, x.second, co, nullptr);
                          if (st != C10D_OK)
                              return st;
                      }
                      return C10D_OK;
                  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCoord::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outs,
                                                   std::vector<at::Tensor> &ins,
                                                   const c10d::ReduceScatterOptions &o)
{
    TORCH_CHECK(outs.size() == ins.size(), "c10d_coord: reduce_scatter_tensor (coalesced) wants "
                "as many outputs as inputs, not ", outs.size(), " and ", ins.size());
    auto vo = views(outs), vi = views(ins);
    std::vector<std::pair<c10d_tensor *, c10d_tensor *>> t;
    std::vector<c10d_reduce_op> op;
    for (size_t i = 0; i < vo.size(); i++) {
        t.emplace_back(&vo[i].t, &vi[i].t);
        op.push_back(op_of(o.reduceOp, vo[i].is_bool));
    }
    return submit("reduce_scatter_tensor (coalesced)", c10d::OpType::COALESCED, vo, vi, outs,
                  o.timeout, queued(o), [=, pg = pg_](const c10d_coll_opts *co) {
                      for (size_t i = 0; i < t.size(); i++) {
                          c10d_status st = c10d_reduce_scatter_tensor(pg, t[i].first, t[i].second,
                                                                      op[i], co, nullptr);
                          if (st != C10D_OK)
                              return st;
                      }
                      return C10D_OK;
                  });
}

// The calls made since startCoalescing were queued in order; the Work of
// the block completes once they all have run.
c10::intrusive_ptr<c10d::Work> ProcessGroupCoord::endCoalescing()
{
    std::vector<View> none, none2;
    return submit("coalesced", c10d::OpType::COALESCED, none, none2, {}, kNoTimeout, true,
                  [](const c10d_coll_opts *) { return C10D_OK; });
}
#endif

} // namespace c10d_coord
