"""Many randomized differential and kill runs of torch_gcx (what CI runs a
few of, in test_diff.py and test_elastic.py), each a fresh launch:

    PYTHONPATH=build/plugin/torch build-venv/bin/python \\
        plugin/torch/tests/diff_run.py --what all --seeds 1-50 --hog

--what collectives: diff_worker.py's seeded plans of torch.distributed
calls on gcx against gloo (--ops calls a plan, --ranks world sizes, one
launch per seed and size). --what coded: diff_worker.py's coded_kill (a
CodedDataParallel rank SIGKILLed at a seeded round and moment, inside
backward() too). --what elastic: elastic_worker.py's inflight (4 ranks of
ElasticDDP, a rank SIGKILLed inside backward() with DDP buckets in flight).
--what all: the three. --hog: a busy-loop process beside the runs. Seeds:
"1-50", "3,7,9" or "random:20" (drawn and printed). Every failure prints
its seed, the ranks' last output and the command that replays it; the exit
status is the number of failed runs (capped at 100).

Cost: a launch is ~5-20 s on the loaded 2-core box (importing torch in each
rank is most of it).
"""
import argparse
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from launch import cpu_hog, launch  # noqa: E402


def parse_seeds(text):
    if text.startswith("random:"):
        return [random.randrange(1, 10**6) for _ in range(int(text[7:]))]
    seeds = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        seeds += list(range(int(a), int(b) + 1)) if b else [int(a)]
    return seeds


def logs_of(results, tail=2500):
    return "\n".join(f"--- rank {r} (rc {rc}) ---\n{o[-tail:]}"
                     for r, (rc, o) in enumerate(results))


def run_collectives(seed, size, ops):
    """None when the run passed, else what failed."""
    try:
        results = launch("collectives", size, timeout=600,
                         script="diff_worker.py",
                         env={"DIFF_SEEDS": str(seed), "DIFF_OPS": str(ops)})
    except AssertionError as e:  # a hang
        return str(e)
    if all(rc == 0 and f"seed {seed} ok" in o for rc, o in results):
        return None
    return logs_of(results)


def check_kill(results, victim_rc=-9):
    """The survivors of a run with one SIGKILLed rank all exited 0."""
    dead = [r for r, (rc, _) in enumerate(results) if rc == victim_rc]
    ok = len(dead) == 1 and all(rc == 0 for r, (rc, _) in enumerate(results)
                                if r not in dead)
    return None if ok else logs_of(results)


def run_coded(seed, size):
    try:
        results = launch("coded_kill", size, timeout=300,
                         script="diff_worker.py",
                         env={"DIFF_SEED": str(seed)})
    except AssertionError as e:
        return str(e)
    bad = check_kill(results)
    if bad is None and not all("coded_kill" in o and " ok" in o
                               for rc, o in results if rc == 0):
        bad = logs_of(results)
    return bad


def run_elastic(seed, size):
    try:
        results = launch("inflight", size, timeout=300,
                         script="elastic_worker.py",
                         env={"ELASTIC_SEED": str(seed)})
    except AssertionError as e:
        return str(e)
    bad = check_kill(results)
    if bad is None:
        hashes = {l.split()[1] for rc, o in results if rc == 0
                  for l in o.splitlines() if l.startswith("PARAMS ")}
        if len(hashes) != 1:
            bad = "survivors' parameters differ\n" + logs_of(results)
    return bad


def replay(what, seed, size, ops):
    return (f"PYTHONPATH=build/plugin/torch build-venv/bin/python "
            f"plugin/torch/tests/diff_run.py --what {what} --seeds {seed} "
            f"--ranks {size}" + (f" --ops {ops}" if what == "collectives"
                                 else ""))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--what", default="collectives",
                   choices=["collectives", "coded", "elastic", "all"])
    p.add_argument("--seeds", default="1-10")
    p.add_argument("--ranks", default=None,
                   help="world sizes, comma-separated (default: 3,4 for "
                        "collectives, 4 for the kills)")
    p.add_argument("--ops", type=int, default=200)
    p.add_argument("--hog", action="store_true",
                   help="a busy-loop process beside the runs")
    a = p.parse_args()
    whats = ["collectives", "coded", "elastic"] if a.what == "all" \
        else [a.what]
    seeds = parse_seeds(a.seeds)
    print(f"seeds: {','.join(map(str, seeds))}", flush=True)
    failed = []
    hog = cpu_hog() if a.hog else None
    if hog:
        hog.__enter__()
    try:
        for what in whats:
            sizes = [int(s) for s in a.ranks.split(",")] if a.ranks else \
                ([3, 4] if what == "collectives" else [4])
            for seed in seeds:
                for size in sizes:
                    t0 = time.time()
                    if what == "collectives":
                        bad = run_collectives(seed, size, a.ops)
                    elif what == "coded":
                        bad = run_coded(seed, size)
                    else:
                        bad = run_elastic(seed, size)
                    line = (f"{what} seed {seed} ranks {size}: "
                            f"{'ok' if bad is None else 'FAIL'} "
                            f"({time.time() - t0:.1f} s)")
                    print(line, flush=True)
                    if bad is not None:
                        failed.append((what, seed, size))
                        print(bad, flush=True)
                        print("replay: " + replay(what, seed, size, a.ops),
                              flush=True)
    finally:
        if hog:
            hog.__exit__(None, None, None)
    print(f"{len(failed)} failed" + (": " + ", ".join(
        f"{w} seed {s} ranks {n}" for w, s, n in failed) if failed else ""),
        flush=True)
    for w, s, n in failed:
        print("replay: " + replay(w, s, n, a.ops), flush=True)
    return min(len(failed), 100)


if __name__ == "__main__":
    sys.exit(main())
