#!/usr/bin/env python3
"""tta_table.py - the time-to-accuracy table of perf/train/time_to_accuracy.sh.

Reads gcx-train's JSON summary (--json) and CSV trace (--csv) of each run
and writes a Markdown table per set of runs. The first run of a set whose
name contains "dense" is that set's reference: speed-up = its time to the
target / the run's; the accuracy difference is the run's final test
accuracy minus its. A set with a run whose name contains "uncoded" (the
pgc-master set's baseline: a master waiting for every worker) gets one
more column, the speed-up over that run. "x fewer bytes" is the run's dense-equivalent bytes
(what a ring allreduce of the full gradient would have sent over the same
steps) over the bytes it actually sent, summed over ranks.

Usage: tta_table.py --out FILE (--title TEXT (--run PATH)...)...
PATH is a run's output without extension: PATH.json and PATH.csv.
Standard library only.
"""
import csv
import json
import os
import sys


def load(path):
    with open(path + ".json") as f:
        summary = json.load(f)
    steps = sync = 0.0
    rows = 0
    with open(path + ".csv") as f:
        for row in csv.DictReader(f):
            steps += float(row["step_s"])
            sync += float(row["sync_s"])
            rows += 1
    summary["_name"] = os.path.basename(path)
    summary["_step_ms"] = 1e3 * steps / rows if rows else float("nan")
    summary["_sync_ms"] = 1e3 * sync / rows if rows else float("nan")
    return summary


def fmt(v, spec, none="—"):
    return none if v is None else format(v, spec)


def table(title, runs):
    ref = next((r for r in runs if "dense" in r["_name"]), None)
    unc = next((r for r in runs if "uncoded" in r["_name"]), None)
    target = runs[0].get("target_acc") if runs else None
    out = [f"### {title}", ""]
    out.append(f"| run | --sync | time to {fmt(target, '.0%')} (s) | speed-up (x) "
               "vs dense |" + (" vs uncoded (x) |" if unc else "") +
               " final test acc | vs dense (points) | bytes sent "
               "(all ranks) | x fewer bytes than dense | steps | step (ms) "
               "| sync (ms) |")
    out.append("|" + " --- |" * (12 if unc else 11))

    def speedup(base, ttt):
        if base is None or not ttt or not base.get("time_to_target_s"):
            return None
        return base["time_to_target_s"] / ttt

    for r in runs:
        ttt = r.get("time_to_target_s")
        speed = speedup(ref, ttt)
        vs_unc = f" {fmt(speedup(unc, ttt), '.2f')} |" if unc else ""
        delta = None
        if ref is not None:
            delta = 100.0 * (r["final_test_acc"] - ref["final_test_acc"])
        fewer = (r["dense_bytes"] / r["bytes_sent"]
                 if r.get("bytes_sent") else None)
        out.append(
            f"| {r['_name']} | `{r['sync']}` | "
            f"{fmt(ttt, '.1f', 'not reached')} | "
            f"{fmt(speed, '.2f')} |{vs_unc} {r['final_test_acc']:.4f} | "
            f"{fmt(delta, '+.2f')} | {r['bytes_sent'] / 1e9:.2f} GB | "
            f"{fmt(fewer, '.1f')} | {r['steps']} | {r['_step_ms']:.1f} | "
            f"{r['_sync_ms']:.1f} |")
    out.append("")
    return out


USAGE = "usage: tta_table.py --out FILE (--title TEXT (--run PATH)...)..."


def usage_error(message):
    sys.exit(f"{USAGE}\ntta_table.py: error: {message}")


def main():
    # --title/--run pairs keep their order, so they are parsed by hand
    sets = []
    args = sys.argv[1:]
    out = None
    i = 0
    while i < len(args):
        if args[i] in ("--out", "--title", "--run") and i + 1 < len(args):
            if args[i] == "--out":
                out = args[i + 1]
            elif args[i] == "--title":
                sets.append((args[i + 1], []))
            else:
                if not sets:
                    usage_error("--run before any --title")
                sets[-1][1].append(load(args[i + 1]))
            i += 2
        else:
            usage_error(f"unexpected argument {args[i]}")
    if out is None:
        usage_error("--out is required")
    lines = ["# Time to accuracy", ""]
    for title, runs in sets:
        lines += table(title, runs)
    with open(out, "w") as f:
        f.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
