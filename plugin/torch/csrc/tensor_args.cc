// tensor_args.cc - how the backend checks torch's arguments and maps them
// onto gcx's: tensors (CPU, dense, contiguous), dtypes and reduce ops,
// roots, and the flat buffers of list-shaped collectives.
//
// Idea: every check runs on the calling (Python) thread before a job is
// queued, so bad use raises at the call with a message naming the op and
// the argument, and nothing reaches gcx. Cost: a few comparisons per
// tensor; flat_cat/scatter_copy copy the data once (list-shaped calls).
#include "tensor_args.h"
#include "engine.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <torch/headeronly/version.h>

#include <optional>

namespace torch_gcx {

// torch 2.11 and 2.12 call PREMUL_SUM's factor NCCLPreMulSumSupplement;
// 2.13 renamed it PreMulSumSupplement
#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 13
using PreMulSupplement = c10d::NCCLPreMulSumSupplement;
#else
using PreMulSupplement = c10d::PreMulSumSupplement;
#endif

void check_status(gcx_status_t st, const std::string &what)
{
    TORCH_CHECK(st == GCX_OK, status_message(what, st));
}

void check_tensor(const at::Tensor &t, const char *op, const char *what)
{
    TORCH_CHECK(t.defined(), "gcx ", op, ": ", what, " is undefined");
    TORCH_CHECK(t.device().is_cpu(), "gcx ", op, ": ", what,
                " must be a CPU tensor, got one on ", t.device(),
                " (the gcx backend supports CPU tensors only)");
    TORCH_CHECK(t.layout() == at::kStrided, "gcx ", op, ": ", what,
                " must be a dense (strided) tensor, got layout ", t.layout());
    TORCH_CHECK(t.is_contiguous(), "gcx ", op, ": ", what,
                " must be contiguous (call .contiguous() first)");
}

void check_dense(const at::Tensor &t, const char *op, const char *what)
{
    TORCH_CHECK(t.defined(), "gcx ", op, ": ", what, " is undefined");
    TORCH_CHECK(t.layout() == at::kStrided, "gcx ", op, ": ", what,
                " must be a dense (strided) tensor, got layout ", t.layout());
    TORCH_CHECK(t.is_contiguous(), "gcx ", op, ": ", what,
                " must be contiguous (call .contiguous() first)");
}

c10::Device call_device(const std::vector<const std::vector<at::Tensor> *> &lists,
                        const char *op)
{
    std::optional<c10::Device> dev;
    for (const auto *l : lists) {
        for (const auto &t : *l) {
            if (!t.defined()) {
                continue;
            }
            c10::Device d = t.device();
            if (!dev) {
                dev = d;
                continue;
            }
            TORCH_CHECK(*dev == d, "gcx ", op, ": the tensors of one call "
                        "are on more than one device (", *dev, " and ", d,
                        "); every tensor of a call must be on the same "
                        "device");
        }
    }
    if (!dev) {
        return c10::Device(c10::kCPU);
    }
    // an accelerator's tensors are staged through host memory by its
    // streams and events (staging.h): any device type with a guard
    // implementation will do (torch_gcx registers for GCX_TORCH_DEVICES)
    TORCH_CHECK(dev->is_cpu() ||
                    (!dev->is_meta() &&
                     c10::impl::hasDeviceGuardImpl(dev->type())),
                "gcx ", op, ": the tensors are on ", *dev,
                "; the gcx backend takes CPU tensors and tensors of an "
                "accelerator (cuda, or a device type of GCX_TORCH_DEVICES)");
    return *dev;
}

at::Tensor single(std::vector<at::Tensor> &ts, const char *op,
                  const char *what)
{
    TORCH_CHECK(ts.size() == 1, "gcx ", op,
                ": expected exactly one tensor, got ", ts.size());
    check_tensor(ts[0], op, what);
    return ts[0];
}

size_t nbytes(const at::Tensor &t)
{
    return static_cast<size_t>(t.numel()) * t.element_size();
}

size_t count(const at::Tensor &t)
{
    return static_cast<size_t>(t.numel());
}

gcx_dtype_t reduce_dtype(const at::Tensor &t, const char *op)
{
    switch (t.scalar_type()) {
    case at::kFloat: return GCX_DT_F32;
    case at::kDouble: return GCX_DT_F64;
    case at::kInt: return GCX_DT_I32;
    case at::kLong: return GCX_DT_I64;
    case at::kHalf: return GCX_DT_F16;
    case at::kBFloat16: return GCX_DT_BF16;
    default: break;
    }
    TORCH_CHECK(false, "gcx ", op, ": dtype ", t.scalar_type(),
                " cannot be reduced by gcx (supported: float32, float64, "
                "int32, int64, float16, bfloat16)");
}

const char *reduce_op_name(c10d::ReduceOp::RedOpType op)
{
    switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
    }
}

