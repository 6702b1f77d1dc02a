// simdev runtime: settings, statistics, per-thread device state, streams
// (FIFOs of host closures run by one worker thread each), events (markers
// in those FIFOs), the stream-ordered caching device allocator with its
// strict-mode checks, and the pinned host allocator.
//
// Idea: a stream's worker thread starts at the first op and exits after
// two idle seconds; an op may name the device blocks it touches, so the
// allocator knows, per block and per stream, how many queued ops still use
// it (that is how a free with a pending cross-stream use is caught). Blocks
// are never returned to the OS, so a late op of a buggy program reads
// poison or stale data, never unmapped memory.
// Cost: a lock and a condition variable per op; one global allocator lock
// taken per allocation, free and per op that names blocks.
#include "simdev.h"

#include <c10/util/Exception.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

namespace simdev {

namespace {

thread_local int tl_device = 0;
thread_local bool tl_device_set = false;
thread_local bool tl_worker = false;
thread_local c10::StreamId tl_stream[kNumDevices] = {kDefaultStream,
                                                     kDefaultStream};

std::atomic<bool> g_shutdown{false};

// Objects below are leaked on purpose: detached worker threads may still
// touch them while the process exits.
std::mutex& registry_mu() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<std::pair<int, c10::StreamId>, SimStream*>& registry() {
  static auto* r = new std::map<std::pair<int, c10::StreamId>, SimStream*>;
  return *r;
}

std::mutex& marker_mu() {
  static auto* m = new std::mutex;
  return *m;
}
std::condition_variable& marker_cv() {
  static auto* cv = new std::condition_variable;
  return *cv;
}

std::string thread_label() {
  char name[64] = {0};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return std::string(name) + " (tid " +
      std::to_string(static_cast<long>(syscall(SYS_gettid))) + ")";
}

} // namespace

Settings& settings() {
  static auto* s = new Settings;
  return *s;
}

Stats& stats() {
  static auto* s = new Stats;
  return *s;
}

void reset_stats() {
  Stats& s = stats();
  s.copies = 0;
  s.async_copies = 0;
  s.fallback_ops = 0;
  s.allocs = 0;
  s.reuses = 0;
  s.poisoned_reads = 0;
  s.cross_stream_violations = 0;
  s.calls_without_device = 0;
  std::lock_guard<std::mutex> lk(s.mu);
  s.calls_without_device_threads.clear();
  s.violations.clear();
}

void add_violation(std::string msg) {
  Stats& s = stats();
  s.cross_stream_violations++;
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.violations.size() < 1000) {
    s.violations.push_back(std::move(msg));
  }
}

// ---------------------------------------------------------------------------
// per-thread device state

int current_device() {
  return tl_device;
}

void check_device(int dev) {
  TORCH_CHECK(dev >= 0 && dev < kNumDevices, "simdev: invalid device index ",
      dev, " (there are ", kNumDevices, " devices)");
}

void set_current_device(int dev) {
  check_device(dev);
  tl_device = dev;
  tl_device_set = true;
}

void mark_device_set() {
  tl_device_set = true;
}

bool is_worker_thread() {
  return tl_worker;
}

void note_call() {
  if (tl_device_set || tl_worker) {
    return;
  }
  Stats& s = stats();
  s.calls_without_device++;
  std::string label = thread_label();
  std::lock_guard<std::mutex> lk(s.mu);
  auto& v = s.calls_without_device_threads;
  if (v.size() < 256 && std::find(v.begin(), v.end(), label) == v.end()) {
    v.push_back(std::move(label));
  }
}

int resolve_device(c10::DeviceIndex idx) {
  int dev = idx < 0 ? tl_device : static_cast<int>(idx);
  check_device(dev);
  return dev;
}

c10::StreamId current_stream_id(int dev) {
  check_device(dev);
  return tl_stream[dev];
}

c10::StreamId exchange_stream_id(int dev, c10::StreamId id) {
  check_device(dev);
  c10::StreamId old = tl_stream[dev];
  tl_stream[dev] = id;
  return old;
}

c10::StreamId pool_stream_id(int dev) {
  static std::atomic<uint32_t> next[kNumDevices];
  check_device(dev);
  return 1 + static_cast<c10::StreamId>(next[dev]++ % kPoolSize);
}

