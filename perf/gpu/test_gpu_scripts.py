"""test_gpu_scripts.py: the GPU check's scripts (perf/gpu/run.sh,
bench_gpu.py, bench_select.py, and the parts of perf/torch/bench_ops.py they
import) do what a first GPU run needs, checked without a GPU.

Idea: what failed or would fail on a GPU is reproduced on a device that
exists here. A device that refuses to mix its tensors with non-scalar CPU
tensors, as CUDA does: torch_simdev's "simdev" when `import torch_simdev`
works, else torch's "meta" device (it refuses the same mixes, "Tensor on
device cpu is not on the expected device meta!", but holds no values, so on
meta only the device rule is checked; the values are checked on the CPU).
The run.sh tests run the dry run's steps with the build in $GCX_BUILD
(default build/ in the checkout; skipped when its torch_gcx is missing),
with small per-step limits, and look at the files it writes.

Cost: the unit tests, well under a second; the run.sh and bench_gpu.py
ones start 1-2 ranks of Python with torch (a few seconds each on a loaded
2-core box, ~30 s in all).

    python -m pytest -q perf/gpu/test_gpu_scripts.py
"""
import glob
import json
import os
import subprocess
import sys
import time

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "perf", "torch"))
sys.path.insert(0, HERE)
import bench_ops as B  # noqa: E402

BUILD = os.path.abspath(os.environ.get("GCX_BUILD",
                                       os.path.join(ROOT, "build")))
PLUGIN = os.path.join(BUILD, "plugin", "torch")
HAVE_BUILD = bool(glob.glob(os.path.join(PLUGIN, "torch_gcx", "_C*.so")))
needs_build = pytest.mark.skipif(
    not HAVE_BUILD, reason=f"no torch_gcx built in {PLUGIN} (GCX_BUILD)")

try:
    import torch_simdev  # noqa: F401  the simulated device "simdev"
    REFUSING = "simdev"
except ImportError:
    REFUSING = "meta"


class DevBufs(B.Buffers):
    def __init__(self, n, device):  # noqa: D107
        self.big = torch.empty(n, dtype=torch.float32, device=device)
        self.big2 = torch.empty(n, dtype=torch.float32, device=device)


def expected_outputs(op, views, p):
    """What one call of op leaves in the views (computed on the CPU)."""
    if op in ("all_reduce", "reduce_scatter"):
        views[0].fill_(p * (p + 1) / 2)
    elif op == "broadcast":
        views[0].fill_(7.0)
    else:
        out = views[0].view(p, -1)
        for i in range(p):
            out[i].fill_(i + 1)


def test_stand_in_refuses_mixing_like_cuda():
    """The premise: the device chosen here refuses a (p, 1) CPU tensor."""
    t = torch.zeros(3, 2, device=REFUSING)
    with pytest.raises(RuntimeError):
        t != torch.ones(3, 1)
    t != torch.tensor(1.0)  # a 0-dim CPU tensor (a scalar) is allowed


@pytest.mark.parametrize("op", B.OPS)
def test_wrong_never_mixes_devices(op):
    """bench_ops.Buffers.wrong on the output's device (bench_gpu.py calls it
    on CUDA tensors): no CPU tensor may enter the comparison."""
    p = 4
    bufs = DevBufs(64, REFUSING)
    views = bufs.setup(op, 64, 1, p)
    if REFUSING == "meta":
        # meta holds no values: the comparison and the count must run on
        # meta; reading the count out (.item()) is then all that fails
        with pytest.raises(RuntimeError,
                           match="cannot be called on meta tensors"):
            B.Buffers.wrong(op, views, p)
    else:
        expected_outputs(op, views, p)
        assert B.Buffers.wrong(op, views, p) == 0


@pytest.mark.parametrize("op", B.OPS)
def test_wrong_counts_on_cpu(op):
    p = 4
    bufs = DevBufs(64, "cpu")
    views = bufs.setup(op, 64, 1, p)
    expected_outputs(op, views, p)
    assert B.Buffers.wrong(op, views, p) == 0
    views[0].view(-1)[-1] = -5.0
    assert B.Buffers.wrong(op, views, p) == 1


