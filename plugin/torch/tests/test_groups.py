"""Sub-groups with the gcx backend (groups_worker.py): new_group and
new_subgroups of a gcx default group are made by their members from the
default group's communicator; a gcx group under a gloo default group over
its own Store. Results against gloo, on 2-4 spawned ranks.

Cost: 6 launches of 2-4 processes, about half a minute of CPU each."""
import pytest

from launch import check_ok


@pytest.mark.parametrize("scenario,size", [
    ("new_group", 2), ("new_group", 4),
    ("new_subgroups", 2), ("new_subgroups", 4),
    ("two_groups", 3),     # overlapping groups in flight at once
    ("gloo_default", 3),   # a gcx group under a gloo default group
])
def test_groups(scenario, size):
    outs = check_ok(scenario, size, script="groups_worker.py", timeout=180)
    assert all(f"{scenario} ok" in o for o in outs), outs
