// tensor_args.h - argument checks and torch -> gcx mappings of the
// backend (tensor_args.cc); each failed check raises (TORCH_CHECK) with a
// message naming the op and what was wrong.
#pragma once

#include <gcx/gcx.h>

#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

namespace torch_gcx {

// A gcx call's status: anything but GCX_OK raises, naming the call (what)
// and the status (status_message, engine.h).
void check_status(gcx_status_t st, const std::string &what);
// t must be defined, on the CPU, strided and contiguous.
void check_tensor(const at::Tensor &t, const char *op, const char *what);
// t must be defined, strided and contiguous, on any device (a device
// tensor is staged through host memory, staging.h).
void check_dense(const at::Tensor &t, const char *op, const char *what);
// The one device of a call's tensors (undefined ones skipped; none at all:
// the CPU). Tensors on two devices (a CPU/CUDA mix, or cuda:0 and cuda:1),
// or on a device type the backend cannot stage (meta, or one without a
// device guard: it takes cpu and the accelerators of GCX_TORCH_DEVICES),
// raise, naming the devices. Every rank checks its own call, as for the
// other argument checks: a call every rank makes the same way raises on
// every rank.
c10::Device call_device(const std::vector<const std::vector<at::Tensor> *> &lists,
                        const char *op);
// The one tensor of ts, checked.
at::Tensor single(std::vector<at::Tensor> &ts, const char *op,
                  const char *what = "the tensor");
size_t nbytes(const at::Tensor &t);
size_t count(const at::Tensor &t);
// gcx's element type for a reduction of t (float32/64, int32/64, f16, bf16).
gcx_dtype_t reduce_dtype(const at::Tensor &t, const char *op);
const char *reduce_op_name(c10d::ReduceOp::RedOpType op);
// SUM/AVG/MIN/MAX/PRODUCT/BAND/BOR/BXOR; any other op raises, naming it.
gcx_op_t reduce_op(const c10d::ReduceOp &op, const char *name);
bool bitwise_op(c10d::ReduceOp::RedOpType op);
// Whether gcx reduces t's dtype with op (the bitwise ops: int32/int64).
bool reducible(const at::Tensor &t, c10d::ReduceOp::RedOpType op);
// A reduction of t as gcx runs it: SUM/AVG/MIN/MAX as they are; PREMUL_SUM
// (torch.distributed._make_nccl_premul_sum, FSDP2's gradient scaling) as
// SUM of the inputs multiplied first by its factor (a float, or a
// one-element tensor read at the call), on floating dtypes only. Raises,
// naming the op, for anything else.
struct Reduction {
    gcx_op_t op   = GCX_OP_SUM;
    bool premul   = false; // multiply the input by factor first
    double factor = 1.0;
};
Reduction reduction(const c10d::ReduceOp &op, const at::Tensor &t,
                    const char *name);
// The input of a reduction as gcx reads it: t itself, or (PREMUL_SUM) t
// multiplied by the factor, in place when in_place (t's content is
// replaced by the result anyway), else into a new tensor.
at::Tensor premul_input(const Reduction &r, const at::Tensor &t,
                        bool in_place);
void check_root(int64_t root, int size, const char *op);
// The tensors of ts (each checked, each like `like`) one after another.
at::Tensor flat_cat(const std::vector<at::Tensor> &ts, const at::Tensor &like,
                    const char *op, const char *what);
// Copy block i of flat (numel of each out) into out[i].
void scatter_copy(const at::Tensor &flat, const std::vector<at::Tensor> &out);

} // namespace torch_gcx
