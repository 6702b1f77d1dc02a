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

    perf/torch/launch_local.py -n 2 [--timeout SEC] [-q] [--no-prefix] [--keep-going] -- PROGRAM ARGS...

Cost: one process per rank plus a reader thread per stream; nothing polls.
"""
import argparse
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
    ap.add_argument("program", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    prog = args.program[1:] if args.program[:1] == ["--"] else args.program
    if args.n < 1 or not prog:
        ap.error("need -n >= 1 and a PROGRAM")
    port = os.environ.get("MASTER_PORT") or str(free_port())
    procs, threads = [], []
    for r in range(args.n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.n), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(args.n), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        env.setdefault("OMP_NUM_THREADS", "1")
        p = subprocess.Popen(prog, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        procs.append(p)
        for stream, out, show in ((p.stdout, sys.stdout, r == 0 or not args.q),
                                  (p.stderr, sys.stderr, True)):
            t = threading.Thread(target=pump, args=(stream, out, "" if args.no_prefix else f"[{r}] ", show), daemon=True)
            t.start()
            threads.append(t)
    deadline = time.monotonic() + args.timeout if args.timeout > 0 else None
    rc, why = 0, None
    try:
        while any(p.poll() is None for p in procs):
            bad = [p for p in procs if p.poll() not in (None, 0)]
            if bad and why is None and not args.keep_going:
                rc, why = bad[0].returncode, f"rank {procs.index(bad[0])} exited with {bad[0].returncode}"
            if deadline is not None and time.monotonic() > deadline and why is None:
                rc, why = 124, f"timeout after {args.timeout:g} s"
            if why is not None:
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        rc, why = 130, "interrupted"
    if why is not None:
        print(f"[launch] {why}: stopping the ranks", file=sys.stderr)
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        end = time.monotonic() + 5
        while any(p.poll() is None for p in procs) and time.monotonic() < end:
            time.sleep(0.05)
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        p.wait()
    for t in threads:
        t.join(timeout=2)
    if rc == 0:
        rc = next((p.returncode for p in procs if p.returncode != 0), 0)
        if rc < 0:
            rc = 128 - rc
    return rc


if __name__ == "__main__":
    sys.exit(main())
