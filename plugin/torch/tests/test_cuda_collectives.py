"""Device tensors through torch_gcx: every collective on device tensors
against gloo (stage_worker.py's scenarios with TEST_DEVICE set; the ranks
share device 0), NCCL's stream semantics (work queued before the call is
seen, work.wait() orders the current stream without a host sync, a side
stream, the Future), CPU/device and two-device mixes raising on every rank,
DDP of a device model, a dead peer during a staged collective (an error, no
stream left waiting).

Each test runs on two devices: "cuda" (skipped, with the reason, without a
CUDA device: perf/gpu/run.sh runs them on a GPU machine) and "simdev", the
simulated asynchronous accelerator of plugin/torch/simdev, in every CI run:
copies land later on worker-thread streams (latency and jitter set below),
its caching allocator reuses freed memory at once and in strict mode
poisons it, and each rank ends by asserting that no device call came from
a thread without a device, no poisoned memory was read and no block was
freed under another stream's queued work (simdev_env.check). The default
chunk (4 MiB) and a small one (64 KiB: many chunks) are both run for the
collectives.

Cost: ~10 launches of 2-3 processes per device; on the 2-core box the
simdev ones take about two minutes."""
import pytest
import torch

from launch import check_ok, launch

try:
    import torch_simdev  # noqa: F401
    HAVE_SIMDEV = True
except ImportError:
    HAVE_SIMDEV = False

HAVE_CUDA = torch.cuda.is_available()
DEVICES = [
    pytest.param({"TEST_DEVICE": "cuda"}, id="cuda", marks=pytest.mark.skipif(
        not HAVE_CUDA, reason="no CUDA device (torch.cuda.is_available() is "
        "False): these tests run on a machine with an NVIDIA GPU")),
    pytest.param({"TEST_DEVICE": "simdev", "GCX_TORCH_DEVICES": "cpu,simdev",
                  "SIMDEV_STRICT": "1", "SIMDEV_LATENCY_US": "300",
                  "SIMDEV_JITTER_US": "300"}, id="simdev",
                 marks=pytest.mark.skipif(
                     not HAVE_SIMDEV, reason="torch_simdev is not built "
                     "(PYTHONPATH needs <build>/plugin/torch/simdev)")),
]


def run(scenario, size, device, env=None, **kw):
    outs = check_ok(scenario, size, script="stage_worker.py",
                    env=dict(device, **(env or {})), timeout=300, **kw)
    assert all(f"{scenario} ok" in o for o in outs), outs
    return outs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk", ["65536", "4194304"])
@pytest.mark.parametrize("size", [2, 3])
def test_device_collectives_match_gloo(size, chunk, device):
    run("collectives", size, device, env={"GCX_TORCH_STAGE_CHUNK": chunk})


@pytest.mark.parametrize("device", DEVICES)
def test_device_pipeline(device):
    run("pipeline", 2, device, env={"GCX_TORCH_STAGE_CHUNK": "65536"})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("size", [2, 3])
def test_device_stream_semantics(size, device):
    run("streams", size, device, env={"GCX_TORCH_STAGE_CHUNK": "65536"})


@pytest.mark.parametrize("device", DEVICES)
def test_device_mixed_devices_raise_on_every_rank(device):
    outs = run("mixed_devices", 2, device)
    for o in outs:
        assert o.count("mixed device error") >= 5, o


@pytest.mark.parametrize("device", DEVICES)
def test_device_ddp(device):
    run("ddp", 2, device)


@pytest.mark.parametrize("device", DEVICES)
def test_device_peer_death_during_staged_collective(device):
    results = launch("peer_death", 2, script="stage_worker.py",
                     env=dict(device, GCX_TORCH_STAGE_CHUNK="65536"),
                     timeout=90)
    rc, out = results[0]
    assert rc == 0, out
    assert "peer death error" in out and "streams idle" in out, out
    assert "next call error" in out, out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["stream", "host"])
def test_device_wait_does_not_block_the_host(device, mode):
    # stream mode (the default where the device can make a stream wait on a
    # host word): wait() returns while the others have not called the
    # collective yet; GCX_TORCH_WAIT=host: it blocks until they did
    env = {"GCX_TORCH_STAGE_CHUNK": "65536"}
    if mode == "host":
        env["GCX_TORCH_WAIT"] = "host"
    if device["TEST_DEVICE"] == "simdev":
        env["SIMDEV_LATENCY_US"] = "1000"  # 1 ms per copy (the issue's)
    outs = run("wait_nonblocking", 2, device, env=env)
    want = "host wait timed out" if mode == "host" else \
        "wait returned before the collective"
    assert outs[0].count(want) == (1 if mode == "host" else 3), outs[0]


def _import_error(env, code):
    import os
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, env=dict(os.environ, **env), timeout=120)
    assert r.returncode != 0, r.stdout
    return r.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("value,want", [
    ("cpu,nosuchdev", "GCX_TORCH_DEVICES='cpu,nosuchdev' names 'nosuchdev'"),
    ("cuda", "must include cpu")])
def test_bad_devices_variable_names_it(value, want):
    err = _import_error({"GCX_TORCH_DEVICES": value}, "import torch_gcx")
    assert want in err, err


@pytest.mark.skipif(not HAVE_SIMDEV, reason="torch_simdev is not built")
def test_bad_wait_variable_names_it():
    err = _import_error({"GCX_TORCH_WAIT": "xyz",
                         "GCX_TORCH_DEVICES": "cpu,simdev"},
                        "import torch_simdev, torch_gcx; "
                        "torch_gcx._C.stream_waits('simdev:0')")
    assert "GCX_TORCH_WAIT='xyz' is not one of auto, host" in err, err
