// simdev torch registrations: the DeviceGuardImpl of PrivateUse1 (devices,
// streams, events, record_stream), the PrivateUse1 hooks (pinned memory,
// generators, device of a pointer), the native kernels that must alias or
// order device memory (empty, views, resize_, set_, copies, .item(),
// record_stream) and a boxed CPU fallback for every other op.
//
// Idea: copies are stream ops (late, as on a GPU); any other op waits for
// the current stream of its device and runs its CPU kernel on CPU tensors
// that alias the device memory (same storage bytes, sizes, strides and
// offset), then maps results back: a result on an argument's storage is a
// device tensor on that storage, a new result is copied (stream-ordered)
// into a new device tensor.
// Cost: one host sync per fallback op; new results are copied once.
#include "simdev.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

namespace simdev {

namespace {

constexpr c10::DeviceType kDev = c10::DeviceType::PrivateUse1;

c10::Device dev_of(int i) {
  return c10::Device(kDev, static_cast<c10::DeviceIndex>(i));
}

// ---------------------------------------------------------------------------
// DeviceGuardImpl

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kDev;
  }
  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kDev, "simdev: not a simdev device: ", d);
    int old = current_device();
    if (d.index() >= 0) {
      set_current_device(d.index());
    }
    mark_device_set();
    return dev_of(old);
  }
  c10::Device getDevice() const override {
    note_call();
    return dev_of(current_device());
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kDev, "simdev: not a simdev device: ", d);
    if (d.index() >= 0) {
      set_current_device(d.index());
    }
    mark_device_set();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < kNumDevices) {
      set_current_device(d.index());
    }
    mark_device_set();
  }
  c10::Stream getStream(c10::Device d) const override {
    note_call();
    int dev = resolve_device(d.index());
    return c10::Stream(c10::Stream::UNSAFE, dev_of(dev), current_stream_id(dev));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    int dev = resolve_device(d.index());
    return c10::Stream(c10::Stream::UNSAFE, dev_of(dev), kDefaultStream);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high*/)
      const override {
    int dev = resolve_device(d.index());
    return c10::Stream(c10::Stream::UNSAFE, dev_of(dev), pool_stream_id(dev));
  }
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    int dev = resolve_device(d.index());
    return c10::Stream(c10::Stream::UNSAFE, dev_of(dev), new_stream_id(dev));
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    note_call();
    int dev = resolve_device(s.device_index());
    c10::StreamId old = exchange_stream_id(dev, s.id());
    return c10::Stream(c10::Stream::UNSAFE, dev_of(dev), old);
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept
      override {
    delete static_cast<Event*>(event);
  }
  void record(void** event, const c10::Stream& stream,
      const c10::DeviceIndex device_index, const c10::EventFlag) const
      override {
    note_call();
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
        "simdev: event device index ", device_index,
        " does not match the recording stream's device ",
        stream.device_index());
    if (*event == nullptr) {
      *event = new Event;
    }
    event_record(static_cast<Event*>(*event), stream.device_index(),
        stream.id());
  }
  void block(void* event, const c10::Stream& stream) const override {
    note_call();
    if (event == nullptr) {
      return;
    }
    event_block(static_cast<Event*>(event), stream.device_index(),
        stream.id());
  }
  bool queryEvent(void* event) const override {
    note_call();
    return event == nullptr || event_query(static_cast<Event*>(event));
  }
  void synchronizeEvent(void* event) const override {
    note_call();
    if (event != nullptr) {
      event_synchronize(static_cast<Event*>(event));
    }
  }
  double elapsedTime(void* a, void* b, const c10::DeviceIndex) const
      override {
    TORCH_CHECK(a && b, "simdev: elapsed_time needs two recorded events");
    return event_elapsed_ms(static_cast<Event*>(a), static_cast<Event*>(b));
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return kNumDevices;
  }
  bool queryStream(const c10::Stream& s) const override {
    note_call();
    return get_stream(s.device_index(), s.id()).query();
  }
  void synchronizeStream(const c10::Stream& s) const override {
    note_call();
    get_stream(s.device_index(), s.id()).synchronize();
  }
  void synchronizeDevice(const c10::DeviceIndex idx) const override {
    note_call();
    synchronize_device(resolve_device(idx));
  }
  void recordDataPtrOnStream(const c10::DataPtr& dp, const c10::Stream& s)
      const override {
    note_call();
    if (Block* b = block_of(dp)) {
      record_block_on_stream(b, s.id());
    }
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

// ---------------------------------------------------------------------------
// copies

struct RawView {
  void* data = nullptr;
  std::vector<int64_t> sizes, strides;
  at::ScalarType dtype = at::kByte;
};

RawView raw_of(const at::Tensor& t) {
  return RawView{t.data_ptr(), t.sizes().vec(), t.strides().vec(),
      t.scalar_type()};
}

RawView raw_bytes(void* p, size_t n) {
  return RawView{p, {static_cast<int64_t>(n)}, {1}, at::kByte};
}

at::Tensor cpu_view(const RawView& v) {
  return at::from_blob(v.data, v.sizes, v.strides,
      at::TensorOptions().dtype(v.dtype).device(at::kCPU));
}

Block* block_of(const at::Tensor& t) {
  if (!t.is_privateuseone() || !t.has_storage()) {
    return nullptr;
  }
  return simdev::block_of(t.storage().data_ptr());
}

// Enqueues dst <- src (broadcast and dtype conversion as Tensor.copy_) on
// `s`. Host storages in `keep` live until the copy ran; device blocks are
// named for the strict-mode checks but not kept (a GPU kernel holds no
// reference either: stream order and record_stream keep them valid).
uint64_t enqueue_copy(SimStream& s, RawView src, Block* src_block,
    RawView dst, Block* dst_block, std::vector<c10::Storage> keep) {
  const uint64_t expected =
      src_block ? src_block->poison_scheduled.load() : 0;
  std::vector<Block*> uses;
  if (src_block) {
    uses.push_back(src_block);
  }
  if (dst_block && dst_block != src_block) {
    uses.push_back(dst_block);
  }
  return s.enqueue(Op{[src = std::move(src), dst = std::move(dst), src_block,
      expected, keep = std::move(keep)] {
    simulated_latency();
    if (src_block && src_block->poison_done.load() > expected) {
      // freed (and poisoned) after this read was queued
      stats().poisoned_reads++;
    }
    at::Tensor d = cpu_view(dst);
    d.copy_(cpu_view(src));
  }, std::move(uses)});
}

at::Tensor sd_copy_from(const at::Tensor& self, const at::Tensor& dst,
    bool non_blocking) {
  const bool sdev = self.is_privateuseone();
  const bool ddev = dst.is_privateuseone();
  TORCH_CHECK((sdev || self.is_cpu()) && (ddev || dst.is_cpu()),
      "simdev: copy from ", self.device(), " to ", dst.device(),
      " is not supported");
  stats().copies++;
  if (dst.numel() == 0) {
    return dst;
  }
  note_call();
  if (sdev && ddev) {
    if (self.scalar_type() != dst.scalar_type()) {
      // converting device-to-device copy: through the host, blocking
      at::Tensor tmp = self.to(at::kCPU).to(dst.scalar_type());
      dst.copy_(tmp);
      return dst;
    }
    const int ds = self.device().index(), dd = dst.device().index();
    SimStream& s = current_stream(ds);
    if (dd != ds) {  // the copy waits for the destination's current stream
      Event e;
      event_record(&e, dd, current_stream_id(dd));
      event_block(&e, ds, s.id());
    }
    enqueue_copy(s, raw_of(self), block_of(self), raw_of(dst),
        block_of(dst), {});
    if (dd != ds) {  // and the destination's current stream waits for it
      Event e;
      event_record(&e, ds, s.id());
      event_block(&e, dd, current_stream_id(dd));
    }
    stats().async_copies++;
    return dst;
  }
  const at::Tensor& host = sdev ? dst : self;
  const at::Tensor& devt = sdev ? self : dst;
  SimStream& s = current_stream(devt.device().index());
  const bool pinned = is_pinned_ptr(host.data_ptr());
  uint64_t seq = sdev
      ? enqueue_copy(s, raw_of(self), block_of(self), raw_of(dst), nullptr,
            {dst.storage()})
      : enqueue_copy(s, raw_of(self), nullptr, raw_of(dst), block_of(dst),
            {self.storage()});
  if (non_blocking && pinned) {
    stats().async_copies++;
  } else {
    s.wait_for(seq);  // pageable or blocking: the host waits, as CUDA
  }
  return dst;
}

at::Tensor sd_copy_from_and_resize(const at::Tensor& self,
    const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return sd_copy_from(self, dst, false);
}

// ---------------------------------------------------------------------------
// allocation, resize, views

// Resizes a device storage to n bytes on device `dev`; with `copy`, the old
// bytes are copied (stream-ordered on the current stream).
void resize_bytes(c10::StorageImpl* st, size_t n, int dev, bool copy) {
  TORCH_CHECK(st->resizable(), "Trying to resize storage that is not "
      "resizable");
  c10::DataPtr fresh = device_allocate(dev, n);
  const size_t keep = std::min(n, st->nbytes());
  if (copy && keep > 0 && fresh.get() != nullptr) {
    enqueue_copy(current_stream(dev), raw_bytes(st->mutable_data(), keep),
        simdev::block_of(st->data_ptr()), raw_bytes(fresh.get(), keep),
        simdev::block_of(fresh), {});
  }
  st->set_data_ptr_noswap(std::move(fresh));
  st->set_nbytes(n);
}

at::Tensor sd_empty(c10::IntArrayRef size,
    std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
    std::optional<at::Device> device, std::optional<bool> /*pin_memory*/,
    std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout || *layout == at::kStrided,
      "simdev: only strided tensors are supported");
  const int dev = resolve_device(device ? device->index() : -1);
  return at::detail::empty_generic(size, device_allocator(dev),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::dtype_or_default(dtype), memory_format);
}

