// backend.cc - the gcx backend as a group: creation of its communicator,
// split and shrink, abort and error state, coalescing blocks, the monitored
// barrier, and the path of every call: enqueue() (a job, or a part of the
// open coalesced block's) and submit_job() (the engine job whose done()
// finishes the Work). The collectives themselves are in ops.cc and
// ops_coalesced.cc.
//
// Idea: a thin shim. Everything that moves data is libgcx; this file keeps
// the tensors alive until the job is done and turns a gcx status into an
// exception that names it. Cost: one Job and one Work per call (one per
// coalesced block), two thread hand-offs (engine, completer).
#include "backend_impl.h"
#include "comm_create.h"
#include "tensor_args.h"

#include <chrono>
#include <set>
#include <stdexcept>

namespace torch_gcx {

GcxBackend::GcxBackend(const c10::intrusive_ptr<c10d::Store> &store, int rank,
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

GcxBackend::GcxBackend(gcx_comm_t *comm, int rank, int size, double timeout_s,
                       const char *how)
    : c10d::Backend(rank, size), comm_(comm), creation_(how),
      timeout_s_(timeout_s)
{
}

std::string GcxBackend::config_value(const std::string &name) const
{
    char buf[256];
    TORCH_CHECK(comm_ != nullptr, "gcx: the group has been destroyed");
    gcx_status_t st = gcx_config_get(gcx_comm_config(comm_), name.c_str(),
                                     buf, sizeof(buf));
    TORCH_CHECK(st == GCX_OK, status_message("gcx_config_get(" + name + ")",
                                             st));
    return buf;
}

GcxBackend::~GcxBackend()
{
    try {
        destroy_comm();
    } catch (...) {
        // at interpreter exit the engine may be gone: leave it to exit
    }
}

void GcxBackend::abort()
{
    gcx_comm_t *comm = comm_;
    if (comm != nullptr && Engine::get().running()) {
        Engine::get().run_sync("gcx_comm_revoke",
                               [comm] { gcx_comm_revoke(comm); });
    }
    destroy_comm();
}

c10::intrusive_ptr<c10d::Backend::Options> GcxBackend::getBackendOptions()
{
    return c10::make_intrusive<c10d::Backend::Options>(
        "gcx", std::chrono::milliseconds(
                   static_cast<int64_t>(timeout_s_ * 1000.0)));
}

c10::intrusive_ptr<c10d::Backend>
GcxBackend::split(const c10::intrusive_ptr<c10d::Store> &,
                  const std::vector<int> &ranks,
                  const c10::intrusive_ptr<c10d::Backend::Options> &)
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

c10d::ErrorType GcxBackend::getError()
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

std::vector<int> GcxBackend::agree_failed()
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

void GcxBackend::adopt_agreed()
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

c10::intrusive_ptr<c10d::Backend>
GcxBackend::shrink(const std::vector<int64_t> &ranks_to_exclude, int shrink_flags,
                   const c10::intrusive_ptr<c10d::Backend::Options> &)
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

void GcxBackend::startCoalescing()
{
    std::lock_guard<std::mutex> lk(coal_mu_);
    TORCH_CHECK(!coal_work_, "gcx startCoalescing: a coalesced block is "
                             "already open (call endCoalescing first)");
    coal_work_ = c10::make_intrusive<GcxWork>(
        getRank(), c10d::OpType::COALESCED, std::vector<at::Tensor>{});
    coal_work_->set_pending(true);
}

c10::intrusive_ptr<c10d::Work> GcxBackend::endCoalescing()
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

void GcxBackend::monitoredBarrier(const c10d::BarrierOptions &opts,
                                  bool wait_all)
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

const char *GcxBackend::profiling_title(c10d::OpType type)
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

void GcxBackend::apply_mirror(std::vector<at::Tensor> &outputs,
                              std::function<void()> &post)
{
    Mirror *m = MirrorScope::current();
    if (m == nullptr) {
        return;
    }
    std::function<void()> back = m->copy_back();
    if (post) {
        post = [first = std::move(post), back] {
            first();
            back();
        };
    } else {
        post = back;
    }
    outputs = m->user_outputs();
}

std::vector<c10::Device> GcxBackend::mirror_devices()
{
    Mirror *m = MirrorScope::current();
    return m != nullptr ? m->future_devices() : std::vector<c10::Device>{};
}

bool GcxBackend::coalescing()
{
    std::lock_guard<std::mutex> lk(coal_mu_);
    return static_cast<bool>(coal_work_);
}

void GcxBackend::check_not_coalescing(const char *what)
{
    std::lock_guard<std::mutex> lk(coal_mu_);
    TORCH_CHECK(!coal_work_, "gcx ", what, ": not allowed inside a "
                             "coalesced block (call endCoalescing "
                             "first)");
}

c10::intrusive_ptr<GcxWork> GcxBackend::enqueue(const std::string &name,
                                                c10d::OpType type,
                                                std::vector<at::Tensor> outputs,
                                                StartFn start,
                                                std::function<void()> post,
                                                const std::vector<at::Tensor> *inputs,
                                                Place *place)
{
    TORCH_CHECK(comm_ != nullptr, "gcx ", name,
                ": the process group has been shut down");
    apply_mirror(outputs, post);
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
        getRank(), type, std::move(outputs), profiling_title(type), ins,
        mirror_devices());
    if (place != nullptr) {
        place->fill(make_job(name, work, std::move(start), std::move(post)));
    } else {
        submit_job(name, work, std::move(start), std::move(post));
    }
    return work;
}

void GcxBackend::submit_job(const std::string &name,
                            const c10::intrusive_ptr<GcxWork> &work, StartFn start,
                            std::function<void()> post,
                            std::function<void(gcx_request_t *, gcx_status_t)>
                                on_request)
{
    Engine::get().submit(make_job(name, work, std::move(start),
                                  std::move(post), std::move(on_request)));
}

std::shared_ptr<Place> GcxBackend::reserve(const std::string &name)
{
    gcx_comm_t *comm = comm_;
    TORCH_CHECK(comm != nullptr, "gcx ", name,
                ": the process group has been shut down");
    check_not_coalescing(name.c_str());
    auto place = std::make_shared<Place>(name, comm);
    Engine::get().submit(place->placeholder());
    return place;
}

std::shared_ptr<Job>
GcxBackend::make_job(const std::string &name,
                     const c10::intrusive_ptr<GcxWork> &work, StartFn start,
                     std::function<void()> post,
                     std::function<void(gcx_request_t *, gcx_status_t)>
                         on_request)
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
    return job;
}

void GcxBackend::destroy_comm()
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

void GcxBackend::drop_agreed()
{
    std::lock_guard<std::mutex> lk(shrink_mu_);
    gcx_comm_t *c = agreed_.comm;
    agreed_       = Shrunk{};
    if (c != nullptr && Engine::get().running()) {
        Engine::get().run_sync(
            "comm_destroy", [c] { gcx_comm_destroy(c); }, c);
    }
}

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
                                                c10d::OpType type,
                                                Place *place)
{
    return backend.composite(name, std::move(outputs), std::move(start),
                             std::move(post), type, place);
}

std::shared_ptr<Place> reserve_place(GcxBackend &backend,
                                     const std::string &name)
{
    return backend.reserve(name);
}

int group_size(const GcxBackend &backend) { return backend.getSize(); }

} // namespace torch_gcx
