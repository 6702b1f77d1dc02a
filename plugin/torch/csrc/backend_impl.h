// backend_impl.h - the class behind the "gcx" backend, GcxBackend, shared
// by the files that implement it, one concern each:
//   backend.cc        the group: creation, split, shrink, abort, errors,
//                     coalescing blocks, monitored barrier, and how a call
//                     becomes an engine job (enqueue, submit_job)
//   ops.cc            op dispatch: one method per c10d collective or p2p
//                     call, mapping it onto gcx calls
//   ops_coalesced.cc  the coalesced calls, and reductions gcx cannot do on
//                     a dtype (gathered and combined here)
//   tensor_args.cc    argument checks and torch -> gcx mappings
//   work.h/.cc        the Work and its Future
//   module.cc         the Python module torch_gcx._C
// The rest of the plugin sees only backend.h.
#pragma once

#include "backend.h"
#include "shrink.h"
#include "staging.h"
#include "work.h"

#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace torch_gcx {

// The tag of monitoredBarrier's messages; user tags are below it.
constexpr int kMonitorTag = 2147483647;

// indices of ts grouped by dtype, groups in order of first appearance
std::vector<std::vector<size_t>> by_dtype(const std::vector<at::Tensor> &ts);

// One reduction of a coalesced call: gcx reduces `in` into `out` (in
// place when they are the same tensor); post copies `out` into `members`
// block by block when it is a flat buffer of several tensors.
struct FlatPart {
    at::Tensor in, out;
    gcx_dtype_t dt;
    std::vector<at::Tensor> members;
};

class GcxBackend : public c10d::Backend {
  public:
    // global_ranks: the group's ranks in torch's default group (empty: this
    // is the default group); group_name: torch's name of the group.
    GcxBackend(const c10::intrusive_ptr<c10d::Store> &store, int rank,
               int size, double timeout_s,
               const std::vector<int64_t> &global_ranks,
               const std::string &group_name, bool from_default);

    // A group split or shrunk from another (split(), shrink()): its
    // communicator is made.
    GcxBackend(gcx_comm_t *comm, int rank, int size, double timeout_s,
               const char *how = "split");

    // How the communicator was made: "create_group" (from the default
    // group's) or "store" (gcx_comm_create over the group's Store).
    const std::string &creation() const { return creation_; }

    // A GCX_* variable of the group's communicator, as text.
    std::string config_value(const std::string &name) const;

    ~GcxBackend() override;

    const std::string getBackendName() const override { return "gcx"; }

    void shutdown() override { destroy_comm(); }

    // Revoke first (every rank's pending and later operations on the
    // communicator fail at once, as a peer blocked in a collective with
    // this rank should), then destroy. Never blocks on the network.
    void abort() override;

    void setSequenceNumberForGroup() override {}

    uint64_t getSequenceNumberForGroup() override { return 0; }

    bool supportsSplitting() const override { return true; }

    bool supportsCoalescing() const override { return true; }

    c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;

    // ProcessGroup.split_group: collective over this group (every rank
    // calls, in its order of collectives); `ranks` are this group's ranks
    // of the new group, in the new group's order. A rank not listed gets
    // no group (nullptr), as torch expects. gcx_comm_split: the new
    // communicator shares the endpoints and this group's configuration
    // (its GCX_TIMEOUT too: opts->timeout cannot change it).
    c10::intrusive_ptr<c10d::Backend>
    split(const c10::intrusive_ptr<c10d::Store> &,
          const std::vector<int> &ranks,
          const c10::intrusive_ptr<c10d::Backend::Options> &) override;

    // The communicator's state (gcx_comm_error, after one gcx_progress so
    // that a loss the transport has seen is known): GCX_ERR_TIMEOUT is
    // TIMEOUT, GCX_ERR_PEER and GCX_ERR_REVOKED (a peer revoked it after a
    // failure) REMOTE_ERROR, any other failure (or a group shut down)
    // COMM_ERROR.
    c10d::ErrorType getError() override;

    // -- shrink: the survivors of a failure go on in a smaller group ------

    bool supportsShrinking() const override { return true; }

