// staging.cc - the staging pipeline of device tensors (see staging.h): the
// settings, the host buffer pool, the side streams, a chunked call's run
// (GcxBackend::submit_staged) and the host mirrors.
//
// A chunked call, step by step (device tensors; CPU tensors with
// GCX_TORCH_STAGE=always take the same steps with plain copies and no
// streams or events):
//   at the call (caller's thread): record an event on the current stream;
//     both side streams wait on it; take the host buffers from the pool;
//     queue every chunk's device-to-host copy on the d2h stream, one event
//     after each chunk; submit one engine job per chunk, whose ready() is
//     that event's query(); return the Work.
//   engine thread: issues chunk i's gcx call once its copy has landed
//     (FIFO: later jobs wait for it), polls the requests.
//   host mode (GCX_TORCH_WAIT=host, or a device without a stream wait):
//   completer thread: chunk i done: queue its host-to-device copies on the
//     h2d stream. The last chunk done: record the completion event on the
//     h2d stream (Work::wait() then makes the caller's stream wait on it),
//     wait for it on the host, give the buffers back, complete the Work and
//     its Future (under a guard of the h2d stream, so a device-aware
//     Future's events follow the copies).
//   stream mode (the default where the device has a stream wait on a host
//     word): at the call, after the copies in, every chunk's copies back
//     are queued on h2d behind a wait on the chunk's pinned word, then the
//     completion event, which the Work has at once (wait() returns without
//     blocking the host). The engine thread sets chunk i's word when its
//     gcx call is over (Job::settled); the last chunk's completer gives
//     the buffers to the pool for when the event is reached and completes
//     the Work and its Future (on a stream that waits for the event),
//     waiting for nothing on the device.
// Every device call the engine and completer threads make is under a
// guard of the call's device (they never set one of their own).
// Cost: beyond the copies themselves, one event query per poll of the
// engine while a chunk's copy is landing, one event per chunk; host mode:
// a host wait for the last chunk's copy back before the Future completes;
// stream mode: a pinned word and a stream wait per chunk.
#include "staging.h"

#include "backend_impl.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <unordered_map>

namespace torch_gcx {

namespace {

size_t env_size(const char *name, size_t dflt, size_t min)
{
    const char *v = std::getenv(name);
    if (v == nullptr || *v == '\0') {
        return dflt;
    }
    char *end    = nullptr;
    long long n  = std::strtoll(v, &end, 10);
    TORCH_CHECK(end != v && *end == '\0' && n >= static_cast<long long>(min),
                "torch_gcx: ", name, "='", v, "' is not a number >= ", min);
    return static_cast<size_t>(n);
}

thread_local Mirror *tl_mirror = nullptr;

// A setting of two values: unset, empty or "auto" (false), or `other`
// (true); anything else raises, naming the variable and both values.
bool env_is(const char *name, const char *other)
{
    const char *v = std::getenv(name);
    if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) {
        return false;
    }
    TORCH_CHECK(std::strcmp(v, other) == 0, "torch_gcx: ", name, "='", v,
                "' is not one of auto, ", other);
    return true;
}

} // namespace

bool stage_always()
{
    static const bool always = env_is("GCX_TORCH_STAGE", "always");
    return always;
}

size_t stage_chunk_bytes()
{
    static const size_t bytes =
        env_size("GCX_TORCH_STAGE_CHUNK", size_t(4) << 20, 64);
    return bytes;
}

// ---- streams that wait on a host word ---------------------------------------

