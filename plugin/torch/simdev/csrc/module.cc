// torch_simdev._C: the Python face of the simdev runtime (settings, stats,
// devices, streams, host waits). Every host wait releases the GIL: a
// stream worker that drops the last reference to a tensor may need it.
// Cost: none beyond the calls themselves.
#include "simdev.h"

#include <torch/extension.h>

#include <thread>

namespace py = pybind11;

extern "C" int simdev_stream_wait_word(int8_t device_index, int64_t stream_id,
                                       const volatile uint32_t* word,
                                       uint32_t value);

namespace {

using simdev::note_call;

py::tuple stream_tuple(int dev, c10::StreamId id) {
  // what torch.Stream(stream_id=, device_index=, device_type=) takes
  return py::make_tuple(id, dev,
      static_cast<int>(c10::DeviceType::PrivateUse1));
}

py::dict stats_dict() {
  simdev::Stats& s = simdev::stats();
  py::dict d;
  d["copies"] = s.copies.load();
  d["async_copies"] = s.async_copies.load();
  d["fallback_ops"] = s.fallback_ops.load();
  d["allocs"] = s.allocs.load();
  d["reuses"] = s.reuses.load();
  d["poisoned_reads"] = s.poisoned_reads.load();
  d["cross_stream_violations"] = s.cross_stream_violations.load();
  d["calls_without_device"] = s.calls_without_device.load();
  std::lock_guard<std::mutex> lk(s.mu);
  d["calls_without_device_threads"] = s.calls_without_device_threads;
  return d;
}

} // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "simdev: a simulated asynchronous accelerator (PrivateUse1)";
  m.attr("device_type") = static_cast<int>(c10::DeviceType::PrivateUse1);
  m.attr("num_devices") = simdev::kNumDevices;

  m.def("_set_latency_us", [](int64_t us) {
    TORCH_CHECK(us >= 0, "simdev: latency must be >= 0 us, got ", us);
    simdev::settings().latency_us = us;
  });
  m.def("_set_jitter_us", [](int64_t us) {
    TORCH_CHECK(us >= 0, "simdev: jitter must be >= 0 us, got ", us);
    simdev::settings().jitter_us = us;
  });
  m.def("_set_strict", [](bool on) { simdev::settings().strict = on; });
  m.def("_get_settings", [] {
    py::dict d;
    d["latency_us"] = simdev::settings().latency_us.load();
    d["jitter_us"] = simdev::settings().jitter_us.load();
    d["strict"] = simdev::settings().strict.load();
    return d;
  });

  m.def("_stats", &stats_dict);
  m.def("_reset_stats", &simdev::reset_stats);
  m.def("_violations", [] {
    std::lock_guard<std::mutex> lk(simdev::stats().mu);
    return simdev::stats().violations;
  });

  m.def("_device_count", [] { return simdev::kNumDevices; });
  m.def("_get_device", [] {
    note_call();
    return simdev::current_device();
  });
  m.def("_set_device", [](int dev) { simdev::set_current_device(dev); });
  m.def("_exchange_device", [](int dev) {
    int old = simdev::current_device();
    if (dev >= 0) {
      simdev::set_current_device(dev);
    }
    return old;
  });
  m.def("_mark_thread_device_set", &simdev::mark_device_set);

  m.def("_current_stream", [](int dev) {
    note_call();
    dev = simdev::resolve_device(static_cast<c10::DeviceIndex>(dev));
    return stream_tuple(dev, simdev::current_stream_id(dev));
  });
  m.def("_default_stream", [](int dev) {
    dev = simdev::resolve_device(static_cast<c10::DeviceIndex>(dev));
    return stream_tuple(dev, simdev::kDefaultStream);
  });
  m.def("_exchange_stream", [](int dev, int64_t id) {
    note_call();
    dev = simdev::resolve_device(static_cast<c10::DeviceIndex>(dev));
    return simdev::exchange_stream_id(dev, id);
  });
  m.def("_synchronize", [](int dev) {
    note_call();
    dev = simdev::resolve_device(static_cast<c10::DeviceIndex>(dev));
    py::gil_scoped_release no_gil;
    simdev::synchronize_device(dev);
  });
  m.def("_synchronize_stream", [](int dev, int64_t id) {
    note_call();
    py::gil_scoped_release no_gil;
    simdev::get_stream(dev, id).synchronize();
  });
  m.def("_query_stream", [](int dev, int64_t id) {
    note_call();
    return simdev::get_stream(dev, id).query();
  });
  m.def("_sleep_on_stream", [](int64_t us, int dev, int64_t id) {
    note_call();
    TORCH_CHECK(us >= 0, "simdev: sleep must be >= 0 us, got ", us);
    simdev::sleep_on_stream(dev, id, us);
  });
  m.def("_stream_wait_word_fn", [] {
    return reinterpret_cast<uintptr_t>(&simdev_stream_wait_word);
  }, "The address of int simdev_stream_wait_word(int8_t device_index, "
     "int64_t stream_id, const volatile uint32_t *word, uint32_t value): "
     "queues a wait of the stream until the host word is >= value (0: "
     "queued). torch_gcx registers it for its stream-mode waits.");
  m.def("_is_pinned_ptr", [](uintptr_t p) {
    return simdev::is_pinned_ptr(reinterpret_cast<const void*>(p));
  });
  m.def("_manual_seed", [](int dev, uint64_t seed) {
    auto gen = at::globalContext().defaultGenerator(
        c10::Device(c10::DeviceType::PrivateUse1,
            static_cast<c10::DeviceIndex>(dev)));
    std::lock_guard<std::mutex> lk(gen.mutex());
    gen.set_current_seed(seed);
  });
  m.def("_shutdown", [] {
    py::gil_scoped_release no_gil;
    simdev::shutdown();
  });
}
