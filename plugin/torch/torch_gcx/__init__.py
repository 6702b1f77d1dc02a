"""torch_gcx: the "gcx" torch.distributed backend over libgcx (CPU tensors).

    import torch_gcx
    torch.distributed.init_process_group("gcx")

Importing registers the backend (once; importing again is harmless). Each
process group gets one gcx communicator, created over the group's c10d Store;
all gcx calls are made by one engine thread per process (see README.md).
"""
import atexit

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from . import _C
from . import hooks  # noqa: F401  (torch_gcx.hooks.topk_hook, ...)

__all__ = ["gcx_version", "hooks"]


def gcx_version():
    """Version of the libgcx this module is linked with."""
    return _C.gcx_version()


def _create_backend(store, rank, size, timeout):
    # timeout is the process group's datetime.timedelta; it becomes the
    # communicator's GCX_TIMEOUT
    return _C.create_backend(store, rank, size, timeout.total_seconds())


if not hasattr(dist.Backend, "GCX"):
    dist.Backend.register_backend("gcx", _create_backend, devices=["cpu"])
    # stop the engine before the interpreter goes away; never hangs
    atexit.register(_C.shutdown)
