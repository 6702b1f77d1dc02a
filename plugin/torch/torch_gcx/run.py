"""python -m torch_gcx.run: start N local ranks of a torch.distributed
script so that shrink-and-continue (torch_gcx.elastic) can happen.

    python -m torch_gcx.run -n 4 train.py ARGS...
    python -m torch_gcx.run -n 4 -m package.module ARGS...

Idea: torchrun's agent ends every surviving worker (SIGTERM, then SIGKILL)
about one monitor interval (0.1 s) after one of them fails, whatever its
options (torch.distributed.elastic's SubprocessContext closes the whole
local group on the first failure, then the agent restarts or stops it), so
ElasticDDP's survivors never get to shrink. This launcher keeps them: a
rank that dies is reported on stderr and the others go on.

The ranks get torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT), so
init_process_group("gcx") with env:// works unchanged. The c10d TCPStore is
served by this launcher, not by rank 0 (TORCHELASTIC_USE_AGENT_STORE=True
makes every rank a client of it, torch's own mechanism for an agent's
store): torch.distributed.shrink_group clones the Store, so with the store
here any rank may die, rank 0 included. GCX_JOB_TOKEN: 128 random bits per
job unless set (rank 0's gcx bootstrap admits only this job's ranks);
TORCH_GCX_LAUNCHER=torch_gcx.run tells torch_gcx it runs here;
OMP_NUM_THREADS=1 unless set (as torchrun does for more than one rank).

Exit status: 0 when every rank exited 0, or when at most --max-failures
ranks failed (died or exited non-zero) and every other rank exited 0: the
job went on without them. Otherwise the first failing rank's status
(128 + signal for a signal), and with more than --max-failures failures the
remaining ranks are stopped (SIGTERM, SIGKILL 5 s later), as gcxrun does
without --keep-going. --max-failures 0 is torchrun's behaviour (stop all at
the first failure). --timeout S stops the job after S seconds (status 124).
SIGINT/SIGTERM are passed to the ranks (a second one: SIGKILL).

One host only, like gcxrun (on a cluster: a launcher that leaves the
survivors running, e.g. srun with --kill-on-bad-exit=0, see
plugin/torch/README.md).

Cost: one Python process beside the ranks: a polling loop (50 ms) and the
store's thread; with -t, a thread per rank stream copying lines.
"""
import argparse
import os
import secrets
import signal
import subprocess
import sys
import threading
import time

KILL_GRACE_S = 5.0
LAUNCHER_NAME = "torch_gcx.run"


def _parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m torch_gcx.run",
        description="Start N local ranks of a torch.distributed script; a "
                    "rank that dies does not stop the others (shrink and "
                    "continue with torch_gcx.elastic).")
    p.add_argument("-n", "--nproc-per-node", "--nprocs", dest="nprocs",
                   type=int, required=True, help="number of ranks")
    p.add_argument("-m", "--module", action="store_true",
                   help="run the program as a module (python -m)")
    p.add_argument("--no-python", action="store_true",
                   help="run the program itself, not with this Python")
    p.add_argument("-t", "--tag-output", action="store_true",
                   help="prefix every output line with [rank]")
    p.add_argument("--max-failures", type=int, default=None,
                   help="failed ranks the job tolerates (default: N - 1); "
                        "one more stops the rest")
    p.add_argument("--timeout", type=float, default=0,
                   help="stop the job after this many seconds (exit 124)")
    p.add_argument("--master-addr", default="127.0.0.1",
                   help="address the store listens on (default 127.0.0.1)")
    p.add_argument("--master-port", type=int, default=0,
                   help="the store's port (default: a free one)")
    p.add_argument("program")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    if a.nprocs < 1:
        p.error("-n must be at least 1")
    if a.max_failures is None:
        a.max_failures = a.nprocs - 1
    if a.max_failures < 0:
        p.error("--max-failures must be >= 0")
    return a


def _copy_lines(src, dst, rank):
    for line in iter(src.readline, b""):
        dst.buffer.write(b"[%d] " % rank + line)
        dst.flush()
    src.close()


def _describe(rc):
    if rc < 0:
        return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


def _status(rc):
    return 128 - rc if rc < 0 else rc


