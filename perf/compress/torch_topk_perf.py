#!/usr/bin/python3
"""torch_topk_perf.py - torch.topk next to gcx's compressors, same data, one run.

For each size N it runs gcx_compress_perf on N (which prints its rows and
writes its input to a temporary file), then times torch.topk on that very
input, with one thread, and prints rows in the same columns:

  size count cf k compressor | time(ms) min(ms) GB/s x_stream nnz #wrong

  torch.norm   torch.linalg.vector_norm(x): torch's own streaming pass
  torch.topk   torch.topk(|x|, k, sorted=False) with |x| computed beforehand
               (the selection alone: the fairest case for torch)
  torch.abs+k  torch.topk(x.abs(), k, sorted=False): what a compressor pays

x_stream divides by gcx's stream row of the same size (the same yardstick
for both libraries). A summary compares the figures of issue #3: topk vs a
streaming pass, topk vs torch.topk, dgc vs a streaming pass, multi-level
topk vs direct.

Times are thread CPU time by default (robust when other jobs share the
machine; --clock wall for wall time), median of --reps runs after a warm-up,
as in gcx_compress_perf. Needs Debian's python3-torch: run it with
/usr/bin/python3 when another python3 comes first in PATH.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import torch
except ImportError as exc:  # pragma: no cover - depends on the machine
    sys.exit(f"torch_topk_perf.py: {exc}; run it with /usr/bin/python3 "
             "(Debian's python3-torch)")


def parse_size(text):
    mult = {"k": 1e3, "m": 1e6, "g": 1e9}
    text = text.strip()
    if text[-1].lower() in mult:
        return int(float(text[:-1]) * mult[text[-1].lower()])
    return int(float(text))


def k_of(n, cf):
    """gcx_compress_k: the smallest k with k * cf >= n, at most n."""
    k = math.ceil(n / cf)
    while k > 0 and (k - 1) * cf >= n:
        k -= 1
    while k * cf < n:
        k += 1
    return min(k, n)


def timed(fn, reps, clock):
    now = time.thread_time_ns if clock == "cpu" else time.perf_counter_ns
    result = fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = now()
        result = fn()
        times.append((now() - t0) * 1e-6)
    times.sort()
    mid = len(times) // 2
    med = times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid])
    return med, times[0], result


def print_header():
    print("# %12s %11s %6s %10s %-10s | %9s %9s %8s %8s %10s %6s" %
          ("size", "count", "cf", "k", "compressor", "time(ms)", "min(ms)",
           "GB/s", "x_stream", "nnz", "#wrong"))


def print_row(row):
    cf = "%g" % row["cf"] if row["cf"] > 0 else "-"
    k = str(row["k"]) if row["cf"] > 0 else "-"
    print("  %12.0f %11d %6s %10s %-10s | %9.3f %9.3f %8.2f %8.2f %10d %6d" %
          (row["size_bytes"], row["count"], cf, k, row["compressor"],
           row["time_ms"], row["min_ms"], row["gbps"], row["x_stream"],
           row["nnz"], row["wrong"]), flush=True)


def torch_rows(x, n, cfs, reps, clock, stream_ms):
    """Rows for torch on the float32 tensor x of n entries."""
    rows = []
    nbytes = 4.0 * n

    def row(name, cf, k, med, mn, nnz, wrong):
        r = {"impl": "torch", "size_bytes": nbytes, "count": n, "cf": cf,
             "k": k, "compressor": name, "time_ms": med, "min_ms": mn,
             "gbps": nbytes / med * 1e-6, "x_stream": med / stream_ms,
             "nnz": nnz, "wrong": wrong}
        print_row(r)
        rows.append(r)

    med, mn, _ = timed(lambda: torch.linalg.vector_norm(x), reps, clock)
    row("torch.norm", 0, 0, med, mn, 0, 0)
    a = x.abs()
    for cf in cfs:
        k = k_of(n, cf)
        med, mn, (vals, idx) = timed(
            lambda: torch.topk(a, k, sorted=False), reps, clock)
        # check: nothing outside the selection is larger than its minimum
        vmin = vals.min()
        wrong = int((a > vmin).sum().item()) - int((vals > vmin).sum().item())
        wrong += int((a[idx] != vals).sum().item())
        row("torch.topk", cf, k, med, mn, k, wrong)
        med, mn, _ = timed(
            lambda: torch.topk(x.abs(), k, sorted=False), reps, clock)
        row("torch.abs+k", cf, k, med, mn, k, 0)
    return rows


def run_gcx(gcx, n, args, tmp):
    """Run gcx_compress_perf on size n; returns its rows (and input file)."""
    jpath = os.path.join(tmp, "gcx_%d.json" % n)
    cmd = [gcx, "--sizes", str(n), "--cfs", ",".join("%g" % c for c in args.cfs),
           "--reps", str(args.reps), "--clock", args.clock, "--dump", tmp,
           "--json", jpath]
    if args.kinds:
        cmd += ["--kinds", args.kinds]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    for line in proc.stdout.splitlines():
        if not line.startswith("#"):
            print(line, flush=True)
    if proc.returncode != 0:
        sys.exit("gcx_compress_perf failed (%d): %s" % (proc.returncode,
                                                       " ".join(cmd)))
    with open(jpath) as fp:
        rows = json.load(fp)
    os.unlink(jpath)
    return rows, os.path.join(tmp, "gcx_compress_input_%d.f32" % n)


def make_input(n, seed):
    """Gradient-like data when no gcx binary is given (not the same data)."""
    gen = np.random.default_rng(seed)
    x = gen.standard_normal(n, dtype=np.float32)
    scales = 10.0 ** (-2.0 * gen.random((n + 65535) // 65536))
    x *= np.repeat(scales, 65536)[:n].astype(np.float32)
    return x


def summary(rows):
    """The figures of issue #3, from the rows of one run."""
    def get(impl, name, n, cf=0):
        for r in rows:
            if (r["impl"] == impl and r["compressor"] == name and
                    r["count"] == n and (cf == 0 or r["cf"] == cf)):
                return r["time_ms"]
        return None

    print("# summary (median times of this run)")
    for n in sorted({r["count"] for r in rows}):
        stream = get("gcx", "stream", n)
        for cf in sorted({r["cf"] for r in rows if r["count"] == n and r["cf"] > 0}):
            topk = get("gcx", "topk", n, cf)
            dgc = get("gcx", "dgc", n, cf)
            l2 = get("gcx", "topk.l2", n, cf)
            ml = get("gcx", "topk.ml", n, cf)
            ttopk = get("torch", "torch.topk", n, cf)
            tabs = get("torch", "torch.abs+k", n, cf)
            parts = ["#  N=%-10d CF=%-5g" % (n, cf)]
            if topk and stream:
                parts.append("topk %.2fx stream" % (topk / stream))
            if topk and ttopk:
                parts.append("torch.topk/topk %.1fx" % (ttopk / topk))
            if topk and tabs:
                parts.append("torch.abs+k/topk %.1fx" % (tabs / topk))
            if dgc and stream:
                parts.append("dgc %.2fx stream" % (dgc / stream))
            if l2 and topk:
                parts.append("ml 2nd level %.2f ms vs direct %.2f ms" % (l2, topk))
            if ml and topk:
                parts.append("ml both levels %.2f ms" % ml)
            print(", ".join(parts))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gcx", help="path of gcx_compress_perf (same data, "
                    "gcx rows too); without it only torch rows on own data")
    ap.add_argument("-n", "--sizes", default="1M,25M,100M")
    ap.add_argument("-c", "--cfs", default="10,100,1000")
    ap.add_argument("-k", "--kinds", default="",
                    help="rows of gcx_compress_perf (its --kinds)")
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="write every row (gcx and torch) here")
    ap.add_argument("--tmpdir", default=None,
                    help="where the inputs are written (default: $TMPDIR)")
    args = ap.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    args.cfs = [float(c) for c in args.cfs.split(",")]

    torch.set_num_threads(args.threads)
    print("# torch %s, %d thread(s), %s time, median of %d runs after a "
          "warm-up; x_stream = time / gcx stream time" %
          (torch.__version__, torch.get_num_threads(),
           "thread CPU" if args.clock == "cpu" else "wall", args.reps))
    print_header()
    rows = []
    with tempfile.TemporaryDirectory(dir=args.tmpdir) as tmp:
        for n in args.sizes:
            if args.gcx:
                grows, path = run_gcx(args.gcx, n, args, tmp)
                rows += grows
                x = torch.from_numpy(np.fromfile(path, dtype=np.float32))
                os.unlink(path)
                stream = [r for r in grows if r["compressor"] == "stream"]
                stream_ms = stream[0]["time_ms"]
            else:
                x = torch.from_numpy(make_input(n, 1))
                stream_ms, _, _ = timed(lambda: torch.linalg.vector_norm(x),
                                        args.reps, args.clock)
            rows += torch_rows(x, n, args.cfs, args.reps, args.clock, stream_ms)
            del x
    summary(rows)
    if args.json:
        with open(args.json, "w") as fp:
            json.dump(rows, fp, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
