"""torch_gcx: the "gcx" torch.distributed backend over libgcx (CPU and CUDA
tensors).

    import torch_gcx
    torch.distributed.init_process_group("gcx")

The backend is registered for the device types GCX_TORCH_DEVICES names
(default "cpu,cuda"; e.g. "cpu,cuda,simdev" adds the tests' simulated
device, whose module must be imported first): tensors of a device other
than the CPU are staged through pinned host buffers, pipelined by chunks,
with NCCL's stream semantics (README.md, "Devices and staging").

Importing registers the backend (once; importing again is harmless). Each
process group gets one gcx communicator: the default group's is created over
its c10d Store, and a sub-group of it is made by its members from it
(gcx_comm_create_group); a gcx group under another default backend (gloo)
is created over its own Store. All gcx calls are made by one engine thread
per process (see README.md).
"""
import atexit
import sys
import weakref

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from . import _C
from . import hooks  # noqa: F401  (torch_gcx.hooks.topk_hook, ...)
from . import elastic  # noqa: F401  (torch_gcx.elastic.ElasticDDP, ...)
from . import coded  # noqa: F401  (torch_gcx.coded.CodedDataParallel, ...)

__all__ = ["gcx_version", "group_creation", "group_config", "get_error",
           "stage_stats", "hooks", "elastic", "coded"]

# False: make every gcx group over its own Store, as before create_group
# (to compare the two; see bench/new_group_time.py)
subgroups_from_default = True


def gcx_version():
    """Version of the libgcx this module is linked with."""
    return _C.gcx_version()


def group_creation(group=None):
    """How the gcx communicator of `group` (default: the default group) was
    made: "create_group" (by its members, from the default group's),
    "store" (gcx_comm_create over the group's c10d Store) or "split"
    (ProcessGroup.split_group, gcx_comm_split of its parent)."""
    return _C.group_creation(_backend(group))


def group_config(name, group=None):
    """A GCX_* variable (e.g. "TIMEOUT") of the communicator of `group`
    (default: the default group), as text."""
    return _C.group_config(_backend(group), name)


def get_error(group=None):
    """The state of the gcx communicator of `group` (default: the default
    group) as a torch._C._distributed_c10d.ErrorType: SUCCESS, TIMEOUT (a collective
    ran past the group's timeout), REMOTE_ERROR (a peer was lost, or a peer
    revoked the communicator after a failure) or COMM_ERROR (any other
    failure, or the group was shut down). The
    backend's getError(), which torch's Python binds for some backends
    only."""
    return _C.get_error(_backend(group))


def stage_stats():
    """Counters of this process's staging of device tensors (and of CPU
    tensors with GCX_TORCH_STAGE=always): "calls" and "chunks" of the
    chunked pipeline, "allocs" and "reuses" of its host buffer pool,
    "mirrors" (calls through host mirrors), "cached_bytes" (idle in the
    pool)."""
    return _C.stage_stats()


def _backend(group):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return pg._get_backend(torch.device("cpu"))


# torch creates a group's backend once per device type it is registered
# for ("cpu", then "cuda", ...), in one call of its _new_process_group_helper:
# the later calls get the backend the first made, so a group has one gcx
# communicator for every kind of tensor. That call is told apart by its
# BackendConfig (a new one per call; held weakly here, and the entry goes
# when torch drops it).
_made = {}


def _creation_call():
    """The BackendConfig of torch's _new_process_group_helper call that is
    creating the group (None if torch creates it some other way: then each
    device type gets its own communicator, which is correct, only dearer)."""
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "_new_process_group_helper":
            cfg = f.f_locals.get("backend_config")
            try:
                weakref.ref(cfg)
            except TypeError:
                return None
            return cfg
        f = f.f_back
    return None


def _create_backend(opts, _backend_options):
    # torch's extended creator API: the group's ranks in the default group
    # (empty for the default group itself) and its name, which every member
    # has the same; the timeout (a datetime.timedelta) becomes the
    # communicator's GCX_TIMEOUT
    call = _creation_call()
    key = (str(opts.group_id), opts.group_rank, opts.group_size)
    if call is not None and key in _made:
        ref, backend = _made[key]
        if ref() is call:
            return backend
    backend = _C.create_backend(opts.store, opts.group_rank, opts.group_size,
                                opts.timeout.total_seconds(),
                                list(opts.global_ranks_in_group),
                                str(opts.group_id), subgroups_from_default)
    if call is not None:
        _made[key] = (weakref.ref(call), backend)
        # the creation is over when torch drops its BackendConfig
        weakref.finalize(call, _made.pop, key, None)
    return backend


def _devices():
    """The device types of GCX_TORCH_DEVICES (default "cpu,cuda"), checked:
    each one torch knows (a custom device's module imported first), cpu
    among them."""
    import os
    text = os.environ.get("GCX_TORCH_DEVICES", "") or "cpu,cuda"
    names = [n.strip() for n in text.split(",")]
    for n in names:
        try:
            ok = n != "" and torch.device(n).type == n and n != "meta"
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"torch_gcx: GCX_TORCH_DEVICES={text!r} names {n!r}, which is "
                f"not a device type torch knows here (a custom device's "
                f"module, e.g. torch_simdev, must be imported before "
                f"torch_gcx)")
    if "cpu" not in names:
        raise ValueError(f"torch_gcx: GCX_TORCH_DEVICES={text!r} must include "
                         f"cpu (the backend's communicator is the CPU one)")
    return list(dict.fromkeys(names))


def _stream_waits(names):
    """A custom device whose module offers `_stream_wait_word_fn()` (the
    address of its C function that queues on a stream a wait until a host
    word reaches a value) gets stream-mode waits (staging.h); CUDA's is
    built in."""
    for n in names:
        if n in ("cpu", "cuda"):
            continue
        fn = getattr(getattr(torch, n, None), "_stream_wait_word_fn", None)
        if fn is not None:
            _C.set_stream_wait_word(n, int(fn()))


if not hasattr(dist.Backend, "GCX"):
    _stream_waits(_devices())
    dist.Backend.register_backend("gcx", _create_backend, extended_api=True,
                                  devices=_devices())
    # stop the engine before the interpreter goes away; never hangs
    atexit.register(_C.shutdown)
