"""pytest suite of the gcx backend under the tools PyTorch users run it with:
torchrun with a plain DDP script, PyTorch Lightning's DDP strategy with
process_group_backend="gcx", and torch's own compress hooks (fp16, bf16,
PowerSGD) converging as they do on gloo. Each run is checked against gloo
(ecosystem_worker.py says how).

torchrun runs get their own process group (session): on a hang the whole
group is killed, so a test fails instead of stalling.

Cost: 3 torchrun jobs of 2 ranks (Lightning's import adds ~3 s a rank) and
one launch.py job; ~1 minute on 2 cores."""
import os
import signal
import subprocess
import sys
import tempfile

import pytest
import torch

from launch import check_ok

HERE = os.path.dirname(os.path.abspath(__file__))


def torchrun(args, nproc=2, timeout=180):
    """Run ecosystem_worker.py ARGS under torchrun on NPROC local ranks;
    returns the ranks' output (rank order); fails on a non-zero exit or a
    hang, showing every rank's own output (torchrun --redirects)."""
    with tempfile.TemporaryDirectory() as logs:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={nproc}", "--log-dir", logs,
               "--redirects", "3",
               os.path.join(HERE, "ecosystem_worker.py"), *args]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env=env,
                             start_new_session=True, text=True)
        hung = False
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            hung = True
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
        ranks = ""
        for d, _, files in sorted(os.walk(logs)):
            for f in sorted(files):
                with open(os.path.join(d, f), errors="replace") as fh:
                    ranks += f"--- {os.path.relpath(os.path.join(d, f), logs)}"
                    ranks += f" ---\n{fh.read()[-4000:]}\n"
    if hung:
        raise AssertionError(f"torchrun {args} hung for {timeout} s; killed."
                             f"\n{ranks}\n{out[-2000:]}")
    assert p.returncode == 0, \
        f"torchrun {args} failed:\n{ranks}\n--- torchrun ---\n{out[-2000:]}"
    return ranks


def test_torchrun_plain_ddp_script():
    out = torchrun(["torchrun_ddp"])
    assert out.count("torchrun ddp ok") == 2, out
    assert out.count("ddp parity ok") == 2, out
    assert out.count("elastic warning ok") == 2, out


def test_lightning_ddp_strategy_matches_gloo():
    pytest.importorskip("pytorch_lightning",
                        reason="scripts/test.sh installs pytorch-lightning")
    with tempfile.TemporaryDirectory() as tmp:
        params = {}
        for backend in ("gcx", "gloo"):
            path = os.path.join(tmp, backend + ".pt")
            out = torchrun(["lightning", backend, path])
            assert out.count(f"lightning {backend} ok after 16 steps") == 2, out
            params[backend] = torch.load(path)
    assert params["gcx"].keys() == params["gloo"].keys()
    for name, p in params["gcx"].items():
        torch.testing.assert_close(p, params["gloo"][name], rtol=1e-5,
                                   atol=1e-6, msg=f"parameter {name}")


@pytest.mark.parametrize("size", [2, 3])
def test_torch_compress_hooks_converge_like_gloo(size):
    outs = check_ok("compress_hooks", size, script="ecosystem_worker.py",
                    timeout=240)
    for o in outs:
        for hook in ("fp16", "bf16", "powersgd"):
            assert f"{hook} hook converges like gloo" in o, o
