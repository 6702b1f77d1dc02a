"""FSDP2 (fully_shard) and DeviceMesh over the gcx backend (fsdp_worker.py):
the same model trained over gcx and over gloo meshes of the same ranks ends
with the same parameters (bit-equal where every sum has two terms, else
within float32 rounding of another summation order); a 2 x 2 mesh (HSDP:
all_reduce over "dp", reduce_scatter/all_gather over "shard") of gcx groups.

Cost: 3 launches of 2-4 processes, 20-45 s each on 2 cores."""
import pytest

from launch import check_ok


@pytest.mark.parametrize("scenario,size", [
    ("fsdp", 2), ("fsdp", 4), ("hsdp", 4),
])
def test_fsdp(scenario, size):
    outs = check_ok(scenario, size, script="fsdp_worker.py", timeout=240)
    assert all(f"{scenario} ok" in o for o in outs), outs
