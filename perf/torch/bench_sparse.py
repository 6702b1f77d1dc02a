#!/usr/bin/env python3
"""bench_sparse.py: dist.all_reduce of a sparse COO gradient through the gcx
backend (gcx_sparse_allreduce, algorithm chosen by its cost model) against
gloo's own sparse allreduce, in the same processes, alternating.

Idea: every rank holds a 1-d float32 COO tensor of N entries (default 25M)
at a density d (default 0.1% and 1%), with its own random support, as a
top-k gradient would be. Each timed call clones the input first (both
backends replace their input by the coalesced sum) and is timed on every
rank; the slowest rank's time of each call is kept (a MAX allreduce over the
gloo group, outside the timing) and the median over calls reported. Rounds
alternate gcx and gloo, so drift on a shared box hits both. Results of the
first call are checked against each other (same dense sum).

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT:
    perf/cluster/emulate.sh -n 4 --rate 1gbit -q -- \\
        VENV/bin/python perf/torch/bench_sparse.py --json OUT.json
with PYTHONPATH holding torch_gcx (e.g. build/plugin/torch).
Cost: per rank the input (12 bytes per entry), the result (up to P times
that) and one clone per call.
"""
import argparse
import datetime
import json
import os
import statistics
import time

import torch
import torch.distributed as dist

import torch_gcx  # noqa: F401  (registers "gcx")


def sparse_input(rank, n, density, seed):
    g = torch.Generator().manual_seed(seed + 1000 * rank)
    nnz = max(1, int(n * density))
    idx = torch.randperm(n, generator=g)[:nnz].sort().values
    vals = torch.randn(nnz, generator=g)
    return torch.sparse_coo_tensor(idx.unsqueeze(0), vals, (n,)).coalesce()


def timed(x, group, gloo, iters, warmup):
    times = []
    for i in range(warmup + iters):
        y = x.clone()
        dist.barrier(group=gloo)
        t0 = time.perf_counter()
        dist.all_reduce(y, group=group)
        dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(dt, op=dist.ReduceOp.MAX, group=gloo)
        if i >= warmup:
            times.append(dt.item())
    return statistics.median(times), y


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-N", type=int, default=25_000_000, help="dense length")
    ap.add_argument("--density", type=float, nargs="+", default=[0.001, 0.01])
    ap.add_argument("-n", "--iters", type=int, default=5)
    ap.add_argument("-w", "--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the rows as JSON (rank 0)")
    args = ap.parse_args()
    if "GCX_EMU_NETNS" in os.environ:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    timeout = datetime.timedelta(seconds=300)
    dist.init_process_group("gcx", timeout=timeout)
    gloo = dist.new_group(backend="gloo", timeout=timeout)
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    rows = []
    for d in args.density:
        x = sparse_input(rank, args.N, d, seed=7)
        per = {"gcx": [], "gloo": []}
        for r in range(args.rounds):
            for name, group in [("gcx", None), ("gloo", gloo)]:
                t, y = timed(x, group, gloo, args.iters, args.warmup)
                per[name].append(t)
                if r == 0:
                    per[name + "_result"] = y
        a, b = per.pop("gcx_result"), per.pop("gloo_result")
        ok = torch.allclose(a.to_dense(), b.to_dense(), rtol=1e-5, atol=1e-5)
        paired = statistics.median(g / c for g, c in zip(per["gloo"],
                                                         per["gcx"]))
        row = {"N": args.N, "density": d, "nnz": x._nnz(), "ranks": size,
               "gcx_ms": 1e3 * min(per["gcx"]),
               "gloo_ms": 1e3 * min(per["gloo"]),
               "gloo_over_gcx_paired": paired,
               "rounds_gcx_ms": [1e3 * t for t in per["gcx"]],
               "rounds_gloo_ms": [1e3 * t for t in per["gloo"]],
               "union_nnz": a._nnz(), "results_agree": ok}
        rows.append(row)
        if rank == 0:
            print(f"N {args.N} density {d:g} ranks {size}: gcx "
                  f"{row['gcx_ms']:.1f} ms, gloo {row['gloo_ms']:.1f} ms, "
                  f"gloo/gcx paired {paired:.2f} (rounds gcx "
                  f"{[round(t, 1) for t in row['rounds_gcx_ms']]}, gloo "
                  f"{[round(t, 1) for t in row['rounds_gloo_ms']]}), "
                  f"union {a._nnz()}, results agree: {ok}", flush=True)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    dist.barrier(group=gloo)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
