"""test_launch_local.py: launch_local.py stops every rank, and the ranks'
children, when the launcher itself is told to stop.

Idea: each rank runs a small Python program that writes its pid and the pid
of a child it starts (`sleep 60`, in the rank's process group) to files
under tmp_path and sleeps; the launcher is then stopped from outside, as
`timeout` does it (SIGTERM to the launcher only: the ranks are in their own
sessions) or by a signal sent to it, and within a few seconds no rank and no
child may be alive. Whatever is still alive at the end is killed by its pid.

Cost: a few seconds per test (one launcher, two ranks of `python -c`).

    python -m pytest -q perf/torch/test_launch_local.py
"""
import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.join(HERE, "launch_local.py")

# a rank: its pid and its child's pid to DIR/pid-RANK, then sleep
RANK = r"""
import os, subprocess, sys, time
d = sys.argv[1]
child = subprocess.Popen(["sleep", "60"])
tmp = os.path.join(d, "pid-%s.tmp" % os.environ["RANK"])
with open(tmp, "w") as f:
    f.write("%d %d\n" % (os.getpid(), child.pid))
os.rename(tmp, os.path.join(d, "pid-%s" % os.environ["RANK"]))
time.sleep(60)
"""


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def read_pids(d, n, wait=20.0):
    end = time.monotonic() + wait
    while time.monotonic() < end:
        files = [os.path.join(d, f"pid-{r}") for r in range(n)]
        if all(os.path.exists(f) for f in files):
            return [int(x) for f in files for x in open(f).read().split()]
        time.sleep(0.05)
    raise AssertionError(f"the ranks did not start within {wait} s")


def wait_dead(pids, within):
    end = time.monotonic() + within
    while time.monotonic() < end and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def cleanup(pids):
    for p in pids:
        if alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_timeout_stops_every_rank_and_its_children(tmp_path):
    """`timeout 2 launch_local.py ...` signals the launcher only."""
    cmd = ["timeout", "-k", "5", "2", sys.executable, LAUNCH, "-n", "2", "--",
           sys.executable, "-c", RANK, str(tmp_path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    pids = []
    try:
        pids = read_pids(tmp_path, 2)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 124, err.decode()
        left = wait_dead(pids, 5.0)
        assert not left, f"still alive 5 s after timeout returned: {left} " \
                         f"(of ranks+children {pids})"
    finally:
        proc.kill()
        cleanup(pids)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT,
                                 signal.SIGHUP])
def test_signal_stops_every_rank_and_exits_128_plus_sig(tmp_path, sig):
    proc = subprocess.Popen([sys.executable, LAUNCH, "-n", "2", "--",
                             sys.executable, "-c", RANK, str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pids = []
    try:
        pids = read_pids(tmp_path, 2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        left = wait_dead(pids, 5.0)
        assert not left, f"still alive 5 s after {sig.name}: {left} " \
                         f"(of ranks+children {pids})"
        assert proc.returncode == 128 + sig, (proc.returncode, err.decode())
    finally:
        proc.kill()
        cleanup(pids)


def test_failing_rank_stops_the_others_and_their_children(tmp_path):
    """Rank 1 exits 3 once it has started; rank 0 and both children go."""
    prog = RANK.replace("time.sleep(60)",
                        "time.sleep(0.5 if os.environ['RANK'] == '1' else 60)"
                        "; sys.exit(3)")
    proc = subprocess.Popen([sys.executable, LAUNCH, "-n", "2", "--",
                             sys.executable, "-c", prog, str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pids = []
    try:
        pids = read_pids(tmp_path, 2)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 3, err.decode()
        left = wait_dead(pids, 5.0)
        assert not left, f"still alive: {left} (of ranks+children {pids})"
    finally:
        proc.kill()
        cleanup(pids)
