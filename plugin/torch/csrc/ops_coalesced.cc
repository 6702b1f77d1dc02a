// ops_coalesced.cc - the coalesced calls of the gcx backend
// (allreduce_coalesced, all_gather_coalesced,
// allgather_into_tensor_coalesced, reduce_scatter_tensor_coalesced) and the
// reductions libgcx has no kernel for (uint8, int8, int16, bool; bitwise
// ops), which are gathered and combined here.
//
// Idea: one gcx collective over a flat buffer per dtype (allgather: one in
// all, as bytes), so a bucket of many small tensors costs one collective.
// Cost: one copy in and one copy out of the flat buffer (none for a
// dtype's only tensor); a locally combined reduction moves P x the tensor
// (gathered) instead of a ring's ~2x.
#include "backend_impl.h"
#include "tensor_args.h"

#include <algorithm>

namespace torch_gcx {

// indices of ts grouped by dtype, groups in order of first appearance
std::vector<std::vector<size_t>> by_dtype(const std::vector<at::Tensor> &ts)
{
    std::vector<std::vector<size_t>> groups;
    std::vector<at::ScalarType> types;
    for (size_t i = 0; i < ts.size(); ++i) {
        auto it = std::find(types.begin(), types.end(), ts[i].scalar_type());
        if (it == types.end()) {
            types.push_back(ts[i].scalar_type());
            groups.emplace_back();
            it = types.end() - 1;
        }
        groups[static_cast<size_t>(it - types.begin())].push_back(i);
    }
    return groups;
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                const c10d::AllreduceCoalescedOptions &opts)
{
    c10::Device dev = call_device({&tensors}, "allreduce_coalesced");
    if (staged(dev)) {
        Mirror m(dev);
        std::vector<at::Tensor> h = m.inout(tensors);
        return m.run([&] { return allreduce_coalesced(h, opts); });
    }
    const char *name = "allreduce_coalesced";
    TORCH_CHECK(!tensors.empty(), "gcx ", name, ": no tensors given");
    for (auto &t : tensors) {
        if (t.defined() && combined_locally(opts.reduceOp, t)) {
            return coalesced_by_gather(tensors, opts.reduceOp.op_);
        }
    }
    Reduction red;
    for (auto &t : tensors) {
        check_tensor(t, name, "every tensor");
        reduce_dtype(t, name);
        red = reduction(opts.reduceOp, t, name);
    }
    gcx_op_t op = red.op;
    auto parts  = std::make_shared<std::vector<FlatPart>>();
    for (auto &g : by_dtype(tensors)) {
        FlatPart part;
        part.dt = reduce_dtype(tensors[g[0]], name);
        if (g.size() == 1) {
            part.out = premul_input(red, tensors[g[0]], true);
        } else {
            std::vector<at::Tensor> flat;
            for (size_t i : g) {
                flat.push_back(tensors[i].reshape({-1}));
                part.members.push_back(tensors[i]);
            }
            part.out = premul_input(red, at::cat(flat), true);
        }
        part.in = part.out;
        parts->push_back(std::move(part));
    }
    return enqueue(
        "gcx_allreduce (coalesced)", c10d::OpType::ALLREDUCE_COALESCED,
        tensors,
        [parts, op](gcx_comm_t *c, auto &reqs) {
            for (auto &p : *parts) {
                GCX_ISSUE(gcx_allreduce(c, GCX_IN_PLACE, p.out.data_ptr(),
                                        count(p.out), p.dt, op, &r_));
            }
            return GCX_OK;
        },
        [parts] { copy_out(*parts); });
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                std::vector<at::Tensor> &inputs,
                                const c10d::AllgatherOptions &opts)
{
    std::vector<const std::vector<at::Tensor> *> lists = {&inputs};
    for (auto &l : outputs) {
        lists.push_back(&l);
    }
    c10::Device dev = call_device(lists, "allgather_coalesced");
    if (staged(dev)) {
        Mirror m(dev);
        std::vector<at::Tensor> hi = m.in(inputs);
        std::vector<std::vector<at::Tensor>> ho = m.out(outputs);
        return m.run([&] { return allgather_coalesced(ho, hi, opts); });
    }
    const char *name = "allgather_coalesced";
    const int p      = getSize();
    TORCH_CHECK(static_cast<int>(outputs.size()) == p, "gcx ", name,
                ": expected ", p, " output lists (one per rank), got ",
                outputs.size());
    std::vector<at::Tensor> bytes, flat_outs;
    for (auto &in : inputs) {
        check_tensor(in, name, "every input tensor");
        bytes.push_back(in.reshape({-1}).view(at::kByte));
    }
    for (auto &list : outputs) {
        TORCH_CHECK(list.size() == inputs.size(), "gcx ", name,
                    ": every output list must have ", inputs.size(),
                    " tensors (one per input), got ", list.size());
        for (size_t i = 0; i < list.size(); ++i) {
            check_tensor(list[i], name, "every output tensor");
            TORCH_CHECK(list[i].scalar_type() ==
                                inputs[i].scalar_type() &&
                            list[i].numel() == inputs[i].numel(),
                        "gcx ", name, ": output ", i, " must have ",
                        inputs[i].numel(), " elements of ",
                        inputs[i].scalar_type(), ", got ",
                        list[i].numel(), " of ", list[i].scalar_type());
            flat_outs.push_back(list[i]);
        }
    }
    at::Tensor in = bytes.empty() ? at::empty({0}, at::kByte)
                                  : at::cat(bytes);
    at::Tensor out = at::empty({p * in.numel()}, at::kByte);
    return enqueue(
        "gcx_allgather (coalesced)", c10d::OpType::ALLGATHER_COALESCED,
        flat_outs,
        [in, out](gcx_comm_t *c, auto &reqs) {
            GCX_ISSUE(gcx_allgather(c, in.data_ptr(), out.data_ptr(),
                                    nbytes(in), GCX_DT_U8, &r_));
            return GCX_OK;
        },
        [out, flat_outs] {
            int64_t off = 0; // rank by rank, input by input
            for (auto &o : flat_outs) {
                at::Tensor ob = o.reshape({-1}).view(at::kByte);
                ob.copy_(out.narrow(0, off, ob.numel()));
                off += ob.numel();
            }
        },
        &inputs);
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllgatherOptions &opts)
{
    c10::Device dev = call_device({&outputs, &inputs}, "allgather_into_tensor_coalesced");
    if (staged(dev)) {
        Mirror m(dev);
        std::vector<at::Tensor> hi = m.in(inputs);
        std::vector<at::Tensor> ho = m.out(outputs);
        return m.run(
            [&] { return allgather_into_tensor_coalesced(ho, hi, opts); });
    }
    const char *name = "allgather_into_tensor_coalesced";
    TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size(),
                "gcx ", name, ": expected as many output tensors as "
                "input tensors (at least one), got ", outputs.size(),
                " outputs and ", inputs.size(), " inputs");
    const int p = getSize();
    std::vector<at::Tensor> bytes;
    int64_t row = 0; // bytes of one rank's block
    for (size_t i = 0; i < inputs.size(); ++i) {
        check_tensor(inputs[i], name, "every input tensor");
        check_tensor(outputs[i], name, "every output tensor");
        TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type() &&
                        outputs[i].numel() == p * inputs[i].numel(),
                    "gcx ", name, ": output ", i, " must hold ", p, " x ",
                    inputs[i].numel(), " elements of ",
                    inputs[i].scalar_type(), ", got ", outputs[i].numel(),
                    " of ", outputs[i].scalar_type());
        bytes.push_back(inputs[i].reshape({-1}).view(at::kByte));
        row += static_cast<int64_t>(nbytes(inputs[i]));
    }
    at::Tensor in  = at::cat(bytes);
    at::Tensor out = at::empty({p * row}, at::kByte);
    std::vector<at::Tensor> outs = outputs;
    return enqueue(
        "gcx_allgather (coalesced)", c10d::OpType::COALESCED, outs,
        [in, out](gcx_comm_t *c, auto &reqs) {
            GCX_ISSUE(gcx_allgather(c, in.data_ptr(), out.data_ptr(),
                                    nbytes(in), GCX_DT_U8, &r_));
            return GCX_OK;
        },
        [out, outs, row, p] {
            int64_t off = 0;
            for (auto &o : outs) {
                at::Tensor ob = o.reshape({-1}).view(at::kByte);
                int64_t b     = ob.numel() / p;
                for (int r = 0; r < p; ++r) {
                    ob.narrow(0, r * b, b)
                        .copy_(out.narrow(0, r * row + off, b));
                }
                off += b;
            }
        });
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::reduce_scatter_tensor_coalesced(
                std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                const c10d::ReduceScatterOptions &opts)
{
    c10::Device dev = call_device({&outputs, &inputs}, "reduce_scatter_tensor_coalesced");
    if (staged(dev)) {
        Mirror m(dev);
        std::vector<at::Tensor> hi = m.in(inputs);
        std::vector<at::Tensor> ho = m.out(outputs);
        return m.run(
            [&] { return reduce_scatter_tensor_coalesced(ho, hi, opts); });
    }
    const char *name = "reduce_scatter_tensor_coalesced";
    TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size(),
                "gcx ", name, ": expected as many output tensors as "
                "input tensors (at least one), got ", outputs.size(),
                " outputs and ", inputs.size(), " inputs");
    const int p = getSize();
    Reduction red;
    for (size_t i = 0; i < inputs.size(); ++i) {
        check_tensor(inputs[i], name, "every input tensor");
        check_tensor(outputs[i], name, "every output tensor");
        reduce_dtype(outputs[i], name);
        red = reduction(opts.reduceOp, outputs[i], name);
        TORCH_CHECK(inputs[i].scalar_type() == outputs[i].scalar_type() &&
                        inputs[i].numel() == p * outputs[i].numel(),
                    "gcx ", name, ": input ", i, " must hold ", p, " x ",
                    outputs[i].numel(), " elements of ",
                    outputs[i].scalar_type(), ", got ", inputs[i].numel(),
                    " of ", inputs[i].scalar_type());
    }
    gcx_op_t op = red.op;
    auto parts  = std::make_shared<std::vector<FlatPart>>();
    for (auto &g : by_dtype(outputs)) {
        FlatPart part;
        part.dt = reduce_dtype(outputs[g[0]], name);
        if (g.size() == 1) {
            part.in  = premul_input(red, inputs[g[0]], false);
            part.out = outputs[g[0]];
        } else {
            std::vector<at::Tensor> chunks;
            int64_t total = 0;
            for (int r = 0; r < p; ++r) {
                for (size_t i : g) {
                    int64_t k = outputs[i].numel();
                    chunks.push_back(
                        inputs[i].reshape({-1}).narrow(0, r * k, k));
                }
            }
            for (size_t i : g) {
                total += outputs[i].numel();
                part.members.push_back(outputs[i]);
            }
            part.in  = premul_input(red, at::cat(chunks), true);
            part.out = at::empty({total}, outputs[g[0]].options());
        }
        parts->push_back(std::move(part));
    }
    return enqueue(
        "gcx_reduce_scatter (coalesced)", c10d::OpType::COALESCED,
        outputs,
        [parts, op](gcx_comm_t *c, auto &reqs) {
            for (auto &pt : *parts) {
                GCX_ISSUE(gcx_reduce_scatter(c, pt.in.data_ptr(),
                                             pt.out.data_ptr(),
                                             count(pt.out), pt.dt, op,
                                             &r_));
            }
            return GCX_OK;
        },
        [parts] { copy_out(*parts); });
}