    // torch_gcx.elastic.agree_failed(): the survivors agree on who is gone
    // (gcx_comm_shrink_ranks, with GCX_SHRINK_REVOKE so that every rank
    // still blocked in a collective fails and comes to agree too) and this
    // rank's list of the others, ascending, is returned; the new
    // communicator is kept for the shrink() that follows, which then does
    // not agree a second time. Calling it again before that shrink returns
    // the same list.
    std::vector<int> agree_failed();

    // After an agreement that left no rank out (a timeout, a revoke, no
    // death): the group goes on over the agreed communicator, same ranks.
    void adopt_agreed();

    // torch.distributed.shrink_group: the ranks that stay call it with the
    // same list. After agree_failed() the list must be the one agreed and
    // that communicator is used; else gcx_comm_shrink_ranks excludes the
    // list (SHRINK_ABORT: GCX_SHRINK_REVOKE) and must find every other rank
    // alive (a further death: raises naming it; agree_failed() then shrink
    // by its list). The new group keeps this group's GCX_TIMEOUT
    // (opts_override cannot change it).
    c10::intrusive_ptr<c10d::Backend>
    shrink(const std::vector<int64_t> &ranks_to_exclude, int shrink_flags,
           const c10::intrusive_ptr<c10d::Backend::Options> &) override;

    // -- coalescing: the calls between start and end are one job ---------

    void startCoalescing() override;

    c10::intrusive_ptr<c10d::Work> endCoalescing() override;

    // Like gloo's: rank 0 waits up to the timeout for every other rank to
    // arrive (one message each, on a tag users cannot pass), then sends
    // each rank the list of who arrived; a rank that sees a rank missing
    // raises naming it (wait_all: all of them). Rank 0 decides within the
    // timeout; the others wait at most twice it for the verdict (they may
    // have arrived up to one timeout before rank 0), after which rank 0
    // is the one named. Receives left open by a missing rank stay posted
    // (a late arrival completes them); after a failed monitored barrier
    // the group should be destroyed.
    void monitoredBarrier(const c10d::BarrierOptions &opts,
                          bool wait_all) override;

    // -- collectives --------------------------------------------------------

    c10::intrusive_ptr<c10d::Work>
    allreduce(std::vector<at::Tensor> &tensors,
              const c10d::AllreduceOptions &opts) override;