at::Tensor sd_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
    std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
    std::optional<at::Device> device, std::optional<bool> /*pin_memory*/) {
  TORCH_CHECK(!layout || *layout == at::kStrided,
      "simdev: only strided tensors are supported");
  const int dev = resolve_device(device ? device->index() : -1);
  return at::detail::empty_strided_generic(size, stride,
      device_allocator(dev),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::dtype_or_default(dtype));
}

at::Tensor sd_as_strided(const at::Tensor& self, c10::IntArrayRef size,
    c10::IntArrayRef stride, std::optional<int64_t> offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, offset);
}

at::Tensor sd_view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor sd_reshape_alias(const at::Tensor& self, c10::IntArrayRef size,
    c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

void grow_storage_for(const at::Tensor& self) {
  auto* impl = self.unsafeGetTensorImpl();
  if (self.numel() == 0) {
    return;
  }
  const size_t needed = at::detail::computeStorageNbytes(self.sizes(),
      self.strides(), self.itemsize(), self.storage_offset());
  if (needed > self.storage().nbytes()) {
    resize_bytes(impl->storage().unsafeGetStorageImpl(), needed,
        self.device().index(), true);
  }
}

const at::Tensor& sd_resize_(const at::Tensor& self, c10::IntArrayRef size,
    std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  at::native::resize_impl_cpu_(impl, size, std::nullopt,
      /*resize_storage=*/false);
  grow_storage_for(self);
  if (memory_format) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve,
        "Unsupported memory format Preserve");
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& sd_set_storage_offset(at::Tensor& self, at::Storage source,
    int64_t offset, c10::IntArrayRef size, c10::IntArrayRef stride) {
  TORCH_CHECK(!source || source.device().type() == kDev,
      "simdev: set_ expects a simdev storage, got one on ", source.device());
  TORCH_CHECK(offset >= 0, "Tensor: invalid storage offset ", offset);
  std::vector<int64_t> st = stride.vec();
  if (stride.empty()) {
    auto cs = c10::contiguous_strides(size);
    st.assign(cs.begin(), cs.end());
  }
  TORCH_CHECK(st.size() == size.size(), "unequal size length (", size.size(),
      ") and stride length (", st.size(), ")");
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_sizes_and_strides(size, st, offset);
  grow_storage_for(self);
  return self;
}

at::Tensor& sd_set_storage(at::Tensor& self, at::Storage source) {
  const int64_t n = static_cast<int64_t>(source.nbytes()) /
      static_cast<int64_t>(self.itemsize());
  return sd_set_storage_offset(self, std::move(source), 0, {n}, {1});
}

at::Tensor& sd_set_tensor(at::Tensor& self, const at::Tensor& src) {
  if (self.unsafeGetTensorImpl() == src.unsafeGetTensorImpl()) {
    return self;
  }
  return sd_set_storage_offset(self, src.storage(), src.storage_offset(),
      src.sizes(), src.strides());
}

at::Tensor& sd_set_empty(at::Tensor& self) {
  const int dev = self.device().index();
  c10::Storage st(c10::Storage::use_byte_size_t(), 0, device_allocator(dev),
      /*resizable=*/true);
  return sd_set_storage_offset(self, std::move(st), 0, {0}, {});
}

at::Scalar sd_local_scalar_dense(const at::Tensor& self) {
  at::Tensor out = at::empty(self.sizes(),
      at::TensorOptions().dtype(self.scalar_type()).device(at::kCPU));
  sd_copy_from(self, out, /*non_blocking=*/false);
  return at::_local_scalar_dense(out);
}

void sd_record_stream(at::Tensor& self, c10::Stream s) {
  note_call();
  TORCH_CHECK(s.device_type() == kDev, "simdev: record_stream needs a simdev "
      "stream, got one of ", s.device());
  if (Block* b = block_of(self)) {
    record_block_on_stream(b, s.id());
  }
}

// ---------------------------------------------------------------------------
// boxed CPU fallback

struct AliasedStorage {
  c10::Storage dev;   // the device storage
  c10::Storage cpu;   // a CPU storage on the same bytes (holds `dev`)
  void* data;         // its bytes when created
};

struct FallbackCtx {
  int dev = -1;
  std::vector<AliasedStorage> storages;
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs;  // (device, alias)

  AliasedStorage& storage_for(const at::Tensor& t) {
    const c10::Storage& st = t.storage();
    for (auto& a : storages) {
      if (a.dev.unsafeGetStorageImpl() == st.unsafeGetStorageImpl()) {
        return a;
      }
    }
    void* data = st.nbytes() > 0 ? st.mutable_data() : nullptr;
    auto* holder = new c10::Storage(st);
    c10::DataPtr dp(data, holder,
        [](void* p) { delete static_cast<c10::Storage*>(p); },
        c10::Device(c10::kCPU));
    c10::Storage cpu(c10::Storage::use_byte_size_t(), st.nbytes(),
        std::move(dp), c10::GetCPUAllocator(), /*resizable=*/true);
    storages.push_back(AliasedStorage{st, std::move(cpu), data});
    return storages.back();
  }

  at::Tensor alias(const at::Tensor& t) {
    for (auto& p : pairs) {
      if (p.first.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        return p.second;
      }
    }
    c10::Storage cpu = storage_for(t).cpu;
    at::Tensor a = at::detail::make_tensor<c10::TensorImpl>(std::move(cpu),
        c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
    a.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(),
        t.storage_offset());
    pairs.emplace_back(t, a);
    return a;
  }

  // A CPU result back to the device.
  at::Tensor to_device(const at::Tensor& r) {
    for (auto& p : pairs) {
      if (p.second.unsafeGetTensorImpl() == r.unsafeGetTensorImpl()) {
        return p.first;  // in-place / out=: the argument itself
      }
    }
    if (r.has_storage()) {
      for (auto& a : storages) {
        if (a.cpu.unsafeGetStorageImpl() ==
            r.storage().unsafeGetStorageImpl()) {
          // a view of an argument: a device view on the same storage
          // (not TensorImpl::VIEW: that has no version counter, and the
          // autograd layer then takes it for an inference tensor)
          at::Tensor v = at::detail::make_tensor<c10::TensorImpl>(
              c10::Storage(a.dev),
              c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), r.dtype());
          v.unsafeGetTensorImpl()->set_sizes_and_strides(r.sizes(),
              r.strides(), r.storage_offset());
          return v;
        }
      }
    }
    // a new result: a new device tensor, filled in stream order
    at::Tensor out = r.is_non_overlapping_and_dense()
        ? sd_empty_strided(r.sizes(), r.strides(), r.scalar_type(),
              std::nullopt, dev_of(dev), std::nullopt)
        : sd_empty(r.sizes(), r.scalar_type(), std::nullopt, dev_of(dev),
              std::nullopt, std::nullopt);
    if (r.numel() > 0) {
      enqueue_copy(current_stream(dev), raw_of(r), nullptr, raw_of(out),
          block_of(out), {r.storage()});
    }
    return out;
  }

  // Mirrors what the CPU kernel did to an argument's metadata/storage.
  void write_back() {
    for (auto& a : storages) {
      const bool moved = a.cpu.unsafeGetStorageImpl()->data() != a.data ||
          a.cpu.nbytes() != a.dev.nbytes();
      if (moved) {  // the CPU kernel resized it: new bytes
        resize_bytes(a.dev.unsafeGetStorageImpl(), a.cpu.nbytes(), dev,
            false);
        if (a.cpu.nbytes() > 0) {
          enqueue_copy(current_stream(dev),
              raw_bytes(a.cpu.mutable_data(), a.cpu.nbytes()), nullptr,
              raw_bytes(a.dev.mutable_data(), a.cpu.nbytes()),
              simdev::block_of(a.dev.data_ptr()), {a.cpu});
        }
      }
    }
    for (auto& p : pairs) {
      const at::Tensor& d = p.first;
      const at::Tensor& c = p.second;
      if (c.storage().unsafeGetStorageImpl() !=
          storage_for(d).cpu.unsafeGetStorageImpl()) {
        // the kernel gave the argument another storage (set_): copy it
        auto& a = storage_for(d);
        resize_bytes(a.dev.unsafeGetStorageImpl(), c.storage().nbytes(), dev,
            false);
        if (c.storage().nbytes() > 0) {
          enqueue_copy(current_stream(dev),
              raw_bytes(c.storage().mutable_data(), c.storage().nbytes()),
              nullptr,
              raw_bytes(a.dev.mutable_data(), c.storage().nbytes()),
              simdev::block_of(a.dev.data_ptr()), {c.storage()});
        }
      }
      if (d.sizes() != c.sizes() || d.strides() != c.strides() ||
          d.storage_offset() != c.storage_offset()) {
        d.unsafeGetTensorImpl()->set_sizes_and_strides(c.sizes(),
            c.strides(), c.storage_offset());
      }
    }
  }
};

