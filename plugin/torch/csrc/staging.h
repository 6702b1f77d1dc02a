// staging.h - device tensors (CUDA) through host buffers, pipelined by
// chunks (staging.cc), and the host mirrors of the calls that are not
// chunked.
//
// Idea: libgcx moves host memory only. A staged call is cut into chunks;
// each chunk's device-to-host copy is queued at the call on a side stream
// (after an event recorded on the caller's current stream, so it sees
// what the caller queued before), the engine issues the chunk's gcx call
// once that copy has landed (Job::ready, FIFO kept), and the completer
// queues the chunk's host-to-device copy on a second side stream when its
// gcx call is done. So the copy in of chunk i+1, the network of chunk i
// and the copy out of chunk i-1 overlap; the call returns at once. The
// host buffers come from a pool (HostPool) that keeps them for the next
// call: pinned memory (torch's pinned-memory allocator of the device)
// for device tensors, plain memory for CPU tensors (GCX_TORCH_STAGE=always,
// which sends CPU tensors through the same pipeline for tests).
// Everything here is device-generic (c10::Stream, c10::Event,
// c10::impl::VirtualGuardImpl, c10::StreamGuard): it builds and runs
// against a CPU-only torch.
//
// Cost: per chunk one gcx collective (its latency: chunks are large,
// GCX_TORCH_STAGE_CHUNK, default 4 MiB), one event, one engine job; the
// pool holds up to GCX_TORCH_STAGE_POOL_MB (default 1024) of idle host
// memory. The calls that are not chunked (coalesced, list-shaped,
// all_to_all, gather/scatter, send/recv, and reductions combined locally)
// use host mirrors: the host waits at the call for the copy in, the copy
// out is synchronous at completion.
#pragma once

#include "engine.h"
#include "work.h"

#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/extension.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace torch_gcx {

// GCX_TORCH_STAGE: unset, "auto": device tensors are staged, CPU tensors
// go to gcx as they are; "always": CPU tensors are staged too (tests of
// the pipeline on machines without a GPU). Any other value raises at the
// first call, naming it.
bool stage_always();
// GCX_TORCH_STAGE_CHUNK: bytes of a chunk (default 4 MiB, at least 64).
size_t stage_chunk_bytes();

// Whether a call on tensors of `device` is staged (false inside a
// MirrorScope: the mirrors are host tensors already).
bool staged(c10::Device device);

// A device type's way to queue, on one of its streams, a wait until a word
// of pinned host memory is >= value (CUDA: cuStreamWaitValue32, built in;
// another device type registers one: torch_gcx._C.set_stream_wait_word
// with the address its device module gives, see torch_gcx/__init__.py).
// Returns 0 when queued.
using StreamWaitWordFn = int (*)(int8_t device_index, int64_t stream_id,
                                 const volatile uint32_t *word,
                                 uint32_t value);
void set_stream_wait_word(c10::DeviceType type, StreamWaitWordFn fn);
// GCX_TORCH_WAIT: unset or "auto": staged calls of a device type that has
// a stream wait (its first use probes it) use stream mode: their copies
// back are queued at the call behind waits on per-chunk words the host
// sets as chunks complete, so Work::wait() returns at once, the caller's
// stream ordered after the copies (NCCL's semantics). "host": never (the
// host waits in wait() until the network part is over and the copies back
// are queued, gloo's CUDA semantics). Any other value raises, naming it.
bool stream_waits(c10::Device device);
// Queue the wait (raises when the device refuses).
void stream_wait_word(const c10::Stream &stream, const volatile uint32_t *word,
                      uint32_t value);

// Counters of the staging, for tests and benchmarks (torch_gcx._C.
// stage_stats()).
struct StageStats {
    uint64_t calls   = 0; // chunked calls
    uint64_t chunks  = 0; // their chunks (gcx calls)
    uint64_t allocs  = 0; // host buffers allocated by the pool
    uint64_t reuses  = 0; // host buffers the pool gave again
    uint64_t mirrors = 0; // calls through host mirrors
    uint64_t cached_bytes = 0;
};
StageStats stage_stats();

// Host buffers for staging, kept for reuse: take() gives the smallest idle
// buffer of at least `bytes` (and at most twice that) of the right kind,
// else a new one; give() keeps it (up to the cap, else frees it).
class HostPool {
  public:
    static HostPool &get();
    at::Tensor take(size_t bytes, bool pinned);
    void give(at::Tensor buf, bool pinned);
    // keep a pinned buffer until `done` is reached on its stream, then as
    // give() (checked at the next take of pinned memory: nobody waits)
    void give_after(at::Tensor buf, std::shared_ptr<c10::Event> done);
    void count_call(size_t chunks);
    void count_mirror();
    StageStats stats();

  private:
    void reap(); // give() the buffers of later_ whose event was reached
    std::mutex mu_;
    std::multimap<size_t, at::Tensor> idle_[2]; // [pinned]
    std::vector<std::pair<at::Tensor, std::shared_ptr<c10::Event>>> later_;
    size_t cached_ = 0;
    StageStats stats_;
};