namespace {

// Pinned words of n gates, as a pool buffer: at least 64 KiB, the pool's
// smallest, so that every call's gates reuse one (the pool gives a buffer
// only to requests of at least half its size)
size_t gate_bytes(size_t n)
{
    return std::max<size_t>(n * sizeof(uint32_t), 65536);
}

// CUDA's: the driver's cuStreamWaitValue32 (CU_STREAM_WAIT_VALUE_GEQ) on
// the stream's native handle, the word's device address from
// cuMemHostGetDevicePointer (pinned memory is mapped). Looked up in the
// libcuda torch loaded; absent (no driver, an old one): no stream mode.
using CuStreamWaitValue32 = int (*)(void *stream, uint64_t addr,
                                    uint32_t value, unsigned flags);
using CuMemHostGetDevicePointer = int (*)(uint64_t *dptr, void *p,
                                          unsigned flags);

struct CudaDriver {
    CuStreamWaitValue32 wait           = nullptr;
    CuMemHostGetDevicePointer host_ptr = nullptr;
};

const CudaDriver &cuda_driver()
{
    static const CudaDriver d = [] {
        CudaDriver r;
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) {
            return r;
        }
        void *w = dlsym(lib, "cuStreamWaitValue32_v2");
        if (w == nullptr) {
            w = dlsym(lib, "cuStreamWaitValue32");
        }
        void *h = dlsym(lib, "cuMemHostGetDevicePointer_v2");
        if (h == nullptr) {
            h = dlsym(lib, "cuMemHostGetDevicePointer");
        }
        if (w != nullptr && h != nullptr) {
            r.wait     = reinterpret_cast<CuStreamWaitValue32>(w);
            r.host_ptr = reinterpret_cast<CuMemHostGetDevicePointer>(h);
        }
        return r;
    }();
    return d;
}

int cuda_stream_wait_word(const c10::Stream &stream,
                          const volatile uint32_t *word, uint32_t value)
{
    const CudaDriver &d = cuda_driver();
    if (d.wait == nullptr) {
        return -1;
    }
    uint64_t addr = 0;
    int rc = d.host_ptr(&addr, const_cast<uint32_t *>(word), 0);
    if (rc != 0) {
        return rc;
    }
    return d.wait(stream.native_handle(), addr, value, 0 /* GEQ */);
}

std::mutex wait_mu;
// device type -> a registered StreamWaitWordFn (set_stream_wait_word)
std::unordered_map<int, StreamWaitWordFn> &wait_fns()
{
    static auto *m = new std::unordered_map<int, StreamWaitWordFn>();
    return *m;
}
// device type -> probe result (1 usable, 0 not)
std::unordered_map<int, int> &wait_probed()
{
    static auto *m = new std::unordered_map<int, int>();
    return *m;
}

// 0: queued; otherwise the device's error, or -1 when the device type has
// no stream wait
int queue_wait_word(const c10::Stream &stream, const volatile uint32_t *word,
                    uint32_t value)
{
    if (stream.device_type() == c10::kCUDA) {
        return cuda_stream_wait_word(stream, word, value);
    }
    StreamWaitWordFn fn = nullptr;
    {
        std::lock_guard<std::mutex> lk(wait_mu);
        auto it = wait_fns().find(static_cast<int>(stream.device_type()));
        if (it != wait_fns().end()) {
            fn = it->second;
        }
    }
    if (fn == nullptr) {
        return -1;
    }
    return fn(stream.device_index(), stream.id(), word, value);
}

} // namespace

void set_stream_wait_word(c10::DeviceType type, StreamWaitWordFn fn)
{
    std::lock_guard<std::mutex> lk(wait_mu);
    wait_fns()[static_cast<int>(type)] = fn;
    wait_probed().erase(static_cast<int>(type));
}

bool wait_on_stream_allowed()
{
    static const bool host = env_is("GCX_TORCH_WAIT", "host");
    return !host;
}

bool stream_waits(c10::Device device)
{
    if (!wait_on_stream_allowed()) {
        return false;
    }
    const int type = static_cast<int>(device.type());
    {
        std::lock_guard<std::mutex> lk(wait_mu);
        auto it = wait_probed().find(type);
        if (it != wait_probed().end()) {
            return it->second == 1;
        }
    }
    // the probe: a wait on a word that already holds its value, on the
    // copy-back stream (a no-op there where it works)
    int rc = -1;
    {
        at::Tensor word = HostPool::get().take(gate_bytes(1), true);
        *static_cast<uint32_t *>(word.data_ptr()) = 1;
        c10::DeviceGuard g(device);
        c10::Stream h2d = stage_streams(device).h2d;
        rc = queue_wait_word(h2d, static_cast<uint32_t *>(word.data_ptr()), 1);
        auto ev = device_event(device);
        ev->record(h2d);
        HostPool::get().give_after(word, ev);
    }
    if (rc != 0 && rc != -1) {
        TORCH_WARN_ONCE("torch_gcx: ", device.type(), " refused a stream wait "
                        "on a host word (error ", rc, "): staged calls' "
                        "wait() blocks the host until their copies back are "
                        "queued");
    }
    std::lock_guard<std::mutex> lk(wait_mu);
    wait_probed()[type] = rc == 0 ? 1 : 0;
    return rc == 0;
}

