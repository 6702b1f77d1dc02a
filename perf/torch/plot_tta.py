#!/usr/bin/env python3
"""plot_tta.py: test accuracy against training time, one line per DDP
configuration, from ddp_tta.py's per-run CSVs.

Idea: read every NAME.csv that ddp_tta.py wrote into DIR (one row per
evaluation: train_time_s, test_acc, ...), draw test accuracy over the
training clock (evaluations excluded) with a dashed line at the target
(--target, default 0.85) and a marker at each epoch end, and write
DIR/accuracy_vs_time.png; with --bytes also DIR/accuracy_vs_bytes.png
(accuracy over the bytes a rank sent, log scale). matplotlib with the Agg
backend: no display needed. Cost: reads a few small CSVs; well under a second.

    python perf/torch/plot_tta.py DIR [--target 0.85] [--bytes]
"""
import argparse
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ("gloo-dense", "gloo-powersgd", "gcx-dense", "gcx-topk", "gcx-gravac", "gcx-powersgd")


def read_runs(folder):
    runs = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".csv") or name.endswith(".trace.csv"):
            continue
        with open(os.path.join(folder, name)) as f:
            rows = list(csv.DictReader(f))
        if rows and "test_acc" in rows[0] and "train_time_s" in rows[0]:
            runs[name[:-4]] = rows
    return dict(sorted(runs.items(), key=lambda kv: (ORDER.index(kv[0]) if kv[0] in ORDER
                                                     else len(ORDER), kv[0])))


def plot(runs, xkey, xlabel, path, target, logx=False):
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for name, rows in runs.items():
        xs = [float(r[xkey]) for r in rows]
        ys = [float(r["test_acc"]) for r in rows]
        style = "--" if name.startswith("gloo") else "-"
        (line,) = ax.plot(xs, ys, style, label=name, linewidth=1.6)
        ends = [(x, y) for x, y, r in zip(xs, ys, rows) if r.get("epoch_end") == "1"]
        if ends:
            ax.plot(*zip(*ends), "o", color=line.get_color(), markersize=4)
    ax.axhline(target, color="grey", linewidth=0.8, linestyle=":")
    ax.text(ax.get_xlim()[0], target, f" {target:.0%}", va="bottom", color="grey", fontsize=8)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test accuracy")
    accs = [float(r["test_acc"]) for rows in runs.values() for r in rows]
    ax.set_ylim(max(0.0, min(min(accs), target) - 0.02), min(1.0, max(max(accs), target) + 0.02))
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("DDP on Fashion-MNIST (MLP 784-1024-1024-10); dots: epoch ends", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="folder with ddp_tta.py's NAME.csv files")
    ap.add_argument("--target", type=float, default=0.85, help="target accuracy line")
    ap.add_argument("--bytes", action="store_true", help="also accuracy vs bytes sent")
    args = ap.parse_args()
    runs = read_runs(args.dir)
    if not runs:
        print(f"plot_tta.py: no ddp_tta CSV in {args.dir}", file=sys.stderr)
        return 1
    out = os.path.join(args.dir, "accuracy_vs_time.png")
    plot(runs, "train_time_s", "training time (s, evaluations excluded)", out, args.target)
    print(f"wrote {out} ({', '.join(runs)})")
    if args.bytes:
        out = os.path.join(args.dir, "accuracy_vs_bytes.png")
        plot({k: [r for r in v if float(r["bytes_sent"]) > 0] for k, v in runs.items()},
             "bytes_sent", "bytes sent by one rank", out, args.target, logx=True)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
