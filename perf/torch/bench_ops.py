#!/usr/bin/env python3
"""bench_ops.py: torch.distributed collectives, backend "gcx" against "gloo",
in the nccl-tests format, both in one run.

Idea: every rank joins one default process group (gloo) and one more group
over all ranks with the backend "gcx" (torch_gcx registers it), so the two
backends run in the same processes, seconds apart. A round times every op
and size on one backend, then on the other (the order flips each round, so
neither is always first); ROUNDS rounds (default 3). For one op, size and
backend: WARMUP untimed calls, then ITERS timed ones; each call is timed on
every rank (start of the call to wait() done), the slowest rank's time of
each iteration is kept (an all_reduce MAX of the times, outside the clock)
and the median over iterations reported, as perf/coll's drivers do. Then
the result of one more call with known inputs is checked (#wrong).

Columns follow nccl-tests: size = bytes of the whole buffer (all_reduce and
broadcast: the tensor; all_gather_into_tensor: the output of P chunks;
reduce_scatter_tensor: the input of P chunks), count = float32 elements in
it, algbw = size / time, busbw = algbw * factor with nccl-tests' factors:
all_reduce 2(P-1)/P, all_gather and reduce_scatter (P-1)/P, broadcast 1.
busbw is what one link carried, comparable to the link rate.

The summary, per op and size: each backend's median over rounds of its
median time (and algbw, busbw from it), the paired ratio gcx/gloo = median
over rounds of round r's busbw ratio (both runs of a round share the box's
state), and in how many rounds gcx was at least as fast. It is printed as a
markdown table (rank 0, stdout) and written with every raw row as CSV to
--out (ops.csv, summary.csv, summary.md).

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT:
    perf/torch/launch_local.py -n 2 -- python perf/torch/bench_ops.py --out DIR
    perf/cluster/emulate.sh -n 4 --rate 1gbit -q -- python perf/torch/bench_ops.py --out DIR
(perf/torch/run_ops.sh does both). Under emulate.sh gloo is put on eth0
(GLOO_SOCKET_IFNAME) and gcx on UCX tcp over eth0 (emulate.sh's UCX_TLS).

Cost: per rank, the largest size three times over (all_gather's and
reduce_scatter's buffers are P chunks) plus a copy for checking, ~200 MB at
64 MB; time = rounds x backends x ops x sum over sizes of (WARMUP + ITERS)
calls; on 1 Gbit/s links with 4 ranks, 1..64 MB, 10 + 2 iterations, about
2-3 minutes a round for the four ops.
"""
import argparse
import csv
import datetime
import os
import statistics
import sys
import time
import warnings

import torch
import torch.distributed as dist

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "coll"))
from gloo_allreduce_perf import parse_size  # noqa: E402  ('64M' -> bytes)


def init_gloo_default_group():
    """The benchmarks' common start (bench_ops.py, bench_fsdp.py): one torch
    thread, gloo as the default group from the launcher's env:// (on the
    emulated NIC under emulate.sh), a 600 s timeout, which is returned for
    the groups made next."""
    if "GCX_EMU_NETNS" in os.environ:
        # under emulate.sh the host name resolves to loopback: put gloo on the emulated NIC
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=600)
    dist.init_process_group("gloo", timeout=timeout)
    return timeout


def bus_factor(op, p):
    if p == 1:
        return 1.0
    if op == "all_reduce":
        return 2.0 * (p - 1) / p
    if op in ("all_gather", "reduce_scatter"):
        return (p - 1) / p
    return 1.0  # broadcast


