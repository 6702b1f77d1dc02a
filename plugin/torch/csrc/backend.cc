// backend.cc - the "gcx" torch.distributed backend: a c10d::Backend whose
// methods check their tensors, build a Job (engine.h) around one or more
// non-blocking gcx calls and return a Work at once; and the Python module
// torch_gcx._C that creates it.
//
// Idea: a thin shim. Everything that moves data is libgcx; this file maps
// torch's arguments onto gcx's (dtype, op, counts, roots), keeps the tensors
// alive until the job is done and turns a gcx status into an exception that
// names it. Data movement (broadcast, allgather, gather, scatter, alltoall,
// send/recv) goes as bytes (GCX_DT_U8), so every dtype works; reductions
// need a gcx element type. Cost: list-shaped collectives (allgather and
// gather into lists, reduce_scatter and scatter from lists) pay one copy
// through a flat buffer; the tensor-shaped ones are zero copy.
#include "backend.h"
#include "comm_create.h"
#include "tensor_args.h"

#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace torch_gcx {

namespace {

std::exception_ptr make_error(const std::string &what, gcx_status_t status)
{
    return std::make_exception_ptr(c10::DistBackendError(
        {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
        status_message(what, status)));
}

} // namespace

// ---- Work ------------------------------------------------------------------

class GcxWork : public c10d::Work {
  public:
    GcxWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
        : c10d::Work(rank, type), outputs_(std::move(outputs)),
          future_(c10::make_intrusive<c10::ivalue::Future>(
              c10::ListType::create(c10::TensorType::get())))
    {
    }

    bool isSuccess() const override
    {
        std::lock_guard<std::mutex> lk(mutex_);
        return completed_ && !exception_;
    }

    std::vector<at::Tensor> result() override { return outputs_; }

    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
    {
        return future_;
    }

    // completer thread, no plugin lock held: the Work first (wait()
    // returns), then the Future (its callbacks run here)
    void finish_ok()
    {
        finish();
        future_->markCompleted(c10::IValue(outputs_));
    }

    void finish_error(std::exception_ptr e)
    {
        finish(e);
        future_->setError(e);
    }

  private:
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// ---- Backend ---------------------------------------------------------------

class GcxBackend : public c10d::Backend {
  public:
    // global_ranks: the group's ranks in torch's default group (empty: this
    // is the default group); group_name: torch's name of the group.
    GcxBackend(const c10::intrusive_ptr<c10d::Store> &store, int rank,
               int size, double timeout_s,
               const std::vector<int64_t> &global_ranks,
               const std::string &group_name, bool from_default)
        : c10d::Backend(rank, size)
    {
        TORCH_CHECK(size > 0 && rank >= 0 && rank < size,
                    "gcx: bad rank ", rank, " for a group of ", size);
        GroupSpec spec{store, rank, size, timeout_s, global_ranks,
                       group_name, from_default};
        gcx_comm_t *comm = nullptr;
        Engine::get().run_sync("comm_create", [&] {
            comm = create_group_comm(spec, &creation_);
        });
        comm_ = comm;
    }

    // How the communicator was made: "create_group" (from the default
    // group's) or "store" (gcx_comm_create over the group's Store).
    const std::string &creation() const { return creation_; }

    // A GCX_* variable of the group's communicator, as text.
    std::string config_value(const std::string &name) const
    {
        char buf[256];
        TORCH_CHECK(comm_ != nullptr, "gcx: the group has been destroyed");
        gcx_status_t st = gcx_config_get(gcx_comm_config(comm_), name.c_str(),
                                         buf, sizeof(buf));
        TORCH_CHECK(st == GCX_OK, status_message("gcx_config_get(" + name + ")",
                                                 st));
        return buf;
    }

    ~GcxBackend() override
    {
        try {
            destroy_comm();
        } catch (...) {
            // at interpreter exit the engine may be gone: leave it to exit
        }
    }

    const std::string getBackendName() const override { return "gcx"; }

    void shutdown() override { destroy_comm(); }

    void abort() override { destroy_comm(); }

    void setSequenceNumberForGroup() override {}

    uint64_t getSequenceNumberForGroup() override { return 0; }

    // -- collectives --------------------------------------------------------