void stream_wait_word(const c10::Stream &stream, const volatile uint32_t *word,
                      uint32_t value)
{
    int rc = queue_wait_word(stream, word, value);
    TORCH_CHECK(rc == 0, "torch_gcx: ", stream,
                " refused a wait on a host word (error ", rc, ")");
}

bool staged(c10::Device device)
{
    if (tl_mirror != nullptr) {
        return false;
    }
    return !device.is_cpu() || stage_always();
}

// ---- pool -------------------------------------------------------------------

HostPool &HostPool::get()
{
    static HostPool *pool = new HostPool(); // leaked: no exit-time frees
    return *pool;
}

at::Tensor HostPool::take(size_t bytes, bool pinned)
{
    if (pinned) {
        reap();
    }
    bytes = std::max<size_t>(bytes, 1);
    {
        std::lock_guard<std::mutex> lk(mu_);
        auto &idle = idle_[pinned ? 1 : 0];
        auto it    = idle.lower_bound(bytes);
        if (it != idle.end() && it->first <= 2 * bytes) {
            at::Tensor buf = std::move(it->second);
            cached_ -= it->first;
            idle.erase(it);
            ++stats_.reuses;
            return buf;
        }
        ++stats_.allocs;
    }
    // round up to 64 KiB so that sizes close together share buffers
    size_t size = (bytes + 65535) / 65536 * 65536;
    return at::empty({static_cast<int64_t>(size)},
                     at::TensorOptions().dtype(at::kByte).pinned_memory(pinned));
}

void HostPool::give(at::Tensor buf, bool pinned)
{
    static const size_t cap =
        env_size("GCX_TORCH_STAGE_POOL_MB", 1024, 0) << 20;
    size_t size = static_cast<size_t>(buf.numel());
    std::lock_guard<std::mutex> lk(mu_);
    if (cached_ + size > cap) {
        return; // freed here (torch's pinned allocator caches it again)
    }
    cached_ += size;
    idle_[pinned ? 1 : 0].emplace(size, std::move(buf));
}

void HostPool::give_after(at::Tensor buf, std::shared_ptr<c10::Event> done)
{
    if (!buf.defined()) {
        return;
    }
    std::lock_guard<std::mutex> lk(mu_);
    later_.emplace_back(std::move(buf), std::move(done));
}

void HostPool::reap()
{
    std::vector<at::Tensor> ready;
    {
        std::lock_guard<std::mutex> lk(mu_);
        for (size_t i = 0; i < later_.size();) {
            const auto &ev = later_[i].second;
            bool reached;
            {
                c10::DeviceGuard g(ev->device());
                reached = ev->query();
            }
            if (!reached) {
                ++i;
                continue;
            }
            ready.push_back(std::move(later_[i].first));
            later_[i] = std::move(later_.back());
            later_.pop_back();
        }
    }
    for (auto &buf : ready) {
        give(std::move(buf), true);
    }
}

void HostPool::count_call(size_t chunks)
{
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.calls;
    stats_.chunks += chunks;
}

void HostPool::count_mirror()
{
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.mirrors;
}

StageStats HostPool::stats()
{
    std::lock_guard<std::mutex> lk(mu_);
    StageStats s   = stats_;
    s.cached_bytes = cached_;
    for (const auto &l : later_) { // held until their copies landed
        s.cached_bytes += static_cast<uint64_t>(l.first.numel());
    }
    return s;
}

StageStats stage_stats() { return HostPool::get().stats(); }