c10::StreamId new_stream_id(int dev) {
  static std::atomic<int64_t> next[kNumDevices] = {{kFirstNewStream},
                                                   {kFirstNewStream}};
  check_device(dev);
  return next[dev]++;
}

// ---------------------------------------------------------------------------
// allocator state (shared by streams: ops name the blocks they use)

namespace {

struct AllocState {
  std::mutex mu;
  std::map<std::pair<int, c10::StreamId>, std::multimap<size_t, Block*>> pools;
  std::map<uintptr_t, Block*> blocks;  // by base address
};
AllocState& alloc_state() {
  static auto* s = new AllocState;
  return *s;
}

void add_uses(const std::vector<Block*>& uses, c10::StreamId stream) {
  if (uses.empty()) {
    return;
  }
  AllocState& a = alloc_state();
  std::lock_guard<std::mutex> lk(a.mu);
  for (Block* b : uses) {
    b->pending[stream]++;
  }
}

void release_uses(const std::vector<Block*>& uses, c10::StreamId stream) {
  if (uses.empty()) {
    return;
  }
  AllocState& a = alloc_state();
  std::lock_guard<std::mutex> lk(a.mu);
  for (Block* b : uses) {
    auto it = b->pending.find(stream);
    if (it != b->pending.end() && --it->second == 0) {
      b->pending.erase(it);
    }
  }
}

void run_op(Op& op) noexcept {
  try {
    op.fn();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "simdev: a queued op failed: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "simdev: a queued op failed\n");
  }
}

} // namespace

// ---------------------------------------------------------------------------
// streams

uint64_t SimStream::enqueue(Op op) {
  add_uses(op.uses, id_);
  if (g_shutdown.load()) {
    // After shutdown (interpreter exit) ops run inline, in call order.
    uint64_t seq;
    {
      std::lock_guard<std::mutex> lk(mu_);
      seq = ++enqueued_;
    }
    run_op(op);
    release_uses(op.uses, id_);
    op.fn = nullptr;
    {
      std::lock_guard<std::mutex> lk(mu_);
      completed_ = std::max(completed_, seq);
      done_cv_.notify_all();
    }
    if (op.post) {
      op.post();
    }
    return seq;
  }
  std::lock_guard<std::mutex> lk(mu_);
  uint64_t seq = ++enqueued_;
  q_.emplace_back(seq, std::move(op));
  if (!running_) {
    running_ = true;
    std::thread([this] { worker(); }).detach();
  } else {
    work_cv_.notify_one();
  }
  return seq;
}

void SimStream::worker() {
  tl_worker = true;
  char name[16];
  std::snprintf(name, sizeof name, "simdev%d.s%lld", dev_,
      static_cast<long long>(id_));
  pthread_setname_np(pthread_self(), name);
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    work_cv_.wait_for(lk, std::chrono::seconds(2),
        [this] { return !q_.empty() || g_shutdown.load(); });
    if (q_.empty()) {  // idle (or shutting down): the thread ends
      running_ = false;
      return;
    }
    auto item = std::move(q_.front());
    q_.pop_front();
    lk.unlock();
    run_op(item.second);
    release_uses(item.second.uses, id_);
    item.second.fn = nullptr;  // drop what the op holds, outside the lock
    lk.lock();
    completed_ = std::max(completed_, item.first);
    done_cv_.notify_all();
    if (item.second.post) {
      lk.unlock();
      item.second.post();
      item.second.post = nullptr;
      lk.lock();
    }
  }
}

void SimStream::wait_for(uint64_t seq) {
  std::unique_lock<std::mutex> lk(mu_);
  done_cv_.wait(lk, [&] { return completed_ >= seq; });
}

void SimStream::synchronize() {
  std::unique_lock<std::mutex> lk(mu_);
  uint64_t seq = enqueued_;
  done_cv_.wait(lk, [&] { return completed_ >= seq; });
}

bool SimStream::query() {
  std::lock_guard<std::mutex> lk(mu_);
  return completed_ >= enqueued_;
}

void SimStream::stop_and_drain_wait() {
  std::unique_lock<std::mutex> lk(mu_);
  done_cv_.wait_for(lk, std::chrono::seconds(5),
      [&] { return completed_ >= enqueued_; });
  work_cv_.notify_all();
}