    c10::intrusive_ptr<c10d::Work>
    allreduce(std::vector<at::Tensor> &tensors,
              const c10d::AllreduceOptions &opts) override
    {
        if (tensors.size() == 1 && tensors[0].defined() &&
            tensors[0].is_sparse()) {
            return sparse_allreduce(*this, tensors[0], opts);
        }
        at::Tensor t   = single(tensors, "allreduce");
        gcx_dtype_t dt = reduce_dtype(t, "allreduce");
        gcx_op_t op    = reduce_op(opts.reduceOp, "allreduce");
        return enqueue("gcx_allreduce", c10d::OpType::ALLREDUCE, {t},
                       [t, dt, op](gcx_comm_t *c, auto &reqs) {
                           GCX_ISSUE(gcx_allreduce(c, GCX_IN_PLACE,
                                                   t.data_ptr(), count(t), dt,
                                                   op, &r_));
                           return GCX_OK;
                       });
    }

    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &tensors,
                        const c10d::AllreduceCoalescedOptions &opts) override
    {
        TORCH_CHECK(!tensors.empty(),
                    "gcx allreduce_coalesced: no tensors given");
        std::vector<gcx_dtype_t> dts;
        for (auto &t : tensors) {
            check_tensor(t, "allreduce_coalesced", "every tensor");
            dts.push_back(reduce_dtype(t, "allreduce_coalesced"));
        }
        gcx_op_t op = reduce_op(opts.reduceOp, "allreduce_coalesced");
        std::vector<at::Tensor> ts = tensors;
        return enqueue("gcx_allreduce (coalesced)",
                       c10d::OpType::ALLREDUCE_COALESCED, ts,
                       [ts, dts, op](gcx_comm_t *c, auto &reqs) {
                           for (size_t i = 0; i < ts.size(); ++i) {
                               GCX_ISSUE(gcx_allreduce(
                                   c, GCX_IN_PLACE, ts[i].data_ptr(),
                                   count(ts[i]), dts[i], op, &r_));
                           }
                           return GCX_OK;
                       });
    }

    c10::intrusive_ptr<c10d::Work>
    broadcast(std::vector<at::Tensor> &tensors,
              const c10d::BroadcastOptions &opts) override
    {
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
    allgather(std::vector<std::vector<at::Tensor>> &outputs,
              std::vector<at::Tensor> &inputs,
              const c10d::AllgatherOptions &) override
    {
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
            [flat, outs] { scatter_copy(flat, outs); });
    }

    c10::intrusive_ptr<c10d::Work>
    _allgather_base(at::Tensor &output, at::Tensor &input,
                    const c10d::AllgatherOptions &) override
    {
        check_tensor(input, "allgather_into_tensor", "the input tensor");
        check_tensor(output, "allgather_into_tensor", "the output tensor");
        TORCH_CHECK(output.scalar_type() == input.scalar_type() &&
                        output.numel() == getSize() * input.numel(),
                    "gcx allgather_into_tensor: the output must hold ",
                    getSize(), " x ", input.numel(), " elements of ",
                    input.scalar_type(), ", got ", output.numel(), " of ",
                    output.scalar_type());
        at::Tensor in = input, out = output;
        return enqueue("gcx_allgather", c10d::OpType::_ALLGATHER_BASE, {out},
                       [in, out](gcx_comm_t *c, auto &reqs) {
                           GCX_ISSUE(gcx_allgather(c, in.data_ptr(),
                                                   out.data_ptr(), nbytes(in),
                                                   GCX_DT_U8, &r_));
                           return GCX_OK;
                       });
    }

