"""Tests of torch_simdev, the simulated asynchronous accelerator.

Each test checks one semantic against an independent expectation (CPU
results, data that has or has not landed, data pointers, counters) and most
have a control that shows the check can fail. Single process, no gcx, runs
in seconds. Run with the package on the path, e.g.
    PYTHONPATH=<builddir>/plugin/torch/simdev python -m pytest test_simdev.py
(<builddir>/plugin/torch also works: the package is looked up under
simdev/ of each path entry).
"""
import os
import subprocess
import sys
import threading
import time

import pytest
import torch


def _find_package():
    """Puts the built package on sys.path: an entry holding torch_simdev/
    as built (with __init__.py), else <entry>/simdev/torch_simdev."""
    entries = [e or "." for e in sys.path]
    if any(os.path.isfile(os.path.join(e, "torch_simdev", "__init__.py"))
           for e in entries):
        return
    for e in entries:
        cand = os.path.join(e, "simdev")
        if os.path.isfile(os.path.join(cand, "torch_simdev", "__init__.py")):
            sys.path.insert(0, cand)
            return


_find_package()
import torch_simdev  # noqa: E402

LAT_US = 20000  # 20 ms


@pytest.fixture(autouse=True)
def _clean():
    torch.simdev.synchronize(0)
    torch.simdev.synchronize(1)
    torch_simdev.set_latency_us(0)
    torch_simdev.set_jitter_us(0)
    torch_simdev.set_strict(False)
    torch_simdev.reset_stats()
    yield
    torch.simdev.synchronize(0)
    torch.simdev.synchronize(1)
    torch_simdev.set_latency_us(0)
    torch_simdev.set_jitter_us(0)
    torch_simdev.set_strict(False)


def _pinned(values):
    t = torch.empty(len(values), pin_memory=True)
    t.copy_(torch.tensor(values, dtype=torch.float32))
    return t


def _env_subprocess(code, env_extra, timeout=60):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(torch_simdev.__file__))] +
        env.get("PYTHONPATH", "").split(os.pathsep))
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=timeout)


# ---- devices, settings, process exit ------------------------------------

def test_devices():
    assert torch.simdev.is_available()
    assert torch.simdev.device_count() == 2
    assert torch.device("simdev:1").type == "simdev"
    t = torch.empty(3, device="simdev:1")
    assert t.device == torch.device("simdev:1") and t.is_simdev
    assert torch.ones(2).to("simdev:0").device.index == 0
    assert torch.ones(2).simdev().is_simdev
    assert torch.simdev.current_device() == 0
    with torch.simdev.device(1):
        assert torch.simdev.current_device() == 1
        assert torch.empty(1, device="simdev").device.index == 1
    assert torch.simdev.current_device() == 0
    s1 = torch.simdev.Stream(device=1)
    assert s1.device_index == 1 and s1 != torch.simdev.default_stream(1)
    with torch.simdev.stream(s1):
        assert torch.simdev.current_device() == 1
        assert torch.simdev.current_stream(1) == s1
    assert torch.simdev.current_device() == 0
    e = torch.simdev.Event()
    e.record(s1)
    e.synchronize()
    assert e.query()


def test_bad_env_value_names_variable():
    r = _env_subprocess("import torch_simdev", {"SIMDEV_LATENCY_US": "abc"})
    assert r.returncode != 0
    assert "SIMDEV_LATENCY_US" in r.stderr
    r = _env_subprocess("import torch_simdev", {"SIMDEV_STRICT": "yes"})
    assert r.returncode != 0 and "SIMDEV_STRICT" in r.stderr
    r = _env_subprocess(
        "import torch_simdev; print(torch_simdev.settings())",
        {"SIMDEV_LATENCY_US": "7", "SIMDEV_JITTER_US": "3",
         "SIMDEV_STRICT": "1"})
    assert r.returncode == 0, r.stderr
    assert "'latency_us': 7" in r.stdout and "'jitter_us': 3" in r.stdout
    assert "'strict': True" in r.stdout


