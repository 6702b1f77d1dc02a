"""torch_gcx: the "gcx" torch.distributed backend over libgcx (CPU tensors).

    import torch_gcx
    torch.distributed.init_process_group("gcx")

Importing registers the backend (once; importing again is harmless). Each
process group gets one gcx communicator: the default group's is created over
its c10d Store, and a sub-group of it is made by its members from it
(gcx_comm_create_group); a gcx group under another default backend (gloo)
is created over its own Store. All gcx calls are made by one engine thread
per process (see README.md).
"""
import atexit

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from . import _C
from . import hooks  # noqa: F401  (torch_gcx.hooks.topk_hook, ...)
from . import elastic  # noqa: F401  (torch_gcx.elastic.ElasticDDP, ...)
from . import coded  # noqa: F401  (torch_gcx.coded.CodedDataParallel, ...)

__all__ = ["gcx_version", "group_creation", "group_config", "get_error",
           "hooks", "elastic", "coded"]

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


def _backend(group):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return pg._get_backend(torch.device("cpu"))


def _create_backend(opts, _backend_options):
    # torch's extended creator API: the group's ranks in the default group
    # (empty for the default group itself) and its name, which every member
    # has the same; the timeout (a datetime.timedelta) becomes the
    # communicator's GCX_TIMEOUT
    return _C.create_backend(opts.store, opts.group_rank, opts.group_size,
                             opts.timeout.total_seconds(),
                             list(opts.global_ranks_in_group),
                             str(opts.group_id), subgroups_from_default)


if not hasattr(dist.Backend, "GCX"):
    dist.Backend.register_backend("gcx", _create_backend, extended_api=True,
                                  devices=["cpu"])
    # stop the engine before the interpreter goes away; never hangs
    atexit.register(_C.shutdown)
