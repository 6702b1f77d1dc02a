#!/usr/bin/env python3
"""figures.py - check the sparse allreduce figures of issue #4 against
gcx_sparse_allreduce_perf --json files (perf/sparse/figures.sh runs them).

Usage: figures.py [--rate R] FILE.json ...   (Markdown on stdout)

Every row of a file is one (density, overlap, topk, algo) measurement: time
(the median over iterations of the slowest rank's time), bound_s (the
bound's bytes at the measured link rate). A setting measured in several
files (figures.sh repeats the millisecond settings) counts with the median
of its repetitions, for every algorithm alike: at a few milliseconds one
algorithm differs by up to ~20% between two communicators, and the fastest
of four single measurements would be biased low against auto's one. "best" is the fastest of the four sparse algorithms (allgather,
recursive_doubling, split, balanced_split) in the same setting; auto and
dense are compared with it. Each figure prints its numbers and "met" or
"NOT met"; nothing is hidden when a figure fails.
"""
import json
import sys
from statistics import median

SPARSE = ("allgather", "recursive_doubling", "split", "balanced_split")


def load(paths):
    reps = {}
    for path in paths:
        with open(path) as f:
            for row in json.load(f):
                key = (row["density"], row["overlap"], bool(row["topk"]))
                reps.setdefault(key, {}).setdefault(row["algo"], []).append(row)
    groups = {}
    for key, algos in reps.items():
        for algo, rows in algos.items():
            merged = dict(rows[0])
            merged["time_s"] = median(r["time_s"] for r in rows)
            merged["bound_s"] = median(r["bound_s"] for r in rows)
            merged["reps"] = len(rows)
            merged["wrong"] = max(r.get("wrong", 0) for r in rows)
            chosen = [r["chosen"] for r in rows]
            merged["chosen"] = chosen[0] if len(set(chosen)) == 1 else \
                " / ".join(chosen)
            groups.setdefault(key, {})[algo] = merged
    return groups


def best(rows):
    cands = [rows[a] for a in SPARSE if a in rows]
    return min(cands, key=lambda r: r["time_s"]) if cands else None


def verdict(ok):
    return "met" if ok else "**NOT met**"


def main(argv):
    rate = "1gbit"
    if len(argv) > 1 and argv[0] == "--rate":
        rate, argv = argv[1], argv[2:]
    groups = load(argv)
    out = [f"# Sparse allreduce figures (issue #4): 4 ranks, emulated {rate}",
           "", "Times in ms; best = fastest of " + ", ".join(SPARSE) + ".", ""]

    out += ["## Best algorithm within 1.5x of the bound (N 25M, density 1%)",
            "", "| overlap | best | time | bound | x bound | figure |",
            "| --- | --- | --- | --- | --- | --- |"]
    for ov in (0.0, 0.5):
        rows = groups.get((0.01, ov, False))
        b = best(rows) if rows else None
        if b is None:
            out.append(f"| {ov} | — | — | — | — | not measured |")
            continue
        x = b["time_s"] / b["bound_s"]
        out.append(f"| {ov} | {b['algo']} | {b['time_s'] * 1e3:.1f} | "
                   f"{b['bound_s'] * 1e3:.1f} | {x:.2f} | {verdict(x <= 1.5)} |")

    out += ["", "## >= 10x faster than dense at density 0.1%", "",
            "| overlap | best | time | dense | speed-up | figure |",
            "| --- | --- | --- | --- | --- | --- |"]
    for (d, ov, tk), rows in sorted(groups.items()):
        if d != 0.001 or tk or "dense" not in rows:
            continue
        b = best(rows)
        x = rows["dense"]["time_s"] / b["time_s"]
        out.append(f"| {ov} | {b['algo']} | {b['time_s'] * 1e3:.1f} | "
                   f"{rows['dense']['time_s'] * 1e3:.1f} | {x:.1f} | "
                   f"{verdict(x >= 10)} |")

    out += ["", "## Faster than allgather-based at density 1% (overlap 0.5, 1;"
            " top-k: >= 2x)", "",
            "| overlap | top-k | best | time | allgather | speed-up | figure |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for (d, ov, tk), rows in sorted(groups.items()):
        if d != 0.01 or "allgather" not in rows or (not tk and ov == 0.0):
            continue
        b = best(rows)
        x = rows["allgather"]["time_s"] / b["time_s"]
        ok = x >= 2.0 if tk else x > 1.0 # top-k: >= 2x; else: faster
        out.append(f"| {ov} | {'yes' if tk else 'no'} | {b['algo']} | "
                   f"{b['time_s'] * 1e3:.1f} | "
                   f"{rows['allgather']['time_s'] * 1e3:.1f} | {x:.2f} | "
                   f"{verdict(ok)} |")

    out += ["", "## auto within 10% of the best, every setting", "",
            "| density | overlap | top-k | runs | auto chose | auto | best | "
            "auto / best | figure |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (d, ov, tk), rows in sorted(groups.items()):
        if "auto" not in rows:
            continue
        b = best(rows)
        a = rows["auto"]
        x = a["time_s"] / b["time_s"]
        out.append(f"| {d * 100:g}% | {ov} | {'yes' if tk else 'no'} | "
                   f"{a['reps']} | {a['chosen']} | {a['time_s'] * 1e3:.1f} | "
                   f"{b['algo']} {b['time_s'] * 1e3:.1f} | {x:.2f} | "
                   f"{verdict(x <= 1.1)} |")
    wrong = [r for rows in groups.values() for r in rows.values()
             if r.get("wrong", 0) not in (0, -1)]
    out += ["", f"Rows with #wrong > 0: {len(wrong)}", ""]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