[[noreturn]] void mixed_devices(const std::string& a, const std::string& b) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but "
      "found at least two devices, ", a, " and ", b, "!");
}

void sd_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const auto args_begin = stack->end() - static_cast<std::ptrdiff_t>(nargs);

  // 1. the device, and the device rules of CUDA
  int dev = -1;
  std::string cpu_seen;
  auto visit = [&](const at::Tensor& t, bool allow_cpu) {
    if (!t.defined()) {
      return;
    }
    if (t.is_privateuseone()) {
      if (dev >= 0 && dev != t.device().index()) {
        mixed_devices(dev_of(dev).str(), t.device().str());
      }
      dev = t.device().index();
    } else if (t.dim() > 0 && !allow_cpu) {
      cpu_seen = t.device().str();
    }
  };
  for (auto it = args_begin; it != stack->end(); ++it) {
    const c10::IValue& v = *it;
    if (v.isTensor()) {
      visit(v.toTensor(), false);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) {
        visit(t, false);
      }
    } else if (v.isList()) {
      // e.g. the optional index tensors of index/index_put_: CUDA takes
      // CPU index tensors there
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) {
          visit(e.toTensor(), true);
        }
      }
    } else if (v.isDevice() && v.toDevice().type() == kDev) {
      const int d = resolve_device(v.toDevice().index());
      if (dev >= 0 && dev != d) {
        mixed_devices(dev_of(dev).str(), dev_of(d).str());
      }
      dev = d;
    }
  }
  if (dev < 0) {
    dev = current_device();
  }
  if (!cpu_seen.empty()) {
    mixed_devices(dev_of(dev).str(), cpu_seen);
  }

  // 2. the op runs after the work queued on the current stream
  note_call();
  stats().fallback_ops++;
  current_stream(dev).synchronize();

  // 3. device tensors -> CPU aliases; device arguments -> cpu
  FallbackCtx ctx;
  ctx.dev = dev;
  for (auto it = args_begin; it != stack->end(); ++it) {
    c10::IValue& v = *it;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined() && t.is_privateuseone()) {
        v = ctx.alias(t);
      }
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> ts = v.toTensorVector();
      c10::List<at::Tensor> out;
      out.reserve(ts.size());
      for (const at::Tensor& t : ts) {
        out.push_back(t.defined() && t.is_privateuseone() ? ctx.alias(t) : t);
      }
      v = std::move(out);
    } else if (v.isList()) {
      c10::List<c10::IValue> lst = v.toList().copy();
      for (size_t i = 0; i < lst.size(); ++i) {
        c10::IValue e = lst.get(i);
        if (e.isTensor() && e.toTensor().defined() &&
            e.toTensor().is_privateuseone()) {
          lst.set(i, ctx.alias(e.toTensor()));
        }
      }
      v = std::move(lst);
    } else if (v.isDevice() && v.toDevice().type() == kDev) {
      v = c10::Device(c10::kCPU);
    }
  }

  // 4. the CPU kernel
  op.callBoxed(stack);

  // 5. arguments' metadata, then results, back to the device
  ctx.write_back();
  const size_t nret = schema.returns().size();
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(nret);
       it != stack->end(); ++it) {
    c10::IValue& v = *it;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined() && t.is_cpu()) {
        v = ctx.to_device(t);
      }
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> ts = v.toTensorVector();
      c10::List<at::Tensor> out;
      out.reserve(ts.size());
      for (const at::Tensor& t : ts) {
        out.push_back(t.defined() && t.is_cpu() ? ctx.to_device(t) : t);
      }
      v = std::move(out);
    }
  }
}