    c10::intrusive_ptr<c10d::Work>
    reduce_scatter(std::vector<at::Tensor> &outputs,
                   std::vector<std::vector<at::Tensor>> &inputs,
                   const c10d::ReduceScatterOptions &opts) override
    {
        at::Tensor out = single(outputs, "reduce_scatter", "the output tensor");
        gcx_dtype_t dt = reduce_dtype(out, "reduce_scatter");
        gcx_op_t op    = reduce_op(opts.reduceOp, "reduce_scatter");
        TORCH_CHECK(inputs.size() == 1,
                    "gcx reduce_scatter: expected one list of input tensors, "
                    "got ", inputs.size());
        TORCH_CHECK(static_cast<int>(inputs[0].size()) == getSize(),
                    "gcx reduce_scatter: expected ", getSize(),
                    " input tensors (one per rank), got ", inputs[0].size());
        at::Tensor flat =
            flat_cat(inputs[0], out, "reduce_scatter", "the input list");
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
    _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                         const c10d::ReduceScatterOptions &opts) override
    {
        const char *name = "reduce_scatter_tensor";
        check_tensor(input, name, "the input tensor");
        check_tensor(output, name, "the output tensor");
        gcx_dtype_t dt = reduce_dtype(output, name);
        gcx_op_t op    = reduce_op(opts.reduceOp, name);
        TORCH_CHECK(input.scalar_type() == output.scalar_type() &&
                        input.numel() == getSize() * output.numel(),
                    "gcx reduce_scatter_tensor: the input must hold ",
                    getSize(), " x ", output.numel(), " elements of ",
                    output.scalar_type(), ", got ", input.numel(), " of ",
                    input.scalar_type());
        at::Tensor in = input, out = output;
        return enqueue("gcx_reduce_scatter",
                       c10d::OpType::_REDUCE_SCATTER_BASE, {out},
                       [in, out, dt, op](gcx_comm_t *c, auto &reqs) {
                           GCX_ISSUE(gcx_reduce_scatter(c, in.data_ptr(),
                                                        out.data_ptr(),
                                                        count(out), dt, op,
                                                        &r_));
                           return GCX_OK;
                       });
    }

    c10::intrusive_ptr<c10d::Work>
    alltoall_base(at::Tensor &output, at::Tensor &input,
                  std::vector<int64_t> &outSplits,
                  std::vector<int64_t> &inSplits,
                  const c10d::AllToAllOptions &) override
    {
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
                       });
    }

    c10::intrusive_ptr<c10d::Work>
    reduce(std::vector<at::Tensor> &tensors,
           const c10d::ReduceOptions &opts) override
    {
        at::Tensor t   = single(tensors, "reduce");
        gcx_dtype_t dt = reduce_dtype(t, "reduce");
        gcx_op_t op    = reduce_op(opts.reduceOp, "reduce");
        TORCH_CHECK(opts.rootTensor == 0, "gcx reduce: rootTensor must be 0");
        check_root(opts.rootRank, getSize(), "reduce");
        int root  = static_cast<int>(opts.rootRank);
        bool mine = root == getRank();
        return enqueue("gcx_reduce", c10d::OpType::REDUCE, {t},
                       [t, dt, op, root, mine](gcx_comm_t *c, auto &reqs) {
                           GCX_ISSUE(gcx_reduce(
                               c, mine ? GCX_IN_PLACE : t.data_ptr(),
                               mine ? t.data_ptr() : nullptr, count(t), dt,
                               op, root, &r_));
                           return GCX_OK;
                       });
    }

    c10::intrusive_ptr<c10d::Work>
    gather(std::vector<std::vector<at::Tensor>> &outputs,
           std::vector<at::Tensor> &inputs,
           const c10d::GatherOptions &opts) override
    {
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
            post);
    }

    c10::intrusive_ptr<c10d::Work>
    scatter(std::vector<at::Tensor> &outputs,
            std::vector<std::vector<at::Tensor>> &inputs,
            const c10d::ScatterOptions &opts) override
    {
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
    barrier(const c10d::BarrierOptions &) override
    {
        return enqueue("gcx_barrier", c10d::OpType::BARRIER, {},
                       [](gcx_comm_t *c, auto &reqs) {
                           GCX_ISSUE(gcx_barrier(c, &r_));
                           return GCX_OK;
                       });
    }

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors,
                                        int dst, int tag) override
    {
        return p2p(tensors, dst, tag, true);
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors,
                                        int src, int tag) override
    {
        return p2p(tensors, src, tag, false);
    }

    // A job of several gcx calls on this group (the DDP hooks, hooks.cc).
    c10::intrusive_ptr<c10d::Work> composite(const std::string &name,
                                             std::vector<at::Tensor> outputs,
                                             StartFn start,
                                             std::function<void()> post,
                                             c10d::OpType type)
    {
        return enqueue(name, type, std::move(outputs), std::move(start),
                       std::move(post));
    }

  private:
    // send (is_send) or receive one tensor, as bytes, with a tag >= 0
    c10::intrusive_ptr<c10d::Work> p2p(std::vector<at::Tensor> &tensors,
                                       int peer, int tag, bool is_send)
    {
        const char *op = is_send ? "send" : "recv";
        at::Tensor  t  = single(tensors, op);
        check_root(peer, getSize(), op);
        TORCH_CHECK(tag >= 0, "gcx ", op, ": tag must be >= 0, got ", tag);
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

    c10::intrusive_ptr<c10d::Work> enqueue(const std::string &name,
                                           c10d::OpType type,
                                           std::vector<at::Tensor> outputs,
                                           StartFn start,
                                           std::function<void()> post = {})
    {
        gcx_comm_t *comm = comm_;
        TORCH_CHECK(comm != nullptr, "gcx ", name,
                    ": the process group has been shut down");
        auto work         = c10::make_intrusive<GcxWork>(getRank(), type,
                                                         std::move(outputs));
        auto job          = std::make_shared<Job>();
        job->name         = name;
        job->comm         = comm;
        job->start        = [comm, start](std::vector<gcx_request_t *> &reqs) {
            return start(comm, reqs);
        };
        job->done = [work, post, name](gcx_status_t status) {
            if (status != GCX_OK) {
                work->finish_error(make_error(name, status));
                return;
            }
            try {
                if (post) {
                    post(); // copy out of the flat buffer
                }
            } catch (...) {
                work->finish_error(std::current_exception());
                return;
            }
            work->finish_ok();
        };
        Engine::get().submit(job);
        return work;
    }

    void destroy_comm()
    {
        gcx_comm_t *comm = comm_;
        comm_            = nullptr;
        if (comm != nullptr && Engine::get().running()) {
            Engine::get().run_sync(
                "comm_destroy",
                [comm] {
                    forget_group_comm(comm);
                    gcx_comm_destroy(comm);
                },
                comm);
        }
    }

    gcx_comm_t *comm_ = nullptr;
    std::string creation_;
};

