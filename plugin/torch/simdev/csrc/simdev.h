// simdev: a simulated asynchronous accelerator for PyTorch (PrivateUse1,
// renamed "simdev"). Shared declarations of the runtime (runtime.cc), the
// torch registrations (backend.cc) and the Python module (module.cc).
//
// Idea: "device memory" is plain host memory handed out by a stream-ordered
// caching allocator; each stream is a FIFO of host closures run in order by
// its own worker thread; events are markers in those FIFOs. Copies are such
// closures (so they land late, as on a GPU); every other op synchronizes
// the current stream and runs its CPU kernel on aliases of the device
// memory. Cost: one thread per stream in use (idle ones exit after a few
// seconds), a mutex + condition variable per stream, one global allocator
// mutex, and memory is never given back to the OS while the process lives.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace simdev {

constexpr int kNumDevices = 2;
constexpr c10::StreamId kDefaultStream = 0;
constexpr c10::StreamId kPoolSize = 8;  // pool streams are 1..kPoolSize
constexpr c10::StreamId kFirstNewStream = 64;

// ---- settings (read at import from SIMDEV_* by the Python package) ----
struct Settings {
  std::atomic<int64_t> latency_us{0};
  std::atomic<int64_t> jitter_us{0};
  std::atomic<bool> strict{false};
};
Settings& settings();

// ---- statistics ----
struct Stats {
  std::atomic<int64_t> copies{0};
  std::atomic<int64_t> async_copies{0};
  std::atomic<int64_t> fallback_ops{0};
  std::atomic<int64_t> allocs{0};
  std::atomic<int64_t> reuses{0};
  std::atomic<int64_t> poisoned_reads{0};
  std::atomic<int64_t> cross_stream_violations{0};
  std::atomic<int64_t> calls_without_device{0};
  std::mutex mu;  // guards the two lists
  std::vector<std::string> calls_without_device_threads;
  std::vector<std::string> violations;
};
Stats& stats();
void reset_stats();
void add_violation(std::string msg);

// ---- per-thread device state ----
// The device index this thread set (default 0) and whether it ever set one
// (setDevice / exchangeDevice / uncheckedSetDevice, i.e. a DeviceGuard).
int current_device();
void set_current_device(int dev);  // marks the thread
void mark_device_set();
bool is_worker_thread();
// Called at the entry of each device API call: counts the call when the
// calling thread never set a device and is not a simdev worker.
void note_call();
void check_device(int dev);
int resolve_device(c10::DeviceIndex idx);  // -1 -> current device

c10::StreamId current_stream_id(int dev);
c10::StreamId exchange_stream_id(int dev, c10::StreamId id);
c10::StreamId pool_stream_id(int dev);
c10::StreamId new_stream_id(int dev);

// ---- allocator blocks ----
struct Block {
  void* ptr = nullptr;
  size_t size = 0;
  int device = 0;
  c10::StreamId stream = 0;  // allocation stream: the pool it returns to
  bool allocated = false;
  std::set<c10::StreamId> recorded;         // record_stream'd streams
  std::map<c10::StreamId, int64_t> pending;  // queued ops using it, per stream
  std::atomic<uint64_t> poison_scheduled{0};  // poison ops enqueued
  std::atomic<uint64_t> poison_done{0};       // poison ops executed
};

// The Block behind a simdev DataPtr, or nullptr for foreign memory.
Block* block_of(const c10::DataPtr& dp);
// Allocates on `dev` from the pool of the calling thread's current stream.
c10::DataPtr device_allocate(int dev, size_t nbytes);
c10::Allocator* device_allocator(int dev);  // allocates on `dev`
c10::Allocator* current_device_allocator();  // allocates on current_device()
void record_block_on_stream(Block* b, c10::StreamId stream);
int device_of_ptr(const void* p);  // -1 when not device memory

// ---- pinned host memory ----
c10::Allocator* pinned_allocator();
bool is_pinned_ptr(const void* p);

// ---- streams ----
struct Op {
  std::function<void()> fn;
  std::vector<Block*> uses;  // device blocks the op touches
  // Runs once the stream counts the op as executed (event markers: a
  // completed event implies a stream query that sees the marker done).
  std::function<void()> post = nullptr;
};

class SimStream {
 public:
  SimStream(int dev, c10::StreamId id) : dev_(dev), id_(id) {}
  // Appends an op; returns its sequence number (1, 2, ...).
  uint64_t enqueue(Op op);
  void wait_for(uint64_t seq);  // host waits until op `seq` executed
  void synchronize();           // host waits for everything enqueued so far
  bool query();                 // queue empty and nothing executing
  int device() const { return dev_; }
  c10::StreamId id() const { return id_; }
  void stop_and_drain_wait();   // used at shutdown

 private:
  void worker();
  int dev_;
  c10::StreamId id_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::pair<uint64_t, Op>> q_;
  uint64_t enqueued_ = 0, completed_ = 0;
  bool running_ = false;  // a worker thread is alive
};

SimStream& get_stream(int dev, c10::StreamId id);
SimStream& current_stream(int dev);
void synchronize_device(int dev);
bool shutting_down();
void shutdown();  // drains all streams (bounded), runs later ops inline
void sleep_on_stream(int dev, c10::StreamId id, int64_t us);
// Enqueue a wait until *word >= value (CUDA's cuStreamWaitValue32, GEQ):
// how torch_gcx makes a stream wait for a host-side completion.
void stream_wait_word(int dev, c10::StreamId id, const volatile uint32_t* word,
                      uint32_t value);
void simulated_latency();  // sleeps latency + jitter (copy ops call it)

// ---- events ----
struct Marker {
  bool done = false;  // guarded by the global marker mutex
  std::chrono::steady_clock::time_point when;
};
struct Event {
  std::mutex mu;
  std::shared_ptr<Marker> latest;  // the latest recording, null if never
  int device = -1;
};
void event_record(Event* ev, int dev, c10::StreamId stream);
void event_block(Event* ev, int dev, c10::StreamId stream);
bool event_query(Event* ev);
void event_synchronize(Event* ev);
double event_elapsed_ms(Event* a, Event* b);

} // namespace simdev