// Convolutions: every convolution of a PrivateUse1 tensor reaches
// convolution_overrideable (and its backward), whose default kernel raises,
// so the fallback never sees them. They run as the fallback runs any op,
// with the CPU kernels of aten::convolution and aten::convolution_backward
// (the same arguments; the backward's bias sizes added: the output
// channels).
void sd_convolution(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  static const auto conv = c10::Dispatcher::singleton().findSchemaOrThrow(
      "aten::convolution", "");
  sd_fallback(conv, stack);
}

void sd_convolution_backward(const c10::OperatorHandle&,
                             torch::jit::Stack* stack) {
  static const auto back = c10::Dispatcher::singleton().findSchemaOrThrow(
      "aten::convolution_backward", "");
  // (grad_output, input, weight, stride, padding, dilation, transposed,
  //  output_padding, groups, output_mask): bias_sizes goes after weight
  constexpr std::ptrdiff_t kArgs = 10;
  auto first = stack->end() - kArgs;
  const at::Tensor weight = first[2].toTensor();
  const bool transposed = first[6].toBool();
  const int64_t groups = first[8].toInt();
  const int64_t out_channels =
      transposed ? weight.size(1) * groups : weight.size(0);
  stack->insert(first + 3, c10::IValue(std::vector<int64_t>{out_channels}));
  sd_fallback(back, stack);
}