def test_summarize_without_contenders():
    """Every contender unsupported: a table (a header) still comes back."""
    lines, srows = B.summarize([], [], 2, "loopback")
    assert lines[0].startswith("| op | size") and srows == []


def test_summarize_lists_unsupported_contenders():
    row = {"round": 1, "backend": "gloo-dev", "op": "all_reduce", "ranks": 2,
           "size": 1024, "count": 256, "time_us": 10.0, "algbw_gbps": 0.1,
           "busbw_gbps": 0.1, "wrong": 0}
    err = "all_reduce: No backend type associated with device type cuda"
    lines, srows = B.summarize([row], ["gcx-dev", "gloo-dev"], 2, "loopback",
                               unsupported={"gcx-dev": err})
    text = "\n".join(lines)
    assert "gloo-dev time (us)" in text and "10.0" in text
    assert f"gcx-dev: unsupported: {err}" in text
    lines, _ = B.summarize([], ["gcx-dev", "gloo-dev"], 2, "loopback",
                           unsupported={"gcx-dev": err, "gloo-dev": "x"})
    assert "gloo-dev: unsupported: x" in "\n".join(lines)


def test_ops_tables_every_contender_unsupported():
    """bench_gpu.ops_tables: both tables, with the errors, no rows at all."""
    import bench_gpu as G
    uns = {"gcx-dev all_reduce": "e1", "gloo-dev all_reduce": "e2",
           "gcx-host all_reduce": "e3"}
    tables = G.ops_tables([], uns, 2)
    assert set(tables) == {"gcx-dev/gloo-dev", "gcx-dev/gcx-host"}
    text = "\n".join(tables["gcx-dev/gloo-dev"]["markdown"])
    assert "gcx-dev all_reduce: unsupported: e1" in text
    assert "gloo-dev all_reduce: unsupported: e2" in text


# ---- the scripts themselves, on the CPU and the meta device --------------

