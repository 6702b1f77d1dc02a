"""CUDA tensors through torch_gcx: every collective on CUDA tensors against
gloo (stage_worker.py's scenarios with TEST_DEVICE=cuda; the ranks share
GPU 0), NCCL's stream semantics (a kernel queued before the call is seen,
work.wait() orders the current stream without a host sync, a side stream,
the Future), CPU/CUDA and two-GPU mixes raising on every rank, DDP of a
CUDA model, a dead peer during a staged collective (an error, no stream
left waiting).

Every test here needs a CUDA device: without one it is skipped, with the
reason, and counted as skipped. The default chunk (4 MiB) and a small one
(64 KiB: many chunks) are both run for the collectives.

Cost on a GPU machine: ~8 launches of 2-3 processes, a minute or two."""
import pytest
import torch

from launch import check_ok, launch

HAVE_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(
    not HAVE_CUDA, reason="no CUDA device (torch.cuda.is_available() is "
    "False): these tests run on a machine with an NVIDIA GPU")
pytestmark = requires_cuda

CUDA = {"TEST_DEVICE": "cuda"}


def run(scenario, size, env=None, **kw):
    outs = check_ok(scenario, size, script="stage_worker.py",
                    env=dict(CUDA, **(env or {})), timeout=300, **kw)
    assert all(f"{scenario} ok" in o for o in outs), outs
    return outs


@pytest.mark.parametrize("chunk", ["65536", "4194304"])
@pytest.mark.parametrize("size", [2, 3])
def test_cuda_collectives_match_gloo(size, chunk):
    run("collectives", size, env={"GCX_TORCH_STAGE_CHUNK": chunk})


def test_cuda_pipeline():
    run("pipeline", 2, env={"GCX_TORCH_STAGE_CHUNK": "65536"})


@pytest.mark.parametrize("size", [2, 3])
def test_cuda_stream_semantics(size):
    run("streams", size, env={"GCX_TORCH_STAGE_CHUNK": "65536"})


def test_cuda_mixed_devices_raise_on_every_rank():
    outs = run("mixed_devices", 2)
    for o in outs:
        assert o.count("mixed device error") >= 5, o


def test_cuda_ddp():
    run("ddp", 2)


def test_cuda_peer_death_during_staged_collective():
    results = launch("peer_death", 2, script="stage_worker.py",
                     env=dict(CUDA, GCX_TORCH_STAGE_CHUNK="65536"),
                     timeout=90)
    rc, out = results[0]
    assert rc == 0, out
    assert "peer death error" in out and "streams idle" in out, out
