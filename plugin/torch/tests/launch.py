"""Start SIZE ranks of worker.py and wait for them; on a hang (no exit within
the timeout) kill every rank, so a test fails instead of stalling."""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def launch(scenario, size, timeout=120, env=None, script="worker.py",
           stopped=()):
    """Run the scenario of SCRIPT (worker.py or hooks_worker.py) on SIZE
    ranks; returns [(returncode, output)]. The ranks in `stopped` (ones that
    SIGSTOP themselves) are not waited for: SIGKILLed once the others have
    exited (their returncode is then -9)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        full_env = dict(os.environ, OMP_NUM_THREADS="1")
        full_env.update(env or {})
        procs = []
        for rank in range(size):
            out = open(os.path.join(tmp, f"out{rank}"), "w+")
            p = subprocess.Popen(
                [sys.executable, os.path.join(HERE, script), scenario,
                 str(rank), str(size), store],
                stdout=out, stderr=subprocess.STDOUT, env=full_env)
            procs.append((p, out))
        deadline = time.monotonic() + timeout
        hung = False
        for r, (p, _) in enumerate(procs):
            if r in stopped:
                continue
            left = deadline - time.monotonic()
            try:
                p.wait(timeout=max(left, 0.1))
            except subprocess.TimeoutExpired:
                hung = True
                break
        if hung or stopped:
            for p, _ in procs:
                if p.poll() is None:
                    p.kill()
            for p, _ in procs:
                p.wait()
        results = []
        for p, out in procs:
            out.seek(0)
            results.append((p.returncode, out.read()))
            out.close()
        if hung:
            logs = "\n".join(f"--- rank {r} (rc {rc}) ---\n{o[-3000:]}"
                             for r, (rc, o) in enumerate(results))
            raise AssertionError(f"{scenario} on {size} ranks hung for "
                                 f"{timeout} s; killed.\n{logs}")
        return results


def check_ok(scenario, size, **kw):
    results = launch(scenario, size, **kw)
    bad = [(r, rc, o) for r, (rc, o) in enumerate(results) if rc != 0]
    if bad:
        logs = "\n".join(f"--- rank {r} (rc {rc}) ---\n{o[-4000:]}"
                         for r, rc, o in bad)
        raise AssertionError(f"{scenario} on {size} ranks failed:\n{logs}")
    return [o for _, o in results]


class cpu_hog:
    """A busy loop in another process while the block runs (what a loaded
    machine does to the ranks' timing); killed at the end."""

    def __enter__(self):
        self.p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        return self

    def __exit__(self, *exc):
        self.p.kill()
        self.p.wait()
        return False