def main(argv=None):
    a = _parse(sys.argv[1:] if argv is None else argv)
    # the store: in this process, so that it outlives every rank
    import datetime
    import torch.distributed as dist
    store = dist.TCPStore(a.master_addr, a.master_port, is_master=True,
                          wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=300))
    port = store.port
    if a.no_python:
        cmd = [a.program]
    elif a.module:
        cmd = [sys.executable, "-u", "-m", a.program]
    else:
        cmd = [sys.executable, "-u", a.program]
    cmd += a.args
    base = dict(os.environ)
    base.setdefault("OMP_NUM_THREADS", "1")
    if not base.get("GCX_JOB_TOKEN"):
        base["GCX_JOB_TOKEN"] = secrets.token_hex(16)
    base.update({"WORLD_SIZE": str(a.nprocs),
                 "LOCAL_WORLD_SIZE": str(a.nprocs), "GROUP_RANK": "0",
                 "MASTER_ADDR": a.master_addr, "MASTER_PORT": str(port),
                 "TORCHELASTIC_USE_AGENT_STORE": "True",
                 "TORCH_GCX_LAUNCHER": LAUNCHER_NAME})
    # torchrun's own variables would make torch_gcx (and others) take this
    # job for a torchrun one
    for k in list(base):
        if k in ("TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
                 "TORCHELASTIC_MAX_RESTARTS"):
            del base[k]
    got = {"sig": 0}

    def on_signal(sig, _frame):
        got["sig"] = sig

    old = {s: signal.signal(s, on_signal)
           for s in (signal.SIGINT, signal.SIGTERM)}
    procs, threads = [], []
    for rank in range(a.nprocs):
        env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
        pipe = subprocess.PIPE if a.tag_output else None
        p = subprocess.Popen(cmd, env=env, stdout=pipe, stderr=pipe)
        procs.append(p)
        if a.tag_output:
            for src, dst in ((p.stdout, sys.stdout), (p.stderr, sys.stderr)):
                t = threading.Thread(target=_copy_lines, args=(src, dst, rank),
                                     daemon=True)
                t.start()
                threads.append(t)
    deadline = time.monotonic() + a.timeout if a.timeout > 0 else None
    failed = []          # ranks in the order they failed
    done = {}
    kill_at = None
    timed_out = False
    forwarded = 0

    def signal_all(sig):
        for r, p in enumerate(procs):
            if r not in done:
                try:
                    p.send_signal(sig)
                except ProcessLookupError:
                    pass

    while len(done) < a.nprocs:
        for r, p in enumerate(procs):
            if r in done:
                continue
            rc = p.poll()
            if rc is None:
                continue
            done[r] = rc
            if rc != 0:
                failed.append(r)
                left = a.nprocs - len(done)
                stop = len(failed) > a.max_failures and left > 0
                if kill_at is None:
                    sys.stderr.write(
                        f"{LAUNCHER_NAME}: rank {r} {_describe(rc)}"
                        + ("; stopping the other ranks\n" if stop else
                           f"; {left} rank{'s' if left != 1 else ''} go on\n"
                           if left else "\n"))
                    sys.stderr.flush()
                if stop and kill_at is None:
                    signal_all(signal.SIGTERM)
                    kill_at = time.monotonic() + KILL_GRACE_S
        if got["sig"]:
            sig, got["sig"] = got["sig"], 0
            forwarded += 1
            signal_all(sig if forwarded == 1 else signal.SIGKILL)
            if kill_at is None:
                kill_at = time.monotonic() + KILL_GRACE_S
        if deadline is not None and not timed_out and \
                time.monotonic() > deadline:
            sys.stderr.write(f"{LAUNCHER_NAME}: --timeout of {a.timeout:g} s "
                             f"reached; stopping the job\n")
            timed_out = True
            signal_all(signal.SIGTERM)
            kill_at = time.monotonic() + KILL_GRACE_S
        if kill_at is not None and time.monotonic() > kill_at:
            signal_all(signal.SIGKILL)
        time.sleep(0.05)
    for t in threads:
        t.join()
    for s, h in old.items():
        signal.signal(s, h)
    if timed_out:
        return 124
    if not failed:
        return 0
    ok = [r for r in range(a.nprocs) if done[r] == 0]
    sys.stderr.write(f"{LAUNCHER_NAME}: {len(ok)} of {a.nprocs} ranks "
                     f"finished; failed: "
                     + ", ".join(f"rank {r} ({_describe(done[r])})"
                                 for r in failed) + "\n")
    if len(failed) <= a.max_failures and ok and forwarded == 0:
        return 0
    return _status(done[failed[0]])


if __name__ == "__main__":
    sys.exit(main())