// ---------------------------------------------------------------------------
// hooks: pinned memory, generators, device of a pointer

at::Generator& default_generator(int dev) {
  static at::Generator* gens[kNumDevices] = {
      new at::Generator(at::make_generator<at::CPUGeneratorImpl>()),
      new at::Generator(at::make_generator<at::CPUGeneratorImpl>())};
  check_device(dev);
  return *gens[dev];
}

struct Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }
  bool isAvailable() const override {
    return true;
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex idx) const
      override {
    return default_generator(resolve_device(idx));
  }
  at::Generator getNewGenerator(c10::DeviceIndex /*idx*/) const override {
    return at::make_generator<at::CPUGeneratorImpl>();
  }
  at::Device getDeviceFromPtr(void* data) const override {
    const int d = device_of_ptr(data);
    TORCH_CHECK(d >= 0, "simdev: pointer ", data, " is not simdev memory");
    return dev_of(d);
  }
  bool isPinnedPtr(const void* data) const override {
    return is_pinned_ptr(data);
  }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return pinned_allocator();
  }
  bool hasPrimaryContext(c10::DeviceIndex) const override {
    return true;
  }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override {
    return kNumDevices;
  }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    set_current_device(d);
  }
  c10::DeviceIndex getCurrentDevice() const override {
    note_call();
    return static_cast<c10::DeviceIndex>(current_device());
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    const int old = current_device();
    if (d >= 0) {
      set_current_device(d);
    }
    return static_cast<c10::DeviceIndex>(old);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t n) const
      override {
    resize_bytes(storage.unsafeGetStorageImpl(), n,
        storage.device().index(), true);
  }
};

struct Registrar {
  Registrar() {
    at::RegisterPrivateUse1HooksInterface(new Hooks);
    c10::SetAllocator(kDev, current_device_allocator());
  }
};
Registrar registrar;

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", sd_empty);
  m.impl("empty_strided", sd_empty_strided);
  m.impl("as_strided", sd_as_strided);
  m.impl("view", sd_view);
  m.impl("_reshape_alias", sd_reshape_alias);
  m.impl("resize_", sd_resize_);
  m.impl("set_.source_Storage", sd_set_storage);
  m.impl("set_.source_Storage_storage_offset", sd_set_storage_offset);
  m.impl("set_.source_Tensor", sd_set_tensor);
  m.impl("set_", sd_set_empty);
  m.impl("_copy_from", sd_copy_from);
  m.impl("_copy_from_and_resize", sd_copy_from_and_resize);
  m.impl("_local_scalar_dense", sd_local_scalar_dense);
  m.impl("record_stream", sd_record_stream);
  m.impl("convolution_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&sd_convolution>());
  m.impl("convolution_backward_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&sd_convolution_backward>());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sd_fallback>());
}

} // namespace simdev
