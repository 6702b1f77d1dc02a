"""Shrink and continue (elastic_worker.py): 4 ranks of DDP over gcx, one
SIGKILLed at a seeded step in the middle of the first epoch; the 3
survivors agree on the dead rank, shrink the default group, finish the
epoch with the dead rank's share of its remaining samples and one more
epoch, with parameters equal bit for bit (and equal to a one-process
replay of the schedule). A shrink on request, a recovery in which one
survivor is a step ahead, and the errors of bad use.

Cost: 5 launches of 2-4 processes, about a minute of CPU in all."""
import json

import pytest

from launch import check_ok, launch

N, EPOCHS = 96, 2  # as elastic_worker.py


def lines(out, tag):
    return [json.loads(l[len(tag) + 1:]) for l in out.splitlines()
            if l.startswith(tag + " ")]


@pytest.mark.parametrize("seed", [7, 11])
def test_kill_one_of_four(seed):
    size, victim = 4, 2
    results = launch("kill", size, timeout=240, script="elastic_worker.py",
                     env={"ELASTIC_SEED": str(seed),
                          "ELASTIC_VICTIM": str(victim)})
    logs = "\n".join(f"--- rank {r} (rc {rc}) ---\n{o[-3000:]}"
                     for r, (rc, o) in enumerate(results))
    assert results[victim][0] == -9, logs
    survivors = [r for r in range(size) if r != victim]
    for r in survivors:
        assert results[r][0] == 0, logs
        assert f"rank {r}: kill ok" in results[r][1], logs
    # every sample of every epoch in exactly one committed step of one rank
    # (the victim's steps before its death included): the dead rank's
    # share of the rest went to the survivors
    for epoch in range(EPOCHS):
        seen = sorted(i for _, out in results for s in lines(out, "STEP")
                      if s["epoch"] == epoch for i in s["idx"])
        assert seen == list(range(N)), (epoch, logs)
    victim_steps = lines(results[victim][1], "STEP")
    assert victim_steps and all(s["world"] == size for s in victim_steps)
    assert len(victim_steps) < N // (size * 4)  # it died inside epoch 0
    hashes = set()
    for r in survivors:
        out = results[r][1]
        events = lines(out, "EVENT")
        assert len(events) == 1, logs
        assert events[0]["dead"] == [victim] and events[0]["world"] == 3
        steps = lines(out, "STEP")
        # the epoch went on at world 3 right after the victim's last step
        assert [s["world"] for s in steps] == \
            [size] * len(victim_steps) + [3] * (len(steps) -
                                                len(victim_steps))
        hashes.update(l.split()[1] for l in out.splitlines()
                      if l.startswith("PARAMS "))
    assert len(hashes) == 1, logs


def test_shrink_on_request():
    outs = check_ok("on_request", 3, timeout=180, script="elastic_worker.py")
    assert all("on_request ok" in o for o in outs), outs


def test_adopt_the_most_advanced():
    outs = check_ok("adopt", 3, timeout=180, script="elastic_worker.py")
    assert all("adopt ok" in o for o in outs), outs


def test_bad_use():
    outs = check_ok("bad_use", 3, timeout=180, script="elastic_worker.py")
    assert all("bad_use ok" in o for o in outs), outs