SimStream& get_stream(int dev, c10::StreamId id) {
  check_device(dev);
  std::lock_guard<std::mutex> lk(registry_mu());
  auto& r = registry();
  auto it = r.find({dev, id});
  if (it == r.end()) {
    it = r.emplace(std::make_pair(dev, id), new SimStream(dev, id)).first;
  }
  return *it->second;
}

SimStream& current_stream(int dev) {
  return get_stream(dev, current_stream_id(dev));
}

void synchronize_device(int dev) {
  check_device(dev);
  std::vector<SimStream*> all;
  {
    std::lock_guard<std::mutex> lk(registry_mu());
    for (auto& kv : registry()) {
      if (kv.first.first == dev) {
        all.push_back(kv.second);
      }
    }
  }
  for (SimStream* s : all) {
    s->synchronize();
  }
}

bool shutting_down() {
  return g_shutdown.load();
}

void shutdown() {
  if (g_shutdown.load()) {
    return;
  }
  std::vector<SimStream*> all;
  {
    std::lock_guard<std::mutex> lk(registry_mu());
    for (auto& kv : registry()) {
      all.push_back(kv.second);
    }
  }
  // Let queued work finish first (bounded: a stream blocked on an event
  // that never completes must not hang the exit).
  for (SimStream* s : all) {
    s->stop_and_drain_wait();
  }
  g_shutdown = true;
  {
    std::lock_guard<std::mutex> lk(marker_mu());
    marker_cv().notify_all();
  }
  for (SimStream* s : all) {
    s->stop_and_drain_wait();  // wakes idle workers so they exit
  }
}

void simulated_latency() {
  int64_t us = settings().latency_us.load();
  int64_t jitter = settings().jitter_us.load();
  if (jitter > 0) {
    thread_local std::mt19937_64 rng(std::random_device{}());
    us += static_cast<int64_t>(rng() % static_cast<uint64_t>(jitter + 1));
  }
  if (us > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
}

void sleep_on_stream(int dev, c10::StreamId id, int64_t us) {
  get_stream(dev, id).enqueue(Op{[us] {
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }, {}});
}

void stream_wait_word(int dev, c10::StreamId id, const volatile uint32_t* word,
                      uint32_t value) {
  get_stream(dev, id).enqueue(Op{[word, value] {
    // as CUDA's cuStreamWaitValue32 (GEQ): the stream stops until the host
    // word reaches the value; polled (a gate opens within ~20 us)
    while (__atomic_load_n(const_cast<const uint32_t*>(word),
                           __ATOMIC_ACQUIRE) < value &&
           !shutting_down()) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }, {}});
}

}  // namespace simdev

// The C entry torch_gcx calls (through the address _stream_wait_word_fn
// gives): 0 when the wait is queued, 1 for a bad device or stream.
extern "C" int simdev_stream_wait_word(int8_t device_index, int64_t stream_id,
                                       const volatile uint32_t* word,
                                       uint32_t value) {
  if (device_index < 0 || device_index >= simdev::kNumDevices || word == nullptr) {
    return 1;
  }
  simdev::note_call();
  simdev::stream_wait_word(device_index, stream_id, word, value);
  return 0;
}

