"""pytest suite of torch_gcx.hooks and of DDP on the gcx backend: each test
starts 1-4 ranks of hooks_worker.py (fresh processes), compares with gloo or
with a reference computed from every rank's data, and kills all ranks if one
hangs.

Cost: ~10 launches of 1-4 processes, about a minute on 2 cores."""
import pytest

from launch import check_ok


def run(scenario, size, **kw):
    return check_ok(scenario, size, script="hooks_worker.py", **kw)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_topk_hook_is_mean_of_every_ranks_topk(size):
    outs = run("topk_exact", size)
    assert all("topk exact ok" in o for o in outs)


@pytest.mark.parametrize("size", [2, 3])
def test_ddp_unused_parameters_buffers_two_groups(size):
    outs = run("ddp_features", size)
    assert all("ddp features ok" in o for o in outs)


def test_topk_hook_at_cf1_matches_dense_gloo():
    outs = run("topk_cf1_parity", 2)
    assert all("topk cf1 parity ok" in o for o in outs)


def test_hooks_converge():
    outs = run("converge", 2, timeout=300)
    assert all("converge ok" in o for o in outs), outs[0]


@pytest.mark.parametrize("size", [1, 2])
def test_gravac_hook_resumes_bit_identically(size):
    outs = run("resume", size)
    assert all("resume ok" in o for o in outs), outs[0]


def test_hook_bad_use_raises_naming_the_cause():
    outs = run("hook_errors", 2)
    for o in outs:
        assert "gloo, not gcx" in o and "float32" in o, o


@pytest.mark.parametrize("size", [1, 2])
def test_callback_may_wait_for_a_collective(size):
    outs = run("nested_wait", size, timeout=60)
    assert all("nested wait ok" in o for o in outs)


def test_torch_powersgd_hook_matches_gloo():
    outs = run("powersgd_parity", 2)
    assert all("powersgd parity ok" in o for o in outs)