StageStreams stage_streams(c10::Device device)
{
    static std::mutex mu;
    static auto *streams = new std::unordered_map<c10::Device, StageStreams>();
    std::lock_guard<std::mutex> lk(mu);
    auto it = streams->find(device);
    if (it == streams->end()) {
        c10::impl::VirtualGuardImpl impl(device.type());
        StageStreams s{impl.getStreamFromGlobalPool(device, false),
                       impl.getStreamFromGlobalPool(device, false),
                       impl.getStreamFromGlobalPool(device, false)};
        it = streams->emplace(device, s).first;
    }
    return it->second;
}

at::Tensor byte_view(const at::Tensor &t)
{
    return t.reshape({-1}).view(at::kByte);
}

std::vector<std::pair<int64_t, int64_t>> chunk_ranges(int64_t n,
                                                      size_t elem_size)
{
    int64_t per = std::max<int64_t>(
        1, static_cast<int64_t>(stage_chunk_bytes() / std::max<size_t>(
                                                          elem_size, 1)));
    std::vector<std::pair<int64_t, int64_t>> r;
    if (n == 0) {
        r.emplace_back(0, 0);
    }
    for (int64_t a = 0; a < n; a += per) {
        r.emplace_back(a, std::min(per, n - a));
    }
    return r;
}

// ---- a chunked call ---------------------------------------------------------

namespace {
struct StageRun;
void queue_copies_back(StageRun &run, size_t n);
} // namespace

std::shared_ptr<c10::Event> device_event(c10::Device device)
{
    return std::shared_ptr<c10::Event>(
        new c10::Event(device.type()), [device](c10::Event *e) {
            c10::DeviceGuard g(device);
            delete e;
        });
}

namespace {

struct StageRun {
    StagePlan plan;
    bool device = false;
    at::Tensor hin, hout;
    std::optional<StageStreams> streams;
    std::vector<std::unique_ptr<c10::Event>> landed; // per chunk (device)
    std::atomic<size_t> left{0};
    std::mutex mu;
    gcx_status_t status = GCX_OK; // first failure (mu)
    std::exception_ptr error;     // a copy that raised (mu)
    c10::intrusive_ptr<GcxWork> work;
    double timeout_s = 0;
    // stream mode (stream_waits): the copies back were queued at the call,
    // each chunk's behind a wait of the copy-back stream on its word of
    // `flags` (pinned, 0 until the chunk's gcx call is over), and
    // `back_done` recorded after them
    bool stream_mode = false;
    at::Tensor flags;
    std::shared_ptr<c10::Event> back_done;

    // chunk i is over (done or failed): let the stream copy it back
    void open_gate(size_t i)
    {
        __atomic_store_n(static_cast<uint32_t *>(flags.data_ptr()) + i, 1u,
                         __ATOMIC_RELEASE);
    }

    void fail(gcx_status_t st, std::exception_ptr e)
    {
        std::lock_guard<std::mutex> lk(mu);
        if (status == GCX_OK && !error) {
            status = st;
            error  = e;
        }
    }

    // completer thread: chunk i's gcx call is done
    void chunk_done(size_t i, gcx_status_t st)
    {
        if (st != GCX_OK) {
            fail(st, nullptr);
        } else if (!stream_mode) {
            try {
                copy_out(i);
            } catch (...) {
                fail(GCX_ERR_INVALID, std::current_exception());
            }
        }
        if (stream_mode) {
            // opened already by the engine (Job::settled), unless the job
            // never reached it (the engine was gone at submission). A
            // failed chunk's gate opens too (the stream must never wait
            // forever): its copy back moves what the host buffer holds,
            // and the Work fails (NCCL's semantics: the outputs of a failed
            // call are undefined; wait() raises once the failure is known)
            open_gate(i);
        }
        if (left.fetch_sub(1) == 1) {
            finish();
        }
    }

    void copy_out(size_t i)
    {
        const StageChunk &c = plan.chunks[i];
        if (c.out.empty()) {
            return;
        }
        if (!device) {
            for (const auto &p : c.out) {
                p.dev.copy_(hout.narrow(0, p.off, p.dev.numel()));
            }
            return;
        }
        c10::StreamGuard g(streams->h2d);
        for (const auto &p : c.out) {
            p.dev.copy_(hout.narrow(0, p.off, p.dev.numel()), true);
        }
    }