GcxBackend &as_gcx(const c10::intrusive_ptr<c10d::Backend> &backend)
{
    auto *b = dynamic_cast<GcxBackend *>(backend.get());
    TORCH_CHECK(b != nullptr, "torch_gcx: the process group's CPU backend is ",
                backend ? backend->getBackendName() : std::string("none"),
                ", not gcx (create the group with backend \"gcx\")");
    return *b;
}

c10::intrusive_ptr<c10d::Work> submit_composite(GcxBackend &backend,
                                                const std::string &name,
                                                std::vector<at::Tensor> outputs,
                                                StartFn start,
                                                std::function<void()> post,
                                                c10d::OpType type)
{
    return backend.composite(name, std::move(outputs), std::move(start),
                             std::move(post), type);
}

int group_size(const GcxBackend &backend) { return backend.getSize(); }

} // namespace torch_gcx

PYBIND11_MODULE(_C, m)
{
    m.doc() = "gcx torch.distributed backend (C++ part)";
    m.def(
        "create_backend",
        [](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
           double timeout_s, const std::vector<int64_t> &global_ranks,
           const std::string &group_name, bool from_default)
            -> c10::intrusive_ptr<c10d::Backend> {
            return c10::make_intrusive<torch_gcx::GcxBackend>(
                store, rank, size, timeout_s, global_ranks, group_name,
                from_default);
        },
        py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout_s"), py::arg("global_ranks"), py::arg("group_name"),
        py::arg("from_default"),
        py::call_guard<py::gil_scoped_release>(),
        "Create the gcx backend of a group (collective over its members).");
    m.def(
        "group_creation",
        [](const c10::intrusive_ptr<c10d::Backend> &backend) {
            return torch_gcx::as_gcx(backend).creation();
        },
        "How a gcx group's communicator was made: 'create_group' or "
        "'store'.");
    m.def(
        "group_config",
        [](const c10::intrusive_ptr<c10d::Backend> &backend,
           const std::string &name) {
            return torch_gcx::as_gcx(backend).config_value(name);
        },
        "A GCX_* variable of a gcx group's communicator, as text.");
    m.def(
        "shutdown",
        [] {
            if (auto *e = torch_gcx::Engine::existing()) {
                e->shutdown();
            }
        },
        py::call_guard<py::gil_scoped_release>(),
        "Stop the engine and completer threads (atexit).");
    m.def("gcx_version", [] { return std::string(gcx_version()); });
    torch_gcx::bind_hooks(m);
}