class Buffers:
    """One allocation per role, sized for the largest size, viewed per size."""

    def __init__(self, max_count):
        self.big = torch.empty(max_count, dtype=torch.float32)    # full buffer
        self.big2 = torch.empty(max_count, dtype=torch.float32)   # reduce_scatter input

    def setup(self, op, count, rank, p):
        """Views (and fills) for one op at `count` elements of the whole buffer."""
        chunk = count // p
        if op == "all_reduce":
            t = self.big[:count]
            t.fill_(rank + 1)
            return (t,)
        if op == "broadcast":
            t = self.big[:count]
            t.fill_(7.0 if rank == 0 else 0.0)
            return (t,)
        if op == "all_gather":
            out, inp = self.big[:count], self.big2[:chunk]
            inp.fill_(rank + 1)
            return out, inp
        inp, out = self.big2[:count], self.big[:chunk]   # reduce_scatter
        inp.fill_(rank + 1)
        return out, inp

    @staticmethod
    def wrong(op, views, p):
        """Elements that differ from the expected result of one call after setup().
        The comparison runs on the output's device: no CPU tensor enters it
        (CUDA refuses a non-scalar CPU operand; bench_gpu.py checks device outputs)."""
        out = views[0]
        if op == "all_gather":
            want = torch.arange(1, p + 1, dtype=out.dtype, device=out.device).view(p, 1)
            bad = (out.view(p, -1) != want).sum()
        elif op == "broadcast":
            bad = (out != 7.0).sum()
        else:  # all_reduce, reduce_scatter: the sum of rank + 1 over the ranks
            bad = (out != p * (p + 1) / 2).sum()
        return int(bad)


def call(op, views, group):
    if op == "all_reduce":
        work = dist.all_reduce(views[0], group=group, async_op=True)
    elif op == "broadcast":
        work = dist.broadcast(views[0], src=0, group=group, async_op=True)
    elif op == "all_gather":
        work = dist.all_gather_into_tensor(views[0], views[1], group=group, async_op=True)
    else:
        work = dist.reduce_scatter_tensor(views[0], views[1], group=group, async_op=True)
    work.wait()


def measure(op, count, group, bufs, rank, p, iters, warmup):
    """Median over iterations of the slowest rank's time (s), and #wrong."""
    views = bufs.setup(op, count, rank, p)
    for _ in range(warmup):
        call(op, views, group)
    times = torch.empty(iters, dtype=torch.float64)
    for it in range(iters):
        t0 = time.perf_counter()
        call(op, views, group)
        times[it] = time.perf_counter() - t0
    dist.all_reduce(times, op=dist.ReduceOp.MAX, group=group)
    views = bufs.setup(op, count, rank, p)
    call(op, views, group)
    wrong = torch.tensor([float(Buffers.wrong(op, views, p))], dtype=torch.float64)
    dist.all_reduce(wrong, op=dist.ReduceOp.MAX, group=group)
    return statistics.median(times.tolist()), int(wrong.item())


