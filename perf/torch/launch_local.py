#!/usr/bin/env python3
"""launch_local.py: start N local ranks of a program, torchrun-style.

Idea: the smallest launcher that gives each rank what torchrun's env://
rendezvous reads (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR=127.0.0.1, a free MASTER_PORT), so bench_ops.py and ddp_tta.py
run the same way on loopback as under perf/cluster/emulate.sh. No elastic
agent, no restarts: when one rank fails or the --timeout passes, the others
are killed and the first failing status is returned (with --keep-going
the others run on: a rank that kills itself on purpose, coded_tta.py's
--kill-rank). Each rank's output
lines are prefixed with [rank] (as emulate.sh does; not with --no-prefix); with -q only rank 0's
stdout is shown (stderr of every rank always is).

Stopping: each rank runs in its own session and process group (so a rank
that forks, as python ranks do, is stopped with its children). When the
launcher stops the ranks (a rank failed, --timeout, or the launcher got
SIGTERM, SIGINT or SIGHUP, e.g. from `timeout`, which signals only its own
child), it sends SIGTERM to every rank's process group, leader alive or
not, then SIGKILL after --grace seconds (default 3), and exits with the
first failing rank's status, 124 for --timeout, or 128+signal. Each rank
also gets SIGKILL if the launcher dies without stopping it (Linux's
PR_SET_PDEATHSIG; e.g. `timeout --kill-after` after the grace: keep that
longer than --grace).

    perf/torch/launch_local.py -n 2 [--timeout SEC] [-q] [--no-prefix] [--keep-going] -- PROGRAM ARGS...

Cost: one process per rank plus a reader thread per stream; the launcher looks
at the ranks every 50 ms.
"""
import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stop(Exception):
    """A signal told the launcher to stop (its number in .signum)."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


_stopping = []


def on_signal(signum, frame):
    # once: `timeout` signals the launcher and then its process group, so the
    # same SIGTERM may come twice; the second must not break the stopping
    if not _stopping:
        _stopping.append(signum)
        raise Stop(signum)


def die_with_parent():
    """In the rank, before exec: SIGKILL when the launcher dies (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def killpg(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_all(procs, grace):
    """SIGTERM to every rank's process group (a rank that exited may have left
    children in it), SIGKILL to the groups after `grace` s; waits for the ranks."""
    for p in procs:
        killpg(p.pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while any(p.poll() is None for p in procs) and time.monotonic() < end:
        time.sleep(0.05)
    for p in procs:
        killpg(p.pid, signal.SIGKILL)
    for p in procs:
        p.wait()


def pump(stream, out, prefix, show):
    for line in iter(stream.readline, b""):
        if show:
            out.write(prefix + line.decode(errors="replace"))
            out.flush()
    stream.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, required=True, help="number of ranks")
    ap.add_argument("--timeout", type=float, default=0, help="kill all ranks after SEC (0: never)")
    ap.add_argument("-q", action="store_true", help="show only rank 0's stdout")
    ap.add_argument("--no-prefix", action="store_true", help="no [rank] before each line")
    ap.add_argument("--keep-going", action="store_true",
                    help="do not stop the other ranks when one fails (the status is still "
                         "the first failing one's)")
    ap.add_argument("--grace", type=float, default=3.0,
                    help="seconds between SIGTERM and SIGKILL to the ranks' groups (default 3)")
    ap.add_argument("program", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    prog = args.program[1:] if args.program[:1] == ["--"] else args.program
    if args.n < 1 or not prog:
        ap.error("need -n >= 1 and a PROGRAM")
    port = os.environ.get("MASTER_PORT") or str(free_port())
    procs, threads = [], []
    rc, why = 0, None
    # a signal from here on stops the ranks started so far (handlers raise Stop)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        for r in range(args.n):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.n), LOCAL_RANK=str(r),
                       LOCAL_WORLD_SIZE=str(args.n), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")
            env.setdefault("OMP_NUM_THREADS", "1")
            # preexec_fn before any reader thread is started (fork with threads is unsafe)
            p = subprocess.Popen(prog, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True, preexec_fn=die_with_parent)
            procs.append(p)
        for r, p in enumerate(procs):
            for stream, out, show in ((p.stdout, sys.stdout, r == 0 or not args.q),
                                      (p.stderr, sys.stderr, True)):
                t = threading.Thread(target=pump, args=(stream, out, "" if args.no_prefix else f"[{r}] ", show), daemon=True)
                t.start()
                threads.append(t)
        deadline = time.monotonic() + args.timeout if args.timeout > 0 else None
        while any(p.poll() is None for p in procs):
            bad = [p for p in procs if p.poll() not in (None, 0)]
            if bad and why is None and not args.keep_going:
                rc, why = bad[0].returncode, f"rank {procs.index(bad[0])} exited with {bad[0].returncode}"
            if deadline is not None and time.monotonic() > deadline and why is None:
                rc, why = 124, f"timeout after {args.timeout:g} s"
            if why is not None:
                break
            time.sleep(0.05)
    except Stop as e:
        rc, why = 128 + e.signum, f"got {signal.Signals(e.signum).name}"
    # while stopping, a second signal changes nothing (the ranks are stopped anyway)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    if why is not None:
        print(f"[launch] {why}: stopping the ranks", file=sys.stderr, flush=True)
        stop_all(procs, args.grace)
    for p in procs:
        p.wait()
    for t in threads:
        t.join(timeout=2)
    if rc == 0:
        rc = next((p.returncode for p in procs if p.returncode != 0), 0)
    if rc < 0:  # a rank killed by a signal
        rc = 128 - rc
    return rc


if __name__ == "__main__":
    sys.exit(main())
