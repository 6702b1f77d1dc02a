"""torch_simdev: a simulated asynchronous accelerator for PyTorch.

``import torch_simdev`` renames PyTorch's PrivateUse1 backend to "simdev",
registers this module as ``torch.simdev`` and generates the tensor methods
(``.simdev()``, ``.is_simdev``). Two devices, streams run by worker threads,
asynchronous copies, a stream-ordered caching allocator with strict-mode
checks and pinned host memory: the CUDA-style code paths of a program run
on a machine without a GPU. See README.md beside this package.

Idea: a thin Python layer over ``torch_simdev._C``; torch.Stream and
torch.Event work with device "simdev" through the DeviceGuardImpl.
Cost: none beyond the calls.

The importing thread is marked as having set its device (device 0), so
``stats()["calls_without_device"]`` counts device API calls from *other*
threads that never set a device (the defect it is meant to catch: on CUDA
>= 12 such a call creates a context on GPU 0).
"""
import atexit
import contextlib
import os
import sys

import torch

from . import _C

__all__ = [
    "is_available", "device_count", "current_device", "set_device",
    "device", "synchronize", "current_stream", "default_stream",
    "set_stream", "stream", "Stream", "Event", "manual_seed",
    "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
    "set_rng_state", "is_initialized", "init", "set_latency_us",
    "set_jitter_us", "set_strict", "settings", "stats", "reset_stats",
    "violations", "sleep_on_stream",
]

_NAME = "simdev"


def _env_int(name, default):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw, 10)
    except ValueError:
        raise ValueError(
            f"{name}={raw!r}: expected a non-negative integer") from None
    if value < 0:
        raise ValueError(f"{name}={raw!r}: expected a non-negative integer")
    return value


def _env_bool(name, default):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    if raw.strip() in ("0", "1"):
        return raw.strip() == "1"
    raise ValueError(f"{name}={raw!r}: expected 0 or 1")


# ---- settings -------------------------------------------------------------

def set_latency_us(us):
    """Delay before each copy executes on its stream (microseconds)."""
    _C._set_latency_us(int(us))


def set_jitter_us(us):
    """Uniform random extra delay 0..us per copy (microseconds)."""
    _C._set_jitter_us(int(us))


def set_strict(on):
    """Strict mode: poison freed blocks (0xFF), count poisoned reads."""
    _C._set_strict(bool(on))


def settings():
    return _C._get_settings()


def stats():
    """Counters: copies, async_copies, fallback_ops, allocs, reuses,
    poisoned_reads, cross_stream_violations, calls_without_device and
    calls_without_device_threads (OS thread names with their tids)."""
    return _C._stats()


def reset_stats():
    _C._reset_stats()


def violations():
    """Messages of the cross-stream violations counted so far."""
    return _C._violations()


# ---- devices ----------------------------------------------------------------

def is_available():
    return True


def device_count():
    return _C._device_count()


def is_initialized():
    return True


def init():
    pass


def _lazy_init():
    pass


def _is_in_bad_fork():
    return False


def _index(dev, optional=True):
    if dev is None:
        return _C._get_device() if optional else 0
    if isinstance(dev, str):
        dev = torch.device(dev)
    if isinstance(dev, torch.device):
        if dev.type != _NAME:
            raise ValueError(f"not a {_NAME} device: {dev}")
        return _C._get_device() if dev.index is None else dev.index
    return int(dev)


def current_device():
    return _C._get_device()


def set_device(dev):
    idx = _index(dev)
    if idx >= 0:
        _C._set_device(idx)


class device:
    """Context manager selecting the current simdev device."""

    def __init__(self, dev):
        self.idx = -1 if dev is None else _index(dev)
        self.prev = -1

    def __enter__(self):
        self.prev = _C._exchange_device(self.idx)

    def __exit__(self, *exc):
        _C._set_device(self.prev)
        return False


def synchronize(device=None):
    """Host waits for every stream of the device (default: current)."""
    _C._synchronize(_index(device))


# ---- streams and events -------------------------------------------------------

def _as_stream(t):
    sid, idx, dtype = t
    return torch.Stream(stream_id=sid, device_index=idx, device_type=dtype)


def current_stream(device=None):
    return _as_stream(_C._current_stream(_index(device)))


def default_stream(device=None):
    return _as_stream(_C._default_stream(_index(device)))


def set_stream(s):
    if s is None:
        return
    _C._exchange_stream(s.device_index, s.stream_id)


@contextlib.contextmanager
def stream(s):
    """Makes `s` the current stream of its device (and its device the
    current device) inside the block, like torch.cuda.stream."""
    if s is None:
        yield
        return
    prev_dev = _C._exchange_device(s.device_index)
    prev = _C._exchange_stream(s.device_index, s.stream_id)
    try:
        yield s
    finally:
        _C._exchange_stream(s.device_index, prev)
        _C._set_device(prev_dev)


class Stream(torch.Stream):
    """A new simdev stream (a torch.Stream on device "simdev")."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs:
            return super().__new__(cls, **kwargs)
        idx = _index(device)
        return super().__new__(cls, device=torch.device(_NAME, idx),
                               priority=priority)


class Event(torch.Event):
    """A simdev event: a torch.Event on device "simdev" (an instance of
    torch.Event itself, not of this class: torch's Event methods, e.g.
    elapsed_time(other), take only exact torch.Event objects)."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event(device=_NAME, enable_timing=enable_timing,
                           blocking=blocking, interprocess=interprocess)


def _stream_wait_word_fn():
    """The address of the C function that queues on a stream a wait until a
    host word reaches a value (as CUDA's cuStreamWaitValue32): torch_gcx
    finds it here and registers it for its stream-mode waits."""
    return _C._stream_wait_word_fn()


def sleep_on_stream(us, stream=None):
    """Enqueues a host-side sleep of `us` microseconds on `stream` (default:
    the current stream): makes the stream visibly busy, like a long kernel."""
    if stream is None:
        stream = current_stream()
    _C._sleep_on_stream(int(us), stream.device_index, stream.stream_id)


# ---- random numbers -------------------------------------------------------------
# Ops run on the CPU: random factories on simdev draw from the CPU default
# generator (torch.manual_seed seeds it). The per-device generators below
# exist for code that asks for them.

def manual_seed(s):
    _C._manual_seed(current_device(), int(s))


def manual_seed_all(s):
    for i in range(device_count()):
        _C._manual_seed(i, int(s))


def seed():
    manual_seed(torch.seed())


def seed_all():
    manual_seed_all(torch.seed())


def initial_seed():
    return torch.initial_seed()


def get_rng_state(device="simdev"):
    return torch.get_rng_state()


def set_rng_state(new_state, device="simdev"):
    torch.set_rng_state(new_state)


def get_rng_state_all():
    return [get_rng_state() for _ in range(device_count())]


def set_rng_state_all(states):
    for s in states:
        set_rng_state(s)


# ---- registration -----------------------------------------------------------------

def _register():
    set_latency_us(_env_int("SIMDEV_LATENCY_US", 0))
    set_jitter_us(_env_int("SIMDEV_JITTER_US", 0))
    set_strict(_env_bool("SIMDEV_STRICT", False))
    if torch._C._get_privateuse1_backend_name() != _NAME:
        torch.utils.rename_privateuse1_backend(_NAME)
    if not hasattr(torch, _NAME):
        torch._register_device_module(_NAME, sys.modules[__name__])
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True,
            for_storage=True)
    _C._mark_thread_device_set()
    atexit.register(_C._shutdown)


_register()
