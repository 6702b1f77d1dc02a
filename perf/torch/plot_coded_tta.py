#!/usr/bin/env python3
"""plot_coded_tta.py: test accuracy against training time, one line per
configuration, one figure per rank count, from coded_tta.py's runs.

Idea: read every NAME.json coded_tta.py wrote into DIR (config, ranks,
straggler, kill record) with its NAME.csv (one row per evaluation:
train_time_s, test_acc, ...), and for each rank count draw test accuracy
over rank 0's training clock (evaluations excluded): the runs under
stragglers as solid lines (DDP dashed), the kill runs dotted in their
configuration's colour with a cross where the rank died, a marker at each
epoch end and a dotted line at the target (--target, default 0.85).
Runs of a few steps without stragglers (the step-cost set: one evaluation)
are left out, and of the seeds' rounds one seed is drawn (--seed, default
the smallest present; the kill runs whatever their seed): the table has the
medians over the seeds, a figure of every seed has too many lines to read.
Writes DIR/accuracy_vs_time_rN.png. matplotlib with the Agg backend: no
display needed. Cost: reads a few small files; a second or two.

    python perf/torch/plot_coded_tta.py DIR [--target 0.85] [--seed N]
"""
import argparse
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ("ddp-gloo", "ddp-gcx", "ddp-elastic", "ignore", "gc-fr", "gc-cr", "pgc-fr", "pgc-cr",
         "pgc-fr-topk")


def read_runs(folder):
    """[(summary, rows)] of every coded_tta.py run in folder with two or more evaluations."""
    runs = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(folder, name)) as f:
            s = json.load(f)
        path = os.path.join(folder, name[:-5] + ".csv")
        if "config" not in s or "ranks" not in s or not os.path.exists(path):
            continue
        with open(path) as f:
            rows = list(csv.DictReader(f))
        if len(rows) >= 2 and "test_acc" in rows[0] and "train_time_s" in rows[0]:
            runs.append((s, rows))
    return runs


def seed_of(s):
    return s.get("options", {}).get("seed")


def lr_of(s):
    return s.get("options", {}).get("lr")


def label(s, default_lr):
    text = s["config"]
    if lr_of(s) is not None and lr_of(s) != default_lr:
        text += f" lr {lr_of(s):g}"
    if s.get("s") is not None and s["s"] != 1:
        text += f" s={s['s']}"
    if "kill" in s:
        text += f" (rank {s['kill']['rank']} killed)"
    return text


def plot(ranks, runs, path, target, default_lr):
    fig, ax = plt.subplots(figsize=(8, 5))
    colours = {}
    runs = sorted(runs, key=lambda r: ("kill" in r[0], ORDER.index(r[0]["config"])
                                       if r[0]["config"] in ORDER else len(ORDER), r[0]["name"]))
    for s, rows in runs:
        xs = [float(r["train_time_s"]) for r in rows]
        ys = [float(r["test_acc"]) for r in rows]
        key = (s["config"], s.get("s"), lr_of(s))
        style = ":" if "kill" in s else "--" if s["config"].startswith("ddp") else "-"
        (line,) = ax.plot(xs, ys, style, label=label(s, default_lr), linewidth=1.5, color=colours.get(key))
        colours.setdefault(key, line.get_color())
        ends = [(x, y) for x, y, r in zip(xs, ys, rows) if r.get("epoch_end") == "1"]
        if ends:
            ax.plot(*zip(*ends), "o", color=line.get_color(), markersize=3.5)
        at = s.get("kill", {}).get("train_time_at_kill_s")
        if at is not None:
            ax.axvline(at, color=line.get_color(), linewidth=0.6, linestyle=":")
            ax.plot([at], [min(ys)], "x", color=line.get_color(), markersize=7)
    ax.axhline(target, color="grey", linewidth=0.8, linestyle=":")
    ax.text(ax.get_xlim()[0], target, f" {target:.0%}", va="bottom", color="grey", fontsize=8)
    ax.set_xlabel("training time, rank 0 (s, evaluations excluded)")
    ax.set_ylabel("test accuracy")
    accs = [float(r["test_acc"]) for _, rows in runs for r in rows]
    ax.set_ylim(max(0.0, min(min(accs), target) - 0.02), min(1.0, max(max(accs), target) + 0.02))
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=7, ncol=2)
    strag = sorted({s["straggler"] for s, _ in runs})
    link = next((s["link"] for s, _ in runs if s.get("link")), "local")
    seeds = sorted({seed_of(s) for s, _ in runs if "kill" not in s and seed_of(s) is not None})
    ax.set_title(f"Coded vs DDP training, CNN on Fashion-MNIST, {ranks} ranks, link {link}, "
                 f"stragglers {', '.join(strag)}, seed {', '.join(map(str, seeds))},\n"
                 f"lr {default_lr:g} unless named; dots: epoch ends, x: a rank killed", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="folder with coded_tta.py's NAME.json and NAME.csv files")
    ap.add_argument("--target", type=float, default=0.85, help="target accuracy line")
    ap.add_argument("--seed", type=int, help="the seed whose runs are drawn (default: the smallest)")
    args = ap.parse_args()
    if not os.path.isdir(args.dir):
        ap.error(f"{args.dir}: not a folder")
    runs = read_runs(args.dir)
    if not runs:
        print(f"plot_coded_tta.py: no coded_tta run with two or more evaluations in {args.dir}",
              file=sys.stderr)
        return 1
    seeds = {seed_of(s) for s, _ in runs if seed_of(s) is not None}
    seed = args.seed if args.seed is not None else min(seeds, default=None)
    if seeds and seed not in seeds:
        ap.error(f"--seed {seed}: the runs in {args.dir} have seeds {sorted(seeds)}")
    runs = [r for r in runs if "kill" in r[0] or seed_of(r[0]) in (seed, None)]
    lrs = [lr_of(s) for s, _ in runs if lr_of(s) is not None]
    default_lr = max(set(lrs), key=lrs.count) if lrs else 0.0
    for ranks in sorted({s["ranks"] for s, _ in runs}):
        mine = [r for r in runs if r[0]["ranks"] == ranks]
        out = os.path.join(args.dir, f"accuracy_vs_time_r{ranks}.png")
        plot(ranks, mine, out, args.target, default_lr)
        print(f"wrote {out} ({', '.join(s['name'] for s, _ in mine)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