bool GcxBackend::combined_locally(const c10d::ReduceOp &op, const at::Tensor &t)
{
    bool ours = op.op_ == c10d::ReduceOp::PRODUCT ||
                op.op_ == c10d::ReduceOp::SUM ||
                op.op_ == c10d::ReduceOp::MIN ||
                op.op_ == c10d::ReduceOp::MAX || bitwise_op(op.op_);
    return ours && !reducible(t, op.op_);
}

at::Tensor GcxBackend::combine_rows(const at::Tensor &rows,
                                    c10d::ReduceOp::RedOpType op)
{
    at::Tensor acc = rows[0].clone();
    for (int64_t r = 1; r < rows.size(0); ++r) {
        switch (op) {
        case c10d::ReduceOp::SUM: acc.add_(rows[r]); break;
        case c10d::ReduceOp::MIN: acc = at::minimum(acc, rows[r]); break;
        case c10d::ReduceOp::MAX: acc = at::maximum(acc, rows[r]); break;
        case c10d::ReduceOp::PRODUCT: acc.mul_(rows[r]); break;
        case c10d::ReduceOp::BAND: acc.bitwise_and_(rows[r]); break;
        case c10d::ReduceOp::BOR: acc.bitwise_or_(rows[r]); break;
        default: acc.bitwise_xor_(rows[r]); break;
        }
    }
    return acc;
}

