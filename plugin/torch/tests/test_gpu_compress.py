"""pytest suite of torch_gcx.hooks' device path (the residual, the top-k
and GraVAC's norms where the gradient is; only the selection crosses to
the host): each test starts 2-3 ranks of gpu_compress_worker.py.

CPU tests force the device path for CPU buckets (device_path="always"),
which runs the device-generic code (selection, staging buffers, the worker
thread, the exchange, the scatter back, checkpoints); references are a
numpy top-k with error feedback, every rank's selection gathered over
gloo, and the C++ host path. The test_cuda_* tests run the same scenarios
on CUDA buckets and are skipped (with the reason) without a CUDA device;
perf/gpu/run.sh runs them on a GPU machine. The test_simdev_* tests run
them on the simulated asynchronous accelerator (plugin/torch/simdev) in
every CI run, strict mode, its counters checked at the end of each rank.

Cost: ~12 launches of 2-3 processes, about a minute on 2 cores."""
import pytest
import torch

from launch import check_ok

HAVE_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(
    not HAVE_CUDA, reason="no CUDA device (torch.cuda.is_available() is "
    "False): the CUDA device path is checked by perf/gpu/run.sh")
try:
    import torch_simdev  # noqa: F401
    HAVE_SIMDEV = True
except ImportError:
    HAVE_SIMDEV = False
requires_simdev = pytest.mark.skipif(
    not HAVE_SIMDEV, reason="torch_simdev is not built (PYTHONPATH needs "
    "<build>/plugin/torch/simdev)")
# the simulated accelerator (plugin/torch/simdev): asynchronous copies with
# latency and jitter, the strict allocator; simdev_env.check() at the end
# of each rank asserts its counters (no device call from a thread without
# a device, no poisoned read, no cross-stream free)
SIMDEV = {"GCX_TORCH_DEVICES": "cpu,simdev", "SIMDEV_STRICT": "1",
          "SIMDEV_LATENCY_US": "200", "SIMDEV_JITTER_US": "300"}


def run(scenario, size, device="cpu", **kw):
    env = {"TEST_DEVICE": device}
    if device == "simdev":
        env.update(SIMDEV)
    return check_ok(scenario, size, script="gpu_compress_worker.py",
                    env=env, **kw)


SCENARIOS = [("topk_exact", "dev topk exact ok", [2, 3]),
             ("threshold", "dev threshold ok", [2]),
             ("gravac_matches_host", "dev gravac matches host ok", [2]),
             ("ddp_matches_host", "dev ddp matches host ok", [2]),
             ("ddp_unused_matches_host", "dev ddp unused matches host ok",
              [2]),
             ("gravac_resume", "dev gravac resume ok", [2]),
             ("errors", "dev errors ok", [2]),
             ("coded", "dev coded ok", [2])]
CASES = [(sc, want, size) for sc, want, sizes in SCENARIOS for size in sizes]


@pytest.mark.parametrize("scenario,want,size", CASES)
def test_device_path_on_cpu(scenario, want, size):
    outs = run(scenario, size)
    assert all(want in o for o in outs), outs[0]


@requires_cuda
@pytest.mark.parametrize("scenario,want,size", CASES)
def test_cuda_device_path(scenario, want, size):
    outs = run(scenario, size, device="cuda")
    assert all(want in o for o in outs), outs[0]


@requires_simdev
@pytest.mark.parametrize("scenario,want,size", CASES)
def test_simdev_device_path(scenario, want, size):
    outs = run(scenario, size, device="simdev")
    assert all(want in o for o in outs), outs[0]


@pytest.mark.parametrize("static", [True, False])
def test_first_true_with_and_without_nonzero_static(static, monkeypatch):
    # the threshold's candidates: the first cap True entries, padded; the
    # fallback (devices without nonzero_static) gives the same
    import numpy as np
    from torch_gcx import hooks as H

    if not static:
        def missing(*a, **k):
            raise NotImplementedError("nonzero_static")
        monkeypatch.setattr(torch, "nonzero_static", missing)
    mask = torch.rand(5000, generator=torch.Generator().manual_seed(1)) > 0.8
    ref = np.flatnonzero(mask.numpy())
    for cap in (1, 700, ref.size, ref.size + 50):
        want = np.concatenate([ref[:cap], np.full(max(0, cap - ref.size),
                                                  5000)])
        got = H._first_true(mask, cap, 5000).numpy()
        np.testing.assert_array_equal(got, want)


def test_k_of_and_select_topk_against_numpy():
    import numpy as np
    from torch_gcx import hooks as H

    assert [H.k_of(1000, cf) for cf in (1, 3, 10, 1000, 1e9)] == \
        [1000, 334, 100, 1, 1]
    assert H.k_of(0, 10) == 0 and H.k_of(10, float("inf")) == 0
    e = torch.randn(10001, generator=torch.Generator().manual_seed(2))
    mag = e.abs()
    mag[-1] = -1
    for k in (0, 1, 37, 10000):
        got = H.select_topk(mag, 10000, k).numpy()
        want = np.sort(np.argsort(-np.abs(e[:10000].numpy()))[:k])
        np.testing.assert_array_equal(got, want)
