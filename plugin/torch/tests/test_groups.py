"""Sub-groups with the gcx backend (groups_worker.py): new_group and
new_subgroups of a gcx default group are made by their members from the
default group's communicator; a gcx group under a gloo default group over
its own Store. Results against gloo, on 2-4 spawned ranks.

Cost: 6 launches of 2-4 processes, about half a minute of CPU each."""
import pytest

from launch import check_ok


def run(scenario, size):
    outs = check_ok(scenario, size, script="groups_worker.py", timeout=180)
    assert all(f"{scenario} ok" in o for o in outs), outs
    return outs


@pytest.mark.parametrize("size", [2, 4])
def test_new_group(size):
    run("new_group", size)


@pytest.mark.parametrize("size", [2, 4])
def test_new_subgroups(size):
    run("new_subgroups", size)


def test_two_groups_at_once():
    run("two_groups", 3)


def test_gcx_group_under_gloo_default_group():
    run("gloo_default", 3)