def test_process_exits_promptly_with_queued_work():
    code = (
        "import torch, torch_simdev\n"
        "d = torch.ones(1000, device='simdev')\n"
        "s = torch.Stream(device='simdev')\n"
        "torch_simdev.sleep_on_stream(200000, s)\n"
        "h = torch.empty(1000, pin_memory=True)\n"
        "with torch.simdev.stream(s):\n"
        "    h.copy_(d, non_blocking=True)\n"
        "print('done')\n")
    t0 = time.monotonic()
    r = _env_subprocess(code, {"SIMDEV_LATENCY_US": "1000",
                               "SIMDEV_STRICT": "1"})
    assert r.returncode == 0, r.stderr
    assert "done" in r.stdout
    assert time.monotonic() - t0 < 30


# ---- asynchronous copies ---------------------------------------------------

def test_nonblocking_copy_to_pinned_is_late():
    d = torch.arange(1, 9, dtype=torch.float32).to("simdev")
    torch.simdev.synchronize()
    torch_simdev.set_latency_us(LAT_US)
    h = torch.zeros(8, pin_memory=True)
    assert h.is_pinned()
    h.copy_(d, non_blocking=True)
    assert torch.equal(h, torch.zeros(8)), "landed before the latency"
    torch.simdev.synchronize()
    assert torch.equal(h, torch.arange(1, 9, dtype=torch.float32))
    s = torch_simdev.stats()
    assert s["async_copies"] >= 1


def test_nonblocking_h2d_from_pinned_returns_before_landing():
    torch_simdev.set_latency_us(200000)
    src = _pinned([1.0, 2.0, 3.0])
    d = torch.empty(3, device="simdev")
    t0 = time.monotonic()
    d.copy_(src, non_blocking=True)
    assert time.monotonic() - t0 < 0.1
    assert not torch.simdev.current_stream().query()
    torch.simdev.synchronize()
    assert torch.simdev.current_stream().query()
    assert torch.equal(d.cpu(), torch.tensor([1.0, 2.0, 3.0]))


def test_blocking_and_pageable_copies_have_landed():
    d = torch.arange(5, dtype=torch.float32).to("simdev")
    torch_simdev.set_latency_us(LAT_US)
    h = torch.zeros(5, pin_memory=True)
    h.copy_(d)  # blocking
    assert torch.equal(h, torch.arange(5, dtype=torch.float32))
    p = torch.zeros(5)  # pageable: synchronous even with non_blocking
    assert not p.is_pinned()
    p.copy_(d, non_blocking=True)
    assert torch.equal(p, torch.arange(5, dtype=torch.float32))
    assert torch_simdev.stats()["async_copies"] == 0


def test_strided_and_converting_copies():
    a = torch.arange(12, dtype=torch.float32).view(3, 4)
    d = a.t().to("simdev")  # non-contiguous source
    assert torch.equal(d.cpu(), a.t())
    dd = a.to("simdev")
    assert torch.equal(dd.t().cpu(), a.t())  # non-contiguous device source
    assert torch.equal(dd[:, 1].cpu(), a[:, 1])
    assert dd.to(torch.float64).dtype == torch.float64
    assert torch.equal(dd.to(torch.float64).cpu(), a.double())
    assert torch.equal(a.to("simdev", torch.int32).cpu(), a.int())
    x = torch.zeros(3, 4, device="simdev")
    x[:, 2:].copy_(a[:, :2])  # strided destination
    exp = torch.zeros(3, 4)
    exp[:, 2:] = a[:, :2]
    assert torch.equal(x.cpu(), exp)
    one = dd.to("simdev:1")
    assert one.device.index == 1 and torch.equal(one.cpu(), a)
    assert torch.equal(dd.to("simdev:1", torch.float16).cpu(), a.half())
    x.copy_(torch.tensor(7.0))  # broadcast
    assert torch.equal(x.cpu(), torch.full((3, 4), 7.0))


def test_item_waits_for_queued_write():
    torch_simdev.set_latency_us(LAT_US)
    d = torch.zeros(1, device="simdev")
    d.copy_(_pinned([42.0]), non_blocking=True)
    assert d.item() == 42.0


# ---- streams and events ------------------------------------------------------

def test_stream_query_and_synchronize():
    s = torch.Stream(device="simdev")
    assert s.query()
    torch_simdev.sleep_on_stream(100000, s)
    assert not s.query()
    t0 = time.monotonic()
    s.synchronize()
    assert s.query()
    assert time.monotonic() - t0 > 0.05


