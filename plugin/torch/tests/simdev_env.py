"""The tests' simulated accelerator (plugin/torch/simdev: torch_simdev,
device "simdev"), for the workers that run device code: imported before
torch_gcx when GCX_TORCH_DEVICES names it (torch_gcx then registers the
backend for it and finds its stream wait), and, at the end of a scenario,
check() asserts what the simulated device counted: no device call from a
thread that never set a device (torch_gcx's engine and completer, the
hooks' issuer thread), no read of memory freed and poisoned (strict mode),
no block freed while another stream still had work queued on it without
record_stream.

Cost: an import; check() reads a few counters.
"""
import os

ON = "simdev" in os.environ.get("GCX_TORCH_DEVICES", "").split(",")
if ON:
    import torch_simdev  # noqa: F401  (before torch_gcx)


def check(rank):
    """Raise if the simulated device saw a defect; print its counters."""
    if not ON:
        return
    import torch_simdev
    torch_simdev.synchronize()
    st = torch_simdev.stats()
    print(f"rank {rank}: simdev {st}", flush=True)
    bad = {k: st[k] for k in ("calls_without_device", "poisoned_reads",
                              "cross_stream_violations") if st[k]}
    assert not bad, (bad, st["calls_without_device_threads"],
                     torch_simdev.violations())
