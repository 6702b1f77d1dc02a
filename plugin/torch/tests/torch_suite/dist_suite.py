"""One run of PyTorch's own distributed test suite for one backend and world size.

The suite is torch/testing/_internal/distributed/distributed_test.py, shipped
in the torch wheel: its DistributedTest._DistTestBase tests, driven by the
environment as PyTorch's test/distributed/test_distributed_spawn.py drives
them (BACKEND, WORLD_SIZE, TEMP_DIR; each test starts WORLD_SIZE processes,
by spawn as upstream does, or by fork with START=fork). This module is run
by run_suite.py, one process per (backend, world size), because the suite
reads BACKEND when it is imported:

    BACKEND=gcx WORLD_SIZE=2 python dist_suite.py OUT.json [TEST_NAME ...]

With no names it runs every test. OUT.json gets each test's outcome
(passed/failed/skipped), its seconds and, for a failure or skip, the last
lines of the reason (rewritten after each test: a killed run keeps them).

gcx is a third-party CPU backend. The suite knows backends by name; its
tables (common_distributed.DistTestCases and the profiling lists) are where a
backend states what it implements, and this module states gcx's there
before the suite is imported: "plugin" (a registered backend), "ddp" (CPU
DDP), and the two profiling lists (gcx is checked for the same profiler
events as gloo). gcx is left out of "gpu", "cuda" and "subgroup" (CUDA
subgroups): it has no CUDA tensors. It is not put in any skip_collective
set, so every CPU collective is run on it. Tests that the suite gates on
the name "gloo" itself skip for gcx; with GATES=gloo they run on gcx too
(below). Nothing else of the suite is changed.

Cost: importing torch and the suite (~3-5 s of CPU per process); each test
then starts WORLD_SIZE processes (spawn: each imports torch again).
"""
import json
import os
import sys
import time
import traceback
import unittest

import torch
from torch.testing._internal import common_distributed

BACKEND = os.environ["BACKEND"]
# GATES=gloo (gcx only): the suite's skip decorators, which it evaluates when
# it is imported, see BACKEND=gloo, so gcx runs every test that gloo runs,
# including the ones the suite keeps to the name "gloo"; the tests
# themselves then see BACKEND=gcx (their process groups are gcx's)
GATES = os.environ.get("GATES", BACKEND)
if GATES != BACKEND and (GATES, BACKEND) != ("gloo", "gcx"):
    sys.exit(f"dist_suite.py: GATES={GATES} is for BACKEND=gcx only")

if BACKEND == "gcx":
    import torch_gcx  # noqa: F401  (registers the backend)

    features = common_distributed.DistTestCases.backend_feature
    features["plugin"].add("gcx")
    features["ddp"].add("gcx")

# the suite: imported after the tables above, which its skip decorators read
os.environ["BACKEND"] = GATES
from torch.testing._internal.distributed import distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)

os.environ["BACKEND"] = distributed_test.BACKEND = BACKEND
if BACKEND == "gcx":
    distributed_test.PROFILING_SUPPORTED_BACKENDS.append("gcx")
    distributed_test.SEND_RECV_PROFILING_SUPPORTED_BACKENDS.append("gcx")

START = os.environ.get("START", "spawn")


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    """test_distributed_spawn.py's class: the suite's tests, processes per test."""

    def setUp(self):
        super().setUp()
        if START == "fork":
            # what MultiProcessTestCase._fork_processes did before torch 2.x
            # dropped it: the ranks are copies of this process
            self._start_processes(torch.multiprocessing.get_context("fork").Process)
        else:
            self._spawn_processes()


def _reason(text, lines=12):
    """The last lines of a traceback or skip message (the part that says why)."""
    text = str(text).strip().splitlines()
    return "\n".join(text[-lines:])


class _Recorder(unittest.TestResult):
    """Each test's outcome and time, written as they finish."""

    def __init__(self, path, meta):
        super().__init__()
        self.path = path
        self.doc = dict(meta, tests={})
        self._t0 = 0.0

    def startTest(self, test):
        super().startTest(test)
        self._t0 = time.monotonic()
        print(f"{test._testMethodName} ...", end=" ", flush=True)

    def _record(self, test, outcome, detail=""):
        name = test._testMethodName
        secs = round(time.monotonic() - self._t0, 2)
        self.doc["tests"][name] = {"outcome": outcome, "seconds": secs}
        if detail:
            self.doc["tests"][name]["detail"] = _reason(detail)
        print(f"{outcome} ({secs} s)", flush=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


def all_tests():
    """The names of the suite's tests (parametrized ones expanded)."""
    return unittest.TestLoader().getTestCaseNames(TestDistBackendWithSpawn)


def main(argv):
    out, names = argv[0], argv[1:]
    if not names:
        names = all_tests()
    known = set(all_tests())
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"dist_suite.py: not tests of the suite: {' '.join(unknown)}")
    meta = {
        "backend": BACKEND,
        "gates": GATES,
        "world_size": int(os.environ["WORLD_SIZE"]),
        "start": START,
        "torch": torch.__version__,
    }
    result = _Recorder(out, meta)
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in names)
    t0 = time.monotonic()
    try:
        suite.run(result)
    except Exception:  # a crash of the runner itself, not of a test
        traceback.print_exc()
        return 2
    print(f"{BACKEND} ws={meta['world_size']}: {len(result.doc['tests'])} tests "
          f"in {time.monotonic() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