namespace simdev {

// ---------------------------------------------------------------------------
// events

void event_record(Event* ev, int dev, c10::StreamId stream) {
  auto m = std::make_shared<Marker>();
  {
    std::lock_guard<std::mutex> lk(ev->mu);
    TORCH_CHECK(ev->device < 0 || ev->device == dev, "simdev: event recorded "
        "on simdev:", ev->device, " cannot be recorded on simdev:", dev);
    ev->device = dev;
    ev->latest = m;
  }
  get_stream(dev, stream).enqueue(Op{[] {}, {}, [m] {
    std::lock_guard<std::mutex> lk(marker_mu());
    m->done = true;
    m->when = std::chrono::steady_clock::now();
    marker_cv().notify_all();
  }});
}

namespace {
std::shared_ptr<Marker> latest_of(Event* ev) {
  std::lock_guard<std::mutex> lk(ev->mu);
  return ev->latest;
}
} // namespace

void event_block(Event* ev, int dev, c10::StreamId stream) {
  std::shared_ptr<Marker> m = latest_of(ev);
  if (!m) {
    return;  // never recorded: no-op, as CUDA
  }
  get_stream(dev, stream).enqueue(Op{[m] {
    std::unique_lock<std::mutex> lk(marker_mu());
    marker_cv().wait(lk, [&] { return m->done || g_shutdown.load(); });
  }, {}});
}

bool event_query(Event* ev) {
  std::shared_ptr<Marker> m = latest_of(ev);
  if (!m) {
    return true;
  }
  std::lock_guard<std::mutex> lk(marker_mu());
  return m->done;
}

void event_synchronize(Event* ev) {
  std::shared_ptr<Marker> m = latest_of(ev);
  if (!m) {
    return;
  }
  std::unique_lock<std::mutex> lk(marker_mu());
  marker_cv().wait(lk, [&] { return m->done; });
}

double event_elapsed_ms(Event* a, Event* b) {
  std::shared_ptr<Marker> ma = latest_of(a), mb = latest_of(b);
  TORCH_CHECK(ma && mb, "simdev: elapsed_time needs two recorded events");
  std::lock_guard<std::mutex> lk(marker_mu());
  TORCH_CHECK(ma->done && mb->done,
      "simdev: elapsed_time needs completed events (synchronize first)");
  return std::chrono::duration<double, std::milli>(mb->when - ma->when)
      .count();
}

// ---------------------------------------------------------------------------
// device allocator

namespace {

void finish_free(Block* b) {
  if (settings().strict.load()) {
    // Stream-ordered poison: runs after the work already queued on the
    // allocation stream, as a reallocation there would overwrite it.
    b->poison_scheduled++;
    get_stream(b->device, b->stream).enqueue(Op{[b] {
      std::memset(b->ptr, 0xFF, b->size);
      b->poison_done++;
    }, {}});
  }
  AllocState& a = alloc_state();
  std::lock_guard<std::mutex> lk(a.mu);
  a.pools[{b->device, b->stream}].emplace(b->size, b);
}

void free_block(void* ctx) {
  Block* b = static_cast<Block*>(ctx);
  std::vector<c10::StreamId> others;
  std::vector<std::string> msgs;
  {
    AllocState& a = alloc_state();
    std::lock_guard<std::mutex> lk(a.mu);
    b->allocated = false;
    for (const auto& kv : b->pending) {
      if (kv.second > 0 && kv.first != b->stream &&
          b->recorded.count(kv.first) == 0) {
        msgs.push_back("cross-stream use without record_stream: a block of " +
            std::to_string(b->size) + " bytes on simdev:" +
            std::to_string(b->device) + " allocated on stream " +
            std::to_string(b->stream) + " was freed while stream " +
            std::to_string(kv.first) + " still had " +
            std::to_string(kv.second) + " queued op(s) using it");
      }
    }
    for (c10::StreamId s : b->recorded) {
      if (s != b->stream) {
        others.push_back(s);
      }
    }
    b->recorded.clear();
  }
  for (auto& m : msgs) {
    add_violation(std::move(m));
  }
  if (others.empty()) {
    finish_free(b);
    return;
  }
  // record_stream'd: back to the pool only once the recorded streams have
  // run everything queued on them before this free (an event on each).
  auto left = std::make_shared<std::atomic<int>>(static_cast<int>(others.size()));
  for (c10::StreamId s : others) {
    get_stream(b->device, s).enqueue(Op{[b, left] {
      if (left->fetch_sub(1) == 1) {
        finish_free(b);
      }
    }, {}});
  }
}

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

class DeviceAllocator final : public c10::Allocator {
 public:
  explicit DeviceAllocator(int dev) : dev_(dev) {}
  c10::DataPtr allocate(size_t n) override {
    return device_allocate(dev_ < 0 ? current_device() : dev_, n);
  }
  // Device memory is host memory: a plain copy (the caller orders it).
  void copy_data(void* dest, const void* src, std::size_t count)
      const override {
    default_copy_data(dest, src, count);
  }