    void finish()
    {
        // the completer thread sets no device of its own: every device call
        // here (events, the Future's) is made on the call's device
        std::optional<c10::DeviceGuard> guard;
        if (device) {
            guard.emplace(plan.device);
            landed.clear(); // every chunk was issued: ready() is over
        }
        std::exception_ptr err;
        {
            std::lock_guard<std::mutex> lk(mu);
            if (error) {
                err = error;
            } else if (status == GCX_ERR_TIMEOUT) {
                err = std::make_exception_ptr(c10::DistBackendError(
                    {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                    status_message(plan.name, status) +
                        ": not done within the group's timeout (" +
                        std::to_string(timeout_s) + " s, its GCX_TIMEOUT)"));
            } else if (status != GCX_OK) {
                err = make_error(plan.name, status);
            }
        }
        if (stream_mode) {
            finish_stream_mode(err);
            return;
        }
        std::shared_ptr<c10::Event> done;
        if (device) {
            try {
                done = device_event(plan.device);
                done->record(streams->h2d);
            } catch (...) {
                done.reset();
                if (!err) {
                    err = std::current_exception();
                }
            }
        }
        if (err) {
            // the Work fails before wait() may see the event
            work->finish_error(err);
            release(done);
            return;
        }
        if (done) {
            work->set_recorded(done);
        }
        release(done);
        if (device) {
            c10::StreamGuard g(streams->h2d);
            work->finish_ok();
        } else {
            work->finish_ok();
        }
    }

    // stream mode: the copies back and `back_done` were queued at the
    // call; nothing here waits for the device (a completer runs the other
    // calls' completions and callbacks: it must not sit behind a stream
    // that waits on gates). The buffers go back to the pool once
    // `back_done` is reached; the Future completes on a stream that waits
    // for it.
    void finish_stream_mode(std::exception_ptr err)
    {
        HostPool &pool = HostPool::get();
        pool.give_after(hin, back_done);
        if (!plan.out_is_in) {
            pool.give_after(hout, back_done);
        }
        pool.give_after(flags, back_done);
        hin = hout = flags = at::Tensor();
        if (err) {
            work->finish_error(err);
            return;
        }
        c10::impl::VirtualGuardImpl impl(plan.device.type());
        c10::Stream s = impl.getStreamFromGlobalPool(plan.device, false);
        back_done->block(s);
        c10::StreamGuard g(s);
        work->finish_ok();
    }

    // the host buffers go back to the pool once nothing reads them
    void release(const std::shared_ptr<c10::Event> &done)
    {
        if (done) {
            try {
                done->synchronize();
            } catch (...) {
                return; // a device error: do not reuse the buffers
            }
        }
        HostPool &pool = HostPool::get();
        pool.give(hin, device);
        if (!plan.out_is_in) {
            pool.give(hout, device);
        }
        hin  = at::Tensor();
        hout = at::Tensor();
    }
};

// Stream mode, at the call: each chunk's copies back are queued now on the
// copy-back stream behind a wait on its gate, then `done`; the Work is
// "recorded" at once, so wait() returns without blocking the host.
void queue_copies_back(StageRun &run, size_t n)
{
    HostPool &pool = HostPool::get();
    run.flags = pool.take(gate_bytes(n), true);
    std::memset(run.flags.data_ptr(), 0, n * sizeof(uint32_t));
    const auto *gates = static_cast<const uint32_t *>(run.flags.data_ptr());
    run.stream_mode = true; // from here chunk_done opens the gates
    try {
        c10::impl::VirtualGuardImpl impl(run.plan.device.type());
        c10::StreamGuard g(run.streams->h2d);
        for (size_t i = 0; i < n; ++i) {
            stream_wait_word(run.streams->h2d, gates + i, 1);
            for (const auto &p : run.plan.chunks[i].out) {
                p.dev.copy_(run.hout.narrow(0, p.off, p.dev.numel()), true);
                // the run lets go of the tensor before the copy lands (no
                // host wait): its memory must not be reused before it has
                impl.recordDataPtrOnStream(p.dev.storage().data_ptr(),
                                           run.streams->h2d);
            }
        }
        run.back_done = device_event(run.plan.device);
        run.back_done->record(run.streams->h2d);
    } catch (...) {
        // nothing is submitted: open every gate queued so far, so the
        // stream goes on (the device refused a wait its probe accepted)
        for (size_t i = 0; i < n; ++i) {
            run.open_gate(i);
        }
        throw;
    }
    run.work->set_recorded(run.back_done);
}

} // namespace

c10::intrusive_ptr<c10d::Work> GcxBackend::submit_staged(StagePlan plan)
{
    gcx_comm_t *comm = comm_;
    TORCH_CHECK(comm != nullptr, "gcx ", plan.name,
                ": the process group has been shut down");
    TORCH_CHECK(!plan.chunks.empty(), "gcx ", plan.name, ": no chunks");
    auto run       = std::make_shared<StageRun>();
    run->device    = !plan.device.is_cpu();
    run->timeout_s = timeout_s_;
    HostPool &pool = HostPool::get();
    std::vector<c10::Device> devices;
    if (run->device) {
        devices.push_back(plan.device);
    }
    auto work = c10::make_intrusive<GcxWork>(getRank(), plan.type,
                                             plan.outputs,
                                             profiling_title(plan.type),
                                             plan.inputs, devices);
    run->work = work;
    run->hin  = pool.take(plan.in_bytes, run->device);
    run->hout = plan.out_is_in ? run->hin
                               : pool.take(plan.out_bytes, run->device);
    const size_t n = plan.chunks.size();
    if (run->device) {
        work->set_device_event(plan.device);
        c10::impl::VirtualGuardImpl impl(plan.device.type());
        run->streams = stage_streams(plan.device);
        c10::Event call(plan.device.type());
        call.record(impl.getStream(plan.device));
        call.block(run->streams->d2h);
        call.block(run->streams->h2d);
        {
            c10::StreamGuard g(run->streams->d2h);
            for (size_t i = 0; i < n; ++i) {
                for (const auto &p : plan.chunks[i].in) {
                    run->hin.narrow(0, p.off, p.dev.numel()).copy_(p.dev,
                                                                   true);
                }
                run->landed.push_back(
                    std::make_unique<c10::Event>(plan.device.type()));
                run->landed.back()->record(run->streams->d2h);
            }
        }
    } else {
        for (size_t i = 0; i < n; ++i) {
            for (const auto &p : plan.chunks[i].in) {
                run->hin.narrow(0, p.off, p.dev.numel()).copy_(p.dev);
            }
        }
    }
    pool.count_call(n);
    run->plan = std::move(plan);
    if (run->device && stream_waits(run->plan.device)) {
        queue_copies_back(*run, n);
    }
    run->left = n;
    for (size_t i = 0; i < n; ++i) {
        auto job  = std::make_shared<Job>();
        job->name = run->plan.name;
        job->comm = comm;
        if (run->device) {
            job->ready = [run, i] {
                c10::DeviceGuard g(run->plan.device); // the engine thread
                return run->landed[i]->query();
            };
        }
        job->start = [run, i, comm](std::vector<gcx_request_t *> &reqs) {
            return run->plan.chunks[i].start(
                comm, reqs, static_cast<uint8_t *>(run->hin.data_ptr()),
                static_cast<uint8_t *>(run->hout.data_ptr()));
        };
        job->settled = [run, i](gcx_status_t) {
            if (run->stream_mode) {
                run->open_gate(i); // the engine thread: see Job::settled
            }
        };
        job->done = [run, i](gcx_status_t st) { run->chunk_done(i, st); };
        try {
            Engine::get().submit(job);
        } catch (...) {
            // the engine is gone: the chunks not queued fail here
            for (size_t j = i; j < n; ++j) {
                run->chunk_done(j, GCX_ERR_CANCELED);
            }
            throw;
        }
    }
    return work;
}

// ---- host mirrors -----------------------------------------------------------

Mirror::Mirror(c10::Device device)
    : device_(device), pinned_(!device.is_cpu())
{
    if (pinned_) {
        c10::impl::VirtualGuardImpl impl(device.type());
        StageStreams s = stage_streams(device);
        call_event_.emplace(device.type());
        call_event_->record(impl.getStream(device));
        call_event_->block(s.d2h);
        call_event_->block(s.mirror);
    }
    HostPool::get().count_mirror();
}

at::Tensor Mirror::host_like(const at::Tensor &t)
{
    // as check_dense: a mirror must not hide a layout gcx would refuse
    TORCH_CHECK(t.layout() == at::kStrided, "gcx: every tensor must be a "
                "dense (strided) tensor, got layout ", t.layout());
    TORCH_CHECK(t.is_contiguous(), "gcx: every tensor must be contiguous "
                "(call .contiguous() first)");
    return at::empty(t.sizes(), at::TensorOptions()
                                    .dtype(t.scalar_type())
                                    .pinned_memory(pinned_));
}

at::Tensor Mirror::in(const at::Tensor &t)
{
    if (!t.defined()) {
        return t;
    }
    at::Tensor h = host_like(t);
    if (pinned_) {
        c10::StreamGuard g(stage_streams(device_).d2h);
        h.copy_(t, true);
    } else {
        h.copy_(t);
    }
    return h;
}

at::Tensor Mirror::out(const at::Tensor &t)
{
    if (!t.defined()) {
        return t;
    }
    at::Tensor h = host_like(t);
    back_.emplace_back(t, h);
    users_.push_back(t);
    return h;
}

at::Tensor Mirror::inout(const at::Tensor &t)
{
    if (!t.defined()) {
        return t;
    }
    at::Tensor h = in(t);
    back_.emplace_back(t, h);
    users_.push_back(t);
    return h;
}

std::vector<at::Tensor> Mirror::in(const std::vector<at::Tensor> &ts)
{
    std::vector<at::Tensor> r;
    for (const auto &t : ts) {
        r.push_back(in(t));
    }
    return r;
}

std::vector<at::Tensor> Mirror::out(const std::vector<at::Tensor> &ts)
{
    std::vector<at::Tensor> r;
    for (const auto &t : ts) {
        r.push_back(out(t));
    }
    return r;
}

std::vector<at::Tensor> Mirror::inout(const std::vector<at::Tensor> &ts)
{
    std::vector<at::Tensor> r;
    for (const auto &t : ts) {
        r.push_back(inout(t));
    }
    return r;
}

std::vector<std::vector<at::Tensor>>
Mirror::in(const std::vector<std::vector<at::Tensor>> &lists)
{
    std::vector<std::vector<at::Tensor>> r;
    for (const auto &l : lists) {
        r.push_back(in(l));
    }
    return r;
}

std::vector<std::vector<at::Tensor>>
Mirror::out(const std::vector<std::vector<at::Tensor>> &lists)
{
    std::vector<std::vector<at::Tensor>> r;
    for (const auto &l : lists) {
        r.push_back(out(l));
    }
    return r;
}

void Mirror::landed()
{
    if (!pinned_) {
        return;
    }
    c10::Event e(device_.type());
    e.record(stage_streams(device_).d2h);
    e.synchronize();
}

std::function<void()> Mirror::copy_back() const
{
    auto back        = back_;
    c10::Device dev  = device_;
    bool pinned      = pinned_;
    return [back, dev, pinned] {
        if (!pinned) {
            for (const auto &b : back) {
                b.first.copy_(b.second);
            }
            return;
        }
        StageStreams s = stage_streams(dev);
        c10::StreamGuard g(s.mirror);
        for (const auto &b : back) {
            b.first.copy_(b.second, true);
        }
        c10::Event e(dev.type());
        e.record(s.mirror);
        e.synchronize();
    };
}

MirrorScope::MirrorScope(Mirror &m) : prev_(tl_mirror) { tl_mirror = &m; }

MirrorScope::~MirrorScope() { tl_mirror = prev_; }

Mirror *MirrorScope::current() { return tl_mirror; }

} // namespace torch_gcx