// The side streams of a device: copies to the host, copies back, and the
// host mirrors' copies back (`mirror`: the completer waits for those on
// the host, so they must never queue behind a stream-mode gate on h2d).
struct StageStreams {
    c10::Stream d2h, h2d, mirror;
};
StageStreams stage_streams(c10::Device device);

// One copy of a chunk: `dev` is a flat byte view of a tensor (device, or
// CPU with GCX_TORCH_STAGE=always), `off` its place in the host buffer.
struct StagePiece {
    at::Tensor dev;
    int64_t off = 0;
};

// One chunk: its copies in (tensor -> host `in` buffer), its gcx call on
// the host buffers, its copies out (host `out` buffer -> tensor).
using ChunkStartFn = std::function<gcx_status_t(
    gcx_comm_t *, std::vector<gcx_request_t *> &, uint8_t *in, uint8_t *out)>;
struct StageChunk {
    std::vector<StagePiece> in, out;
    ChunkStartFn start;
};

// A chunked call: host buffers of in_bytes and out_bytes (out_is_in: one
// buffer, the call is in place), its chunks in issue order, the user's
// tensors (the Work's outputs; inputs for the profiler).
struct StagePlan {
    std::string name;
    c10d::OpType type = c10d::OpType::UNKNOWN;
    c10::Device device{c10::kCPU};
    size_t in_bytes = 0, out_bytes = 0;
    bool out_is_in = false;
    std::vector<StageChunk> chunks;
    std::vector<at::Tensor> outputs, inputs;
};

// An event of `device` that is destroyed under a guard of its device: it
// may be dropped on a thread that never set one (the completer's, a
// Work's last owner), where destroying it would switch to device 0 and
// back (with CUDA >= 12: a context on GPU 0 from every rank).
std::shared_ptr<c10::Event> device_event(c10::Device device);

// Flat byte view of a contiguous tensor.
at::Tensor byte_view(const at::Tensor &t);

// Element ranges [first, first + len) of n elements, chunk by chunk
// (chunk_bytes / element size elements each; one empty range for n == 0).
std::vector<std::pair<int64_t, int64_t>> chunk_ranges(int64_t n,
                                                      size_t elem_size);

// ---- host mirrors (calls that are not chunked) ----------------------------

// Host copies of a call's device tensors: in() copies the content over
// (queued after the caller's current stream), out() is copied back into
// the tensor when the job is done (copy_back, on the completer thread,
// synchronous), inout() both. landed() waits for the copies in.
class MirrorScope;

class Mirror {
  public:
    explicit Mirror(c10::Device device);
    at::Tensor in(const at::Tensor &t);
    at::Tensor out(const at::Tensor &t);
    at::Tensor inout(const at::Tensor &t);
    std::vector<at::Tensor> in(const std::vector<at::Tensor> &ts);
    std::vector<at::Tensor> out(const std::vector<at::Tensor> &ts);
    std::vector<at::Tensor> inout(const std::vector<at::Tensor> &ts);
    // lists of lists (allgather's outputs, reduce_scatter's inputs, ...)
    std::vector<std::vector<at::Tensor>>
    in(const std::vector<std::vector<at::Tensor>> &lists);
    std::vector<std::vector<at::Tensor>>
    out(const std::vector<std::vector<at::Tensor>> &lists);
    void landed();
    // landed(), then `call()` on this thread inside a MirrorScope: the one
    // way an op runs itself again on its mirrors
    template <typename F> auto run(F &&call);
    // the copies back, for a job's post()
    std::function<void()> copy_back() const;
    // the user's tensors given to out()/inout(), in order
    const std::vector<at::Tensor> &user_outputs() const { return users_; }
    // the devices of a device-aware Work's Future: the mirrored device, or
    // none for CPU tensors (GCX_TORCH_STAGE=always)
    std::vector<c10::Device> future_devices() const
    {
        return pinned_ ? std::vector<c10::Device>{device_}
                       : std::vector<c10::Device>{};
    }

  private:
    at::Tensor host_like(const at::Tensor &t);
    c10::Device device_;
    bool pinned_;
    std::vector<std::pair<at::Tensor, at::Tensor>> back_; // (device, host)
    std::vector<at::Tensor> users_;
    std::optional<c10::Event> call_event_;
};

// While alive, calls on this thread are on mirrors: they are not staged
// again, and the backend's enqueue() appends the mirror's copy back to the
// job's post() and reports the user's tensors as the Work's outputs.
class MirrorScope {
  public:
    explicit MirrorScope(Mirror &m);
    ~MirrorScope();
    MirrorScope(const MirrorScope &)            = delete;
    MirrorScope &operator=(const MirrorScope &) = delete;
    static Mirror *current();

  private:
    Mirror *prev_;
};

template <typename F> auto Mirror::run(F &&call)
{
    landed();
    MirrorScope scope(*this);
    return call();
}

} // namespace torch_gcx
