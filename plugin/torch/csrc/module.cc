// module.cc - the Python module torch_gcx._C: creation of the backend of a
// group (torch_gcx registers it with torch.distributed) and the functions
// torch_gcx's Python reaches a group's backend with. Cost: none at run
// time (pybind11 bindings; each call releases the GIL where it may wait).
#include "backend_impl.h"

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
    m.def(
        "stage_stats",
        [] {
            torch_gcx::StageStats s = torch_gcx::stage_stats();
            py::dict d;
            d["calls"]        = s.calls;
            d["chunks"]       = s.chunks;
            d["allocs"]       = s.allocs;
            d["reuses"]       = s.reuses;
            d["mirrors"]      = s.mirrors;
            d["cached_bytes"] = s.cached_bytes;
            return d;
        },
        "Counters of the staging of device tensors (staging.h): chunked "
        "calls and their chunks, host buffers allocated and reused by the "
        "pool, calls through host mirrors, idle bytes in the pool.");
    m.def("stage_mode",
          [] { return std::string(torch_gcx::stage_always() ? "always"
                                                            : "auto"); },
          "GCX_TORCH_STAGE as the plugin read it: 'auto' or 'always'.");
    m.def("stage_chunk_bytes", [] { return torch_gcx::stage_chunk_bytes(); },
          "GCX_TORCH_STAGE_CHUNK as the plugin read it (bytes).");
    m.def("set_stream_wait_word",
          [](const std::string &device_type, uintptr_t address) {
              c10::DeviceType t = c10::Device(device_type).type();
              TORCH_CHECK(t != c10::kCPU && t != c10::kCUDA && address != 0,
                          "torch_gcx: set_stream_wait_word takes a custom "
                          "device type and a function's address");
              torch_gcx::set_stream_wait_word(
                  t, reinterpret_cast<torch_gcx::StreamWaitWordFn>(address));
          },
          py::arg("device_type"), py::arg("address"),
          "Register a device type's stream wait on a host word: the "
          "address of int fn(int8_t device_index, int64_t stream_id, const "
          "volatile uint32_t *word, uint32_t value), 0 when queued "
          "(staging.h).");
    m.def("stream_waits",
          [](const std::string &device) {
              return torch_gcx::stream_waits(c10::Device(device));
          },
          py::arg("device"),
          "Whether staged calls on this device use stream mode: wait() "
          "returns at once, the caller's stream waits (GCX_TORCH_WAIT).");
    m.def("gcx_version", [] { return std::string(gcx_version()); });
    torch_gcx::bind_hooks(m);
}
