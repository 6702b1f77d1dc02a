#!/usr/bin/env python3
"""bench_gpu.py: torch_gcx with tensors on a GPU, two benchmarks, one rank
each (run under perf/torch/launch_local.py; perf/gpu/run.sh does it).

  ops: all_reduce, reduce_scatter_tensor, all_gather_into_tensor and
  broadcast, each op and size timed for three contenders in one run,
  paired: "gcx-dev" (the gcx group, tensors on the device), "gloo-dev"
  (gloo, the same device tensors) and "gcx-host" (the gcx group, CPU
  tensors of the same size). The rounds rotate their order. Timing,
  checks, sizes and the summary are perf/torch/bench_ops.py's (imported,
  not copied): per call the slowest rank's time, the device synchronised
  after wait() (wait() of a device collective need not block the host),
  the median over iterations, then over rounds; two paired tables:
  gcx-dev / gloo-dev and gcx-dev / gcx-host.

  ddp: one DDP training step of ResNet-50 and ResNet-101 (torchvision's,
  else the same architecture defined here; 10 classes, synthetic 3x32x32
  batches) per configuration: "compute" (no DDP: the step without
  communication), "gloo" (DDP on gloo), "gcx-ddp" (DDP on the gcx group:
  the backend's own device collectives), "gcx-dense", "gcx-topk" (CF 100)
  and "gcx-gravac" (torch_gcx.hooks on the gcx group, DDP's own
  broadcasts on gloo). The time of a step is split into compute (the
  compute configuration's step), and for the hooks compression, copies
  (d2h, h2d) and network from the hook's time_split() (device time by
  events; h2d includes the scatter into the bucket; network: issue to
  completion on the host, summed over buckets, which overlap each other
  and the backward); copies: bytes staged per timed step.

    launch_local.py -n 4 -- python perf/gpu/bench_gpu.py ops --out DIR
    launch_local.py -n 4 -- python perf/gpu/bench_gpu.py ddp --out DIR
    ... --dry-run: CPU tensors, tiny sizes and models, to check the script

A contender that cannot run (e.g. a gcx backend without device tensors,
"No backend type associated with device type cuda") is reported as
unsupported with its error, and the rest goes on. Rank 0 prints markdown
and writes DIR/ops-p<P>.json / ddp-p<P>.json (rows and tables).
"""
import argparse
import json
import os
import statistics
import sys
import time
import warnings

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import bench_ops as B  # noqa: E402  (timing, checks, sizes, summary)
from bench_ops import parse_size  # noqa: E402


def device_of(args):
    if args.dry_run or not torch.cuda.is_available():
        if not args.dry_run:
            raise SystemExit("bench_gpu.py: no CUDA device (torch.cuda."
                             "is_available() is False); --dry-run runs on "
                             "CPU tensors")
        return torch.device("cpu")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    return dev


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


class DevBuffers(B.Buffers):
    """bench_ops' buffers, on a device."""

    def __init__(self, max_count, device):  # noqa: D107 (no super: no CPU)
        self.big = torch.empty(max_count, dtype=torch.float32, device=device)
        self.big2 = torch.empty(max_count, dtype=torch.float32, device=device)


def measure(op, count, group, bufs, rank, p, iters, warmup, dev):
    """bench_ops.measure with the device synchronised after each call."""
    views = bufs.setup(op, count, rank, p)
    for _ in range(warmup):
        B.call(op, views, group)
        sync(dev)
    times = torch.empty(iters, dtype=torch.float64)
    for it in range(iters):
        sync(dev)
        t0 = time.perf_counter()
        B.call(op, views, group)
        sync(dev)
        times[it] = time.perf_counter() - t0
    dist.all_reduce(times, op=dist.ReduceOp.MAX)  # on gloo (default)
    views = bufs.setup(op, count, rank, p)
    B.call(op, views, group)
    sync(dev)
    wrong = torch.tensor([float(B.Buffers.wrong(op, views, p))],
                         dtype=torch.float64)
    dist.all_reduce(wrong, op=dist.ReduceOp.MAX)
    return statistics.median(times.tolist()), int(wrong.item())


def agreed_error(err):
    """Every rank's error (or None) -> the first one any rank had."""
    errs = [None] * dist.get_world_size()
    dist.all_gather_object(errs, err)
    return next((e for e in errs if e), None)