def env_with_build():
    env = dict(os.environ)
    env["PYTHONPATH"] = PLUGIN + (":" + env["PYTHONPATH"]
                                  if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


@needs_build
def test_bench_gpu_ops_writes_its_file_when_device_contenders_fail(tmp_path):
    """--device meta: gcx-dev and gloo-dev cannot run a collective on meta
    tensors (as gcx without CUDA support could not on cuda ones); gcx-host
    runs; ops-p2.json is written with both tables and the errors."""
    cmd = [sys.executable, os.path.join(ROOT, "perf/torch/launch_local.py"),
           "-q", "-n", "2", "--timeout", "120", "--", sys.executable,
           os.path.join(HERE, "bench_gpu.py"), "ops", "--device", "meta",
           "-b", "4K", "-e", "4K", "--rounds", "1", "--iters", "1",
           "--warmup", "0", "--out", str(tmp_path)]
    r = subprocess.run(cmd, env=env_with_build(), capture_output=True,
                       text=True, timeout=180)
    path = tmp_path / "ops-p2.json"
    assert path.exists(), r.stdout + r.stderr
    o = json.loads(path.read_text())
    assert set(o["tables"]) == {"gcx-dev/gloo-dev", "gcx-dev/gcx-host"}
    assert any(k.startswith("gcx-dev") for k in o["unsupported"])
    assert any(k.startswith("gloo-dev") for k in o["unsupported"])
    assert {r["backend"] for r in o["rows"]} == {"gcx-host"}
    assert "unsupported" in "\n".join(o["tables"]["gcx-dev/gloo-dev"]
                                      ["markdown"])


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def pids_mentioning(text):
    """Processes whose command line contains text (a unique tmp path)."""
    out = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(os.path.join(d, "cmdline"), "rb") as f:
                if text.encode() in f.read():
                    out.append(int(os.path.basename(d)))
        except OSError:
            pass
    return [p for p in out if p != os.getpid() and alive(p)]


def run_sh(out, env_extra, timeout=240):
    env = env_with_build()
    env.update(BUILD=BUILD, PYTHON=sys.executable, DEVICE="cpu", **env_extra)
    return subprocess.run(["bash", os.path.join(HERE, "run.sh"), "--dry-run",
                           str(out)], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@needs_build
def test_run_sh_step_timeout_kills_ranks_and_writes_results(tmp_path):
    """select runs and its table is kept; ops-p2 runs out of its (tiny)
    limit: its ranks are gone when run.sh is, and results.md/json are
    written with what there is (the rows rank 0 had, if any). A stale ops-p8.json from an earlier run in
    the same folder (here: a truncated one) is not reported."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "ops-p8.json").write_text('{"ranks": 8, "rows": [')
    # ROUNDS (bench_gpu.py's default --rounds): far more than 3 s of work
    r = run_sh(out, {"STEPS": "select,ops-p2", "LIMIT_ops_p2": "3",
                     "ROUNDS": "100000"})
    log = r.stdout + r.stderr
    try:
        assert r.returncode == 1, log
        md = (out / "results.md").read_text()
        res = json.loads((out / "results.json").read_text())
        assert "ops-p2: timed out after 3 s" in md, md
        assert "## Top-k selection" in md and res["select"], md
        assert "8 processes" not in md, md
        assert "## Collectives, 2 processes" in md, md
        # what rank 0 measured before SIGTERM, if it got that far, is kept
        if res["ops"]:
            assert "Stopped: stopped by SIGTERM" in res["ops"][0]["error"]
            assert "ops-p2 stopped: Stopped" in md
        time.sleep(1)
        assert not pids_mentioning(str(out)), "ranks left alive"
    finally:
        for p in pids_mentioning(str(out)):
            os.kill(p, 9)


@needs_build
def test_run_sh_dry_run_does_not_rebuild_an_existing_build(tmp_path):
    """--dry-run with BUILD holding a built torch_gcx: no ninja, no meson
    (the build may be shared); the build step is reported as reused."""
    r = run_sh(tmp_path, {"STEPS": "none"})
    log = (tmp_path / "log.txt").read_text()
    assert "ninja" not in log and "meson" not in log, log
    assert "build: ok (reused" in (tmp_path / "results.md").read_text()


def test_report_survives_broken_and_missing_files(tmp_path):
    """run.sh's last step: a step killed while writing (a truncated JSON),
    one that timed out before writing, an empty tests.txt: results.md and
    results.json are written, with every section and what stopped it."""
    import bench_gpu as G
    (tmp_path / "tests.txt").write_text("")
    (tmp_path / "ops-p2.json").write_text('{"ranks": 2, "rows": [')
    ddp = {"ranks": 2, "device": "cpu", "rows": [], "unsupported": {},
           "markdown": G.ddp_markdown([], {"resnet50 gloo": "E"}),
           "error": "Stopped: stopped by SIGTERM (a time limit?)"}
    (tmp_path / "ddp-p2.json").write_text(json.dumps(ddp))
    status = ["build: ok", "cuda-tests: failed (rc 2, see log.txt)",
              "select: timed out after 40 s", "ops-p2: timed out after 80 s",
              "ops-p4: skipped (budget spent)",
              "ddp-p2: timed out after 440 s"]
    md = G.report(str(tmp_path), True, "cpu", status)
    assert md == (tmp_path / "results.md").read_text()
    res = json.loads((tmp_path / "results.json").read_text())
    for head in ("## CUDA tests", "## Top-k selection",
                 "## Collectives, 2 processes", "## Collectives, 4 processes",
                 "## DDP step, 2 processes"):
        assert head in md, head
    assert "(no table: select timed out after 40 s)" in md
    assert "(no tables: ops-p4 skipped (budget spent))" in md
    assert "resnet50 gloo: unsupported: E" in md and "stopped by SIGTERM" in md
    assert res["steps"] == status and len(res["ddp"]) == 1
    assert any("ops-p2.json unreadable" in x for x in res["problems"])