 private:
  int dev_;
};

} // namespace

c10::DataPtr device_allocate(int dev, size_t nbytes) {
  check_device(dev);
  note_call();
  stats().allocs++;
  c10::Device device(c10::DeviceType::PrivateUse1,
      static_cast<c10::DeviceIndex>(dev));
  if (nbytes == 0) {
    return c10::DataPtr(nullptr, device);
  }
  const size_t size = round_up(nbytes, 512);
  const c10::StreamId stream = current_stream_id(dev);
  AllocState& a = alloc_state();
  Block* b = nullptr;
  {
    std::lock_guard<std::mutex> lk(a.mu);
    auto& pool = a.pools[{dev, stream}];
    auto it = pool.lower_bound(size);
    if (it != pool.end() && it->first <= 2 * size) {
      b = it->second;
      pool.erase(it);
      b->allocated = true;
      stats().reuses++;
    }
  }
  if (b == nullptr) {
    void* p = nullptr;
    TORCH_CHECK(posix_memalign(&p, 512, size) == 0,
        "simdev: out of memory allocating ", size, " bytes");
    if (settings().strict.load()) {
      std::memset(p, 0xFF, size);  // uninitialized memory reads as NaN
    }
    b = new Block;
    b->ptr = p;
    b->size = size;
    b->device = dev;
    b->stream = stream;
    b->allocated = true;
    std::lock_guard<std::mutex> lk(a.mu);
    a.blocks[reinterpret_cast<uintptr_t>(p)] = b;
  }
  return c10::DataPtr(b->ptr, b, &free_block, device);
}

Block* block_of(const c10::DataPtr& dp) {
  if (dp.get_deleter() != &free_block) {
    return nullptr;
  }
  return static_cast<Block*>(dp.get_context());
}

c10::Allocator* device_allocator(int dev) {
  static DeviceAllocator* allocs[kNumDevices] = {
      new DeviceAllocator(0), new DeviceAllocator(1)};
  check_device(dev);
  return allocs[dev];
}

c10::Allocator* current_device_allocator() {
  static auto* a = new DeviceAllocator(-1);
  return a;
}

void record_block_on_stream(Block* b, c10::StreamId stream) {
  AllocState& a = alloc_state();
  std::lock_guard<std::mutex> lk(a.mu);
  if (b->allocated && stream != b->stream) {
    b->recorded.insert(stream);
  }
}

int device_of_ptr(const void* p) {
  AllocState& a = alloc_state();
  std::lock_guard<std::mutex> lk(a.mu);
  auto it = a.blocks.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == a.blocks.begin()) {
    return -1;
  }
  --it;
  if (reinterpret_cast<uintptr_t>(p) < it->first + it->second->size) {
    return it->second->device;
  }
  return -1;
}

// ---------------------------------------------------------------------------
// pinned host memory: plain aligned host memory whose ranges are remembered

namespace {

std::mutex& pinned_mu() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<uintptr_t, size_t>& pinned_ranges() {
  static auto* r = new std::map<uintptr_t, size_t>;
  return *r;
}

void pinned_free(void* p) {
  {
    std::lock_guard<std::mutex> lk(pinned_mu());
    pinned_ranges().erase(reinterpret_cast<uintptr_t>(p));
  }
  std::free(p);
}

class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    if (n == 0) {
      return c10::DataPtr(nullptr, c10::Device(c10::kCPU));
    }
    void* p = nullptr;
    TORCH_CHECK(posix_memalign(&p, 4096, n) == 0,
        "simdev: out of pinned memory allocating ", n, " bytes");
    {
      std::lock_guard<std::mutex> lk(pinned_mu());
      pinned_ranges()[reinterpret_cast<uintptr_t>(p)] = n;
    }
    return c10::DataPtr(p, p, &pinned_free, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return &pinned_free;
  }
  void copy_data(void* dest, const void* src, std::size_t count)
      const override {
    default_copy_data(dest, src, count);
  }
};

} // namespace

c10::Allocator* pinned_allocator() {
  static auto* a = new PinnedAllocator;
  return a;
}

bool is_pinned_ptr(const void* p) {
  if (p == nullptr) {
    return false;
  }
  std::lock_guard<std::mutex> lk(pinned_mu());
  auto& r = pinned_ranges();
  auto it = r.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == r.begin()) {
    return false;
  }
  --it;
  return reinterpret_cast<uintptr_t>(p) < it->first + it->second;
}

} // namespace simdev
