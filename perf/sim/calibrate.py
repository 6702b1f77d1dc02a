#!/usr/bin/env python3
"""calibrate.py - fit sim.py's alpha, B_eff (eff x link rate), o, gamma (and
the compute time per partition of each 'fit:KEY') to measured step times,
and check the simulator against them.

    calibrate.py fit   [--points measured.json] [--out params.json] [--evals 150]
    calibrate.py check [--points measured.json] [--params params.json] [--tol 15]
    calibrate.py show  (the fitted parameters)

fit: minimises sum over the used points of log(simulated / measured)^2
(relative error, every point weighs the same) with Nelder-Mead in log space,
in two stages: (1) eff [0.5, 1] and alpha [1 us, 10 ms] on the points
without compute (back-to-back collectives: the link alone); (2) o [0.1 us,
10 ms] and each compute key [0.1 ms, 1 s] on all used points, the link
held. gamma is held at its start value (0.3 ns/B, --gamma; a fit without
stage 3 keeps params.json's instead): with gamma free
the fit buys the training steps' CPU effects with a 2.5 ns/B decode that
puts every ring point 13-19% off. (A joint fit of everything trades the
link's rate against those effects the same way.) Ring points alone fix only
o+alpha; the split comes from the star points (o is paid n-1 times in a row
by the root's result sends). Stage 3: kappa, gamma, wake and one CPU slow-down per
'cpu_scale: fit:KEY' on the car-* points (gcx_coded_gather_perf on the
loaded 2-core box, perf/coded/run_masterless.sh), the link and o held;
--stages 3 runs it alone. Ratio points ("kind": "ratio") and "measure":
"agg" (rank 0's entry subtracted): see README. Writes params.json (the fit, and per point simulated
vs measured). Stochastic points (exp:M) are
simulated with fixed seeds (common random numbers), so the objective is
deterministic.

check: prints, for every point, simulated vs measured and the error %,
and each stage's objective over its points (params.json's "objective" is
the last fitted stage's alone; a fit also writes all three, "objectives"),
and exits 1 when a used point is off by more than --tol % (default 15);
points with "use": false are printed, marked, and not counted.

Measured-point format: see measured.json's "format" and README.md.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sim  # noqa: E402

GLOBALS = ("alpha", "o", "gamma", "eff", "kappa", "wake", "lead")
# kappa at most 1.5 ns/B (a copy pass at >= 0.67 GB/s on one node): on the
# emulator only kappa x the CPU slow-down f is identified (the same fit with
# kappa 7.8 ns/B and f ~ 1, or kappa 1.5 and f ~ 5), and the plots use f = 1
BOUNDS = {"alpha": (1e-6, 1e-2), "o": (1e-7, 1e-2), "gamma": (1e-12, 1e-8),
          "eff": (0.5, 1.0), "compute": (1e-4, 1.0), "kappa": (1e-12, 1.5e-9),
          "cpu": (1.0, 200.0), "wake": (1e-7, 1e-2), "lead": (1e-3, 1.0)}
START = {"alpha": 50e-6, "o": 20e-6, "gamma": 0.3e-9, "eff": 0.956, "compute": 0.01,
         "kappa": 0.3e-9, "cpu": 10.0, "wake": 1e-4, "lead": 0.15}


# rounds simulated for a stochastic point (exp:M): its mean is the model's
# expectation only up to Monte-Carlo error; with 32 the mean of the max of 8
# Exp(1) draws came out 2.26 (seeded) against 2.72, putting the 8-rank DDP
# step 22% short; 256 is within 3.5 points (%) of 1024 on every point (README)
STOCHASTIC_ROUNDS = 256


def load_points(path):
    with open(path) as f:
        return json.load(f)["points"]


def compute_keys(points, field="compute"):
    keys = []
    for p in points:
        c = p.get(field, 0)
        if isinstance(c, str) and c.startswith("fit:") and c[4:] not in keys:
            keys.append(c[4:])
    return keys


def cpu_keys(points):
    return compute_keys(points, "cpu_scale")


def point_params(pt, fit, rounds=None):
    c = pt.get("compute", 0)
    if isinstance(c, str):
        c = fit["compute"][c[4:]]
    step = pt.get("step_compute", 0)
    if isinstance(step, str):
        step = fit["compute"][step[4:]]
    straggler = pt.get("straggler", "none")
    st = sim.parse_straggler(straggler)[0]
    R = rounds or pt.get("rounds") or (1 if st in ("none", "dead", "slow") else STOCHASTIC_ROUNDS)
    if pt["scheme"] == "star-chained":
        R = max(R, 24)
    rate = sim.parse_rate(pt["link"])
    burst = pt.get("burst", "tbf" if c else 0)
    burst = sim.tbf_burst(rate) if burst == "tbf" else float(burst)
    cs = pt.get("cpu_scale", 0)
    if isinstance(cs, str):
        cs = fit.get("cpu", {}).get(cs[4:], START["cpu"])
    return sim.params(kappa=fit.get("kappa", 0.0), cpu_scale=float(cs), wake=fit.get("wake", 0.0),
                      uplink=pt.get("uplink", "fifo"), lead=fit.get("lead", START["lead"]),
                      load=float(pt.get("load", 0)), cpus=float(pt.get("cpus", 0)),
                      n=pt["n"], gbytes=float(pt["bytes"]), rate=rate, burst=burst,
                      eff=fit["eff"], alpha=fit["alpha"], o=fit["o"], gamma=fit["gamma"],
                      compute=float(c), step=float(step), cores=float(pt.get("cores", 0)),
                      s=int(pt.get("s", 1)), code=pt.get("code", "fr"),
                      coded_parts=pt.get("parts", "pgc"), straggler=straggler,
                      seed=int(pt.get("seed", 1)), rounds=R)


def entry_times(pt, p):
    """when rank 0 enters the aggregation call in each simulated round
    ("measure": "agg": the measured time is inside the call): after its
    compute (parts x c); for the ring also after its own injected delay
    (the perf driver sleeps it before gcx_allreduce; the coded calls take
    the delay inside, on the rank's own chunk sends)."""
    parts = 1 if pt["scheme"] == "ring" or p.coded_parts == "pgc" else p.s + 1
    e = np.full(p.rounds, parts * p.compute + p.step)
    if pt["scheme"] == "ring":
        e = e + sim.delays(p, parts, p.rounds, p.compute)[:, 0]
    return e


_BYID = {}


def simulate_point(pt, fit):
    if pt.get("kind") == "ratio":
        r = pt["ratio"]
        num = simulate_point(_BYID[r["num"]], fit)
        den = simulate_point(_BYID[r["den"]], fit)
        return (r["pre_s"] + num) / (r["pre_s"] + den)
    p = point_params(pt, fit)
    x = sim.simulate(p, pt["scheme"])
    if pt.get("measure") == "agg":
        x = x - entry_times(pt, p)
    return float(np.median(x) if pt.get("stat", "median") == "median" else np.mean(x))


def _get(fit, name):
    if name.startswith("fit:"):
        return fit["compute"][name[4:]]
    if name.startswith("cpu:"):
        return fit["cpu"][name[4:]]
    return fit[name]


def _pack(fit, free):
    return np.log([_get(fit, k) for k in free])


def _unpack(x, free, base):
    fit = dict(base)
    fit["compute"] = dict(base["compute"])
    fit["cpu"] = dict(base.get("cpu", {}))
    for k, v in zip(free, np.exp(x)):
        if k.startswith("fit:"):
            fit["compute"][k[4:]] = float(v)
        elif k.startswith("cpu:"):
            fit["cpu"][k[4:]] = float(v)
        else:
            fit[k] = float(v)
    return fit


def _bounds(free):
    b = [BOUNDS["compute" if k.startswith("fit:") else "cpu" if k.startswith("cpu:") else k]
         for k in free]
    return np.log([x[0] for x in b]), np.log([x[1] for x in b])


def nelder_mead(f, x0, lo, hi, evals=600, step=0.5):
    """plain Nelder-Mead, clipped to [lo, hi] (no scipy here)."""
    d = len(x0)
    clip = lambda x: np.minimum(np.maximum(x, lo), hi)  # noqa: E731
    pts = [clip(x0)] + [clip(x0 + step * np.eye(d)[i]) for i in range(d)]
    val = [f(x) for x in pts]
    n_ev = d + 1
    while n_ev < evals:
        order = np.argsort(val)
        pts = [pts[i] for i in order]
        val = [val[i] for i in order]
        if abs(val[-1] - val[0]) < 1e-10:
            break
        cen = np.mean(pts[:-1], axis=0)
        xr = clip(cen + (cen - pts[-1]))
        fr = f(xr); n_ev += 1
        if fr < val[0]:
            xe = clip(cen + 2 * (cen - pts[-1]))
            fe = f(xe); n_ev += 1
            pts[-1], val[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < val[-2]:
            pts[-1], val[-1] = xr, fr
        else:
            xc = clip(cen + 0.5 * (pts[-1] - cen))
            fc = f(xc); n_ev += 1
            if fc < val[-1]:
                pts[-1], val[-1] = xc, fc
            else:
                for i in range(1, d + 1):
                    pts[i] = clip(pts[0] + 0.5 * (pts[i] - pts[0]))
                    val[i] = f(pts[i]); n_ev += 1
    i = int(np.argmin(val))
    return pts[i], val[i], n_ev


def objective(points, free, base):
    used = [p for p in points if p.get("use", True)]

    def f(x):
        fit = _unpack(x, free, base)
        err = 0.0
        for pt in used:
            t = simulate_point(pt, fit)
            err += math.log(t / pt["measured_s"]) ** 2
        return err
    return f


def stage_points(points):
    """The points each fit stage weighs: (1) the back-to-back collectives
    (no compute, not car-*), (2) every point but the car-* ones, (3) the
    car-* ones (gcx_coded_gather_perf on the emulated cluster)."""
    box = [p for p in points if p["id"].startswith("car-")]
    other = [p for p in points if not p["id"].startswith("car-")]
    return [[p for p in other if p.get("compute", 0) == 0], other, box]


def stage_objectives(points, rows):
    """Each stage's objective (the fit's: the sum over its used points of
    log(simulated / measured)^2) from a table's rows, so that fits of
    different stages compare; params.json's "objective" is its last
    stage's alone."""
    by_id = {r["id"]: r for r in rows}
    out = {}
    for k, pts in enumerate(stage_points(points), 1):
        used = [by_id[p["id"]] for p in pts if p.get("use", True)]
        out[f"stage{k}"] = round(sum(math.log(r["simulated_s"] / r["measured_s"]) ** 2
                                     for r in used), 4)
    return out


def table(points, fit):
    rows = []
    for pt in points:
        t = simulate_point(pt, fit)
        rows.append({"id": pt["id"], "use": pt.get("use", True), "measured_s": pt["measured_s"],
                     "simulated_s": t, "error_pct": 100.0 * (t / pt["measured_s"] - 1.0)})
    return rows


def print_table(rows, tol):
    print(f"{'point':40s} {'measured ms':>12s} {'simulated ms':>13s} {'error %':>8s}")
    bad = 0
    for r in rows:
        mark = ""
        if not r["use"]:
            mark = "  (not used)"
        elif abs(r["error_pct"]) > tol:
            mark = f"  > {tol:g}%"
            bad += 1
        sc = 1.0 if r["id"].endswith("-ratio") else 1e3   # ratios: printed as they are
        print(f"{r['id']:40s} {sc * r['measured_s']:12.2f} {sc * r['simulated_s']:13.2f} "
              f"{r['error_pct']:+8.1f}{mark}")
    used = [abs(r["error_pct"]) for r in rows if r["use"]]
    if used:
        print(f"# {len(used)} used points: max |error| {max(used):.1f}%, "
              f"median {np.median(used):.1f}%, {bad} above {tol:g}%")
    return bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["fit", "check", "show"])
    ap.add_argument("--points", default=os.path.join(HERE, "measured.json"))
    ap.add_argument("--params", default=os.path.join(HERE, "params.json"))
    ap.add_argument("--out", default=None, help="fit: where to write (default --params)")
    ap.add_argument("--evals", type=int, default=150)
    ap.add_argument("--stages", default="", help="fit: only these stages (e.g. 3)")
    ap.add_argument("--tol", type=float, default=15.0)
    ap.add_argument("--hold", default="",
                    help="fit: comma-separated parameters held at their "
                         "warm-start values (e.g. gamma)")
    ap.add_argument("--gamma", type=float, default=START["gamma"],
                    help="fit: the decode/reduce cost held, s per byte")
    a = ap.parse_args(argv)
    points = load_points(a.points)
    _BYID.update({p["id"]: p for p in points})
    keys = compute_keys(points) + compute_keys(points, "step_compute")
    ckeys = cpu_keys(points)
    if a.mode == "show":
        print(json.dumps(json.load(open(a.params)), indent=1))
        return 0
    if a.mode == "fit":
        fit0 = dict(START, gamma=a.gamma)
        fit0["compute"] = {k: START["compute"] for k in keys}
        fit0["cpu"] = {k: START["cpu"] for k in ckeys}
        if os.path.exists(a.params):  # warm start
            old = json.load(open(a.params))
            # gamma starts at --gamma for stage 2 (held there) when stage 3
            # refits it; a fit without stage 3 keeps the fitted one
            keep_gamma = "gamma" in a.hold.split(",") or \
                (a.stages and "3" not in a.stages.split(","))
            for k in ("alpha", "o", "eff", "kappa", "wake", "lead") + \
                    (("gamma",) if keep_gamma else ()):
                fit0[k] = old.get(k, fit0[k])
            for k in keys:
                fit0["compute"][k] = old.get("compute", {}).get(k, fit0["compute"][k])
            for k in ckeys:
                fit0["cpu"][k] = old.get("cpu", {}).get(k, fit0["cpu"][k])
        # stage 1: the link (eff, alpha) from the points without compute
        # (back-to-back collectives); stage 2: o, gamma and the compute times
        # from all used points, the link held. A joint fit trades the
        # link's rate against the training steps' CPU effects.
        fit = fit0
        total, val = 0, float("nan")
        stages = list(zip([["eff", "alpha"], ["o"] + ["fit:" + k for k in keys],
                           ["kappa", "gamma", "wake", "lead"] + ["cpu:" + k for k in ckeys]],
                          stage_points(points)))
        if a.stages:
            stages = [stages[int(i) - 1] for i in a.stages.split(",")]
        held = set(a.hold.split(",")) - {""}
        for free, pts in stages:
            free = [k for k in free if k not in held]
            if not free or not [p for p in pts if p.get("use", True)]:
                continue
            lo, hi = _bounds(free)
            f = objective(pts, free, fit)
            x, val, nev = nelder_mead(f, _pack(fit, free), lo, hi, a.evals)
            x, val, nev2 = nelder_mead(f, x, lo, hi, a.evals // 3, step=0.2)
            fit = _unpack(x, free, fit)
            total += nev + nev2
            print(f"# stage {free}: objective {val:.4f} ({nev + nev2} evaluations)", flush=True)
        nev, nev2 = total, 0
        rows = table(points, fit)
        out = dict(fit)
        out["objective"] = val
        out["objectives"] = stage_objectives(points, rows)
        out["evaluations"] = nev + nev2
        out["points"] = a.points if not a.points.startswith(HERE) else os.path.relpath(a.points, HERE)
        out["table"] = rows
        with open(a.out or a.params, "w") as f:
            json.dump(out, f, indent=1)
        print(f"# fit: kappa {fit.get('kappa', 0) * 1e9:.3f} ns/B, wake {fit.get('wake', 0) * 1e6:.1f} us, cpu "
              + ", ".join(f"{k} {v:.2f}" for k, v in fit.get("cpu", {}).items()))
        print(f"# fit: alpha {fit['alpha'] * 1e6:.1f} us, o {fit['o'] * 1e6:.2f} us, "
              f"gamma {fit['gamma'] * 1e9:.3f} ns/B, eff {fit['eff']:.4f}, compute "
              + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in fit["compute"].items())
              + f" ({nev + nev2} evaluations, objective {val:.4f})")
        print_table(rows, a.tol)
        return 0
    fit = json.load(open(a.params))
    rows = table(points, fit)
    bad = print_table(rows, a.tol)
    print("# objective (sum of log(simulated / measured)^2 over the used points): " +
          ", ".join(f"{k} {v}" for k, v in stage_objectives(points, rows).items()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
