"""perf/sim self-check: the event simulation reproduces the closed formulas
without stragglers, a few invariants with them, and calibrate.py's
per-stage objective. Not timing-dependent.

    build-venv/bin/python -m pytest -q -p no:cacheprovider perf/sim/test_sim.py
    build-venv/bin/python perf/sim/test_sim.py        # without pytest
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim  # noqa: E402

CASES = [
    # n, |g|, rate, alpha, o, gamma, c, s, code
    (4, 4 * 2**20, 1e9, 50e-6, 20e-6, 0.1e-9, 0.01, 1, "fr"),
    (8, 861484, 1e9, 100e-6, 40e-6, 0.5e-9, 0.02, 1, "cr"),
    (16, 4 * 2**20, 10e9, 20e-6, 5e-6, 0.2e-9, 0.0, 1, "fr"),
    (12, 3 * 2**20, 1e9, 30e-6, 10e-6, 0.1e-9, 0.005, 2, "fr"),
    (64, 100e6, 10e9, 50e-6, 20e-6, 0.1e-9, 0.1, 1, "cr"),
    (256, 2**20, 10e9, 10e-6, 30e-6, 0.1e-9, 0.0, 3, "fr"),  # o > m/B: CPU-bound sends
]
SCHEMES = ("ring", "ignore", "star", "masterless", "masterless-blocked")


def _p(case, **kw):
    n, g, rate, alpha, o, gamma, c, s, code = case
    kw.setdefault("code", code)
    return sim.params(n=n, gbytes=g, rate=rate, alpha=alpha, o=o, gamma=gamma,
                      compute=c, s=s, rounds=1, **kw)


def test_closed_formulas():
    for case in CASES:
        p = _p(case)
        for sc in SCHEMES:
            ev = float(sim.simulate(p, sc)[0])
            cl = sim.closed(p, sc)
            assert abs(ev / cl - 1) < 1e-9, (case, sc, ev, cl)


def test_gc_parts_and_star_ignore():
    # n = 7: the closed forms take CR's guarantee (any n-s), which is the
    # decoder's rule there (n + s even, cr_prefix)
    p = _p((7,) + CASES[1][1:], coded_parts="gc")
    for sc in ("star", "masterless"):
        assert abs(sim.simulate(p, sc)[0] / sim.closed(p, sc) - 1) < 1e-9
    p = _p(CASES[0], code="ignore")
    assert abs(sim.simulate(p, "star")[0] / sim.closed(p, "star") - 1) < 1e-9


def test_cr_prefix_is_the_first_decodable_set():
    """cr_prefix against linear algebra on src/coding/cr.c's matrix for
    s = 1, n + s odd (H: the cos row of frequency n/2; B_ii = 1,
    B_i,i+1 = -H_i+1 / H_i): a set decodes when the all-ones vector is
    in the span of its rows."""
    rng = np.random.default_rng(5)
    for n in (4, 6, 8, 16):
        H = np.cos(np.pi * np.arange(n))
        B = np.zeros((n, n))
        for i in range(n):
            B[i, i] = 1.0
            B[i, (i + 1) % n] = -H[(i + 1) % n] / H[i]
        order = np.array([rng.permutation(n) for _ in range(40)])
        got = sim.cr_prefix(order, n, 1)
        for row, k in zip(order, got):
            want = next(j for j in range(1, n + 1)
                        if np.linalg.norm(np.linalg.lstsq(B[row[:j]].T, np.ones(n),
                                                          rcond=None)[0] @ B[row[:j]]
                                          - np.ones(n)) < 1e-9)
            assert k == want, (n, row, k, want)


def test_link_scan_matches_a_loop():
    rng = np.random.default_rng(3)
    seg = rng.integers(0, 4, 60)
    a = rng.uniform(0, 1e-2, 60)
    m = rng.uniform(1e3, 1e5, 60)
    B, sigma, o = 1e8, 5e4, 2e-5
    got = sim._link_scan(seg, a, m, B, sigma, o)
    for s in range(4):
        idx = np.flatnonzero(seg == s)
        idx = idx[np.argsort(a[idx], kind="stable")]
        cpu, tok, t_last = -np.inf, sigma, 0.0
        for i in idx:   # token bucket, step by step
            cpu = max(cpu, a[i]) + o
            t0 = max(cpu, t_last)
            tok = min(sigma, tok + (t0 - t_last) * B)
            need = max(0.0, m[i] - tok)
            end = t0 + need / B
            tok = max(0.0, tok - m[i])
            t_last = end
            assert abs(got[i] - end) < 1e-12, (s, i, got[i], end)


def test_straggler_invariants():
    base = dict(n=16, gbytes=4 * 2**20, rate=1e9, alpha=50e-6, o=20e-6,
                gamma=0.1e-9, compute=0.02, s=1, rounds=8)
    none = sim.params(**base)
    slow = sim.params(straggler="slow:3:200", **base)
    t0 = {sc: sim.simulate(none, sc).mean() for sc in SCHEMES}
    t1 = {sc: sim.simulate(slow, sc).mean() for sc in SCHEMES}
    # the ring waits 200 ms for the slow rank; the free-owner master-less
    # allreduce and the star do not; the blocked owner does
    assert abs(t1["ring"] - t0["ring"] - 0.2) < 1e-9
    assert abs(t1["masterless"] / t0["masterless"] - 1) < 0.01
    assert abs(t1["star"] / t0["star"] - 1) < 0.01
    assert t1["masterless-blocked"] > t0["masterless-blocked"] + 0.19
    # exp:M: every scheme slower, none faster than its no-straggler step
    ex = sim.params(straggler="exp:1", **base)
    for sc in SCHEMES:
        assert np.all(sim.simulate(ex, sc) >= t0[sc] - 1e-12), sc
    # dead ranks: decodable with s dead, an error with more
    dead = sim.params(straggler="dead:1", **base)
    for sc in ("star", "masterless"):
        assert np.isfinite(sim.simulate(dead, sc)).all()
    # re-splitting over the live ranks: no dearer than without the death;
    # the acting owner of two chunks is
    rs = sim.simulate(dead, "masterless-resplit").mean()
    assert rs <= t0["masterless"] + 1e-9 < sim.simulate(dead, "masterless").mean()
    assert abs(sim.simulate(none, "masterless-resplit").mean() - t0["masterless"]) < 1e-12
    try:
        sim.simulate(sim.params(straggler="dead:2", **base), "masterless")
    except ValueError:
        pass
    else:
        raise AssertionError("dead:2 with s = 1 should not decode")


def test_masterless_impl():
    """the implemented protocol (copies, ACK/COMMIT): never ahead of
    the idealised master-less step, one ACK round trip plus a chunk behind
    it at most when copies are free; a late rank's chunks do not hold it;
    the CPU slow-down f is o, gamma, kappa scaled by f and alpha + wake (f - 1)."""
    for n, code in ((8, "fr"), (8, "cr"), (16, "fr"), (12, "cr")):
        base = dict(n=n, gbytes=4 * 2**20, rate=1e9, alpha=50e-6, o=20e-6,
                    gamma=0.1e-9, compute=0.01, s=1, code=code, rounds=1)
        p = sim.params(**base)
        ideal = sim.simulate(p, "masterless")[0]
        impl = sim.simulate(p, "masterless-impl")[0]
        m = p.gbytes / n
        assert ideal - 1e-12 <= impl <= ideal + 2 * m / p.B + 4 * (p.o + p.alpha) + n * p.gamma * m, (n, code)
        slow = sim.simulate(sim.params(straggler="slow:3:200", **base), "masterless-impl")[0]
        assert slow < impl * 1.1, (n, code, slow, impl)
        k = sim.simulate(sim.params(kappa=0.5e-9, **base), "masterless-impl")[0]
        assert k > impl
        f = sim.simulate(sim.params(cpu_scale=4.0, kappa=0.5e-9, wake=1e-4, **base), "masterless-impl")[0]
        b2 = dict(base, o=4 * base["o"], gamma=4 * base["gamma"], alpha=base["alpha"] + 3e-4)
        g = sim.simulate(sim.params(kappa=2e-9, **b2), "masterless-impl")[0]
        assert abs(f - g) < 1e-12
        assert sim.params(n=16, cpus=2, load=20).cpu_factor == 18.0


def test_stage_objectives():
    """calibrate's per-stage objective: each stage's used points only (the
    car-* ones in stage 3 alone, the collectives without compute in 1 and
    2), the sum of squared log errors."""
    import math
    import calibrate
    pts = [{"id": "ring-a", "compute": 0, "measured_s": 1.0},
           {"id": "torch-b", "compute": "fit:k", "measured_s": 2.0},
           {"id": "torch-c", "compute": 0.01, "measured_s": 1.0, "use": False},
           {"id": "car-d", "compute": 0.005, "measured_s": 4.0}]
    sim_s = {"ring-a": 1.1, "torch-b": 1.5, "torch-c": 9.0, "car-d": 5.0}
    rows = [{"id": p["id"], "measured_s": p["measured_s"], "simulated_s": sim_s[p["id"]]}
            for p in pts]
    got = calibrate.stage_objectives(pts, rows)
    l2 = lambda a, b: math.log(a / b) ** 2  # noqa: E731
    assert got["stage1"] == round(l2(1.1, 1.0), 4)
    assert got["stage2"] == round(l2(1.1, 1.0) + l2(1.5, 2.0), 4)
    assert got["stage3"] == round(l2(5.0, 4.0), 4)


if __name__ == "__main__":
    for name, f in list(globals().items()):
        if name.startswith("test_"):
            f()
            print("ok", name)
