"""Shrink-and-continue resume time: how long after a rank is SIGKILLed
each survivor commits its first step on the shrunk group.

Runs plugin/torch/tests/elastic_worker.py's "kill" scenario (DDP of a tiny
MLP on 4 local ranks over gcx, torch_gcx.elastic.ElasticDDP, the victim
kills itself at the start of a seeded step) ROUNDS times; the victim writes
time.time() just before its SIGKILL, each survivor its recovery's stamps
(EVENT lines). Per survivor: detect (kill -> its failed step raised),
agree (gcx's agreement on the dead rank), drop (the old DDP collected),
shrink (torch's shrink_group),
ready (the state check and the new DDP), step (the redone step), and resume
(kill -> first committed step after the shrink), against the figure
GCX_TIMEOUT + 2 s. Wall clocks of one host, so the stamps compare.

    PYTHONPATH=build/plugin/torch python perf/torch/elastic_resume.py \\
        --rounds 5 --timeout 10

--hang: the victim SIGSTOPs itself instead, a hung rank that only
GCX_TIMEOUT finds (the script SIGKILLs it once the survivors are done).

Cost: ROUNDS launches of 4 processes (each ~10-30 s on a loaded 2-core box).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "plugin", "torch", "tests"))
from launch import launch  # noqa: E402


def run_hung(size, victim, env, tmp):
    """launch() for --hang: the stopped victim never exits, so wait for
    the survivors, then SIGKILL it; [(returncode, output)]."""
    tests = os.path.join(HERE, "..", "..", "plugin", "torch", "tests")
    full = dict(os.environ, OMP_NUM_THREADS="1", **env)
    procs = []
    for rank in range(size):
        out = open(os.path.join(tmp, f"out{rank}"), "w+")
        procs.append((subprocess.Popen(
            [sys.executable, os.path.join(tests, "elastic_worker.py"), "kill",
             str(rank), str(size), os.path.join(tmp, "store")],
            stdout=out, stderr=subprocess.STDOUT, env=full), out))
    try:
        for r, (p, _) in enumerate(procs):
            if r != victim:
                p.wait(timeout=300)
    finally:
        for p, _ in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    res = []
    for p, out in procs:
        out.seek(0)
        res.append((p.returncode, out.read()))
        out.close()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=4)
    ap.add_argument("--victim", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=10.0,
                    help="the group's timeout = GCX_TIMEOUT, seconds")
    ap.add_argument("--hang", action="store_true",
                    help="the victim SIGSTOPs itself (a hung rank, found "
                    "by GCX_TIMEOUT) instead of SIGKILL; killed at the end")
    args = ap.parse_args()
    rows = []
    for rnd in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            stamp = os.path.join(tmp, "kill")
            env = {"ELASTIC_SEED": str(100 + rnd),
                   "ELASTIC_VICTIM": str(args.victim),
                   "ELASTIC_TIMEOUT": str(args.timeout),
                   "ELASTIC_KILL_STAMP": stamp}
            if args.hang:
                env["ELASTIC_HANG"] = "1"
                res = run_hung(args.size, args.victim, env, tmp)
            else:
                res = launch("kill", args.size, timeout=300,
                             script="elastic_worker.py", env=env)
            t_kill = float(open(stamp).read())
        hashes = set()
        for r, (rc, out) in enumerate(res):
            if r == args.victim:
                continue
            if rc != 0:
                sys.exit(f"round {rnd} rank {r} failed (rc {rc}):\n{out}")
            ev = [json.loads(l[6:]) for l in out.splitlines()
                  if l.startswith("EVENT ")][0]
            hashes.update(l.split()[1] for l in out.splitlines()
                          if l.startswith("PARAMS "))
            rows.append({
                "round": rnd, "rank": r,
                "detect": ev["t_failed"] - t_kill,
                "agree": ev["t_agreed"] - ev["t_failed"],
                "drop": ev["t_dropped"] - ev["t_agreed"],
                "shrink": ev["t_shrunk"] - ev["t_dropped"],
                "ready": ev["t_ready"] - ev["t_shrunk"],
                "step": ev["t_resumed"] - ev["t_ready"],
                "resume": ev["t_resumed"] - t_kill})
        if len(hashes) != 1:
            sys.exit(f"round {rnd}: survivors' parameters differ: {hashes}")
    cols = ["detect", "agree", "drop", "shrink", "ready", "step", "resume"]
    how = "SIGSTOPped (hung)" if args.hang else "SIGKILLed"
    print(f"{args.size} local ranks, rank {args.victim} {how}, "
          f"GCX_TIMEOUT {args.timeout:g} s, {args.rounds} rounds; seconds; "
          f"parameters equal bit for bit in every round")
    print("| round | rank | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for row in rows:
        print(f"| {row['round']} | {row['rank']} | " +
              " | ".join(f"{row[c]:.3f}" for c in cols) + " |")
    res = [row["resume"] for row in rows]
    print(f"resume: median {statistics.median(res):.3f} s, max "
          f"{max(res):.3f} s (figure: <= GCX_TIMEOUT + 2 = "
          f"{args.timeout + 2:g} s)")


if __name__ == "__main__":
    main()
