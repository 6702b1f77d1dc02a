// work.cc - the errors a Work fails with, and how waiting on a Work
// works: a CPU call blocks the host until it completed; a staged call on
// device tensors (staging.h) blocks the host only until its copy back is
// queued, then orders the caller's current stream after it (see work.h).
// Cost: one condition-variable wait; for device tensors one event wait
// queued on the caller's stream.
#include "work.h"

#include <c10/core/impl/VirtualGuardImpl.h>

namespace torch_gcx {

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

bool GcxWork::wait(std::chrono::milliseconds timeout)
{
    std::unique_lock<std::mutex> lk(mutex_);
    // The Work of a coalesced block not yet ended: its job is not queued,
    // so wait() raises instead of waiting forever.
    TORCH_CHECK(!pending_,
                "gcx: this Work belongs to a coalesced block that has "
                "not ended; call endCoalescing (leave "
                "_coalescing_manager) and wait for the Work it "
                "returns");
    if (!device_) {
        lk.unlock();
        return c10d::Work::wait(timeout);
    }
    auto ready = [this] { return recorded_ || completed_; };
    if (timeout == kNoTimeout) {
        cv_.wait(lk, ready);
    } else if (!cv_.wait_for(lk, timeout, ready)) {
        TORCH_CHECK(false, "gcx: Work timed out after ", timeout.count(),
                    " ms");
    }
    if (exception_) {
        std::rethrow_exception(exception_);
    }
    lk.unlock();
    std::shared_ptr<c10::Event> done;
    {
        std::lock_guard<std::mutex> elk(event_mu_);
        done = done_;
    }
    if (done) {
        c10::impl::VirtualGuardImpl impl(device_->type());
        done->block(impl.getStream(*device_));
    }
    return true;
}

void GcxWork::synchronize()
{
    // no mutex_ here: c10d::Work::wait calls this holding it
    std::shared_ptr<c10::Event> done;
    std::optional<c10::Device> dev = device_; // set before submission
    {
        std::lock_guard<std::mutex> elk(event_mu_);
        done = done_;
    }
    if (done && dev) {
        c10::impl::VirtualGuardImpl impl(dev->type());
        done->block(impl.getStream(*dev));
    }
}

} // namespace torch_gcx
