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
// through a flat buffer; the tensor-shaped ones are zero copy. The
// coalesced calls (allreduce_coalesced, allgather_into_tensor_coalesced,
// reduce_scatter_tensor_coalesced) are one gcx collective over a flat
// buffer per dtype (allgather: one in all, as bytes), one copy in and one
// out; a block between startCoalescing and endCoalescing is one job of the
// calls made in it, one Work. PREMUL_SUM multiplies the input first (a
// copy where torch keeps the input: reduce, reduce_scatter).
#include "backend.h"
#include "comm_create.h"
#include "shrink.h"
#include "tensor_args.h"

#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <stdexcept>

namespace torch_gcx {

namespace {

std::exception_ptr make_error(const std::string &what, gcx_status_t status)
{
    return std::make_exception_ptr(c10::DistBackendError(
        {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
        status_message(what, status)));
}

[[noreturn]] void throw_dist_error(const std::string &msg)
{
    throw c10::DistBackendError(
        {__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg);
}

// The tag of monitoredBarrier's messages; user tags are below it.
constexpr int kMonitorTag = 2147483647;

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

// One reduction of a coalesced call: gcx reduces `in` into `out` (in
// place when they are the same tensor); post copies `out` into `members`
// block by block when it is a flat buffer of several tensors.
struct FlatPart {
    at::Tensor in, out;
    gcx_dtype_t dt;
    std::vector<at::Tensor> members;
};

} // namespace

// ---- Work ------------------------------------------------------------------

class GcxWork : public c10d::Work {
  public:
    // title: the profiler event ("gcx:all_reduce", ...), nullptr for none;
    // c10d::Work records it with the inputs' shapes (when profiling) and
    // ends it in finish(), on the completer thread
    GcxWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
            const char *title = nullptr,
            const std::vector<at::Tensor> &inputs = {})
        : c10d::Work(rank, type, title,
                     title != nullptr
                         ? std::optional<std::vector<at::Tensor>>(inputs)
                         : std::nullopt),
          outputs_(std::move(outputs)),
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

    // The Work of a coalesced block not yet ended: its job is not queued,
    // so wait() raises instead of waiting forever.
    bool wait(std::chrono::milliseconds timeout) override
    {
        {
            std::lock_guard<std::mutex> lk(mutex_);
            TORCH_CHECK(!pending_,
                        "gcx: this Work belongs to a coalesced block that has "
                        "not ended; call endCoalescing (leave "
                        "_coalescing_manager) and wait for the Work it "
                        "returns");
        }
        return c10d::Work::wait(timeout);
    }

    // Wait until deadline without raising; true if the Work completed
    // (successfully or not).
    bool wait_until(std::chrono::steady_clock::time_point deadline)
    {
        std::unique_lock<std::mutex> lk(mutex_);
        return cv_.wait_until(lk, deadline, [this] { return completed_; });
    }

    // coalescing: before the block's job is submitted only
    void set_pending(bool pending)
    {
        std::lock_guard<std::mutex> lk(mutex_);
        pending_ = pending;
    }

    void add_outputs(const std::vector<at::Tensor> &outputs)
    {
        outputs_.insert(outputs_.end(), outputs.begin(), outputs.end());
    }

    // the sender of an any-source receive (set before the Work completes)
    void set_source(int source) { source_ = source; }

    int sourceRank() const override
    {
        TORCH_CHECK(source_ >= 0, "gcx: sourceRank() of a Work that is not "
                                  "a completed receive from any source");
        return source_;
    }

  private:
    std::atomic<int> source_{-1};
    bool pending_ = false;
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
        : c10d::Backend(rank, size), timeout_s_(timeout_s)
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

    // A group split or shrunk from another (split(), shrink()): its
    // communicator is made.
    GcxBackend(gcx_comm_t *comm, int rank, int size, double timeout_s,
               const char *how = "split")
        : c10d::Backend(rank, size), comm_(comm), creation_(how),
          timeout_s_(timeout_s)
    {
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

    // Revoke first (every rank's pending and later operations on the
    // communicator fail at once, as a peer blocked in a collective with
    // this rank should), then destroy. Never blocks on the network.
    void abort() override
    {
        gcx_comm_t *comm = comm_;
        if (comm != nullptr && Engine::get().running()) {
            Engine::get().run_sync("gcx_comm_revoke",
                                   [comm] { gcx_comm_revoke(comm); });
        }
        destroy_comm();
    }

    void setSequenceNumberForGroup() override {}

    uint64_t getSequenceNumberForGroup() override { return 0; }

    bool supportsSplitting() const override { return true; }

    bool supportsCoalescing() const override { return true; }

    c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override
    {
        return c10::make_intrusive<c10d::Backend::Options>(
            "gcx", std::chrono::milliseconds(
                       static_cast<int64_t>(timeout_s_ * 1000.0)));
    }

    // ProcessGroup.split_group: collective over this group (every rank
    // calls, in its order of collectives); `ranks` are this group's ranks
    // of the new group, in the new group's order. A rank not listed gets
    // no group (nullptr), as torch expects. gcx_comm_split: the new
    // communicator shares the endpoints and this group's configuration
    // (its GCX_TIMEOUT too: opts->timeout cannot change it).
    c10::intrusive_ptr<c10d::Backend>
    split(const c10::intrusive_ptr<c10d::Store> &,
          const std::vector<int> &ranks,
          const c10::intrusive_ptr<c10d::Backend::Options> &) override
    {
        TORCH_CHECK(!ranks.empty(), "gcx split: the list of ranks is empty");
        std::set<int> seen;
        int me = -1;
        for (size_t i = 0; i < ranks.size(); ++i) {
            TORCH_CHECK(ranks[i] >= 0 && ranks[i] < getSize(),
                        "gcx split: rank ", ranks[i],
                        " is out of range for a group of ", getSize());
            TORCH_CHECK(seen.insert(ranks[i]).second, "gcx split: rank ",
                        ranks[i], " is listed twice");
            if (ranks[i] == getRank()) {
                me = static_cast<int>(i);
            }
        }
        check_not_coalescing("split");
        gcx_comm_t *comm = comm_;
        TORCH_CHECK(comm != nullptr,
                    "gcx split: the process group has been shut down");
        // disjoint groups: the smallest member names each one
        int color = me < 0 ? GCX_UNDEFINED : *seen.begin();
        gcx_comm_t *child = nullptr;
        gcx_status_t st = GCX_OK;
        Engine::get().run_sync("gcx_comm_split", [&] {
            st = gcx_comm_split(comm, color, me < 0 ? 0 : me, &child);
        });
        if (st != GCX_OK) {
            throw_dist_error(status_message("gcx_comm_split", st));
        }
        if (me < 0) {
            return nullptr;
        }
        return c10::make_intrusive<GcxBackend>(
            child, me, static_cast<int>(ranks.size()), timeout_s_);
    }

    // The communicator's state (gcx_comm_error, after one gcx_progress so
    // that a loss the transport has seen is known): GCX_ERR_TIMEOUT is
    // TIMEOUT, GCX_ERR_PEER and GCX_ERR_REVOKED (a peer revoked it after a
    // failure) REMOTE_ERROR, any other failure (or a group shut down)
    // COMM_ERROR.
    c10d::ErrorType getError() override
    {
        gcx_status_t st = GCX_ERR_CANCELED;
        if (!Engine::get().running()) {
            return c10d::ErrorType::COMM_ERROR; // shut down (at exit)
        }
        // read comm_ on the engine: a destruction queued before this job
        // has cleared it, one queued after runs after it
        Engine::get().run_sync("gcx_progress", [&] {
            gcx_comm_t *comm = comm_;
            if (comm != nullptr) {
                (void)gcx_progress(comm);
                st = gcx_comm_error(comm);
            }
        });
        switch (st) {
        case GCX_OK: return c10d::ErrorType::SUCCESS;
        case GCX_ERR_TIMEOUT: return c10d::ErrorType::TIMEOUT;
        case GCX_ERR_PEER:
        case GCX_ERR_REVOKED: return c10d::ErrorType::REMOTE_ERROR;
        default: return c10d::ErrorType::COMM_ERROR;
        }
    }

    // -- shrink: the survivors of a failure go on in a smaller group ------

    bool supportsShrinking() const override { return true; }

    // torch_gcx.elastic.agree_failed(): the survivors agree on who is gone
    // (gcx_comm_shrink_ranks, with GCX_SHRINK_REVOKE so that every rank
    // still blocked in a collective fails and comes to agree too) and this
    // rank's list of the others, ascending, is returned; the new
    // communicator is kept for the shrink() that follows, which then does
    // not agree a second time. Calling it again before that shrink returns
    // the same list.
    std::vector<int> agree_failed()
    {
        std::lock_guard<std::mutex> lk(shrink_mu_);
        check_not_coalescing("agree_failed");
        if (agreed_.comm == nullptr) {
            gcx_comm_t *comm = comm_;
            Engine::get().run_sync("gcx_comm_shrink_ranks", [&] {
                agreed_ = shrink_comm(comm, getRank(), {}, GCX_SHRINK_REVOKE);
            });
        }
        return left_out(agreed_, getSize());
    }

    // After an agreement that left no rank out (a timeout, a revoke, no
    // death): the group goes on over the agreed communicator, same ranks.
    void adopt_agreed()
    {
        std::lock_guard<std::mutex> lk(shrink_mu_);
        TORCH_CHECK(agreed_.comm != nullptr,
                    "gcx: no agreement to adopt (call agree_failed first)");
        TORCH_CHECK(left_out(agreed_, getSize()).empty(),
                    "gcx: the agreement left ranks ",
                    rank_list(left_out(agreed_, getSize())),
                    " out: shrink the group instead");
        gcx_comm_t *old = comm_, *fresh = agreed_.comm;
        agreed_         = Shrunk{};
        Engine::get().run_sync(
            "comm_replace",
            [old, fresh] {
                adopt_group_comm(old, fresh);
                gcx_comm_destroy(old);
            },
            old);
        comm_ = fresh;
    }

    // torch.distributed.shrink_group: the ranks that stay call it with the
    // same list. After agree_failed() the list must be the one agreed and
    // that communicator is used; else gcx_comm_shrink_ranks excludes the
    // list (SHRINK_ABORT: GCX_SHRINK_REVOKE) and must find every other rank
    // alive (a further death: raises naming it; agree_failed() then shrink
    // by its list). The new group keeps this group's GCX_TIMEOUT
    // (opts_override cannot change it).
    c10::intrusive_ptr<c10d::Backend>
    shrink(const std::vector<int64_t> &ranks_to_exclude, int shrink_flags,
           const c10::intrusive_ptr<c10d::Backend::Options> &) override
    {
        std::vector<int> exclude =
            check_exclude(ranks_to_exclude, getRank(), getSize());
        TORCH_CHECK(shrink_flags == 0 || shrink_flags == 1,
                    "gcx shrink: shrink_flags must be SHRINK_DEFAULT (0) or "
                    "SHRINK_ABORT (1), got ", shrink_flags);
        std::lock_guard<std::mutex> lk(shrink_mu_);
        check_not_coalescing("shrink");
        Shrunk s;
        if (agreed_.comm != nullptr) {
            std::vector<int> agreed = left_out(agreed_, getSize());
            TORCH_CHECK(agreed == exclude, "gcx shrink: ranks_to_exclude ",
                        rank_list(exclude),
                        " is not the set the survivors agreed on, ",
                        rank_list(agreed), " (torch_gcx.elastic.agree_failed)");
            s       = agreed_;
            agreed_ = Shrunk{};
        } else {
            gcx_comm_t *comm = comm_;
            int flags        = shrink_flags == 1 ? GCX_SHRINK_REVOKE : 0;
            Engine::get().run_sync("gcx_comm_shrink_ranks", [&] {
                s = shrink_comm(comm, getRank(), exclude, flags);
            });
            std::vector<int> out = left_out(s, getSize());
            if (out != exclude) {
                Engine::get().run_sync(
                    "comm_destroy", [c = s.comm] { gcx_comm_destroy(c); },
                    s.comm);
                TORCH_CHECK(false, "gcx shrink: ranks ", rank_list(out),
                            " are gone, not only ranks_to_exclude ",
                            rank_list(exclude),
                            " (shrink by torch_gcx.elastic.agree_failed()'s "
                            "list)");
            }
        }
        gcx_comm_t *old = comm_;
        Engine::get().run_sync("adopt_group_comm",
                               [old, c = s.comm] { adopt_group_comm(old, c); });
        return c10::make_intrusive<GcxBackend>(s.comm, gcx_comm_rank(s.comm),
                                               gcx_comm_size(s.comm),
                                               timeout_s_, "shrink");
    }

    // -- coalescing: the calls between start and end are one job ---------

    void startCoalescing() override
    {
        std::lock_guard<std::mutex> lk(coal_mu_);
        TORCH_CHECK(!coal_work_, "gcx startCoalescing: a coalesced block is "
                                 "already open (call endCoalescing first)");
        coal_work_ = c10::make_intrusive<GcxWork>(
            getRank(), c10d::OpType::COALESCED, std::vector<at::Tensor>{});
        coal_work_->set_pending(true);
    }

    c10::intrusive_ptr<c10d::Work> endCoalescing() override
    {
        std::vector<Deferred> ops;
        c10::intrusive_ptr<GcxWork> work;
        {
            std::lock_guard<std::mutex> lk(coal_mu_);
            TORCH_CHECK(coal_work_, "gcx endCoalescing: no coalesced block "
                                    "is open (call startCoalescing first)");
            ops.swap(coal_ops_);
            work = std::move(coal_work_);
            coal_work_.reset();
        }
        std::string name = "coalesced block (";
        for (size_t i = 0; i < ops.size(); ++i) {
            name += (i ? ", " : "") + ops[i].name;
        }
        name += ")";
        auto all = std::make_shared<std::vector<Deferred>>(std::move(ops));
        StartFn start = [all](gcx_comm_t *c, auto &reqs) {
            for (auto &op : *all) {
                gcx_status_t st = op.start(c, reqs);
                if (st != GCX_OK) {
                    return st;
                }
            }
            return GCX_OK;
        };
        auto post = [all] {
            for (auto &op : *all) {
                if (op.post) {
                    op.post();
                }
            }
        };
        work->set_pending(false);
        submit_job(name, work, start, post);
        return work;
    }

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
                          bool wait_all) override
    {
        check_not_coalescing("monitored_barrier");
        auto timeout =
            opts.timeout == c10d::kUnsetTimeout
                ? std::chrono::milliseconds(
                      static_cast<int64_t>(timeout_s_ * 1000.0))
                : opts.timeout;
        TORCH_CHECK(timeout.count() >= 0,
                    "gcx monitored_barrier: the timeout must be >= 0, got ",
                    timeout.count(), " ms");
        const int n = getSize(), me = getRank();
        if (n == 1) {
            return;
        }
        auto now = std::chrono::steady_clock::now;
        std::vector<int> missing;
        if (me == 0) {
            std::vector<c10::intrusive_ptr<GcxWork>> arrivals;
            for (int r = 1; r < n; ++r) {
                arrivals.push_back(
                    p2p_job(at::empty({1}, at::kLong), r, kMonitorTag, false));
            }
            auto deadline = now() + timeout;
            at::Tensor verdict = at::ones({n}, at::kLong);
            for (int r = 1; r < n; ++r) {
                auto &w = arrivals[static_cast<size_t>(r - 1)];
                if (!w->wait_until(deadline) || !w->isSuccess()) {
                    missing.push_back(r);
                    verdict[r] = 0;
                }
            }
            for (int r = 1; r < n; ++r) {
                p2p_job(verdict, r, kMonitorTag, true);
            }
        } else {
            p2p_job(at::full({1}, me, at::kLong), 0, kMonitorTag, true);
            at::Tensor verdict = at::empty({n}, at::kLong);
            auto w = p2p_job(verdict, 0, kMonitorTag, false);
            // gloo's words for a rank that arrived but failed
            std::string arrived = "gcx monitored_barrier: Rank " +
                                  std::to_string(me) +
                                  " successfully reached monitoredBarrier, "
                                  "but received errors while waiting for "
                                  "send/recv from rank 0: ";
            if (!w->wait_until(now() + 2 * timeout)) {
                throw_dist_error(arrived + "Rank 0 failed to pass "
                                 "monitoredBarrier in " +
                                 std::to_string(timeout.count()) +
                                 " ms (no answer from it within twice that)");
            }
            if (!w->isSuccess()) {
                try {
                    w->wait(kNoTimeout);
                } catch (const std::exception &e) {
                    throw_dist_error(arrived + e.what());
                }
            }
            const int64_t *v = verdict.data_ptr<int64_t>();
            if (v[me] == 0) {
                throw_dist_error("gcx monitored_barrier: Rank " +
                                 std::to_string(me) + " failed to pass "
                                 "monitoredBarrier in " +
                                 std::to_string(timeout.count()) +
                                 " ms: rank 0 stopped waiting for it");
            }
            for (int r = 1; r < n; ++r) {
                if (v[r] == 0) {
                    missing.push_back(r);
                }
            }
        }
        if (missing.empty()) {
            return;
        }
        if (!wait_all) {
            missing.resize(1);
        }
        std::string who = missing.size() == 1 ? "Rank " : "Ranks ";
        for (size_t i = 0; i < missing.size(); ++i) {
            who += (i ? ", " : "") + std::to_string(missing[i]);
        }
        std::string what = who + " failed to pass monitoredBarrier in " +
                           std::to_string(timeout.count()) + " ms";
        if (me != 0) {
            throw_dist_error("gcx monitored_barrier: Rank " +
                             std::to_string(me) +
                             " successfully reached monitoredBarrier, but "
                             "received errors while waiting for send/recv "
                             "from rank 0: " + what + " (reported by rank 0)");
        }
        if (timeout.count() == 0) {
            what = "Rank 0 timed out in monitoredBarrier after 0 ms (" +
                   what + ")";
        }
        throw_dist_error("gcx monitored_barrier: [Rank 0]: " + what);
    }

    // -- collectives --------------------------------------------------------

    c10::intrusive_ptr<c10d::Work>
    allreduce(std::vector<at::Tensor> &tensors,
              const c10d::AllreduceOptions &opts) override
    {
        if (tensors.size() == 1 && tensors[0].defined() &&
            tensors[0].is_sparse()) {
            return sparse_allreduce(*this, tensors[0], opts);
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

    // torch's all_reduce of several tensors in one call (and what
    // _coalescing_manager makes of all_reduce calls): one gcx_allreduce
    // per dtype, over a flat copy of that dtype's tensors (in place on a
    // dtype's only tensor).
    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &tensors,
                        const c10d::AllreduceCoalescedOptions &opts) override
    {
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

    // dist.all_gather_coalesced: outputs[r][i] gets rank r's inputs[i]
    // (tensors of any shapes and dtypes, empty ones too): one gcx_allgather
    // of every input's bytes one after another, copied apart.
    c10::intrusive_ptr<c10d::Work>
    allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                        std::vector<at::Tensor> &inputs,
                        const c10d::AllgatherOptions &) override
    {
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

    // all_gather_into_tensor of several pairs in one call
    // (_coalescing_manager): one gcx_allgather of every input's bytes one
    // after another, each rank's block then copied apart.
    c10::intrusive_ptr<c10d::Work>
    allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                    std::vector<at::Tensor> &inputs,
                                    const c10d::AllgatherOptions &) override
    {
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

    // reduce_scatter_tensor of several pairs in one call
    // (_coalescing_manager): per dtype one gcx_reduce_scatter over a flat
    // input laid out rank by rank (rank r's blocks of every input one after
    // another), the result copied apart (zero copy for a dtype's only pair).
    c10::intrusive_ptr<c10d::Work>
    reduce_scatter_tensor_coalesced(
        std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
        const c10d::ReduceScatterOptions &opts) override
    {
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

    // gloo's allreduce_sparse is its allreduce (which takes sparse tensors
    // too); torch calls it for sparse tensors of some devices.
    c10::intrusive_ptr<c10d::Work>
    allreduce_sparse(std::vector<at::Tensor> &tensors,
                     const c10d::AllreduceOptions &opts) override
    {
        return allreduce(tensors, opts);
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
            [flat, outs] { scatter_copy(flat, outs); }, &inputs);
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
    reduce_scatter(std::vector<at::Tensor> &outputs,
                   std::vector<std::vector<at::Tensor>> &inputs,
                   const c10d::ReduceScatterOptions &opts) override
    {
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
    _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                         const c10d::ReduceScatterOptions &opts) override
    {
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
    reduce(std::vector<at::Tensor> &tensors,
           const c10d::ReduceOptions &opts) override
    {
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
            post, &inputs);
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

    // dist.recv/irecv without a source: one gcx_recv from GCX_ANY_SOURCE;
    // the Work's sourceRank() is the sender (gcx_recv_source, read on the
    // engine before the request is freed).
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                                 int tag) override
    {
        at::Tensor t = single(tensors, "recv (any source)");
        TORCH_CHECK(tag >= 0 && tag < kMonitorTag,
                    "gcx recv (any source): tag must be in 0..",
                    kMonitorTag - 1, ", got ", tag);
        check_not_coalescing("recv from any source");
        auto work = c10::make_intrusive<GcxWork>(
            getRank(), c10d::OpType::RECVANYSOURCE, std::vector<at::Tensor>{t},
            profiling_title(c10d::OpType::RECVANYSOURCE),
            std::vector<at::Tensor>{t});
        c10d::Work *w = work.get(); // the job holds the Work until done
        submit_job(
            "gcx_recv (any source)", work,
            [t, tag](gcx_comm_t *c, auto &reqs) {
                GCX_ISSUE(gcx_recv(c, t.data_ptr(), nbytes(t), GCX_DT_U8,
                                   GCX_ANY_SOURCE, tag, &r_));
                return GCX_OK;
            },
            {},
            [w](gcx_request_t *req, gcx_status_t st) {
                int src = -1;
                if (st == GCX_OK && gcx_recv_source(req, &src) == GCX_OK) {
                    static_cast<GcxWork *>(w)->set_source(src);
                }
            });
        return work;
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
        TORCH_CHECK(tag >= 0 && tag < kMonitorTag, "gcx ", op,
                    ": tag must be in 0..", kMonitorTag - 1, " (",
                    kMonitorTag, " is monitored_barrier's), got ", tag);
        return p2p_job(t, peer, tag, is_send);
    }

    c10::intrusive_ptr<GcxWork> p2p_job(const at::Tensor &t, int peer,
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

    // A call of a coalesced block, kept until endCoalescing.
    struct Deferred {
        std::string name;
        StartFn start;
        std::function<void()> post;
    };

    // gloo's names of the profiler events, with gcx's prefix
    static const char *profiling_title(c10d::OpType type)
    {
        switch (type) {
        case c10d::OpType::ALLREDUCE: return "gcx:all_reduce";
        case c10d::OpType::ALLREDUCE_COALESCED:
            return "gcx:all_reduce_coalesced";
        case c10d::OpType::BROADCAST: return "gcx:broadcast";
        case c10d::OpType::REDUCE: return "gcx:reduce";
        case c10d::OpType::ALLGATHER: return "gcx:all_gather";
        case c10d::OpType::_ALLGATHER_BASE:
            return "gcx:all_gather_into_tensor";
        case c10d::OpType::ALLGATHER_COALESCED:
            return "gcx:all_gather_coalesced";
        case c10d::OpType::GATHER: return "gcx:gather";
        case c10d::OpType::SCATTER: return "gcx:scatter";
        case c10d::OpType::REDUCE_SCATTER: return "gcx:reduce_scatter";
        case c10d::OpType::_REDUCE_SCATTER_BASE:
            return "gcx:reduce_scatter_tensor";
        case c10d::OpType::ALLTOALL_BASE: return "gcx:all_to_all";
        case c10d::OpType::BARRIER: return "gcx:barrier";
        case c10d::OpType::SEND: return "gcx:send";
        case c10d::OpType::RECV: return "gcx:recv";
        case c10d::OpType::RECVANYSOURCE: return "gcx:recvAnySource";
        default: return nullptr;
        }
    }

    // Reductions of dtypes libgcx does not reduce (uint8, int8, int16,
    // bool: SUM, MIN, MAX, PRODUCT and the bitwise ops, as gloo does them;
    // bitwise ops of floats, which raise): gathered and combined here
    static bool combined_locally(const c10d::ReduceOp &op, const at::Tensor &t)
    {
        bool ours = op.op_ == c10d::ReduceOp::PRODUCT ||
                    op.op_ == c10d::ReduceOp::SUM ||
                    op.op_ == c10d::ReduceOp::MIN ||
                    op.op_ == c10d::ReduceOp::MAX || bitwise_op(op.op_);
        return ours && !reducible(t, op.op_);
    }

    // rows[r] is rank r's tensor: their combination in rank order
    static at::Tensor combine_rows(const at::Tensor &rows,
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

    static void check_combinable(const at::Tensor &t,
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

    // allreduce_coalesced of those ops: one gcx_allgather of every
    // tensor's bytes, each tensor combined over the ranks' blocks
    c10::intrusive_ptr<c10d::Work>
    coalesced_by_gather(std::vector<at::Tensor> &tensors,
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

    // ... every rank's tensor is gathered as bytes (gcx_allgather, or
    // gcx_gather to root >= 0) and combined in rank order, so every rank
    // gets the same bits. Cost: P x the tensor's memory and bytes on the
    // wire (a ring allreduce sends ~2x): only for the dtypes above.
    c10::intrusive_ptr<c10d::Work>
    reduce_by_gather(const at::Tensor &t, c10d::ReduceOp::RedOpType op,
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

    static void copy_out(std::vector<FlatPart> &parts)
    {
        for (auto &p : parts) {
            if (!p.members.empty()) {
                scatter_copy(p.out, p.members);
            }
        }
    }

    void check_not_coalescing(const char *what)
    {
        std::lock_guard<std::mutex> lk(coal_mu_);
        TORCH_CHECK(!coal_work_, "gcx ", what, ": not allowed inside a "
                                 "coalesced block (call endCoalescing "
                                 "first)");
    }

    // A job for the engine, or, inside a coalesced block, a part of the
    // block's job (the block's Work is returned).
    c10::intrusive_ptr<GcxWork> enqueue(const std::string &name,
                                        c10d::OpType type,
                                        std::vector<at::Tensor> outputs,
                                        StartFn start,
                                        std::function<void()> post = {},
                                        const std::vector<at::Tensor> *inputs =
                                            nullptr)
    {
        TORCH_CHECK(comm_ != nullptr, "gcx ", name,
                    ": the process group has been shut down");
        {
            std::lock_guard<std::mutex> lk(coal_mu_);
            if (coal_work_) {
                coal_work_->add_outputs(outputs);
                coal_ops_.push_back({name, std::move(start), std::move(post)});
                return coal_work_;
            }
        }
        // the profiler's inputs: the outputs for in-place calls
        std::vector<at::Tensor> ins = inputs != nullptr ? *inputs : outputs;
        auto work = c10::make_intrusive<GcxWork>(
            getRank(), type, std::move(outputs), profiling_title(type), ins);
        submit_job(name, work, std::move(start), std::move(post));
        return work;
    }

    void submit_job(const std::string &name,
                    const c10::intrusive_ptr<GcxWork> &work, StartFn start,
                    std::function<void()> post,
                    std::function<void(gcx_request_t *, gcx_status_t)>
                        on_request = {})
    {
        gcx_comm_t *comm = comm_;
        TORCH_CHECK(comm != nullptr, "gcx ", name,
                    ": the process group has been shut down");
        auto job          = std::make_shared<Job>();
        job->name         = name;
        job->comm         = comm;
        job->on_request   = std::move(on_request);
        job->start        = [comm, start](std::vector<gcx_request_t *> &reqs) {
            return start(comm, reqs);
        };
        double timeout_s = timeout_s_;
        job->done = [work, post, name, timeout_s](gcx_status_t status) {
            if (status == GCX_ERR_TIMEOUT) {
                work->finish_error(std::make_exception_ptr(c10::DistBackendError(
                    {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                    status_message(name, status) +
                        ": not done within the group's timeout (" +
                        std::to_string(timeout_s) + " s, its GCX_TIMEOUT)")));
                return;
            }
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
    }

    void destroy_comm()
    {
        drop_agreed();
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

    // an agreement's communicator no shrink took (the group goes away)
    void drop_agreed()
    {
        std::lock_guard<std::mutex> lk(shrink_mu_);
        gcx_comm_t *c = agreed_.comm;
        agreed_       = Shrunk{};
        if (c != nullptr && Engine::get().running()) {
            Engine::get().run_sync(
                "comm_destroy", [c] { gcx_comm_destroy(c); }, c);
        }
    }

    std::atomic<gcx_comm_t *> comm_{nullptr};
    std::mutex shrink_mu_;
    Shrunk agreed_; // agree_failed()'s, until shrink() takes it (shrink_mu_)
    std::string creation_;
    double timeout_s_;
    std::mutex coal_mu_;
    c10::intrusive_ptr<GcxWork> coal_work_; // the open coalesced block's
    std::vector<Deferred> coal_ops_;
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
        "get_error",
        [](const c10::intrusive_ptr<c10d::Backend> &backend) {
            return torch_gcx::as_gcx(backend).getError();
        },
        py::call_guard<py::gil_scoped_release>(),
        "The state of a gcx group's communicator as a "
        "torch._C._distributed_c10d.ErrorType (torch binds Backend.getError only for "
        "some backends).");
    m.def(
        "agree_failed",
        [](const c10::intrusive_ptr<c10d::Backend> &backend) {
            return torch_gcx::as_gcx(backend).agree_failed();
        },
        py::call_guard<py::gil_scoped_release>(),
        "The survivors' agreement on a gcx group: the group ranks that are "
        "gone, ascending (the communicator is kept for the shrink).");
    m.def(
        "adopt_agreed",
        [](const c10::intrusive_ptr<c10d::Backend> &backend) {
            torch_gcx::as_gcx(backend).adopt_agreed();
        },
        py::call_guard<py::gil_scoped_release>(),
        "After an agreement that left no rank out: the group goes on over "
        "the agreed communicator.");
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
