#!/usr/bin/env python3
"""bench_fsdp.py: FSDP2 (torch.distributed.fsdp.fully_shard) training steps
per second with backend "gcx" against "gloo", both in one run.

Idea: every rank joins the default group (gloo) and a 1-D DeviceMesh over a
gcx group of every rank (init_device_mesh's backend_override), so both
backends run in the same processes, seconds apart. The model and loop are
the FSDP2 test's (plugin/torch/tests/fsdp_worker.py: an MLP, one FSDP group
per Linear, SGD on MSE), made wide enough (--dims) that a step is mostly
communication on a slow link: forward all-gathers every layer's shards,
backward all-gathers them again (reshard after forward) and reduce-scatters
the gradients with ReduceOp.AVG. A round trains WARMUP steps, then STEPS
timed ones on each backend (the order flips every round); a step's time is
the slowest rank's (all ranks start together after a barrier; the time to
the last rank's end of STEPS steps). Per round: steps/s of each backend and
their ratio; the summary is the median over rounds of each and of the
paired ratio gcx/gloo, and in how many rounds gcx was at least as fast. At
the end both models' parameters are compared (same start, same batches:
they must agree to float32 rounding of a different summation order).

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT:
    perf/torch/launch_local.py -n 4 -- python perf/torch/bench_fsdp.py
    perf/cluster/emulate.sh -n 4 --rate 1gbit -q -- python perf/torch/bench_fsdp.py
(perf/torch/README.md, "FSDP2", has the commands and figures.)

Cost: parameters of --dims (default 1024-2048-2048-1024-10: ~8.4 M floats,
34 MB) twice per rank, plus one layer's gathered copy; on 1 Gbit/s links
with 4 ranks a step moves ~3 x 34 MB x 3/4 per rank: ~0.7 s. Defaults:
3 rounds x 2 backends x (2 + 8) steps, ~1 minute a round.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "plugin", "torch", "tests"))
import fsdp_worker as F  # noqa: E402  (the FSDP2 test's model and loop)
from bench_ops import init_gloo_default_group  # noqa: E402


def timed_steps(model, rank, first_step, steps, batch_size, dims):
    """STEPS SGD steps from step number first_step; the slowest rank's
    seconds (barrier before; MAX of every rank's time after, off the clock)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    dist.barrier()
    t0 = time.perf_counter()
    for step in range(first_step, first_step + steps):
        x, y = F.batch(rank, step, batch_size, dims)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(dt, op=dist.ReduceOp.MAX)
    return dt.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", default=os.environ.get("DIMS", "1024,2048,2048,1024,10"),
                    help="layer widths (env DIMS)")
    ap.add_argument("--batch", type=int, default=int(os.environ.get("BATCH", "32")),
                    help="samples per rank per step (env BATCH)")
    ap.add_argument("--steps", type=int, default=int(os.environ.get("STEPS", "8")),
                    help="timed steps per backend per round (env STEPS)")
    ap.add_argument("--warmup", type=int, default=int(os.environ.get("WARMUP", "2")),
                    help="untimed steps first (env WARMUP)")
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", "3")),
                    help="rounds, gcx and gloo alternating (env ROUNDS)")
    args = ap.parse_args()
    dims = tuple(int(d) for d in args.dims.split(","))
    if len(dims) < 2 or min(dims) < 1 or args.steps < 1 or args.rounds < 1 \
            or args.warmup < 0 or args.batch < 1:
        ap.error("need >= 2 positive --dims, --steps >= 1, --rounds >= 1, "
                 "--warmup >= 0, --batch >= 1")
    import torch_gcx  # noqa: F401  registers the backend "gcx"
    init_gloo_default_group()
    rank, p = dist.get_rank(), dist.get_world_size()
    meshes = {"gloo": init_device_mesh("cpu", (p,)),
              "gcx": init_device_mesh("cpu", (p,), backend_override={0: "gcx"})}
    for b, mesh in meshes.items():
        assert dist.get_backend(mesh.get_group()) == b, (b, dist.get_backend(mesh.get_group()))
    models = {b: F.shard(F.make_model(dims=dims), mesh) for b, mesh in meshes.items()}
    nparams = sum(prm.numel() for prm in F.make_model(dims=dims).parameters())
    if rank == 0:
        print(f"# FSDP2 {p} ranks, dims {dims} ({nparams / 1e6:.2f} M params, "
              f"{4 * nparams / 2**20:.1f} MiB), batch {args.batch}, {args.warmup} + "
              f"{args.steps} steps x {args.rounds} rounds; "
              f"UCX_TLS={os.environ.get('UCX_TLS', '(unset)')}", flush=True)
        print("| round | first | gcx steps/s | gloo steps/s | gcx/gloo |", flush=True)
        print("|---|---|---|---|---|", flush=True)
    step = {b: 0 for b in models}
    rates = {b: [] for b in models}
    ratios = []
    for rnd in range(1, args.rounds + 1):
        order = ["gcx", "gloo"] if rnd % 2 else ["gloo", "gcx"]
        for b in order:
            if args.warmup:
                timed_steps(models[b], rank, step[b], args.warmup, args.batch, dims)
                step[b] += args.warmup
            secs = timed_steps(models[b], rank, step[b], args.steps, args.batch, dims)
            step[b] += args.steps
            rates[b].append(args.steps / secs)
        ratios.append(rates["gcx"][-1] / rates["gloo"][-1])
        if rank == 0:
            print(f"| {rnd} | {order[0]} | {rates['gcx'][-1]:.3f} | {rates['gloo'][-1]:.3f} "
                  f"| {ratios[-1]:.3f} |", flush=True)
    a, b = F.full_params(models["gcx"]), F.full_params(models["gloo"])
    worst = max((x - y).abs().max().item() for x, y in zip(a, b))
    ok = all(torch.allclose(x, y, rtol=1e-4, atol=1e-5) for x, y in zip(a, b))
    if rank == 0:
        ahead = sum(r >= 1.0 for r in ratios)
        print(f"\nmedian steps/s: gcx {statistics.median(rates['gcx']):.3f}, "
              f"gloo {statistics.median(rates['gloo']):.3f}; paired gcx/gloo "
              f"{statistics.median(ratios):.3f} (gcx at least as fast in {ahead} of "
              f"{len(ratios)} rounds); parameters after {step['gcx']} steps: max |gcx - gloo| "
              f"{worst:.2e} ({'agree' if ok else 'DIFFER'})", flush=True)
    dist.destroy_process_group()
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