def test_stream_wait_word_holds_the_stream_until_the_host_sets_it():
    # what torch_gcx's stream-mode wait() queues (CUDA's
    # cuStreamWaitValue32): the stream, and what is queued behind the wait,
    # run only once the host word reaches the value
    import ctypes
    fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int8, ctypes.c_int64,
                          ctypes.c_void_p, ctypes.c_uint32)(
                              torch_simdev._stream_wait_word_fn())
    word = torch.zeros(1, dtype=torch.int32, pin_memory=True)
    s = torch.Stream(device="simdev")
    src = torch.full((4,), 3.0, pin_memory=True)
    with torch.simdev.stream(s):
        dst = torch.zeros(4, device="simdev")
        assert fn(s.device_index, s.stream_id, word.data_ptr(), 2) == 0
        dst.copy_(src, non_blocking=True)
    word[0] = 1  # below the value: still held
    time.sleep(0.05)
    assert not s.query()
    word[0] = 2
    s.synchronize()
    assert torch.equal(dst.cpu(), src)
    assert fn(5, s.stream_id, word.data_ptr(), 1) != 0  # no such device


def test_convolution_forward_and_backward_match_cpu():
    # convolutions reach convolution_overrideable (not the fallback): run
    # through aten::convolution's CPU kernels, gradients as on the CPU
    torch.manual_seed(0)
    for transposed in (False, True):
        conv = (torch.nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2)
                if transposed else torch.nn.Conv2d(4, 6, 3, padding=1,
                                                   groups=2))
        x = torch.randn(2, 4, 7, 7)
        ref_out = conv(x)
        ref_out.square().sum().backward()
        ref = [p.grad.clone() for p in conv.parameters()]
        conv.zero_grad()
        dconv = conv.to("simdev")
        out = dconv(x.to("simdev"))
        torch.testing.assert_close(out.cpu(), ref_out, rtol=1e-5, atol=1e-5)
        out.square().sum().backward()
        for p, want in zip(dconv.parameters(), ref):
            torch.testing.assert_close(p.grad.cpu(), want, rtol=1e-4,
                                       atol=1e-4)
        conv.to("cpu")


def test_current_stream_is_thread_local_and_per_device():
    s = torch.Stream(device="simdev")
    seen = {}
    with torch.simdev.stream(s):
        assert torch.simdev.current_stream() == s
        assert torch.simdev.current_stream(1).stream_id == 0

        def other():
            torch.simdev.set_device(0)
            seen["id"] = torch.simdev.current_stream().stream_id

        th = threading.Thread(target=other)
        th.start()
        th.join()
    assert seen["id"] == 0
    assert torch.simdev.current_stream() == torch.simdev.default_stream()


def _ordered_read(wait):
    """On stream A: 300 ms of work, then write [5,6,7] into d. On stream B:
    (optionally wait for A's event, then) read d. Returns what B read."""
    a = torch.Stream(device="simdev")
    b = torch.Stream(device="simdev")
    d = torch.zeros(3, device="simdev")
    torch.simdev.synchronize()
    src = _pinned([5.0, 6.0, 7.0])
    out = torch.zeros(3, pin_memory=True)
    with torch.simdev.stream(a):
        torch_simdev.sleep_on_stream(300000)
        d.copy_(src, non_blocking=True)
        e = torch.Event(device="simdev")
        e.record(a)
    if wait:
        b.wait_event(e)
    with torch.simdev.stream(b):
        out.copy_(d, non_blocking=True)
    b.synchronize()
    result = out.clone()
    torch.simdev.synchronize()
    return result


def test_event_orders_streams():
    assert torch.equal(_ordered_read(wait=True), torch.tensor([5.0, 6.0, 7.0]))
    # control: without the wait, B reads before A wrote
    assert torch.equal(_ordered_read(wait=False), torch.zeros(3))


def test_event_query_synchronize_and_unrecorded_wait():
    e = torch.Event(device="simdev")
    assert e.query()  # never recorded
    s = torch.Stream(device="simdev")
    s.wait_event(e)  # no-op
    s.synchronize()
    torch_simdev.sleep_on_stream(100000, s)
    e.record(s)
    assert not e.query()
    e.synchronize()
    assert e.query() and s.query()


