"""The c10d::Backend calls FSDP2, DeviceMesh and torchft-style wrappers use
(backend_ops_worker.py), against gloo: AVG is the mean and PREMUL_SUM the
sum of the scaled inputs in every reduction; PRODUCT and the bitwise ops;
the coalesced calls and a startCoalescing/endCoalescing block as one Work;
ProcessGroup.split_group over gcx_comm_split; monitored_barrier naming the
rank that did not come, within its timeout; get_error after a peer death.
Bad use raises a clear error.

Cost: 7 launches of 2-4 processes, 10-30 s each on 2 cores (the monitored
barrier waits out its 6 s timeout)."""
import pytest

from launch import check_ok


@pytest.mark.parametrize("scenario,size", [
    ("reductions", 2), ("reductions", 3),
    ("coalesced", 2), ("coalesced", 3),
    ("split", 2), ("split", 4),
    ("monitored", 3),
    ("get_error", 2),
])
def test_backend_ops(scenario, size):
    outs = check_ok(scenario, size, script="backend_ops_worker.py",
                    timeout=180)
    assert any(f"{scenario} ok" in o for o in outs), outs
