#!/usr/bin/env python3
"""gravac_study_verdict.py - the figure of perf/train/gravac_study.sh.

For each model, from OUT/MODEL-*.json (gcx-train --json): the static top-k
runs whose final test accuracy is within 0.5 points of dense ("eligible"),
the fastest of them to the target, and the GraVAC runs that reach the
target sooner than every eligible static CF, with their final accuracy and
bytes. Prints Markdown. Standard library only.

Usage: gravac_study_verdict.py --target A OUT MODEL...
"""
import glob
import json
import os
import sys


def load(out, model):
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, f"{model}-*.json"))):
        with open(path) as f:
            runs[os.path.basename(path)[:-5]] = json.load(f)
    return runs


def ttt(run):
    t = run.get("time_to_target_s")
    return t if t is not None and t >= 0 else float("inf")


def verdict(model, runs, target):
    lines = [f"### {model}: GraVAC against static CFs", ""]
    dense = runs.get(f"{model}-dense")
    if dense is None:
        return lines + ["no dense run: nothing to compare", ""]
    base = dense["final_test_acc"]
    static = {n: r for n, r in runs.items() if "-topk-" in n}
    eligible = {n: r for n, r in static.items()
                if r["final_test_acc"] >= base - 0.005}
    bar = min((ttt(r) for r in eligible.values()), default=float("inf"))
    lines.append(f"dense final accuracy {base:.4f}; static CFs within 0.5 "
                 f"points: {', '.join(sorted(eligible)) or 'none'}; the "
                 f"fastest of them to {target:.0%}: "
                 + ("not reached" if bar == float("inf") else f"{bar:.1f} s"))
    lines.append("")
    winners = sorted(((ttt(r), n, r) for n, r in runs.items()
                      if "-gravac-" in n and ttt(r) < bar),
                     key=lambda x: x[0])
    if not winners:
        lines.append("No GraVAC setting reached the target sooner than every "
                     "eligible static CF.")
    for t, n, r in winners:
        fewer = r["dense_bytes"] / r["bytes_sent"] if r.get("bytes_sent") else 0
        lines.append(f"- {n}: {t:.1f} s to {target:.0%} "
                     f"({bar / t if bar != float('inf') else float('inf'):.2f}x "
                     f"sooner than the best eligible static CF), final "
                     f"{r['final_test_acc']:.4f} "
                     f"({100 * (r['final_test_acc'] - base):+.2f} points vs "
                     f"dense), {fewer:.1f}x fewer bytes than dense")
    lines.append("")
    return lines


def main():
    args = sys.argv[1:]
    if len(args) < 4 or args[0] != "--target":
        sys.exit(__doc__.strip().splitlines()[-1])
    target = float(args[1])
    out = args[2]
    lines = []
    for model in args[3:]:
        lines += verdict(model, load(out, model), target)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