void GcxBackend::check_combinable(const at::Tensor &t,
                                  c10d::ReduceOp::RedOpType op,
                                  const char *name)
{
    const char *opname = reduce_op_name(op);
    TORCH_CHECK(!t.is_complex(), "gcx ", name, ": ReduceOp.", opname,
                " of a complex tensor");
    TORCH_CHECK(!bitwise_op(op) || !at::isFloatingType(t.scalar_type()),
                "gcx ", name, ": ReduceOp.", opname,
                " needs an integer or bool dtype, got ", t.scalar_type());
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::coalesced_by_gather(std::vector<at::Tensor> &tensors,
                                c10d::ReduceOp::RedOpType op)
{
    const char *name = "allreduce_coalesced";
    const int p      = getSize();
    std::vector<at::Tensor> bytes;
    for (auto &t : tensors) {
        check_tensor(t, name, "every tensor");
        check_combinable(t, op, name);
        bytes.push_back(t.reshape({-1}).view(at::kByte));
    }
    at::Tensor in  = at::cat(bytes);
    at::Tensor all = at::empty({p, in.numel()}, at::kByte);
    std::vector<at::Tensor> ts = tensors;
    return enqueue(
        "gcx_allgather (allreduce_coalesced)",
        c10d::OpType::ALLREDUCE_COALESCED, ts,
        [in, all](gcx_comm_t *c, auto &reqs) {
            GCX_ISSUE(gcx_allgather(c, in.data_ptr(), all.data_ptr(),
                                    nbytes(in), GCX_DT_U8, &r_));
            return GCX_OK;
        },
        [ts, all, op] {
            int64_t off = 0;
            for (auto &t : ts) {
                int64_t b = static_cast<int64_t>(nbytes(t));
                at::Tensor rows = all.narrow(1, off, b).contiguous().view(
                    t.scalar_type());
                t.copy_(combine_rows(rows, op).view(t.sizes()));
                off += b;
            }
        });
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::reduce_by_gather(const at::Tensor &t, c10d::ReduceOp::RedOpType op,
                             int root, const char *name)
{
    check_combinable(t, op, name);
    const int p     = getSize();
    const bool mine = root < 0 || root == getRank();
    at::Tensor all  = at::empty({mine ? p : 0, t.numel()}, t.options());
    // t is read by gcx, then (post, after completion) overwritten
    at::Tensor in = t;
    auto start = [in, all, root](gcx_comm_t *c, auto &reqs) {
        if (root < 0) {
            GCX_ISSUE(gcx_allgather(c, in.data_ptr(), all.data_ptr(),
                                    nbytes(in), GCX_DT_U8, &r_));
        } else {
            GCX_ISSUE(gcx_gather(c, in.data_ptr(), nbytes(in),
                                 all.numel() ? all.data_ptr() : nullptr,
                                 GCX_DT_U8, root, &r_));
        }
        return GCX_OK;
    };
    std::function<void()> post;
    if (mine) {
        post = [t, all, op] {
            t.copy_(combine_rows(all, op).view(t.sizes()));
        };
    }
    return enqueue(root < 0 ? "gcx_allgather (allreduce)"
                            : "gcx_gather (reduce)",
                   root < 0 ? c10d::OpType::ALLREDUCE
                            : c10d::OpType::REDUCE,
                   {t}, start, post);
}

void GcxBackend::copy_out(std::vector<FlatPart> &parts)
{
    for (auto &p : parts) {
        if (!p.members.empty()) {
            scatter_copy(p.out, p.members);
        }
    }
}
} // namespace torch_gcx