def sizes_of(begin, end, factor, p):
    """Byte sizes begin, begin*factor, ... <= end; counts rounded down to a multiple of P."""
    out, n = [], begin
    while n <= end:
        count = (n // 4) // p * p
        if count > 0 and (not out or out[-1] != count):
            out.append(count)
        nxt = int(n * factor)
        n = nxt if nxt > n else n + 1
    return out


def fmt_size(b):
    for unit, div in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


def summarize(rows, backends, p, link, unsupported=None):
    """Markdown lines and summary rows from the raw rows (rank 0). Any of the
    backends may have no rows (it could not run: its cells are "-"), or there
    may be no backend at all: the table is still made. unsupported: {name:
    error}, listed under the table ("- name: unsupported: error")."""
    by = {}
    for r in rows:
        by.setdefault((r["op"], r["size"]), {}).setdefault(r["backend"], {})[r["round"]] = r
    base = backends[0] if backends else None
    other = backends[1] if len(backends) > 1 else None
    hdr = ["op", "size", "count", "type"]
    for b in backends:
        hdr += [f"{b} time (us)", f"{b} algbw (GB/s)", f"{b} busbw (GB/s)"]
    if other:
        hdr += [f"paired {base}/{other}", f"{base} ahead"]
    hdr += ["#wrong"]
    lines = ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    out_rows = []
    for (op, size) in sorted(by, key=lambda k: (OPS.index(k[0]), k[1])):
        per = by[(op, size)]
        first = next(iter(next(iter(per.values())).values()))
        cells = [op, fmt_size(size), str(first["count"]), "float"]
        srow = {"op": op, "ranks": p, "link": link, "size": size, "count": first["count"],
                "type": "float"}
        wrong = 0
        for b in backends:
            runs = per.get(b, {})
            if not runs:
                cells += ["-", "-", "-"]
                continue
            t = statistics.median(x["time_us"] for x in runs.values())
            alg = size / (t * 1e-6) / 1e9
            bus = alg * bus_factor(op, p)
            wrong += sum(x["wrong"] for x in runs.values())
            cells += [f"{t:.1f}", f"{alg:.3f}", f"{bus:.3f}"]
            srow.update({f"{b}_time_us": round(t, 1), f"{b}_algbw_gbps": round(alg, 4),
                         f"{b}_busbw_gbps": round(bus, 4), f"{b}_rounds": len(runs)})
        if other:
            ratios = [per[base][r]["busbw_gbps"] / per[other][r]["busbw_gbps"]
                      for r in per.get(base, {}) if r in per.get(other, {})
                      and per[other][r]["busbw_gbps"] > 0]
            med = statistics.median(ratios) if ratios else float("nan")
            ahead = sum(1 for x in ratios if x >= 1.0)
            cells += [f"{med:.2f}", f"{ahead}/{len(ratios)}"]
            srow.update({"paired_ratio": round(med, 4), "ahead": ahead, "paired_rounds": len(ratios)})
        cells.append(str(wrong))
        srow["wrong"] = wrong
        lines.append("| " + " | ".join(cells) + " |")
        out_rows.append(srow)
    if unsupported:
        lines += [""] + [f"- {b}: unsupported: {e}" for b, e in unsupported.items()]
    return lines, out_rows


def write_csv(path, rows):
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-b", type=parse_size, default=parse_size(os.environ.get("BEGIN", "1M")),
                    help="smallest size in bytes (env BEGIN, default 1M)")
    ap.add_argument("-e", type=parse_size, default=parse_size(os.environ.get("END", "64M")),
                    help="largest size in bytes (env END, default 64M)")
    ap.add_argument("-f", type=float, default=2.0, help="size factor (default 2)")
    ap.add_argument("-n", "--iters", type=int, default=int(os.environ.get("ITERS", "10")),
                    help="timed iterations (env ITERS, default 10)")
    ap.add_argument("-w", "--warmup", type=int, default=int(os.environ.get("WARMUP", "2")),
                    help="warm-up iterations (env WARMUP, default 2)")
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", "3")),
                    help="rounds, backends alternating (env ROUNDS, default 3)")
    ap.add_argument("--ops", default=os.environ.get("OPS", ",".join(OPS)),
                    help="comma list of " + ",".join(OPS) + " (env OPS, default all)")
    ap.add_argument("--backends", default=os.environ.get("BACKENDS", "gcx,gloo"),
                    help="comma list, the first is the ratio's numerator (env BACKENDS)")
    ap.add_argument("--out", default=os.environ.get("OUT", ""), help="folder for the CSVs (rank 0)")
    ap.add_argument("--link", default=os.environ.get("LINK", ""), help="label for the CSV (e.g. 1gbit)")
    args = ap.parse_args()
    ops = [o for o in args.ops.split(",") if o]
    backends = [b for b in args.backends.split(",") if b]
    if any(o not in OPS for o in ops) or not ops:
        ap.error(f"--ops: a comma list of {','.join(OPS)}")
    if not backends or any(b not in ("gcx", "gloo") for b in backends):
        ap.error("--backends: gcx and/or gloo")
    if args.e < args.b or args.f <= 1 or args.iters < 1 or args.warmup < 0 or args.rounds < 1:
        ap.error("need -e >= -b, -f > 1, -n >= 1, -w >= 0, --rounds >= 1")

    # torch 2.13 marks the two *_tensor calls deprecated (for *_single); they are what
    # DDP-era code calls and what both backends implement, so keep them, quietly
    warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed")
    if "gcx" in backends:
        import torch_gcx  # noqa: F401  registers the backend "gcx"
    timeout = init_gloo_default_group()
    rank, p = dist.get_rank(), dist.get_world_size()
    groups = {b: (dist.group.WORLD if b == "gloo" else dist.new_group(backend=b, timeout=timeout))
              for b in backends}
    counts = sizes_of(args.b, args.e, args.f, p)
    bufs = Buffers(counts[-1])
    if rank == 0:
        print(f"# torch.distributed ops, {'/'.join(backends)}: {p} ranks, {args.rounds} rounds, "
              f"{args.iters} iterations (median of the slowest rank), {args.warmup} warm-up, "
              f"float32, sizes {fmt_size(counts[0] * 4)}..{fmt_size(counts[-1] * 4)}"
              f"{', link ' + args.link if args.link else ''}", flush=True)
        if "gcx" in backends:
            print(f"# torch {torch.__version__}, gcx {torch_gcx.gcx_version()}, "
                  f"UCX_TLS={os.environ.get('UCX_TLS', '(unset)')}, "
                  f"GLOO_SOCKET_IFNAME={os.environ.get('GLOO_SOCKET_IFNAME', '(unset)')}", flush=True)
    rows = []
    t_start = time.monotonic()
    for rnd in range(1, args.rounds + 1):
        order = backends if rnd % 2 == 1 else backends[::-1]
        for b in order:
            g = groups[b]
            if rank == 0:
                print(f"# round {rnd}/{args.rounds}, {b} "
                      f"({time.monotonic() - t_start:.0f} s)", file=sys.stderr, flush=True)
                print(f"# {'backend':>7} {'op':>14} {'size':>10} {'count':>10} {'type':>6} | "
                      f"{'time(us)':>11} {'algbw(GB/s)':>11} {'busbw(GB/s)':>11} {'#wrong':>6}",
                      file=sys.stderr, flush=True)
            for op in ops:
                for count in counts:
                    t, wrong = measure(op, count, g, bufs, rank, p, args.iters, args.warmup)
                    size = count * 4
                    alg = size / t / 1e9
                    row = {"round": rnd, "backend": b, "op": op, "ranks": p, "link": args.link,
                           "size": size, "count": count, "type": "float",
                           "time_us": round(t * 1e6, 1), "algbw_gbps": round(alg, 4),
                           "busbw_gbps": round(alg * bus_factor(op, p), 4), "wrong": wrong}
                    rows.append(row)
                    if rank == 0:
                        print(f"  {b:>7} {op:>14} {size:10d} {count:10d} {'float':>6} | "
                              f"{row['time_us']:11.1f} {row['algbw_gbps']:11.3f} "
                              f"{row['busbw_gbps']:11.3f} {wrong:6d}", file=sys.stderr, flush=True)
            dist.barrier()
    failures = sum(1 for r in rows if r["wrong"])
    if rank == 0:
        lines, srows = summarize(rows, backends, p, args.link)
        print(f"\n{p} ranks{', link ' + args.link if args.link else ''}; times: median over "
              f"{args.rounds} rounds of the per-round median; paired: median over rounds of "
              f"round r's busbw ratio\n")
        print("\n".join(lines), flush=True)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            write_csv(os.path.join(args.out, "ops.csv"), rows)
            write_csv(os.path.join(args.out, "summary.csv"), srows)
            with open(os.path.join(args.out, "summary.md"), "w") as f:
                f.write("\n".join(lines) + "\n")
            print(f"\n# wrote {args.out}/ops.csv, summary.csv, summary.md", flush=True)
        if failures:
            print(f"# {failures} measurement(s) with wrong results", file=sys.stderr)
    for b in backends:
        if b != "gloo":
            dist.destroy_process_group(groups[b])
    dist.destroy_process_group()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
