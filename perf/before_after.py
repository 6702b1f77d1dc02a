#!/usr/bin/env python3
"""before_after.py OUT ROUNDS: the summary table of perf/before_after.sh.

Reads OUT/<item>-<before|after>-r<round>.json and prints one markdown row
per figure: the median over rounds for each build and after/before (for a
time, below 1 is faster; for a bandwidth or a ratio, above 1 is better).
"""
import json
import statistics
import sys

out, rounds = sys.argv[1], int(sys.argv[2])


def load(item, side, r):
    with open(f"{out}/{item}-{side}-r{r}.json") as f:
        return json.load(f)


def rows_of(doc):
    return doc["rows"] if isinstance(doc, dict) and "rows" in doc else doc


figures = []  # (name, unit, {side: [per-round values]})


def add(name, unit, fn):
    vals = {side: [fn(side, r) for r in range(1, rounds + 1)] for side in ("before", "after")}
    figures.append((name, unit, vals))


def busbw(item, side, r, size):
    return next(x["busbw_gbps"] for x in rows_of(load(item, side, r)) if x["size"] == size)


for size in (1 << 20, 4 << 20, 16 << 20, 64 << 20):
    mb = size >> 20
    add(f"allreduce busbw, 4 ranks, {mb} MB", "GB/s", lambda s, r, z=size: busbw("allreduce", s, r, z))
    add(f"allreduce gcx/MPI, 4 ranks, {mb} MB", "ratio",
        lambda s, r, z=size: busbw("allreduce", s, r, z) / busbw("mpi", s, r, z))

for cf in (100, 1000):
    add(f"top-k, N = 25M, CF {cf}", "ms (CPU)",
        lambda s, r, c=cf: next(x["time_ms"] for x in load("topk", s, r)
                                if x["compressor"] == "topk" and x["cf"] == c))


def coded(side, r, mode):
    return next(x["p50_ms"] for x in rows_of(load("coded", side, r))
                if x["mode"] == mode and x["straggler"])


for mode in ("uncoded", "gc-cr", "pgc-cr"):
    add(f"coded round, 1 straggler of 4 (50 ms), {mode}", "ms", lambda s, r, m=mode: coded(s, r, m))
add("coded straggler ratio uncoded / gc-cr", "ratio",
    lambda s, r: coded(s, r, "uncoded") / coded(s, r, "gc-cr"))


def sparse(side, r, density, algo):
    return next(x["time_s"] * 1e3 for x in load("sparse", side, r)
                if x["density"] == density and x["algo"] == algo and not x["topk"])


for density in (0.001, 0.01):
    for algo in ("auto", "dense"):
        add(f"sparse allreduce 25M, {density:.1%}, overlap 0.5, {algo} (emulated 1 Gbit/s)", "ms",
            lambda s, r, d=density, a=algo: sparse(s, r, d, a))
add("gcx-train gravac, 4 ranks, 1 epoch: training time", "s",
    lambda s, r: load("train", s, r)["total_time_s"] - load("train", s, r)["eval_time_s"])
add("gcx-train gravac, 4 ranks, 1 epoch: test accuracy", "",
    lambda s, r: load("train", s, r)["final_test_acc"])

print(f"| figure | unit | before (median of {rounds}) | after | after/before |")
print("|---|---|---|---|---|")
for name, unit, vals in figures:
    b, a = statistics.median(vals["before"]), statistics.median(vals["after"])
    print(f"| {name} | {unit} | {b:.4g} | {a:.4g} | {a / b if b else float('nan'):.3f} |")
