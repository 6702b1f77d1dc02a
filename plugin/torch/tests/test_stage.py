"""The staging pipeline of device tensors, exercised on CPU tensors: with
GCX_TORCH_STAGE=always the CPU tensors of every collective go through the
same chunked pipeline (host buffer pool, one gcx call per chunk, copies in
and out) and the host mirrors that CUDA tensors take. A small
GCX_TORCH_STAGE_CHUNK (4 KiB) makes every size above a few hundred
elements several chunks with a tail.

- stage_worker.py scenarios: every collective against gloo (sizes 0, 1,
  just under a chunk, one chunk, several with a tail; six dtypes; roots),
  the pool's reuse and the chunk count, many calls in flight waited out of
  order, Future values, device errors on every rank, a dead peer during a
  staged collective;
- worker.py's and backend_ops_worker.py's collective scenarios again, with
  the pipeline forced;
- a bad GCX_TORCH_STAGE raises naming it.

Cost: ~11 launches of 2-3 processes, about a minute and a half on 2 cores.
"""
import pytest

from launch import check_ok, launch

STAGE = {"GCX_TORCH_STAGE": "always", "GCX_TORCH_STAGE_CHUNK": "4096"}


@pytest.mark.parametrize("scenario,size", [
    ("collectives", 2), ("collectives", 3),
    ("pipeline", 2),
    ("errors", 2),
])
def test_stage(scenario, size):
    outs = check_ok(scenario, size, script="stage_worker.py", env=STAGE,
                    timeout=300)
    assert all(f"{scenario} ok" in o for o in outs), outs


@pytest.mark.parametrize("scenario,size", [
    ("allreduce", 3), ("movement", 2), ("reduce", 3), ("alltoall", 2),
    ("p2p", 2),
])
def test_worker_scenarios_staged(scenario, size):
    # the plain suite's scenarios, every tensor through the pipeline
    check_ok(scenario, size, env=STAGE, timeout=300)


def test_backend_ops_staged():
    outs = check_ok("coalesced", 2, script="backend_ops_worker.py",
                    env=STAGE, timeout=180)
    assert any("coalesced ok" in o for o in outs), outs


def test_peer_death_during_staged_collective():
    results = launch("peer_death", 2, script="stage_worker.py", env=STAGE,
                     timeout=90)
    rc, out = results[0]
    assert rc == 0, out
    assert "peer death error" in out, out


def test_bad_stage_variable_names_it():
    results = launch("badenv", 2, script="stage_worker.py",
                     env={"GCX_TORCH_STAGE": "sometimes"}, timeout=60)
    for rc, out in results:
        assert rc == 3, out
        line = [l for l in out.splitlines() if l.startswith("stage env error")]
        assert line and "GCX_TORCH_STAGE='sometimes'" in line[0], out