def test_wait_refers_to_recording_at_block_time():
    a = torch.Stream(device="simdev")
    b = torch.Stream(device="simdev")
    c = torch.Stream(device="simdev")
    e = torch.Event(device="simdev")
    t0 = time.monotonic()
    torch_simdev.sleep_on_stream(500000, a)
    e.record(a)
    b.wait_event(e)
    e.record(c)  # re-record on an idle stream
    e.synchronize()
    assert time.monotonic() - t0 < 0.35  # latest recording: done quickly
    assert not a.query()
    b.synchronize()  # but b waits for the recording it was given
    assert time.monotonic() - t0 >= 0.48


def test_elapsed_time():
    e1 = torch.Event(device="simdev", enable_timing=True)
    e2 = torch.Event(device="simdev", enable_timing=True)
    e1.record()
    torch_simdev.sleep_on_stream(30000)
    e2.record()
    e2.synchronize()
    assert e1.elapsed_time(e2) >= 25


# ---- caching allocator -----------------------------------------------------------

def test_eager_reuse_on_same_stream():
    x = torch.empty(1000, device="simdev")
    p = x.data_ptr()
    del x
    y = torch.empty(1000, device="simdev")
    assert y.data_ptr() == p
    assert torch_simdev.stats()["reuses"] >= 1


def test_no_reuse_on_another_stream():
    x = torch.empty(1000, device="simdev")
    p = x.data_ptr()
    del x
    with torch.simdev.stream(torch.Stream(device="simdev")):
        y = torch.empty(1000, device="simdev")
    assert y.data_ptr() != p
    z = torch.empty(1000, device="simdev")  # back on the default stream
    assert z.data_ptr() == p


def test_record_stream_delays_reuse():
    b = torch.Stream(device="simdev")
    x = torch.empty(1000, device="simdev")
    p = x.data_ptr()
    x.record_stream(b)
    torch_simdev.sleep_on_stream(200000, b)
    del x
    y = torch.empty(1000, device="simdev")
    assert y.data_ptr() != p  # b may still use it
    b.synchronize()
    z = torch.empty(1000, device="simdev")
    assert z.data_ptr() == p  # b is done: back in the pool


def _cross_stream_read_after_free(record):
    torch_simdev.set_strict(True)
    b = torch.Stream(device="simdev")
    x = torch.ones(1000, device="simdev")
    torch.simdev.synchronize()
    out = torch.zeros(1000, pin_memory=True)
    torch_simdev.sleep_on_stream(150000, b)
    with torch.simdev.stream(b):
        out.copy_(x, non_blocking=True)
    if record:
        x.record_stream(b)
    del x  # freed while b's read is still queued
    b.synchronize()
    return out


def test_strict_poison_seen_by_cross_stream_read():
    out = _cross_stream_read_after_free(record=False)
    assert torch.isnan(out).all()
    s = torch_simdev.stats()
    assert s["poisoned_reads"] == 1
    assert s["cross_stream_violations"] == 1
    msgs = torch_simdev.violations()
    assert len(msgs) == 1 and "record_stream" in msgs[0]
    assert "4096 bytes" in msgs[0]  # 1000 floats, rounded up to 512


def test_record_stream_prevents_poisoned_read():
    out = _cross_stream_read_after_free(record=True)
    assert torch.equal(out, torch.ones(1000))
    s = torch_simdev.stats()
    assert s["poisoned_reads"] == 0 and s["cross_stream_violations"] == 0


def test_strict_same_stream_free_is_ordered():
    torch_simdev.set_strict(True)
    torch_simdev.set_latency_us(LAT_US)
    x = torch.full((100,), 3.0, device="simdev")
    out = torch.zeros(100, pin_memory=True)
    out.copy_(x, non_blocking=True)
    del x  # poison runs after the queued read on the same stream
    torch.simdev.synchronize()
    assert torch.equal(out, torch.full((100,), 3.0))
    s = torch_simdev.stats()
    assert s["poisoned_reads"] == 0 and s["cross_stream_violations"] == 0


