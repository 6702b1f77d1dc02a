#!/usr/bin/env python3
"""bench_select.py: the device path's two top-k selections (torch_gcx.hooks:
select_topk = torch.topk, select_threshold = DGC's sampled threshold) on one
device, timed and judged, for the pick rule of hooks' select="auto".

For each size N and CF: a residual-like vector (normal entries), k =
ceil(N / CF); each selection's median time over REPS calls (the device
synchronised around each call), the entries it sends, and its recall: the
|mass| it sends over the |mass| of the exact top-k (1.0 for topk). Also the
time of the accumulate (e += g) that both pay, as a scale.

    python perf/gpu/bench_select.py [--device cuda] [--sizes 1M,4M,25M]
        [--cfs 100,1000] [--reps 20] [--json FILE]

--device: cuda (the default where torch sees CUDA, else cpu), cpu, or a
custom device type such as simdev (its module torch_<type> is imported
first); the device is synchronised through torch.get_device_module().

Prints a markdown table; --json writes the rows. Cost: per size, about
(2 + REPS x 3) passes over N floats per CF; 25M floats ~ 0.3 GB.
"""
import argparse
import importlib
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "coll"))
from gloo_allreduce_perf import parse_size  # noqa: E402  ('64M' -> bytes)


def device_sync(dev):
    """A function that waits for dev's queued work (nothing on the CPU)."""
    if dev.type == "cpu":
        return lambda: None
    mod = torch.get_device_module(dev.type)
    return lambda: mod.synchronize(dev)


def timed(fn, dev, reps):
    sync = device_sync(dev)
    out = fn()  # warm-up (allocations, kernels)
    ts = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available()
                    else "cpu")
    ap.add_argument("--sizes", default="1M,4M,16M",
                    help="entry counts (K/M suffixes: x1024)")
    ap.add_argument("--cfs", default="100,1000")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    kind = args.device.split(":")[0]  # torch.device() knows it only once imported
    if kind not in ("cpu", "cuda"):
        importlib.import_module(f"torch_{kind}")  # registers the device type
        os.environ.setdefault("GCX_TORCH_DEVICES", f"cpu,cuda,{kind}")
    from torch_gcx import hooks as H
    dev = torch.device(args.device)
    torch.manual_seed(0)
    rows = []
    for n in [parse_size(s) for s in args.sizes.split(",") if s]:
        e = torch.randn(n + 1, device=dev)
        e[n] = 0
        g = torch.randn(n, device=dev)
        t_acc, _ = timed(lambda: e[:n].add_(g), dev, args.reps)
        e[:n].sub_(g.mul(args.reps + 1))  # undo the accumulates
        mag = e.abs()
        mag[n] = -1
        for cf in [float(c) for c in args.cfs.split(",") if c]:
            k = H.k_of(n, cf)
            best = float(mag[H.select_topk(mag, n, k)].sum())
            sample = H._sample_of(n, dev, 0)
            for name, fn in (
                    ("topk", lambda: H.select_topk(mag, n, k)),
                    ("threshold",
                     lambda: H.select_threshold(mag, n, k, sample))):
                t, idx = timed(fn, dev, args.reps)
                real = idx[idx < n]
                rows.append({
                    "device": str(dev), "n": n, "cf": cf, "k": k,
                    "select": name, "time_ms": round(t * 1e3, 3),
                    "sent": int(real.numel()),
                    "recall": round(float(mag[real].sum()) / best, 4)
                    if best > 0 else 1.0,
                    "accumulate_ms": round(t_acc * 1e3, 3)})
                print(f"# {name:9} n={n} cf={cf:g}: {t * 1e3:.2f} ms",
                      file=sys.stderr, flush=True)
    hdr = ["device", "N", "CF", "k", "select", "time (ms)", "sent",
           "recall", "e += g (ms)"]
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in rows:
        print(f"| {r['device']} | {r['n']} | {r['cf']:g} | {r['k']} | "
              f"{r['select']} | {r['time_ms']:.2f} | {r['sent']} | "
              f"{r['recall']:.3f} | {r['accumulate_ms']:.2f} |")
    if args.json:
        tmp = f"{args.json}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump({"torch": torch.__version__, "device": str(dev),
                       "rows": rows}, f, indent=1)
        os.replace(tmp, args.json)  # a reader never sees half a file
    return 0


if __name__ == "__main__":
    sys.exit(main())