gcx_op_t reduce_op(const c10d::ReduceOp &op, const char *name)
{
    switch (op.op_) {
    case c10d::ReduceOp::SUM: return GCX_OP_SUM;
    case c10d::ReduceOp::AVG: return GCX_OP_AVG;
    case c10d::ReduceOp::MIN: return GCX_OP_MIN;
    case c10d::ReduceOp::MAX: return GCX_OP_MAX;
    case c10d::ReduceOp::PRODUCT: return GCX_OP_PROD;
    case c10d::ReduceOp::BAND: return GCX_OP_BAND;
    case c10d::ReduceOp::BOR: return GCX_OP_BOR;
    case c10d::ReduceOp::BXOR: return GCX_OP_BXOR;
    default: break;
    }
    TORCH_CHECK(false, "gcx ", name, ": ReduceOp.", reduce_op_name(op.op_),
                " is not supported by the gcx backend (supported: SUM, AVG, "
                "MIN, MAX, PRODUCT, BAND, BOR, BXOR, PREMUL_SUM)");
}

bool bitwise_op(c10d::ReduceOp::RedOpType op)
{
    return op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR ||
           op == c10d::ReduceOp::BXOR;
}

bool reducible(const at::Tensor &t, c10d::ReduceOp::RedOpType op)
{
    switch (t.scalar_type()) {
    case at::kInt:
    case at::kLong: return true;
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16: return !bitwise_op(op);
    default: return false;
    }
}

Reduction reduction(const c10d::ReduceOp &op, const at::Tensor &t,
                    const char *name)
{
    Reduction r;
    if (op.op_ != c10d::ReduceOp::PREMUL_SUM) {
        r.op = reduce_op(op, name);
        TORCH_CHECK(!bitwise_op(op.op_) || t.scalar_type() == at::kInt ||
                        t.scalar_type() == at::kLong,
                    "gcx ", name, ": ReduceOp.", reduce_op_name(op.op_),
                    " needs an integer dtype (int32, int64 here), got ",
                    t.scalar_type());
        return r;
    }
    TORCH_CHECK(at::isFloatingType(t.scalar_type()), "gcx ", name,
                ": ReduceOp.PREMUL_SUM needs a floating dtype, got ",
                t.scalar_type());
    auto *sup = dynamic_cast<PreMulSupplement *>(op.supplement_.get());
    TORCH_CHECK(sup != nullptr, "gcx ", name,
                ": ReduceOp.PREMUL_SUM without its factor (make it with "
                "torch.distributed._make_nccl_premul_sum)");
    if (sup->tensor_factor.defined()) {
        const at::Tensor &f = sup->tensor_factor;
        TORCH_CHECK(f.numel() == 1, "gcx ", name,
                    ": the PREMUL_SUM factor must be a one-element "
                    "tensor, got ", f.numel(), " elements on ", f.device());
        r.factor = f.item<double>();
    } else {
        r.factor = sup->double_factor;
    }
    r.premul = true;
    return r;
}

at::Tensor premul_input(const Reduction &r, const at::Tensor &t,
                        bool in_place)
{
    if (!r.premul) {
        return t;
    }
    if (in_place) {
        t.mul_(r.factor);
        return t;
    }
    return t.mul(r.factor).contiguous();
}

void check_root(int64_t root, int size, const char *op)
{
    TORCH_CHECK(root >= 0 && root < size, "gcx ", op, ": root rank ", root,
                " is out of range for a group of ", size);
}

at::Tensor flat_cat(const std::vector<at::Tensor> &ts, const at::Tensor &like,
                    const char *op, const char *what)
{
    std::vector<at::Tensor> flat;
    flat.reserve(ts.size());
    for (auto &t : ts) {
        check_tensor(t, op, what);
        TORCH_CHECK(t.scalar_type() == like.scalar_type() &&
                        t.numel() == like.numel(),
                    "gcx ", op, ": every tensor of ", what, " must have ",
                    like.numel(), " elements of ", like.scalar_type(),
                    ", got ", t.numel(), " of ", t.scalar_type());
        flat.push_back(t.reshape({-1}));
    }
    return at::cat(flat);
}

// copy block i of flat (numel of each out) into out[i]
void scatter_copy(const at::Tensor &flat, const std::vector<at::Tensor> &out)
{
    int64_t off = 0;
    for (auto &t : out) {
        t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
        off += t.numel();
    }
}

} // namespace torch_gcx
