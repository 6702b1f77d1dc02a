#!/usr/bin/env python3
"""import_coded.py - refresh the master-less run's points (`car-*`) of
measured.json from a new run of perf/coded/run_masterless.sh.

The run writes, per rank count N, `coded-fixed-N.json` (no straggler and
rank 3 200 ms late, `--baseline`) and `coded-exp-N.json` (exp:1) into its
OUT folder; each holds one row per mode and run (modes listed twice run
twice, alternating). Every `car-*` point of measured.json whose rows are
there gets, in place (id, scheme, code, model fields unchanged):

- an `agg` point (`car-MODE-nN-{none,slow3,exp1}-agg`): measured_s = the
  mean agg_ms of the runs (rank 0's time inside the aggregation call);
- a ratio point (`car-MODE-nN-slow3-ratio`): measured_s = the sum of the
  runs' mean_ms with the straggler over the sum without (what the driver
  prints as vs_base, over every run), pre_s = the mean (mean_ms - agg_ms)
  of the runs without (compute and encode, taken as measured);

and its source and note (with every run's value). Points of rank counts
or modes the run does not have are left as they are. Cost: reads a few
small files.

--modes takes only those modes' points (a run that has the dense ring as
its reference refreshes the coded points alone); --source names the script
that made the run (default perf/coded/run_masterless.sh).

Usage:
  build-venv/bin/python perf/sim/import_coded.py OUT --date 2026-12-05 \\
      [--measured perf/sim/measured.json] [--modes a,b] [--source SCRIPT] [--dry-run]
"""
import argparse
import json
import os
import re
import sys

# the script whose runs these points come from, unless --source names another
DEFAULT_SOURCE = "perf/coded/run_masterless.sh"

ID_RE = re.compile(r"^car-(?P<mode>.+)-n(?P<n>\d+)-(?P<case>none|slow3|exp1)"
                   r"-(?P<kind>agg|ratio)$")


def load_rows(folder, n, which):
    """Rows of coded-WHICH-N.json (or WHICH-N.json) in folder, or None."""
    for name in (f"coded-{which}-{n}.json", f"{which}-{n}.json"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)["rows"], path
    return None, None


def runs(rows, mode, straggler):
    return [r for r in rows if r["mode"] == mode and
            bool(r["straggler"]) == straggler]


def refresh(point, folder, date, modes=None,
            script=DEFAULT_SOURCE):
    """Update one car-* point in place; False when the run lacks it (or
    its mode is not in modes, when given)."""
    m = ID_RE.match(point["id"])
    if m is None:
        return False
    mode, n, case, kind = m["mode"], int(m["n"]), m["case"], m["kind"]
    if modes is not None and mode not in modes:
        return False
    rows, path = load_rows(folder, n, "exp" if case == "exp1" else "fixed")
    if rows is None:
        return False
    source = (f"{script}, {date}, JSON "
              f"{os.path.basename(path)} of that run")
    if kind == "agg":
        got = runs(rows, mode, case != "none")  # exp rows: straggler
        if not got:
            return False
        aggs = [r["agg_ms"] for r in got]
        point["measured_s"] = round(sum(aggs) / len(aggs) / 1e3, 6)
        point["note"] = ("agg_ms (time inside the aggregation call on rank "
                         f"0), mean of {len(aggs)} run(s): " +
                         ", ".join(f"{a:.2f}" for a in aggs) + " ms")
    else:
        with_, without = runs(rows, mode, True), runs(rows, mode, False)
        if not with_ or len(with_) != len(without):
            return False
        point["measured_s"] = round(sum(r["mean_ms"] for r in with_) /
                                    sum(r["mean_ms"] for r in without), 4)
        point["ratio"]["pre_s"] = round(
            sum(r["mean_ms"] - r["agg_ms"] for r in without) /
            len(without) / 1e3, 6)
        per_run = ", ".join(f"{a['mean_ms'] / b['mean_ms']:.2f}"
                            for a, b in zip(with_, without))
        point["note"] = (
            "vs_base: mean round (mean_ms, compute + encode + aggregation) "
            "with rank 3 200 ms late / without, over all runs (per run: "
            f"{per_run}); simulated as (pre_s + simulated agg with) / "
            "(pre_s + simulated agg without), pre_s = the measured mean_ms "
            "- agg_ms of the runs without (compute, encode)")
    point["source"] = source
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="OUT of perf/coded/run_masterless.sh")
    ap.add_argument("--date", required=True, help="the run's date")
    ap.add_argument("--measured", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "measured.json"))
    ap.add_argument("--modes", help="comma-separated: only these modes' points")
    ap.add_argument("--source", default=DEFAULT_SOURCE,
                    help="the script that made the run (the points' source)")
    ap.add_argument("--dry-run", action="store_true",
                    help="print what would change, write nothing")
    args = ap.parse_args(argv)
    with open(args.measured) as f:
        data = json.load(f)
    changed = 0
    for p in data["points"]:
        if not p["id"].startswith("car-"):
            continue
        before = p.get("measured_s")
        if refresh(p, args.folder, args.date,
                   args.modes.split(",") if args.modes else None, args.source):
            changed += 1
            print(f"{p['id']:34s} {before!s:>10} -> {p['measured_s']}")
    if changed == 0:
        print("no car-* point found in the run's files", file=sys.stderr)
        return 1
    if not args.dry_run:
        with open(args.measured, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
    print(f"{changed} points {'would change' if args.dry_run else 'updated'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