def run_ops(args, dev, gcx, rank, p):
    counts = B.sizes_of(args.b, args.e, args.f, p)
    bufs = {"gcx-dev": DevBuffers(counts[-1], dev),
            "gloo-dev": None, "gcx-host": B.Buffers(counts[-1])}
    bufs["gloo-dev"] = bufs["gcx-dev"]
    groups = {"gcx-dev": gcx, "gloo-dev": dist.group.WORLD, "gcx-host": gcx}
    names = list(groups)
    ops = [o for o in args.ops.split(",") if o]
    unsupported = {}
    rows = []
    t0 = time.monotonic()
    for rnd in range(1, args.rounds + 1):
        k = (rnd - 1) % len(names)
        order = names[k:] + names[:k]
        for b in order:
            if b in unsupported:
                continue
            if rank == 0:
                print(f"# round {rnd}/{args.rounds}, {b} "
                      f"({time.monotonic() - t0:.0f} s)", file=sys.stderr,
                      flush=True)
            for op in ops:
                for count in counts:
                    err = None
                    try:
                        t, wrong = measure(op, count, groups[b], bufs[b],
                                           rank, p, args.iters, args.warmup,
                                           dev)
                    except RuntimeError as e:
                        err = f"{op}: {str(e).splitlines()[0]}"
                    err = agreed_error(err)
                    if err:
                        unsupported[b] = err
                        if rank == 0:
                            print(f"# {b} unsupported: {err}",
                                  file=sys.stderr, flush=True)
                        break
                    size = count * 4
                    alg = size / t / 1e9
                    rows.append({
                        "round": rnd, "backend": b, "op": op, "ranks": p,
                        "link": "loopback", "size": size, "count": count,
                        "type": "float", "device": str(dev if b != "gcx-host"
                                                       else "cpu"),
                        "time_us": round(t * 1e6, 1),
                        "algbw_gbps": round(alg, 4),
                        "busbw_gbps": round(alg * B.bus_factor(op, p), 4),
                        "wrong": wrong})
                    if rank == 0:
                        print(f"  {b:>8} {op:>14} {size:10d} | "
                              f"{rows[-1]['time_us']:11.1f} us "
                              f"{wrong:4d} wrong", file=sys.stderr,
                              flush=True)
                if b in unsupported:
                    break
            dist.barrier()
    out = {"ranks": p, "device": str(dev), "rows": rows,
           "unsupported": unsupported, "tables": {}}
    if rank == 0:
        for pair in (["gcx-dev", "gloo-dev"], ["gcx-dev", "gcx-host"]):
            have = [b for b in pair if b not in unsupported]
            lines, srows = B.summarize([r for r in rows
                                        if r["backend"] in have], have, p,
                                       "loopback")
            key = "/".join(pair)
            out["tables"][key] = {"markdown": lines, "summary": srows}
            print(f"\n### {p} processes, dev = {dev}: {key}"
                  f"{' (paired: ' + have[0] + ' / ' + have[1] + ')' if len(have) == 2 else ''}\n")
            print("\n".join(lines))
        for b, e in unsupported.items():
            print(f"\n{b}: unsupported: {e}")
    return out, sum(1 for r in rows if r["wrong"])


# ---- DDP training step ----------------------------------------------------

def resnet(depth, num_classes=10):
    """torchvision's ResNet-50/101 (v1.5: stride in the 3x3), or the same
    architecture defined here when torchvision is missing."""
    try:
        import torchvision
        return getattr(torchvision.models, f"resnet{depth}")(
            num_classes=num_classes), "torchvision"
    except ImportError:
        pass
    nn = torch.nn

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin, width, stride, down):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(width * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = down

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            return self.relu(self.bn3(self.conv3(out)) + idt)

    blocks = {50: [3, 4, 6, 3], 101: [3, 4, 23, 3]}[depth]
    layers, cin = [], 64
    for i, (nb, width) in enumerate(zip(blocks, [64, 128, 256, 512])):
        stride = 1 if i == 0 else 2
        down = nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride, bias=False),
                             nn.BatchNorm2d(width * 4))
        mods = [Bottleneck(cin, width, stride, down)]
        cin = width * 4
        mods += [Bottleneck(cin, width, 1, None) for _ in range(nb - 1)]
        layers.append(nn.Sequential(*mods))
    model = nn.Sequential(
        nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
        nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1), *layers,
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes))
    return model, "local (torchvision missing)"


