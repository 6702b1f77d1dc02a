// work.h - the Work and Future of a gcx backend call (work.cc).
//
// Idea: one GcxWork per call (or per coalesced block): c10d::Work's own
// wait()/exception machinery, plus a Future whose value is the output
// tensors. The completer thread ends both, the Work first (wait()
// returns), then the Future (its callbacks run there). A call on device
// tensors (staging.h) also carries a completion event: wait() then makes
// the caller's current stream wait on it instead of blocking on the copies.
// Cost: one heap object, one Future and a mutex + condition variable hand-off
// per call.
#pragma once

#include "engine.h"

#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch_gcx {

// A c10::DistBackendError naming the call and the gcx status.
std::exception_ptr make_error(const std::string &what, gcx_status_t status);
[[noreturn]] void throw_dist_error(const std::string &msg);

// ---- Work ------------------------------------------------------------------

class GcxWork : public c10d::Work {
  public:
    // title: the profiler event ("gcx:all_reduce", ...), nullptr for none;
    // c10d::Work records it with the inputs' shapes (when profiling) and
    // ends it in finish(), on the completer thread
    // devices: the accelerator the outputs are on (a call on device
    // tensors, staged or through host mirrors, staging.h), empty for CPU:
    // the Future is then device-aware (its value is ready on a stream that
    // waited for the copies back, see finish_ok; then() callbacks run under
    // its device and streams, as NCCL's).
    GcxWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
            const char *title = nullptr,
            const std::vector<at::Tensor> &inputs = {},
            std::vector<c10::Device> devices = {})
        : c10d::Work(rank, type, title,
                     title != nullptr
                         ? std::optional<std::vector<at::Tensor>>(inputs)
                         : std::nullopt),
          outputs_(std::move(outputs)),
          future_(c10::make_intrusive<c10::ivalue::Future>(
              c10::ListType::create(c10::TensorType::get()), devices))
    {
        if (!devices.empty()) {
            future_device_ = devices.front();
        }
    }

    // A staged call on device tensors: `done` will be recorded on the
    // staging's copy-back stream after the last host-to-device copy
    // (set_recorded); wait() then makes the caller's current stream wait
    // on it instead of blocking until the copies ran. Set before submit.
    void set_device_event(c10::Device device)
    {
        device_ = device;
    }

    // The staging has queued its last copy and recorded `done` after it.
    void set_recorded(std::shared_ptr<c10::Event> done)
    {
        {
            std::lock_guard<std::mutex> elk(event_mu_);
            done_ = std::move(done);
        }
        {
            std::lock_guard<std::mutex> lk(mutex_);
            recorded_ = true;
        }
        cv_.notify_all();
    }

    // NCCL's semantics for device tensors: the host waits only until the
    // network part is over and the copy back is queued (set_recorded),
    // then the caller's current stream waits for the copy (no host sync
    // on the copy). CPU tensors: c10d::Work::wait (the host blocks).
    bool wait(std::chrono::milliseconds timeout) override;

    // Current stream waits for the copy back (the work has completed or
    // its copies are queued); nothing for CPU tensors.
    void synchronize() override;

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
    // returns), then the Future (its callbacks run here). A device-aware
    // Future records its events on the current streams of the calling
    // thread: the staging calls this under a guard of its copy stream. The
    // device is set here for that (the completer thread never sets one: a
    // device call without it would work on device 0, and with CUDA >= 12
    // make a context there).
    void finish_ok()
    {
        finish();
        if (future_device_) {
            c10::DeviceGuard g(*future_device_);
            future_->markCompleted(c10::IValue(outputs_));
        } else {
            future_->markCompleted(c10::IValue(outputs_));
        }
    }

    void finish_error(std::exception_ptr e)
    {
        finish(e);
        future_->setError(e);
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
    std::optional<c10::Device> device_; // staged device call
    std::optional<c10::Device> future_device_; // a device-aware Future's
    bool recorded_ = false;             // done_ is recorded (mutex_)
    // after the last copy back; its own lock: c10d::Work::wait calls
    // synchronize() holding mutex_
    std::mutex event_mu_;
    std::shared_ptr<c10::Event> done_;
    std::atomic<int> source_{-1};
    bool pending_ = false;
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

} // namespace torch_gcx