    // torch's all_reduce of several tensors in one call (and what
    // _coalescing_manager makes of all_reduce calls): one gcx_allreduce
    // per dtype, over a flat copy of that dtype's tensors (in place on a
    // dtype's only tensor).
    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &tensors,
                        const c10d::AllreduceCoalescedOptions &opts) override;

    // dist.all_gather_coalesced: outputs[r][i] gets rank r's inputs[i]
    // (tensors of any shapes and dtypes, empty ones too): one gcx_allgather
    // of every input's bytes one after another, copied apart.
    c10::intrusive_ptr<c10d::Work>
    allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                        std::vector<at::Tensor> &inputs,
                        const c10d::AllgatherOptions &) override;

    // all_gather_into_tensor of several pairs in one call
    // (_coalescing_manager): one gcx_allgather of every input's bytes one
    // after another, each rank's block then copied apart.
    c10::intrusive_ptr<c10d::Work>
    allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                    std::vector<at::Tensor> &inputs,
                                    const c10d::AllgatherOptions &) override;

    // reduce_scatter_tensor of several pairs in one call
    // (_coalescing_manager): per dtype one gcx_reduce_scatter over a flat
    // input laid out rank by rank (rank r's blocks of every input one after
    // another), the result copied apart (zero copy for a dtype's only pair).
    c10::intrusive_ptr<c10d::Work>
    reduce_scatter_tensor_coalesced(
        std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
        const c10d::ReduceScatterOptions &opts) override;

    // gloo's allreduce_sparse is its allreduce (which takes sparse tensors
    // too); torch calls it for sparse tensors of some devices.
    c10::intrusive_ptr<c10d::Work>
    allreduce_sparse(std::vector<at::Tensor> &tensors,
                     const c10d::AllreduceOptions &opts) override;

    c10::intrusive_ptr<c10d::Work>
    broadcast(std::vector<at::Tensor> &tensors,
              const c10d::BroadcastOptions &opts) override;

    c10::intrusive_ptr<c10d::Work>
    allgather(std::vector<std::vector<at::Tensor>> &outputs,
              std::vector<at::Tensor> &inputs,
              const c10d::AllgatherOptions &) override;

    c10::intrusive_ptr<c10d::Work>
    _allgather_base(at::Tensor &output, at::Tensor &input,
                    const c10d::AllgatherOptions &) override;

    c10::intrusive_ptr<c10d::Work>
    reduce_scatter(std::vector<at::Tensor> &outputs,
                   std::vector<std::vector<at::Tensor>> &inputs,
                   const c10d::ReduceScatterOptions &opts) override;

    c10::intrusive_ptr<c10d::Work>
    _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                         const c10d::ReduceScatterOptions &opts) override;

    c10::intrusive_ptr<c10d::Work>
    alltoall_base(at::Tensor &output, at::Tensor &input,
                  std::vector<int64_t> &outSplits,
                  std::vector<int64_t> &inSplits,
                  const c10d::AllToAllOptions &) override;

    c10::intrusive_ptr<c10d::Work>
    reduce(std::vector<at::Tensor> &tensors,
           const c10d::ReduceOptions &opts) override;

    c10::intrusive_ptr<c10d::Work>
    gather(std::vector<std::vector<at::Tensor>> &outputs,
           std::vector<at::Tensor> &inputs,
           const c10d::GatherOptions &opts) override;

    c10::intrusive_ptr<c10d::Work>
    scatter(std::vector<at::Tensor> &outputs,
            std::vector<std::vector<at::Tensor>> &inputs,
            const c10d::ScatterOptions &opts) override;

    c10::intrusive_ptr<c10d::Work>
    barrier(const c10d::BarrierOptions &) override;

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors,
                                        int dst, int tag) override;

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors,
                                        int src, int tag) override;

    // dist.recv/irecv without a source: one gcx_recv from GCX_ANY_SOURCE;
    // the Work's sourceRank() is the sender (gcx_recv_source, read on the
    // engine before the request is freed).
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                                 int tag) override;

    // A job of several gcx calls on this group (the DDP hooks, hooks.cc);
    // with a place (reserve), it fills the place instead of joining the
    // end of the line.
    c10::intrusive_ptr<c10d::Work> composite(const std::string &name,
                                             std::vector<at::Tensor> outputs,
                                             StartFn start,
                                             std::function<void()> post,
                                             c10d::OpType type,
                                             Place *place = nullptr);

    // Take a place in the engine's line now for a job given later
    // (composite with the place) or never (Place::cancel); engine.h.
    std::shared_ptr<Place> reserve(const std::string &name);

  private:
    // -- staging (staging.h): device tensors, or CPU tensors with
    // GCX_TORCH_STAGE=always ----------------------------------------------

    // ops_staged.cc: the chunked calls, each built into a StagePlan
    c10::intrusive_ptr<c10d::Work>
    staged_allreduce(std::vector<at::Tensor> &tensors,
                     const c10d::AllreduceOptions &opts, c10::Device dev);
    c10::intrusive_ptr<c10d::Work>
    staged_broadcast(std::vector<at::Tensor> &tensors,
                     const c10d::BroadcastOptions &opts, c10::Device dev);
    c10::intrusive_ptr<c10d::Work>
    staged_allgather_base(at::Tensor &output, at::Tensor &input,
                          const c10d::AllgatherOptions &opts,
                          c10::Device dev);
    c10::intrusive_ptr<c10d::Work>
    staged_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                               const c10d::ReduceScatterOptions &opts,
                               c10::Device dev);
    c10::intrusive_ptr<c10d::Work>
    staged_reduce(std::vector<at::Tensor> &tensors,
                  const c10d::ReduceOptions &opts, c10::Device dev);

    // staging.cc: run a chunked call (the Work is returned at once)
    c10::intrusive_ptr<c10d::Work> submit_staged(StagePlan plan);

    // inside a MirrorScope: the job's post() also copies the mirrors back,
    // and the Work's outputs are the user's tensors
    static void apply_mirror(std::vector<at::Tensor> &outputs,
                             std::function<void()> &post);

    // inside a MirrorScope of device tensors: their device, for the Work's
    // device-aware Future; else none
    static std::vector<c10::Device> mirror_devices();

    // whether a coalesced block is open
    bool coalescing();

    // send (is_send) or receive one tensor, as bytes, with a tag >= 0
    c10::intrusive_ptr<c10d::Work> p2p(std::vector<at::Tensor> &tensors,
                                       int peer, int tag, bool is_send);

    c10::intrusive_ptr<GcxWork> p2p_job(const at::Tensor &t, int peer,
                                        int tag, bool is_send);

    // A call of a coalesced block, kept until endCoalescing.
    struct Deferred {
        std::string name;
        StartFn start;
        std::function<void()> post;
    };

    // gloo's names of the profiler events, with gcx's prefix
    static const char *profiling_title(c10d::OpType type);

    // Reductions of dtypes libgcx does not reduce (uint8, int8, int16,
    // bool: SUM, MIN, MAX, PRODUCT and the bitwise ops, as gloo does them;
    // bitwise ops of floats, which raise): gathered and combined here
    static bool combined_locally(const c10d::ReduceOp &op, const at::Tensor &t);

    // rows[r] is rank r's tensor: their combination in rank order
    static at::Tensor combine_rows(const at::Tensor &rows,
                                   c10d::ReduceOp::RedOpType op);

    static void check_combinable(const at::Tensor &t,
                                 c10d::ReduceOp::RedOpType op,
                                 const char *name);

    // allreduce_coalesced of those ops: one gcx_allgather of every
    // tensor's bytes, each tensor combined over the ranks' blocks
    c10::intrusive_ptr<c10d::Work>
    coalesced_by_gather(std::vector<at::Tensor> &tensors,
                        c10d::ReduceOp::RedOpType op);

    // ... every rank's tensor is gathered as bytes (gcx_allgather, or
    // gcx_gather to root >= 0) and combined in rank order, so every rank
    // gets the same bits. Cost: P x the tensor's memory and bytes on the
    // wire (a ring allreduce sends ~2x): only for the dtypes above.
    c10::intrusive_ptr<c10d::Work>
    reduce_by_gather(const at::Tensor &t, c10d::ReduceOp::RedOpType op,
                     int root, const char *name);

    static void copy_out(std::vector<FlatPart> &parts);

    void check_not_coalescing(const char *what);

    // A job for the engine, or, inside a coalesced block, a part of the
    // block's job (the block's Work is returned).
    c10::intrusive_ptr<GcxWork> enqueue(const std::string &name,
                                        c10d::OpType type,
                                        std::vector<at::Tensor> outputs,
                                        StartFn start,
                                        std::function<void()> post = {},
                                        const std::vector<at::Tensor> *inputs =
                                            nullptr,
                                        Place *place = nullptr);

    // The engine job of a call: start(), then post() and the Work's end
    // (or its failure, naming the status).
    std::shared_ptr<Job>
    make_job(const std::string &name, const c10::intrusive_ptr<GcxWork> &work,
             StartFn start, std::function<void()> post,
             std::function<void(gcx_request_t *, gcx_status_t)> on_request =
                 {});

    void submit_job(const std::string &name,
                    const c10::intrusive_ptr<GcxWork> &work, StartFn start,
                    std::function<void()> post,
                    std::function<void(gcx_request_t *, gcx_status_t)>
                        on_request = {});

    void destroy_comm();

    // an agreement's communicator no shrink took (the group goes away)
    void drop_agreed();

    std::atomic<gcx_comm_t *> comm_{nullptr};
    std::mutex shrink_mu_;
    Shrunk agreed_; // agree_failed()'s, until shrink() takes it (shrink_mu_)
    std::string creation_;
    double timeout_s_;
    std::mutex coal_mu_;
    c10::intrusive_ptr<GcxWork> coal_work_; // the open coalesced block's
    std::vector<Deferred> coal_ops_;
};

} // namespace torch_gcx
