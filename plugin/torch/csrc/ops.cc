// ops.cc - op dispatch: the c10d collectives and point-to-point calls of
// the gcx backend, each mapped onto one non-blocking gcx call (a job for
// the engine) and returning a Work at once.
//
// Idea: check the arguments on the calling thread (tensor_args.h), map
// torch's dtype, op, counts and roots onto gcx's, and capture the tensors
// in the job so they live until it is done. Data movement (broadcast,
// allgather, gather, scatter, alltoall, send/recv) goes as bytes
// (GCX_DT_U8), so every dtype works; reductions need a gcx element type.
// Cost: the tensor-shaped calls are zero copy; the list-shaped ones
// (allgather and gather into lists, reduce_scatter and scatter from lists)
// pay one copy through a flat buffer. PREMUL_SUM multiplies the input
// first (a copy where torch keeps the input: reduce, reduce_scatter).
#include "backend_impl.h"
#include "tensor_args.h"

namespace torch_gcx {

c10::intrusive_ptr<c10d::Work>
GcxBackend::allreduce(std::vector<at::Tensor> &tensors,
                      const c10d::AllreduceOptions &opts)
{
    if (tensors.size() == 1 && tensors[0].defined() &&
        tensors[0].is_sparse()) {
        return sparse_allreduce(*this, tensors[0], opts);
    }
    c10::Device dev = call_device({&tensors}, "allreduce");
    if (staged(dev)) {
        return staged_allreduce(tensors, opts, dev);
    }
    at::Tensor t = single(tensors, "allreduce");
    if (combined_locally(opts.reduceOp, t)) {
        return reduce_by_gather(t, opts.reduceOp.op_, -1, "allreduce");
    }
    gcx_dtype_t dt = reduce_dtype(t, "allreduce");
    Reduction red  = reduction(opts.reduceOp, t, "allreduce");
    gcx_op_t op    = red.op;
    premul_input(red, t, true);
    return enqueue("gcx_allreduce", c10d::OpType::ALLREDUCE, {t},
                   [t, dt, op](gcx_comm_t *c, auto &reqs) {
                       GCX_ISSUE(gcx_allreduce(c, GCX_IN_PLACE,
                                               t.data_ptr(), count(t), dt,
                                               op, &r_));
                       return GCX_OK;
                   });
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::allreduce_sparse(std::vector<at::Tensor> &tensors,
                             const c10d::AllreduceOptions &opts)
{
    return allreduce(tensors, opts);
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::broadcast(std::vector<at::Tensor> &tensors,
                      const c10d::BroadcastOptions &opts)
{
    c10::Device dev = call_device({&tensors}, "broadcast");
    if (staged(dev)) {
        return staged_broadcast(tensors, opts, dev);
    }
    at::Tensor t = single(tensors, "broadcast");
    TORCH_CHECK(opts.rootTensor == 0,
                "gcx broadcast: rootTensor must be 0");
    check_root(opts.rootRank, getSize(), "broadcast");
    int root = static_cast<int>(opts.rootRank);
    return enqueue("gcx_broadcast", c10d::OpType::BROADCAST, {t},
                   [t, root](gcx_comm_t *c, auto &reqs) {
                       GCX_ISSUE(gcx_broadcast(c, t.data_ptr(), nbytes(t),
                                               GCX_DT_U8, root, &r_));
                       return GCX_OK;
                   });
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                      std::vector<at::Tensor> &inputs,
                      const c10d::AllgatherOptions &opts)
{
    c10::Device dev = call_device({&inputs, outputs.empty() ? &inputs : &outputs[0]}, "allgather");
    if (staged(dev)) {
        Mirror m(dev);
        std::vector<at::Tensor> hi = m.in(inputs);
        std::vector<std::vector<at::Tensor>> ho = m.out(outputs);
        return m.run([&] { return allgather(ho, hi, opts); });
    }
    at::Tensor in = single(inputs, "allgather", "the input tensor");
    TORCH_CHECK(outputs.size() == 1,
                "gcx allgather: expected one list of output tensors, got ",
                outputs.size());
    std::vector<at::Tensor> outs = outputs[0];
    TORCH_CHECK(static_cast<int>(outs.size()) == getSize(),
                "gcx allgather: expected ", getSize(),
                " output tensors (one per rank), got ", outs.size());
    for (auto &o : outs) {
        TORCH_CHECK(o.device().is_cpu(),
                    "gcx allgather: output tensors must be on the CPU");
        TORCH_CHECK(o.scalar_type() == in.scalar_type() &&
                        o.numel() == in.numel(),
                    "gcx allgather: every output tensor must have ",
                    in.numel(), " elements of ", in.scalar_type(),
                    ", got ", o.numel(), " of ", o.scalar_type());
    }
    at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
    return enqueue(
        "gcx_allgather", c10d::OpType::ALLGATHER, outs,
        [in, flat](gcx_comm_t *c, auto &reqs) {
            GCX_ISSUE(gcx_allgather(c, in.data_ptr(), flat.data_ptr(),
                                    nbytes(in), GCX_DT_U8, &r_));
            return GCX_OK;
        },
        [flat, outs] { scatter_copy(flat, outs); }, &inputs);
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::_allgather_base(at::Tensor &output, at::Tensor &input,
                            const c10d::AllgatherOptions &opts)
{
    std::vector<at::Tensor> both = {output, input};
    c10::Device dev = call_device({&both}, "allgather_into_tensor");
    if (staged(dev)) {
        return staged_allgather_base(output, input, opts, dev);
    }
    check_tensor(input, "allgather_into_tensor", "the input tensor");
    check_tensor(output, "allgather_into_tensor", "the output tensor");
    TORCH_CHECK(output.scalar_type() == input.scalar_type() &&
                    output.numel() == getSize() * input.numel(),
                "gcx allgather_into_tensor: the output must hold ",
                getSize(), " x ", input.numel(), " elements of ",
                input.scalar_type(), ", got ", output.numel(), " of ",
                output.scalar_type());
    at::Tensor in = input, out = output;
    std::vector<at::Tensor> ins = {input};
    return enqueue(
        "gcx_allgather", c10d::OpType::_ALLGATHER_BASE, {out},
        [in, out](gcx_comm_t *c, auto &reqs) {
            GCX_ISSUE(gcx_allgather(c, in.data_ptr(), out.data_ptr(),
                                    nbytes(in), GCX_DT_U8, &r_));
            return GCX_OK;
        },
        {}, &ins);
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::reduce_scatter(std::vector<at::Tensor> &outputs,
                           std::vector<std::vector<at::Tensor>> &inputs,
                           const c10d::ReduceScatterOptions &opts)
{
    c10::Device dev = call_device({&outputs, inputs.empty() ? &outputs : &inputs[0]}, "reduce_scatter");
    if (staged(dev)) {
        Mirror m(dev);
        std::vector<at::Tensor> ho = m.out(outputs);
        std::vector<std::vector<at::Tensor>> hi = m.in(inputs);
        return m.run([&] { return reduce_scatter(ho, hi, opts); });
    }
    at::Tensor out = single(outputs, "reduce_scatter", "the output tensor");
    gcx_dtype_t dt = reduce_dtype(out, "reduce_scatter");
    Reduction red  = reduction(opts.reduceOp, out, "reduce_scatter");
    gcx_op_t op    = red.op;
    TORCH_CHECK(inputs.size() == 1,
                "gcx reduce_scatter: expected one list of input tensors, "
                "got ", inputs.size());
    TORCH_CHECK(static_cast<int>(inputs[0].size()) == getSize(),
                "gcx reduce_scatter: expected ", getSize(),
                " input tensors (one per rank), got ", inputs[0].size());
    at::Tensor flat = premul_input(
        red, flat_cat(inputs[0], out, "reduce_scatter", "the input list"),
        true);
    return enqueue("gcx_reduce_scatter", c10d::OpType::REDUCE_SCATTER,
                   {out}, [flat, out, dt, op](gcx_comm_t *c, auto &reqs) {
                       GCX_ISSUE(gcx_reduce_scatter(c, flat.data_ptr(),
                                                    out.data_ptr(),
                                                    count(out), dt, op,
                                                    &r_));
                       return GCX_OK;
                   });
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                 const c10d::ReduceScatterOptions &opts)
{
    std::vector<at::Tensor> both = {output, input};
    c10::Device dev = call_device({&both}, "reduce_scatter_tensor");
    if (staged(dev)) {
        return staged_reduce_scatter_base(output, input, opts, dev);
    }
    const char *name = "reduce_scatter_tensor";
    check_tensor(input, name, "the input tensor");
    check_tensor(output, name, "the output tensor");
    gcx_dtype_t dt = reduce_dtype(output, name);
    Reduction red  = reduction(opts.reduceOp, output, name);
    gcx_op_t op    = red.op;
    TORCH_CHECK(input.scalar_type() == output.scalar_type() &&
                    input.numel() == getSize() * output.numel(),
                "gcx reduce_scatter_tensor: the input must hold ",
                getSize(), " x ", output.numel(), " elements of ",
                output.scalar_type(), ", got ", input.numel(), " of ",
                input.scalar_type());
    at::Tensor in = premul_input(red, input, false), out = output;
    std::vector<at::Tensor> ins = {input};
    return enqueue(
        "gcx_reduce_scatter", c10d::OpType::_REDUCE_SCATTER_BASE, {out},
        [in, out, dt, op](gcx_comm_t *c, auto &reqs) {
            GCX_ISSUE(gcx_reduce_scatter(c, in.data_ptr(), out.data_ptr(),
                                         count(out), dt, op, &r_));
            return GCX_OK;
        },
        {}, &ins);
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::alltoall_base(at::Tensor &output, at::Tensor &input,
                          std::vector<int64_t> &outSplits,
                          std::vector<int64_t> &inSplits,
                          const c10d::AllToAllOptions &opts)
{
    std::vector<at::Tensor> both = {output, input};
    c10::Device dev = call_device({&both}, "all_to_all_single");
    if (staged(dev)) {
        Mirror m(dev);
        at::Tensor hi = m.in(input), ho = m.out(output);
        return m.run(
            [&] { return alltoall_base(ho, hi, outSplits, inSplits, opts); });
    }
    const char *name = "all_to_all_single";
    check_tensor(input, name, "the input tensor");
    check_tensor(output, name, "the output tensor");
    TORCH_CHECK(input.scalar_type() == output.scalar_type(), "gcx ", name,
                ": input and output dtypes differ (", input.scalar_type(),
                " vs ", output.scalar_type(), ")");
    int p = getSize();
    auto counts = [&](const at::Tensor &t, const std::vector<int64_t> &sp,
                      const char *what) {
        auto v = std::make_shared<std::vector<size_t>>(2 * p);
        int64_t rows = t.dim() == 0 ? 1 : t.size(0);
        size_t row   = rows == 0 ? 0 : nbytes(t) / rows;
        if (sp.empty()) {
            TORCH_CHECK(rows % p == 0, "gcx ", name, ": the ", what,
                        "'s first dimension (", rows,
                        ") is not divisible by the group size ", p);
        } else {
            TORCH_CHECK(static_cast<int>(sp.size()) == p, "gcx ", name,
                        ": ", what, " split sizes has ", sp.size(),
                        " entries, expected ", p);
            int64_t sum = 0;
            for (auto s : sp) {
                TORCH_CHECK(s >= 0, "gcx ", name, ": negative split size");
                sum += s;
            }
            TORCH_CHECK(sum == rows, "gcx ", name, ": ", what,
                        " split sizes sum to ", sum, ", but its first "
                        "dimension is ", rows);
        }
        size_t off = 0;
        for (int i = 0; i < p; ++i) {
            size_t n = sp.empty() ? static_cast<size_t>(rows / p) * row
                                  : static_cast<size_t>(sp[i]) * row;
            (*v)[i]     = n;   // counts
            (*v)[p + i] = off; // displacements
            off += n;
        }
        return v;
    };
    auto sc = counts(input, inSplits, "input");
    auto rc = counts(output, outSplits, "output");
    at::Tensor in = input, out = output;
    std::vector<at::Tensor> ins = {input};
    return enqueue("gcx_alltoallv", c10d::OpType::ALLTOALL_BASE, {out},
                   [in, out, sc, rc, p](gcx_comm_t *c, auto &reqs) {
                       // gcx_alltoallv() rejects NULL buffers even
                       // when every count is 0 (an empty tensor's)
                       static char empty_in, empty_out;
                       void *ip = in.numel() ? in.data_ptr() : &empty_in;
                       void *op = out.numel() ? out.data_ptr()
                                              : &empty_out;
                       GCX_ISSUE(gcx_alltoallv(
                           c, ip, sc->data(), sc->data() + p, op,
                           rc->data(), rc->data() + p, GCX_DT_U8, &r_));
                       return GCX_OK;
                   },
                   {}, &ins);
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::reduce(std::vector<at::Tensor> &tensors,
                   const c10d::ReduceOptions &opts)
{
    c10::Device dev = call_device({&tensors}, "reduce");
    if (staged(dev)) {
        return staged_reduce(tensors, opts, dev);
    }
    at::Tensor t = single(tensors, "reduce");
    TORCH_CHECK(opts.rootTensor == 0, "gcx reduce: rootTensor must be 0");
    check_root(opts.rootRank, getSize(), "reduce");
    if (combined_locally(opts.reduceOp, t)) {
        return reduce_by_gather(t, opts.reduceOp.op_,
                                static_cast<int>(opts.rootRank), "reduce");
    }
    gcx_dtype_t dt = reduce_dtype(t, "reduce");
    Reduction red  = reduction(opts.reduceOp, t, "reduce");
    gcx_op_t op    = red.op;
    int root  = static_cast<int>(opts.rootRank);
    bool mine = root == getRank();
    // the root reduces in place; the others keep their input
    at::Tensor src = premul_input(red, t, mine);
    return enqueue("gcx_reduce", c10d::OpType::REDUCE, {t},
                   [t, src, dt, op, root, mine](gcx_comm_t *c,
                                                auto &reqs) {
                       GCX_ISSUE(gcx_reduce(
                           c, mine ? GCX_IN_PLACE : src.data_ptr(),
                           mine ? t.data_ptr() : nullptr, count(t), dt,
                           op, root, &r_));
                       return GCX_OK;
                   });
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::gather(std::vector<std::vector<at::Tensor>> &outputs,
                   std::vector<at::Tensor> &inputs,
                   const c10d::GatherOptions &opts)
{
    c10::Device dev = call_device({&inputs, outputs.empty() ? &inputs : &outputs[0]}, "gather");
    if (staged(dev)) {
        Mirror m(dev);
        std::vector<at::Tensor> hi = m.in(inputs);
        std::vector<std::vector<at::Tensor>> ho = m.out(outputs);
        return m.run([&] { return gather(ho, hi, opts); });
    }
    at::Tensor in = single(inputs, "gather", "the input tensor");
    check_root(opts.rootRank, getSize(), "gather");
    int root  = static_cast<int>(opts.rootRank);
    bool mine = root == getRank();
    std::vector<at::Tensor> outs;
    at::Tensor flat;
    if (mine) {
        TORCH_CHECK(outputs.size() == 1 &&
                        static_cast<int>(outputs[0].size()) == getSize(),
                    "gcx gather: the root needs one list of ", getSize(),
                    " output tensors");
        outs = outputs[0];
        for (auto &o : outs) {
            TORCH_CHECK(o.device().is_cpu() &&
                            o.scalar_type() == in.scalar_type() &&
                            o.numel() == in.numel(),
                        "gcx gather: every output tensor must be a CPU "
                        "tensor of ", in.numel(), " elements of ",
                        in.scalar_type());
        }
        flat = at::empty({getSize() * in.numel()}, in.options());
    } else {
        TORCH_CHECK(outputs.empty() || (outputs.size() == 1 &&
                                        outputs[0].empty()),
                    "gcx gather: only the root passes output tensors");
    }
    std::function<void()> post;
    if (mine) {
        post = [flat, outs] { scatter_copy(flat, outs); };
    }
    return enqueue(
        "gcx_gather", c10d::OpType::GATHER, outs,
        [in, flat, root, mine](gcx_comm_t *c, auto &reqs) {
            GCX_ISSUE(gcx_gather(c, in.data_ptr(), nbytes(in),
                                 mine ? flat.data_ptr() : nullptr,
                                 GCX_DT_U8, root, &r_));
            return GCX_OK;
        },
        post, &inputs);
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::scatter(std::vector<at::Tensor> &outputs,
                    std::vector<std::vector<at::Tensor>> &inputs,
                    const c10d::ScatterOptions &opts)
{
    c10::Device dev = call_device({&outputs, inputs.empty() ? &outputs : &inputs[0]}, "scatter");
    if (staged(dev)) {
        Mirror m(dev);
        std::vector<at::Tensor> ho = m.out(outputs);
        std::vector<std::vector<at::Tensor>> hi = m.in(inputs);
        return m.run([&] { return scatter(ho, hi, opts); });
    }
    at::Tensor out = single(outputs, "scatter", "the output tensor");
    check_root(opts.rootRank, getSize(), "scatter");
    int root  = static_cast<int>(opts.rootRank);
    bool mine = root == getRank();
    at::Tensor flat;
    if (mine) {
        TORCH_CHECK(inputs.size() == 1 &&
                        static_cast<int>(inputs[0].size()) == getSize(),
                    "gcx scatter: the root needs one list of ", getSize(),
                    " input tensors");
        flat = flat_cat(inputs[0], out, "scatter", "the input list");
    } else {
        TORCH_CHECK(inputs.empty() ||
                        (inputs.size() == 1 && inputs[0].empty()),
                    "gcx scatter: only the root passes input tensors");
    }
    return enqueue("gcx_scatter", c10d::OpType::SCATTER, {out},
                   [out, flat, root, mine](gcx_comm_t *c, auto &reqs) {
                       GCX_ISSUE(gcx_scatter(
                           c, mine ? flat.data_ptr() : nullptr,
                           out.data_ptr(), nbytes(out), GCX_DT_U8, root,
                           &r_));
                       return GCX_OK;
                   });
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::barrier(const c10d::BarrierOptions &)
{
    return enqueue("gcx_barrier", c10d::OpType::BARRIER, {},
                   [](gcx_comm_t *c, auto &reqs) {
                       GCX_ISSUE(gcx_barrier(c, &r_));
                       return GCX_OK;
                   });
}

c10::intrusive_ptr<c10d::Work> GcxBackend::send(std::vector<at::Tensor> &tensors,
                                                int dst, int tag)
{
    return p2p(tensors, dst, tag, true);
}

c10::intrusive_ptr<c10d::Work> GcxBackend::recv(std::vector<at::Tensor> &tensors,
                                                int src, int tag)
{
    return p2p(tensors, src, tag, false);
}

c10::intrusive_ptr<c10d::Work> GcxBackend::recvAnysource(std::vector<at::Tensor> &tensors,
                                                         int tag)
{
    c10::Device dev = call_device({&tensors}, "recv (any source)");
    if (staged(dev)) {
        Mirror m(dev);
        std::vector<at::Tensor> h = m.out(tensors);
        return m.run([&] { return recvAnysource(h, tag); });
    }
    at::Tensor t = single(tensors, "recv (any source)");
    TORCH_CHECK(tag >= 0 && tag < kMonitorTag,
                "gcx recv (any source): tag must be in 0..",
                kMonitorTag - 1, ", got ", tag);
    check_not_coalescing("recv from any source");
    std::vector<at::Tensor> outs{t};
    std::function<void()> post; // a mirror's copy back (device tensors)
    apply_mirror(outs, post);
    auto work = c10::make_intrusive<GcxWork>(
        getRank(), c10d::OpType::RECVANYSOURCE, outs,
        profiling_title(c10d::OpType::RECVANYSOURCE), outs,
        mirror_devices());
    c10d::Work *w = work.get(); // the job holds the Work until done
    submit_job(
        "gcx_recv (any source)", work,
        [t, tag](gcx_comm_t *c, auto &reqs) {
            GCX_ISSUE(gcx_recv(c, t.data_ptr(), nbytes(t), GCX_DT_U8,
                               GCX_ANY_SOURCE, tag, &r_));
            return GCX_OK;
        },
        post,
        [w](gcx_request_t *req, gcx_status_t st) {
            int src = -1;
            if (st == GCX_OK && gcx_recv_source(req, &src) == GCX_OK) {
                static_cast<GcxWork *>(w)->set_source(src);
            }
        });
    return work;
}

c10::intrusive_ptr<c10d::Work> GcxBackend::composite(const std::string &name,
                                                     std::vector<at::Tensor> outputs,
                                                     StartFn start,
                                                     std::function<void()> post,
                                                     c10d::OpType type,
                                                     Place *place)
{
    if (place != nullptr) {
        // a place's job is one job: a coalesced block is refused by reserve
        return enqueue(name, type, std::move(outputs), std::move(start),
                       std::move(post), nullptr, place);
    }
    return enqueue(name, type, std::move(outputs), std::move(start),
                   std::move(post));
}

c10::intrusive_ptr<c10d::Work> GcxBackend::p2p(std::vector<at::Tensor> &tensors,
                                               int peer, int tag, bool is_send)
{
    c10::Device dev = call_device({&tensors}, is_send ? "send" : "recv");
    if (staged(dev)) {
        Mirror m(dev);
        std::vector<at::Tensor> h =
            is_send ? m.in(tensors) : m.out(tensors);
        return m.run([&] { return p2p(h, peer, tag, is_send); });
    }
    const char *op = is_send ? "send" : "recv";
    at::Tensor  t  = single(tensors, op);
    check_root(peer, getSize(), op);
    TORCH_CHECK(tag >= 0 && tag < kMonitorTag, "gcx ", op,
                ": tag must be in 0..", kMonitorTag - 1, " (",
                kMonitorTag, " is monitored_barrier's), got ", tag);
    return p2p_job(t, peer, tag, is_send);
}

c10::intrusive_ptr<GcxWork> GcxBackend::p2p_job(const at::Tensor &t, int peer,
                                                int tag, bool is_send)
{
    return enqueue(is_send ? "gcx_send" : "gcx_recv",
                   is_send ? c10d::OpType::SEND : c10d::OpType::RECV, {t},
                   [t, peer, tag, is_send](gcx_comm_t *c, auto &reqs) {
                       GCX_ISSUE(is_send ?
                                     gcx_send(c, t.data_ptr(), nbytes(t),
                                              GCX_DT_U8, peer, tag, &r_) :
                                     gcx_recv(c, t.data_ptr(), nbytes(t),
                                              GCX_DT_U8, peer, tag, &r_));
                       return GCX_OK;
                   });
}
} // namespace torch_gcx