def run_ddp(args, dev, gcx, rank, p):
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch_gcx import hooks as H

    configs = ["compute", "gloo", "gcx-ddp", "gcx-dense", "gcx-topk",
               "gcx-gravac"]
    rows, unsupported = [], {}
    for depth in [int(d) for d in args.models.split(",") if d]:
        torch.manual_seed(0)
        base, origin = resnet(depth)
        nparam = sum(q.numel() for q in base.parameters())
        g = torch.Generator().manual_seed(rank)
        x = torch.randn(args.batch, 3, 32, 32, generator=g).to(dev)
        y = torch.randint(0, 10, (args.batch,), generator=g).to(dev)
        compute = None
        for cfg in configs:
            model = resnet(depth)[0].to(dev)
            model.load_state_dict(base.state_dict())
            state = None
            err = None
            try:
                kw = {"device_ids": [dev.index]} if dev.type == "cuda" else {}
                if cfg == "compute":
                    net = model
                elif cfg == "gloo":
                    net = DDP(model, broadcast_buffers=False, **kw)
                elif cfg == "gcx-ddp":
                    net = DDP(model, process_group=gcx,
                              broadcast_buffers=False, **kw)
                else:
                    net = DDP(model, broadcast_buffers=False, **kw)
                    if cfg == "gcx-gravac":
                        state = H.GravacState(
                            process_group=gcx, batch_size=args.batch,
                            device_path="always")
                        net.register_comm_hook(state, H.gravac_hook)
                    else:
                        state = H.TopkState(
                            process_group=gcx, cf=100,
                            start_iter=10 ** 9 if cfg == "gcx-dense" else 1,
                            device_path="always")
                        net.register_comm_hook(state, H.topk_hook)
                    state.profile = True
                opt = torch.optim.SGD(net.parameters(), lr=0.01)
                times, split, copied = [], [], 0
                for it in range(args.warmup + args.steps):
                    if it == args.warmup and state is not None:
                        copied = sum(state.copy_bytes.values())
                    sync(dev)
                    t0 = time.perf_counter()
                    opt.zero_grad(set_to_none=False)
                    loss = torch.nn.functional.cross_entropy(net(x), y)
                    loss.backward()
                    opt.step()
                    sync(dev)
                    t = time.perf_counter() - t0
                    sp = state.time_split() if state is not None else None
                    if it >= args.warmup:
                        times.append(t)
                        if sp is not None:
                            split.append(sp)
            except RuntimeError as e:
                err = f"{str(e).splitlines()[0]}"
            err = agreed_error(err)
            if err:
                unsupported[f"resnet{depth} {cfg}"] = err
                if rank == 0:
                    print(f"# resnet{depth} {cfg}: unsupported: {err}",
                          file=sys.stderr, flush=True)
                continue
            tt = torch.tensor(times, dtype=torch.float64)
            dist.all_reduce(tt, op=dist.ReduceOp.MAX)  # the slowest rank
            step = statistics.median(tt.tolist())
            if cfg == "compute":
                compute = step
            row = {"model": f"resnet{depth}", "origin": origin,
                   "params": nparam, "grad_mb": round(nparam * 4 / 2**20, 1),
                   "config": cfg, "ranks": p, "device": str(dev),
                   "batch": args.batch, "steps": args.steps,
                   "step_ms": round(step * 1e3, 2),
                   "compute_ms": round(compute * 1e3, 2) if compute else None,
                   "vs_compute": round(step / compute, 3) if compute else None}
            if split:
                for kind in ("compress", "d2h", "h2d", "network"):
                    row[f"{kind}_ms"] = round(statistics.median(
                        s[kind] for s in split) * 1e3, 2)
                row["copy_mb_per_step"] = round(
                    (sum(state.copy_bytes.values()) - copied) /
                    args.steps / 2**20, 3)
                row["compress_share"] = round(row["compress_ms"] /
                                              row["step_ms"], 4)
            rows.append(row)
            if rank == 0:
                print(f"# resnet{depth} {cfg}: {row['step_ms']} ms",
                      file=sys.stderr, flush=True)
            del net, model, opt, state
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    hdr = ["model", "config", "step (ms)", "x compute", "compress (ms)",
           "d2h (ms)", "h2d+scatter (ms)", "network (ms, summed)",
           "compress share", "copies (MB/step)"]
    lines = ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for r in rows:
        def c(key, fmt="{:.2f}"):
            return fmt.format(r[key]) if r.get(key) is not None else "-"
        lines.append("| " + " | ".join([
            f"{r['model']} ({r['grad_mb']} MB)", r["config"], c("step_ms"),
            c("vs_compute", "{:.3f}"), c("compress_ms"), c("d2h_ms"),
            c("h2d_ms"), c("network_ms"), c("compress_share", "{:.3f}"),
            c("copy_mb_per_step", "{:.3f}")]) + " |")
    if rank == 0:
        print(f"\n### DDP step, {p} processes on {dev}, batch {args.batch} "
              f"(3x32x32), median of {args.steps} steps after "
              f"{args.warmup}\n")
        print("\n".join(lines))
        for k, e in unsupported.items():
            print(f"\n{k}: unsupported: {e}")
    return {"ranks": p, "device": str(dev), "rows": rows,
            "unsupported": unsupported, "markdown": lines}, 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["ops", "ddp"])
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU tensors, tiny sizes (checks the script)")
    ap.add_argument("-b", type=parse_size, default=None,
                    help="ops: smallest size in bytes (default 1M; dry 64K)")
    ap.add_argument("-e", type=parse_size, default=None,
                    help="ops: largest size (default 256M; dry 256K)")
    ap.add_argument("-f", type=float, default=4.0, help="ops: size factor")
    ap.add_argument("--iters", type=int, default=int(os.environ.get(
        "ITERS", "3")))
    ap.add_argument("--warmup", type=int, default=int(os.environ.get(
        "WARMUP", "1")))
    ap.add_argument("--rounds", type=int, default=int(os.environ.get(
        "ROUNDS", "2")))
    ap.add_argument("--ops", default=",".join(B.OPS))
    ap.add_argument("--models", default=None,
                    help="ddp: ResNet depths (default 50,101; dry 50)")
    ap.add_argument("--batch", type=int, default=None,
                    help="ddp: batch per rank (default 32; dry 2)")
    ap.add_argument("--steps", type=int, default=None,
                    help="ddp: timed steps (default 10; dry 2)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    dry = args.dry_run
    args.b = args.b or (64 << 10 if dry else 1 << 20)
    args.e = args.e or (256 << 10 if dry else 256 << 20)
    args.models = args.models or ("50" if dry else "50,101")
    args.batch = args.batch or (2 if dry else 32)
    args.steps = args.steps or (2 if dry else 10)
    if args.what == "ddp":
        args.warmup = max(args.warmup, 2)  # DDP rebuilds buckets after 1

    warnings.filterwarnings("ignore", category=FutureWarning,
                            module="torch.distributed")
    # torch 2.13 deprecates DDP's broadcast_buffers (2.11 has no successor)
    warnings.filterwarnings("ignore", message=".*broadcast_buffers",
                            category=FutureWarning)
    import torch_gcx
    dev = device_of(args)
    timeout = B.init_gloo_default_group()
    rank, p = dist.get_rank(), dist.get_world_size()
    gcx = dist.new_group(backend="gcx", timeout=timeout)
    if rank == 0:
        print(f"# bench_gpu {args.what}: {p} processes, device {dev}"
              f"{' (dry run)' if dry else ''}, torch {torch.__version__}, "
              f"gcx {torch_gcx.gcx_version()}", flush=True)
    if args.what == "ops":
        out, bad = run_ops(args, dev, gcx, rank, p)
    else:
        out, bad = run_ddp(args, dev, gcx, rank, p)
    if rank == 0 and args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, f"{args.what}-p{p}.json")
        out.update(torch=torch.__version__, dry_run=dry,
                   gcx=torch_gcx.gcx_version())
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
        print(f"\n# wrote {path}", flush=True)
    dist.destroy_process_group(gcx)
    dist.destroy_process_group()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
