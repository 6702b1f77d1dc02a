#!/usr/bin/env python3
"""plot.py - step time against n (4 .. 1024, log x) for the star, the
master-less coded allreduce (owner role free / blocked), DDP's ring and
ignore-stragglers; four panels: no stragglers, exp:1, one rank 200 ms slow,
s dead ranks. Writes step-vs-n-CONFIG.png, table-CONFIG.md and
results-CONFIG.json into perf/sim/ (or --out).

    python plot.py [--config cluster|emulated|all] [--rounds 12] [--big-rounds 3]

Needs matplotlib (and numpy). Network and CPU parameters alpha, o, gamma,
eff come from params.json (calibrate.py fit); the configurations:
  emulated  1 Gbit/s links, |g| = 861,484 B (the CNN of perf/torch's coded
            study), c = 10 ms (a round figure: the fit, the 2 CPUs shared,
            has 7.1 ms per CNN partition on a core of its own and 7.4 ms
            per step outside it at 4 ranks), no tbf
            burst, one rank per node (no CPU sharing)
  cluster   10 Gbit/s links, |g| = 100 MB (a 25M-parameter model), c = 100 ms
Both: s = 1, FR code, pgc-style compute (one partition per step).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sim  # noqa: E402

NS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
TABLE_NS = (4, 8, 16, 64, 256, 1024)
SCHEMES = ("star", "masterless", "masterless-impl", "masterless-blocked", "ring", "ignore")
DEAD_EXTRA = "masterless-resplit"   # the dead-ranks panel only
LABEL = {"star": "star (coded gather)", "masterless": "master-less (idealised), owner role free",
         "masterless-impl": "master-less as implemented (copies, COMMIT), owner free",
         "masterless-blocked": "master-less, owner role blocked",
         "ring": "DDP ring allreduce", "ignore": "ignore-stragglers (n-s fastest + ring)",
         "masterless-resplit": "master-less, chunks re-split over the live ranks"}
STYLE = {"star": "C3-o", "masterless": "C0-s", "masterless-impl": "C1-P", "masterless-blocked": "C0--^",
         "ring": "C2-D", "ignore": "C7-v", "masterless-resplit": "C9:x"}
PANELS = (("none", "no stragglers"), ("exp:1", "exp:1 (every worker, mean delay = c)"),
          ("slow:1:200", "rank 1 slow by 200 ms per step"), ("dead:1", "s = 1 dead rank"))


def configs(fit):
    cnn = 0.010   # a round figure for one CNN partition (docstring)
    base = {k: fit[k] for k in ("alpha", "o", "gamma", "eff", "kappa") if k in fit}
    return {
        "emulated": dict(base, rate=1e9, gbytes=861484.0, compute=cnn, burst=0.0, cores=0.0),
        "cluster": dict(base, rate=10e9, gbytes=100e6, compute=0.1, burst=0.0, cores=0.0),
    }


def run(cfg, rounds, big_rounds, s=1):
    res = {}
    for st, _ in PANELS:
        res[st] = {}
        for n in NS:
            R = 1 if st in ("none", "slow:1:200") else (rounds if n <= 256 else big_rounds)
            p = sim.params(n=n, s=s, code="fr", straggler=st, rounds=R, seed=1, **cfg)
            row = {}
            for sc in panel_schemes(st):
                t0 = time.time()
                x = sim.simulate(p, sc)
                row[sc] = float(np.mean(x))
                row[sc + ":secs"] = time.time() - t0
            res[st][n] = row
            print(f"# {st:10s} n={n:5d} " + " ".join(f"{sc}={1e3 * row[sc]:.1f}"
                                                    for sc in panel_schemes(st)), flush=True)
    return res


def panel_schemes(st):
    return SCHEMES + ((DEAD_EXTRA,) if st.startswith("dead") else ())


def table(res, cfgname, cfg):
    out = [f"Step time (ms, mean over the simulated rounds), configuration `{cfgname}`: "
           f"{cfg['rate'] / 1e9:g} Gbit/s links, |g| = {cfg['gbytes']:.0f} B, "
           f"c = {1e3 * cfg['compute']:.2f} ms, s = 1, FR.", ""]
    for st, title in PANELS:
        out.append(f"**{title}**")
        out.append("")
        sch = panel_schemes(st)
        out.append("| n | " + " | ".join(LABEL[s] for s in sch)
                   + " | master-less (idealised) / ring | master-less as implemented / ring |")
        out.append("|---" * (len(sch) + 3) + "|")
        for n in TABLE_NS:
            r = res[st][n]
            out.append(f"| {n} | " + " | ".join(f"{1e3 * r[s]:.1f}" for s in sch)
                       + f" | {r['masterless'] / r['ring']:.2f} | {r['masterless-impl'] / r['ring']:.2f} |")
        out.append("")
    return "\n".join(out)


def plot(res, cfgname, cfg, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(12, 9), sharex=True)
    for ax, (st, title) in zip(axes.ravel(), PANELS):
        for sc in panel_schemes(st):
            y = [1e3 * res[st][n][sc] for n in NS]
            ax.plot(NS, y, STYLE[sc], label=LABEL[sc], ms=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_xticks(NS)
        ax.set_xticklabels([str(n) for n in NS])
    for ax in axes[1]:
        ax.set_xlabel("ranks n")
    for ax in axes[:, 0]:
        ax.set_ylabel("step time (ms)")
    axes[0, 0].legend(fontsize=8)
    axes[1, 1].legend(fontsize=7)
    fig.suptitle(f"perf/sim: {cfgname}: {cfg['rate'] / 1e9:g} Gbit/s links, "
                 f"|g| = {cfg['gbytes'] / 1e6:.3g} MB, c = {1e3 * cfg['compute']:.1f} ms, "
                 f"s = 1 (FR), alpha {1e6 * cfg['alpha']:.0f} us, o {1e6 * cfg['o']:.1f} us, "
                 f"kappa {1e9 * cfg.get('kappa', 0):.2f} ns/B")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="all", choices=["all", "emulated", "cluster"])
    ap.add_argument("--rounds", type=int, default=12, help="Monte-Carlo rounds, n <= 256")
    ap.add_argument("--big-rounds", type=int, default=3, help="rounds at n = 512, 1024")
    ap.add_argument("--params", default=os.path.join(HERE, "params.json"))
    ap.add_argument("--out", default=HERE)
    a = ap.parse_args(argv)
    fit = json.load(open(a.params)) if os.path.exists(a.params) else {}
    cfgs = configs(fit)
    names = list(cfgs) if a.config == "all" else [a.config]
    for name in names:
        res = run(cfgs[name], a.rounds, a.big_rounds)
        with open(os.path.join(a.out, f"results-{name}.json"), "w") as f:
            json.dump({"config": cfgs[name], "results": res}, f, indent=1)
        md = table(res, name, cfgs[name])
        with open(os.path.join(a.out, f"table-{name}.md"), "w") as f:
            f.write(md + "\n")
        print(md)
        plot(res, name, cfgs[name], os.path.join(a.out, f"step-vs-n-{name}.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
