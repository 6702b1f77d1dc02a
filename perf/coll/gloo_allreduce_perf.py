#!/usr/bin/env python3
"""gloo_allreduce_perf.py: torch.distributed allreduce (gloo backend) in the
format of gcx_allreduce_perf, so the two read side by side.

Idea: the same sizes, warm-up and iteration counts as perf_common.c; every
iteration is timed on every rank, the slowest rank's time of each iteration
is kept (an allreduce MAX of the times, as gcx_allreduce_perf does) and the
median reported; busbw = algbw * 2(P-1)/P. The result of one extra
allreduce is checked (rank r contributes r+1 everywhere).

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
(perf/cluster/emulate.sh, torchrun):
    perf/cluster/emulate.sh -n 4 --rate 1gbit -- \\
        VENV/bin/python perf/coll/gloo_allreduce_perf.py -b 1M -e 64M
Cost: one float32 tensor of the largest size, in and out of place as torch
does it (gloo reduces in place).
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def parse_size(text):
    """'64M' -> 67108864 (K, M, G are powers of 1024, as in perf_common.c)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-b", type=parse_size, default=1 << 20, help="smallest size in bytes")
    parser.add_argument("-e", type=parse_size, default=64 << 20, help="largest size in bytes")
    parser.add_argument("-f", type=float, default=2.0, help="size factor")
    parser.add_argument("-n", type=int, default=20, help="timed iterations")
    parser.add_argument("-w", type=int, default=5, help="warm-up iterations")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (rank 0)")
    args = parser.parse_args()
    if args.e < args.b or args.f <= 1 or args.n < 1 or args.w < 0:
        parser.error("need -e >= -b, -f > 1, -n >= 1, -w >= 0")

    if "GCX_EMU_NETNS" in os.environ:
        # under emulate.sh the host name resolves to loopback, where gloo
        # would look for its peers: use the emulated NIC
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    buf = torch.empty(args.e // 4, dtype=torch.float32)
    times = torch.empty(args.n, dtype=torch.float64)
    failures = 0
    rows = []
    if rank == 0:
        print(f"# gloo allreduce perf: {size} ranks, {args.n} iterations (median of the "
              f"slowest rank), {args.w} warm-up, in place", flush=True)
        print(f"# {'size':>12} {'count':>12} {'type':>8} {'redop':>6} | {'time(us)':>10} "
              f"{'algbw(GB/s)':>11} {'busbw(GB/s)':>11} {'#wrong':>7}", flush=True)
    nbytes = args.b
    while nbytes <= args.e:
        count = nbytes // 4
        view = buf[:count]
        view.fill_(rank + 1)
        for _ in range(args.w):
            dist.all_reduce(view)
        for it in range(args.n):
            t0 = time.perf_counter()
            dist.all_reduce(view)
            times[it] = time.perf_counter() - t0
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        median = statistics.median(times.tolist())
        view.fill_(rank + 1)
        dist.all_reduce(view)
        expected = size * (size + 1) / 2
        wrong = torch.tensor([float((view != expected).sum())], dtype=torch.float64)
        dist.all_reduce(wrong, op=dist.ReduceOp.MAX)
        failures += int(wrong.item() != 0)
        algbw = count * 4 / median / 1e9
        busbw = algbw * (2.0 * (size - 1) / size if size > 1 else 1.0)
        rows.append({"size": count * 4, "count": count, "type": "float", "redop": "sum",
                     "time_us": median * 1e6, "algbw_gbps": algbw, "busbw_gbps": busbw,
                     "wrong": int(wrong.item())})
        if rank == 0:
            print(f"  {count * 4:12d} {count:12d} {'float':>8} {'sum':>6} | "
                  f"{median * 1e6:10.1f} {algbw:11.3f} {busbw:11.3f} {int(wrong.item()):7d}",
                  flush=True)
        nxt = int(nbytes * args.f)
        nbytes = nxt if nxt > nbytes else nbytes + 1
    dist.destroy_process_group()
    if rank == 0 and args.json:
        with open(args.json, "w") as out:
            json.dump({"backend": "gloo", "collective": "allreduce", "ranks": size,
                       "in_place": True, "rows": rows}, out, indent=1)
    if failures and rank == 0:
        print(f"# {failures} size(s) with wrong results", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
