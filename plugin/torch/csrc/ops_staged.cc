// ops_staged.cc - op dispatch of the staged calls: all_reduce, broadcast,
// reduce, all_gather_into_tensor and reduce_scatter_tensor of device
// tensors (or of CPU tensors with GCX_TORCH_STAGE=always), each cut into
// chunks that staging.cc pipelines (copy in, network, copy out overlap).
//
// Idea: a chunk is a slice of the elements every rank cuts the same way
// (the same chunk size on every rank: GCX_TORCH_STAGE_CHUNK must agree, as
// every GCX_* setting), so chunk i of one rank meets chunk i of the others
// in one gcx call. Host layout: all_reduce, broadcast and reduce stage the
// tensor as it is, in place; all_gather_into_tensor stages the input and
// receives, per chunk, the ranks' slices one after another (copied out to
// their places in the output); reduce_scatter_tensor stages, per chunk,
// the ranks' slices of the input one after another. Calls inside a
// coalesced block and reductions gcx does not have for the dtype go
// through host mirrors (staging.h). Cost: per chunk one gcx call and one
// copy in and out per piece (all_gather/reduce_scatter: P pieces a chunk).
#include "backend_impl.h"
#include "tensor_args.h"

namespace torch_gcx {

c10::intrusive_ptr<c10d::Work>
GcxBackend::staged_allreduce(std::vector<at::Tensor> &tensors,
                             const c10d::AllreduceOptions &opts,
                             c10::Device dev)
{
    const char *name = "allreduce";
    TORCH_CHECK(tensors.size() == 1, "gcx ", name,
                ": expected exactly one tensor, got ", tensors.size());
    at::Tensor t = tensors[0];
    check_dense(t, name, "the tensor");
    if (coalescing() || combined_locally(opts.reduceOp, t)) {
        Mirror m(dev);
        std::vector<at::Tensor> h = m.inout(tensors);
        return m.run([&] { return allreduce(h, opts); });
    }
    gcx_dtype_t dt = reduce_dtype(t, name);
    Reduction red  = reduction(opts.reduceOp, t, name);
    gcx_op_t op    = red.op;
    premul_input(red, t, true);
    const int64_t e = static_cast<int64_t>(t.element_size());
    at::Tensor b    = byte_view(t);
    StagePlan plan;
    plan.name     = "gcx_allreduce";
    plan.type     = c10d::OpType::ALLREDUCE;
    plan.device   = dev;
    plan.in_bytes = plan.out_bytes = nbytes(t);
    plan.out_is_in                 = true;
    for (auto [a, len] : chunk_ranges(t.numel(), static_cast<size_t>(e))) {
        StageChunk c;
        c.in  = {{b.narrow(0, a * e, len * e), a * e}};
        c.out = c.in;
        size_t off = static_cast<size_t>(a * e);
        size_t cnt = static_cast<size_t>(len);
        c.start    = [off, cnt, dt, op](gcx_comm_t *comm, auto &reqs,
                                     uint8_t *in, uint8_t *) {
            GCX_ISSUE(gcx_allreduce(comm, GCX_IN_PLACE, in + off, cnt, dt, op,
                                    &r_));
            return GCX_OK;
        };
        plan.chunks.push_back(std::move(c));
    }
    plan.outputs = {t};
    plan.inputs  = {t};
    return submit_staged(std::move(plan));
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::staged_broadcast(std::vector<at::Tensor> &tensors,
                             const c10d::BroadcastOptions &opts,
                             c10::Device dev)
{
    const char *name = "broadcast";
    TORCH_CHECK(tensors.size() == 1, "gcx ", name,
                ": expected exactly one tensor, got ", tensors.size());
    at::Tensor t = tensors[0];
    check_dense(t, name, "the tensor");
    TORCH_CHECK(opts.rootTensor == 0, "gcx broadcast: rootTensor must be 0");
    check_root(opts.rootRank, getSize(), name);
    if (coalescing()) {
        Mirror m(dev);
        std::vector<at::Tensor> h = m.inout(tensors);
        return m.run([&] { return broadcast(h, opts); });
    }
    const int root  = static_cast<int>(opts.rootRank);
    const bool mine = root == getRank();
    const int64_t e = static_cast<int64_t>(t.element_size());
    at::Tensor b    = byte_view(t);
    StagePlan plan;
    plan.name     = "gcx_broadcast";
    plan.type     = c10d::OpType::BROADCAST;
    plan.device   = dev;
    plan.in_bytes = plan.out_bytes = nbytes(t);
    plan.out_is_in                 = true;
    for (auto [a, len] : chunk_ranges(t.numel(), static_cast<size_t>(e))) {
        StageChunk c;
        StagePiece p{b.narrow(0, a * e, len * e), a * e};
        // the root only sends, the others only receive
        (mine ? c.in : c.out).push_back(p);
        size_t off = static_cast<size_t>(a * e);
        size_t sz  = static_cast<size_t>(len * e);
        c.start    = [off, sz, root](gcx_comm_t *comm, auto &reqs,
                                  uint8_t *in, uint8_t *) {
            GCX_ISSUE(gcx_broadcast(comm, in + off, sz, GCX_DT_U8, root, &r_));
            return GCX_OK;
        };
        plan.chunks.push_back(std::move(c));
    }
    plan.outputs = {t};
    plan.inputs  = {t};
    return submit_staged(std::move(plan));
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::staged_reduce(std::vector<at::Tensor> &tensors,
                          const c10d::ReduceOptions &opts, c10::Device dev)
{
    const char *name = "reduce";
    TORCH_CHECK(tensors.size() == 1, "gcx ", name,
                ": expected exactly one tensor, got ", tensors.size());
    at::Tensor t = tensors[0];
    check_dense(t, name, "the tensor");
    TORCH_CHECK(opts.rootTensor == 0, "gcx reduce: rootTensor must be 0");
    check_root(opts.rootRank, getSize(), name);
    if (coalescing() || combined_locally(opts.reduceOp, t)) {
        Mirror m(dev);
        std::vector<at::Tensor> h = m.inout(tensors);
        return m.run([&] { return reduce(h, opts); });
    }
    gcx_dtype_t dt  = reduce_dtype(t, name);
    Reduction red   = reduction(opts.reduceOp, t, name);
    gcx_op_t op     = red.op;
    const int root  = static_cast<int>(opts.rootRank);
    const bool mine = root == getRank();
    // the root reduces in place; the others keep their input
    at::Tensor src  = premul_input(red, t, mine);
    const int64_t e = static_cast<int64_t>(t.element_size());
    at::Tensor sb = byte_view(src), tb = byte_view(t);
    StagePlan plan;
    plan.name     = "gcx_reduce";
    plan.type     = c10d::OpType::REDUCE;
    plan.device   = dev;
    plan.in_bytes = plan.out_bytes = nbytes(t);
    plan.out_is_in                 = true;
    for (auto [a, len] : chunk_ranges(t.numel(), static_cast<size_t>(e))) {
        StageChunk c;
        c.in = {{sb.narrow(0, a * e, len * e), a * e}};
        if (mine) {
            c.out = {{tb.narrow(0, a * e, len * e), a * e}};
        }
        size_t off = static_cast<size_t>(a * e);
        size_t cnt = static_cast<size_t>(len);
        c.start    = [off, cnt, dt, op, root, mine](gcx_comm_t *comm,
                                                 auto &reqs, uint8_t *in,
                                                 uint8_t *) {
            GCX_ISSUE(gcx_reduce(comm, mine ? GCX_IN_PLACE : in + off,
                                 mine ? in + off : nullptr, cnt, dt, op, root,
                                 &r_));
            return GCX_OK;
        };
        plan.chunks.push_back(std::move(c));
    }
    plan.outputs = {t};
    plan.inputs  = {t};
    return submit_staged(std::move(plan));
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::staged_allgather_base(at::Tensor &output, at::Tensor &input,
                                  const c10d::AllgatherOptions &opts,
                                  c10::Device dev)
{
    const char *name = "allgather_into_tensor";
    check_dense(input, name, "the input tensor");
    check_dense(output, name, "the output tensor");
    const int p = getSize();
    TORCH_CHECK(output.scalar_type() == input.scalar_type() &&
                    output.numel() == p * input.numel(),
                "gcx allgather_into_tensor: the output must hold ", p, " x ",
                input.numel(), " elements of ", input.scalar_type(), ", got ",
                output.numel(), " of ", output.scalar_type());
    if (coalescing()) {
        Mirror m(dev);
        at::Tensor hi = m.in(input), ho = m.out(output);
        return m.run([&] { return _allgather_base(ho, hi, opts); });
    }
    const int64_t e = static_cast<int64_t>(input.element_size());
    const int64_t B = static_cast<int64_t>(nbytes(input));
    at::Tensor ib = byte_view(input), ob = byte_view(output);
    StagePlan plan;
    plan.name      = "gcx_allgather";
    plan.type      = c10d::OpType::_ALLGATHER_BASE;
    plan.device    = dev;
    plan.in_bytes  = static_cast<size_t>(B);
    plan.out_bytes = static_cast<size_t>(p * B);
    for (auto [a, len] : chunk_ranges(input.numel(), static_cast<size_t>(e))) {
        StageChunk c;
        c.in = {{ib.narrow(0, a * e, len * e), a * e}};
        for (int r = 0; r < p; ++r) {
            c.out.push_back({ob.narrow(0, r * B + a * e, len * e),
                             p * a * e + r * len * e});
        }
        size_t ioff = static_cast<size_t>(a * e);
        size_t ooff = static_cast<size_t>(p * a * e);
        size_t sz   = static_cast<size_t>(len * e);
        c.start     = [ioff, ooff, sz](gcx_comm_t *comm, auto &reqs,
                                   uint8_t *in, uint8_t *out) {
            GCX_ISSUE(gcx_allgather(comm, in + ioff, out + ooff, sz,
                                    GCX_DT_U8, &r_));
            return GCX_OK;
        };
        plan.chunks.push_back(std::move(c));
    }
    plan.outputs = {output};
    plan.inputs  = {input};
    return submit_staged(std::move(plan));
}

c10::intrusive_ptr<c10d::Work>
GcxBackend::staged_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                       const c10d::ReduceScatterOptions &opts,
                                       c10::Device dev)
{
    const char *name = "reduce_scatter_tensor";
    check_dense(input, name, "the input tensor");
    check_dense(output, name, "the output tensor");
    gcx_dtype_t dt = reduce_dtype(output, name);
    Reduction red  = reduction(opts.reduceOp, output, name);
    gcx_op_t op    = red.op;
    const int p    = getSize();
    TORCH_CHECK(input.scalar_type() == output.scalar_type() &&
                    input.numel() == p * output.numel(),
                "gcx reduce_scatter_tensor: the input must hold ", p, " x ",
                output.numel(), " elements of ", output.scalar_type(),
                ", got ", input.numel(), " of ", input.scalar_type());
    if (coalescing()) {
        Mirror m(dev);
        at::Tensor hi = m.in(input), ho = m.out(output);
        return m.run([&] { return _reduce_scatter_base(ho, hi, opts); });
    }
    at::Tensor in   = premul_input(red, input, false);
    const int64_t e = static_cast<int64_t>(output.element_size());
    const int64_t B = static_cast<int64_t>(nbytes(output));
    at::Tensor ib = byte_view(in), ob = byte_view(output);
    StagePlan plan;
    plan.name      = "gcx_reduce_scatter";
    plan.type      = c10d::OpType::_REDUCE_SCATTER_BASE;
    plan.device    = dev;
    plan.in_bytes  = static_cast<size_t>(p * B);
    plan.out_bytes = static_cast<size_t>(B);
    for (auto [a, len] :
         chunk_ranges(output.numel(), static_cast<size_t>(e))) {
        StageChunk c;
        for (int r = 0; r < p; ++r) {
            c.in.push_back({ib.narrow(0, r * B + a * e, len * e),
                            p * a * e + r * len * e});
        }
        c.out       = {{ob.narrow(0, a * e, len * e), a * e}};
        size_t ioff = static_cast<size_t>(p * a * e);
        size_t ooff = static_cast<size_t>(a * e);
        size_t cnt  = static_cast<size_t>(len);
        c.start     = [ioff, ooff, cnt, dt, op](gcx_comm_t *comm, auto &reqs,
                                            uint8_t *hin, uint8_t *hout) {
            GCX_ISSUE(gcx_reduce_scatter(comm, hin + ioff, hout + ooff, cnt,
                                         dt, op, &r_));
            return GCX_OK;
        };
        plan.chunks.push_back(std::move(c));
    }
    plan.outputs = {output};
    plan.inputs  = {input};
    return submit_staged(std::move(plan));
}

} // namespace torch_gcx