def test_strict_fresh_memory_is_nan():
    torch_simdev.set_strict(True)
    t = torch.empty(10_000_000 // 4 + 123, device="simdev")  # a new block
    assert torch.isnan(t.cpu()).all()


# ---- fallback, devices, views ------------------------------------------------------

def test_mixed_devices_refused():
    d = torch.ones(3, device="simdev")
    with pytest.raises(RuntimeError,
                       match="Expected all tensors to be on the same device"):
        d + torch.ones(3)
    with pytest.raises(RuntimeError,
                       match="Expected all tensors to be on the same device"):
        d + torch.ones(3, device="simdev:1")
    assert torch.equal((d + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))
    assert torch.equal((d * 2).cpu(), torch.full((3,), 2.0))


VIEWS = {
    "narrow": lambda t: t.narrow(0, 2, 5),
    "select": lambda t: t.view(4, 6).select(0, 1),
    "view": lambda t: t.view(4, 6),
    "reshape": lambda t: t.reshape(2, 12),
    "flatten": lambda t: t.view(2, 3, 4).flatten(1),
    "transpose": lambda t: t.view(4, 6).transpose(0, 1),
    "expand": lambda t: t.view(1, 24).expand(3, 24),
    "split": lambda t: t.split(5)[1],
    "chunk": lambda t: t.chunk(3)[2],
    "unbind": lambda t: t.view(4, 6).unbind(0)[3],
    "squeeze": lambda t: t.view(1, 24).squeeze(0),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "permute": lambda t: t.view(2, 3, 4).permute(2, 0, 1),
    "t": lambda t: t.view(4, 6).t(),
    "diagonal": lambda t: t.view(4, 6).diagonal(),
    "unfold": lambda t: t.unfold(0, 4, 2),
    "detach": lambda t: t.detach(),
    "getitem": lambda t: t.view(4, 6)[1:3, ::2],
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_alias_storage(name):
    base_cpu = torch.arange(24, dtype=torch.float32)
    b = base_cpu.to("simdev")
    v = VIEWS[name](b)
    vc = VIEWS[name](base_cpu)
    assert v.is_simdev
    assert v.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert torch.equal(v.cpu(), vc)
    if name != "expand":  # write through the view
        v.add_(100)
        vc.add_(100)
        assert torch.equal(b.cpu(), base_cpu)


def test_reshape_of_noncontiguous_copies():
    b = torch.arange(24.0).to("simdev")
    r = b.view(4, 6).t().reshape(24)  # control: not a view
    assert r.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()


def _close(a, b):
    if isinstance(a, (tuple, list)):
        return all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        assert a.is_simdev, a.device
        return torch.allclose(a.cpu(), b, equal_nan=True) and \
            a.dtype == b.dtype and a.shape == b.shape
    return a == b


def test_fallback_ops_match_cpu():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(5, 4, generator=g)
    c = torch.randn(4, 3, generator=g)
    idx = torch.tensor([0, 3, 4])
    ops = {
        "add": lambda x, y, i: x + 1.5 * x,
        "matmul": lambda x, y, i: x @ y,
        "sum": lambda x, y, i: x.sum(1),
        "softmax": lambda x, y, i: torch.softmax(x, 1),
        "cat": lambda x, y, i: torch.cat([x, x * 2]),
        "stack": lambda x, y, i: torch.stack([x, x]),
        "index": lambda x, y, i: x[i],
        "where": lambda x, y, i: torch.where(x > 0, x, -x),
        "sort": lambda x, y, i: tuple(x.sort(1)),
        "topk": lambda x, y, i: tuple(x.topk(2, 1)),
        "nonzero": lambda x, y, i: (x > 0).nonzero(),
        "cumsum": lambda x, y, i: x.cumsum(0),
        "foreach": lambda x, y, i: tuple(torch._foreach_mul([x, y], 3.0)),
        "max": lambda x, y, i: x.max(),
        "clone_t": lambda x, y, i: x.t().clone(),
        "mean_int": lambda x, y, i: (x > 0).int().sum(),
    }
    for name, f in ops.items():
        got = f(a.to("simdev"), c.to("simdev"), idx.to("simdev"))
        assert _close(got, f(a, c, idx)), name
    assert torch_simdev.stats()["fallback_ops"] > len(ops)


def test_fallback_inplace_and_out():
    a = torch.arange(6.0)
    d = a.to("simdev")
    r = d.add_(1)
    assert r is d and torch.equal(d.cpu(), a + 1)
    out = torch.empty(0, device="simdev")
    torch.mul(d, 2, out=out)  # the CPU kernel resizes the out tensor
    assert out.shape == (6,) and torch.equal(out.cpu(), (a + 1) * 2)
    x = torch.zeros(5, device="simdev")
    x[torch.tensor([1, 3])] = 4.0  # index_put_ with CPU indices
    assert torch.equal(x.cpu(), torch.tensor([0.0, 4.0, 0.0, 4.0, 0.0]))
    ys = [torch.ones(2, device="simdev"), torch.zeros(3, device="simdev")]
    torch._foreach_add_(ys, 2.0)
    assert torch.equal(ys[0].cpu(), torch.full((2,), 3.0))
    assert torch.equal(ys[1].cpu(), torch.full((3,), 2.0))
    d.zero_()
    assert torch.equal(d.cpu(), torch.zeros(6))
    d.resize_(10)
    assert d.shape == (10,) and torch.equal(d[:6].cpu(), torch.zeros(6))


def test_fallback_runs_after_queued_work():
    torch_simdev.set_latency_us(LAT_US)
    d = torch.zeros(3, device="simdev")
    d.copy_(_pinned([1.0, 2.0, 3.0]), non_blocking=True)
    assert (d * 2).cpu().tolist() == [2.0, 4.0, 6.0]


def test_random_on_device_follows_manual_seed():
    torch.manual_seed(123)
    a = torch.randn(5, device="simdev")
    torch.manual_seed(123)
    b = torch.randn(5)
    assert torch.equal(a.cpu(), b)


def test_autograd_backward():
    lin = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)
    lin(x).pow(2).sum().backward()
    ref = lin.weight.grad.clone()
    lin.zero_grad()
    ld = torch.nn.Linear(4, 2).to("simdev")
    ld.load_state_dict(lin.state_dict())
    ld(x.to("simdev")).pow(2).sum().backward()
    assert ld.weight.grad.is_simdev
    assert torch.allclose(ld.weight.grad.cpu(), ref, atol=1e-6)
    # autograd's device threads set their device: nothing counted
    assert torch_simdev.stats()["calls_without_device"] == 0


# ---- pinned memory ---------------------------------------------------------------

def test_pinned_memory():
    p = torch.empty(16, pin_memory=True)
    assert p.is_pinned()
    q = torch.ones(16).pin_memory()
    assert q.is_pinned() and torch.equal(q, torch.ones(16))
    assert q[4:].is_pinned()
    assert not torch.ones(16).is_pinned()
    h = torch.ones(4, device="simdev").to("cpu", non_blocking=True)
    torch.simdev.synchronize()
    assert h.is_pinned() and torch.equal(h, torch.ones(4))


# ---- calls from threads that never set a device --------------------------------------

def test_calls_without_device_counted_per_thread():
    def unset():
        torch.simdev.current_stream()

    th = threading.Thread(target=unset)
    th.start()
    th.join()
    s = torch_simdev.stats()
    assert s["calls_without_device"] >= 1
    assert any(f"tid {th.native_id})" in n
               for n in s["calls_without_device_threads"])

    torch_simdev.reset_stats()

    def with_device():
        torch.simdev.set_device(0)
        torch.simdev.current_stream()
        torch.empty(10, device="simdev")
        torch.Event(device="simdev").record()

    th = threading.Thread(target=with_device)
    th.start()
    th.join()
    assert torch_simdev.stats()["calls_without_device"] == 0


def test_calls_without_device_from_ops_and_guards():
    def unset_ops():
        d = torch.ones(10, device="simdev")  # allocation + fill
        d.cpu()

    th = threading.Thread(target=unset_ops)
    th.start()
    th.join()
    assert torch_simdev.stats()["calls_without_device"] >= 2
    torch_simdev.reset_stats()

    def guarded():
        with torch.simdev.device(0):
            torch.ones(10, device="simdev").cpu()

    th = threading.Thread(target=guarded)
    th.start()
    th.join()
    assert torch_simdev.stats()["calls_without_device"] == 0
