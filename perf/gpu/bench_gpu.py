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
    ... --device cpu|simdev|cuda (default cuda; with --dry-run cpu):
        the device of the "-dev" tensors and of the DDP models; a device
        type other than cpu/cuda is imported as torch_<type> (torch_simdev)
        before torch_gcx, and added to GCX_TORCH_DEVICES when that is unset
    ... --dry-run: tiny sizes, 2 steps (the same code paths and tables)
    python perf/gpu/bench_gpu.py report DIR [--dry-run] [--device D] -- STEP...
        results.md / results.json of run.sh from DIR's files and its step
        lines ("name: what happened"); every section, also with no data

A contender that cannot run an op (e.g. a gcx backend without device
tensors, "No backend type associated with device type cuda") is reported
as unsupported for that op with its error ("gcx-dev all_reduce": ...),
and the rest goes on; a DDP configuration likewise. Rank 0 prints markdown
and always writes DIR/ops-p<P>.json / ddp-p<P>.json (rows, tables, the
unsupported ones; "error" when the run itself failed or was stopped by
SIGTERM, with the rows it had), also when every contender failed.
Device time: the device is synchronised (torch.get_device_module(dev))
before each clock read. DDP's own process group is gloo for cpu and cuda
tensors (which gloo takes), else the gcx group (gloo has no other device).

Cost, ops: per rank 2 device buffers of the largest size (2 x 256 MB) and
2 CPU ones; rounds x 3 contenders x 4 ops x sizes x (warm-up + iters + 1)
calls. ddp: per rank one model at a time; 6 configurations x (2 + steps)
steps per model.
"""
import argparse
import glob
import importlib
import json
import os
import signal
import statistics
import sys
import time
import traceback
import warnings

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import bench_ops as B  # noqa: E402  (timing, checks, sizes, summary)
from bench_ops import parse_size  # noqa: E402


def device_module(dev):
    """torch.cuda, torch.simdev, ...; None for the CPU and for devices
    without one (meta)."""
    if dev.type == "cpu":
        return None
    try:
        return torch.get_device_module(dev.type)
    except (RuntimeError, AttributeError):
        return None


def load_device_type(kind):
    """A device type other than cpu/cuda/meta: its module torch_<type> is
    imported (it registers the type), and GCX_TORCH_DEVICES names it (when
    unset) so that torch_gcx registers the gcx backend for it."""
    if kind in ("cpu", "cuda", "meta"):
        return
    importlib.import_module(f"torch_{kind}")
    os.environ.setdefault("GCX_TORCH_DEVICES", f"cpu,cuda,{kind}")


def device_of(args):
    """This rank's device: args.device, the index LOCAL_RANK modulo the
    devices there are (ranks share a GPU when there are fewer)."""
    kind = torch.device(args.device).type
    if kind == "cpu":
        return torch.device("cpu")
    mod = device_module(torch.device(kind))
    if mod is None:  # meta: no module, no index (tests)
        return torch.device(kind)
    if hasattr(mod, "is_available") and not mod.is_available():
        raise SystemExit(f"bench_gpu.py: no {kind} device (torch.{kind}."
                         f"is_available() is False); --device cpu runs on "
                         f"CPU tensors")
    n = mod.device_count() if hasattr(mod, "device_count") else 1
    dev = torch.device(kind, int(os.environ.get("LOCAL_RANK", "0")) % max(n, 1))
    if hasattr(mod, "set_device"):
        mod.set_device(dev)
    return dev


def sync(dev):
    """Wait for the device's queued work (a no-op on the CPU)."""
    mod = device_module(dev)
    if mod is not None and hasattr(mod, "synchronize"):
        mod.synchronize(dev)


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


CONTENDERS = ("gcx-dev", "gloo-dev", "gcx-host")
PAIRS = (("gcx-dev", "gloo-dev"), ("gcx-dev", "gcx-host"))


def ops_tables(rows, unsupported, p):
    """{"gcx-dev/gloo-dev": {"markdown", "summary"}, "gcx-dev/gcx-host":
    ...} from the rows so far; a contender without rows keeps its columns
    ("-"), and the pair's unsupported entries ("contender op": error) are
    listed under its table. Made whatever failed: never raises on no rows."""
    tables = {}
    for pair in PAIRS:
        uns = {k: e for k, e in unsupported.items()
               if k.split(" ")[0] in pair}
        lines, srows = B.summarize([r for r in rows if r["backend"] in pair],
                                   list(pair), p, "loopback", uns)
        tables["/".join(pair)] = {"markdown": lines, "summary": srows}
    return tables


def run_ops(args, dev, gcx, rank, p, out):
    """Fills out["rows"] and out["unsupported"] as it goes (so that what
    was measured survives a failure), then out["tables"]."""
    counts = B.sizes_of(args.b, args.e, args.f, p)
    bufs = {"gcx-dev": DevBuffers(counts[-1], dev),
            "gloo-dev": None, "gcx-host": B.Buffers(counts[-1])}
    bufs["gloo-dev"] = bufs["gcx-dev"]
    groups = {"gcx-dev": gcx, "gloo-dev": dist.group.WORLD, "gcx-host": gcx}
    names = list(CONTENDERS)
    ops = [o for o in args.ops.split(",") if o]
    unsupported = out["unsupported"]
    rows = out["rows"]
    t0 = time.monotonic()
    for rnd in range(1, args.rounds + 1):
        k = (rnd - 1) % len(names)
        order = names[k:] + names[:k]
        for b in order:
            if rank == 0:
                print(f"# round {rnd}/{args.rounds}, {b} "
                      f"({time.monotonic() - t0:.0f} s)", file=sys.stderr,
                      flush=True)
            for op in ops:
                if f"{b} {op}" in unsupported:
                    continue
                for count in counts:
                    err = None
                    try:
                        t, wrong = measure(op, count, groups[b], bufs[b],
                                           rank, p, args.iters, args.warmup,
                                           dev)
                    except Exception as e:  # noqa: BLE001 (any: all ranks agree)
                        lines = str(e).strip().splitlines() or [type(e).__name__]
                        err = f"{type(e).__name__}: {lines[0]}"
                    err = agreed_error(err)
                    if err:
                        unsupported[f"{b} {op}"] = err
                        if rank == 0:
                            print(f"# {b} {op} unsupported: {err}",
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
            dist.barrier()
    out["tables"] = ops_tables(rows, unsupported, p)
    if rank == 0:
        for key, tab in out["tables"].items():
            print(f"\n### {p} processes, dev = {dev}: {key}\n")
            print("\n".join(tab["markdown"]))
    return sum(1 for r in rows if r["wrong"])


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


DDP_HDR = ["model", "config", "step (ms)", "x compute", "compress (ms)",
           "d2h (ms)", "h2d+scatter (ms)", "network (ms, summed)",
           "compress share", "copies (MB/step)"]


def ddp_markdown(rows, unsupported):
    """The DDP table from the rows so far (a header at least), and the
    unsupported configurations ("resnetD config": error) under it."""
    lines = ["| " + " | ".join(DDP_HDR) + " |", "|" + "---|" * len(DDP_HDR)]
    for r in rows:
        def c(key, fmt="{:.2f}"):
            return fmt.format(r[key]) if r.get(key) is not None else "-"
        lines.append("| " + " | ".join([
            f"{r['model']} ({r['grad_mb']} MB)", r["config"], c("step_ms"),
            c("vs_compute", "{:.3f}"), c("compress_ms"), c("d2h_ms"),
            c("h2d_ms"), c("network_ms"), c("compress_share", "{:.3f}"),
            c("copy_mb_per_step", "{:.3f}")]) + " |")
    if unsupported:
        lines += [""] + [f"- {k}: unsupported: {e}"
                         for k, e in unsupported.items()]
    return lines


def run_ddp(args, dev, gcx, rank, p, out):
    """Fills out["rows"], out["unsupported"] as it goes, then
    out["markdown"]."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch_gcx import hooks as H

    configs = ["compute", "gloo", "gcx-ddp", "gcx-dense", "gcx-topk",
               "gcx-gravac"]
    rows, unsupported = out["rows"], out["unsupported"]
    # DDP's own collectives (the parameters' broadcast, the shape check) for
    # the hook configurations: gloo takes cpu and cuda tensors only
    ddp_pg = None if dev.type in ("cpu", "cuda") else gcx
    mod = device_module(dev)
    for depth in [int(d) for d in args.models.split(",") if d]:
        torch.manual_seed(0)
        base, origin = resnet(depth)
        nparam = sum(q.numel() for q in base.parameters())
        g = torch.Generator().manual_seed(rank)
        x = torch.randn(args.batch, 3, 32, 32, generator=g).to(dev)
        y = torch.randint(0, 10, (args.batch,), generator=g).to(dev)
        compute = None
        for cfg in configs:
            model = net = opt = state = None
            err = None
            try:
                model = resnet(depth)[0]
                model.load_state_dict(base.state_dict())
                model = model.to(dev)
                kw = {"device_ids": [dev.index]} if dev.type == "cuda" else {}
                if cfg == "compute":
                    net = model
                elif cfg == "gloo":
                    net = DDP(model, broadcast_buffers=False, **kw)
                elif cfg == "gcx-ddp":
                    net = DDP(model, process_group=gcx,
                              broadcast_buffers=False, **kw)
                else:
                    net = DDP(model, process_group=ddp_pg,
                              broadcast_buffers=False, **kw)
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
            except Exception as e:  # noqa: BLE001 (any: all ranks agree)
                lines = str(e).strip().splitlines() or [type(e).__name__]
                err = f"{type(e).__name__}: {lines[0]}"
            err = agreed_error(err)
            if err:
                unsupported[f"resnet{depth} {cfg}"] = err
                if rank == 0:
                    print(f"# resnet{depth} {cfg}: unsupported: {err}",
                          file=sys.stderr, flush=True)
            else:
                tt = torch.tensor(times, dtype=torch.float64)
                dist.all_reduce(tt, op=dist.ReduceOp.MAX)  # the slowest rank
                step = statistics.median(tt.tolist())
                if cfg == "compute":
                    compute = step
                row = {"model": f"resnet{depth}", "origin": origin,
                       "params": nparam,
                       "grad_mb": round(nparam * 4 / 2**20, 1),
                       "config": cfg, "ranks": p, "device": str(dev),
                       "batch": args.batch, "steps": args.steps,
                       "step_ms": round(step * 1e3, 2),
                       "compute_ms": round(compute * 1e3, 2)
                       if compute else None,
                       "vs_compute": round(step / compute, 3)
                       if compute else None}
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
            if mod is not None and hasattr(mod, "empty_cache"):
                mod.empty_cache()
    out["markdown"] = ddp_markdown(rows, unsupported)
    if rank == 0:
        print(f"\n### DDP step, {p} processes on {dev}, batch {args.batch} "
              f"(3x32x32), median of {args.steps} steps after "
              f"{args.warmup}\n")
        print("\n".join(out["markdown"]))
    return 0


class Stopped(BaseException):
    """SIGTERM (the launcher stopping the ranks: a time limit). Not an
    Exception: the per-op/per-config `except Exception` must not take it
    for an unsupported contender."""


def on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once
    raise Stopped(f"stopped by {signal.Signals(signum).name} (a time limit?)")


def write_json(path, out):
    """Atomically: a reader never sees half a file."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, path)


# ---- results.md / results.json (run.sh's last step) ------------------------

def _load(path):
    """(data, None) or (None, why) for a JSON file of a step."""
    try:
        with open(path) as f:
            return json.load(f), None
    except (OSError, ValueError) as e:
        return None, f"{os.path.basename(path)} unreadable ({type(e).__name__}: {e})"


def report(out, dry, device, status):
    """results.md (every section a GPU run has, each with its table, or
    what stopped its step) and results.json (every row) in out, from the
    files the steps wrote and run.sh's step lines ("name: what happened").
    Never raises on a missing or broken file; returns the markdown."""
    steps = dict(st.split(": ", 1) if ": " in st else (st, "")
                 for st in status)
    res = {"dry_run": dry, "device": device, "steps": status, "tests": None,
           "select": None, "ops": [], "ddp": [], "problems": []}
    title = "# perf/gpu results"
    if dry:
        title += f" (DRY RUN on {device}: tiny sizes; no GPU figure)"
    md = [title, "", "## Steps", ""] + [f"- {st}" for st in status] + [""]

    def missing(name, what):
        why = steps.get(name)
        return [f"(no {what}: {name} {why})" if why else
                f"(no {what}: {name} did not run)", ""]

    md += ["## CUDA tests", ""]
    try:
        with open(os.path.join(out, "tests.txt")) as f:
            last = [ln for ln in f.read().splitlines() if ln.strip()][-1:]
        res["tests"] = last[0] if last else None
    except OSError:
        pass
    md += [f"    {res['tests']}", ""] if res["tests"] else \
        missing("cuda-tests", "summary line")

    md += ["## Top-k selection on the device (bench_select.py)", ""]
    sel, why = _load(os.path.join(out, "select.json"))
    if sel is not None and sel.get("rows") is not None:
        res["select"] = sel["rows"]
        md += ["| device | N | CF | select | time (ms) | sent | recall |",
               "|---|---|---|---|---|---|---|"]
        md += [f"| {r['device']} | {r['n']} | {r['cf']:g} | {r['select']} | "
               f"{r['time_ms']} | {r['sent']} | {r['recall']} |"
               for r in sel["rows"]] + [""]
    else:
        if why and os.path.exists(os.path.join(out, "select.json")):
            res["problems"].append(why)
        md += missing("select", "table")

    def ranks_of(name):
        try:
            return int(name.rsplit("-p", 1)[1])
        except (IndexError, ValueError):
            return None

    def files_and_steps(kind):
        """(P, path) for every kind-p<P> step run.sh planned and every
        kind-p<P>.json there is, by P."""
        ps = {ranks_of(n) for n in steps if n.startswith(kind + "-p")}
        for path in glob.glob(os.path.join(out, f"{kind}-p*.json")):
            ps.add(ranks_of(os.path.basename(path)[:-5]))
        return sorted(x for x in ps if x is not None)

    for q in files_and_steps("ops"):
        name, path = f"ops-p{q}", os.path.join(out, f"ops-p{q}.json")
        o, why = _load(path)
        if o is None:
            if os.path.exists(path):
                res["problems"].append(why)
            md += [f"## Collectives, {q} processes", ""] + \
                missing(name, "tables")
            continue
        res["ops"].append(o)
        for key, tab in (o.get("tables") or {}).items():
            md += [f"## Collectives, {o['ranks']} processes, {key} "
                   f"(dev = {o['device']})", ""] + tab["markdown"] + [""]
        if o.get("error"):
            md += [f"- {name} stopped: {o['error']} (the tables hold "
                   f"what was measured before)", ""]
    for q in files_and_steps("ddp"):
        name, path = f"ddp-p{q}", os.path.join(out, f"ddp-p{q}.json")
        d, why = _load(path)
        if d is None:
            if os.path.exists(path):
                res["problems"].append(why)
            md += [f"## DDP step, {q} processes", ""] + missing(name, "table")
            continue
        res["ddp"].append(d)
        md += [f"## DDP step, {d['ranks']} processes (dev = {d['device']})",
               ""] + d.get("markdown", []) + [""]
        if d.get("error"):
            md += [f"- {name} stopped: {d['error']} (the table holds what "
                   f"was measured before)", ""]
    if res["problems"]:
        md += ["## Problems", ""] + [f"- {x}" for x in res["problems"]] + [""]
    write_json(os.path.join(out, "results.json"), res)
    text = "\n".join(md) + "\n"
    tmp = os.path.join(out, f"results.md.tmp{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(out, "results.md"))
    return text


def main_report(argv):
    ap = argparse.ArgumentParser(
        prog="bench_gpu.py report",
        description="results.md and results.json from a run's files")
    ap.add_argument("out")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--device", default="cuda")
    # after "--": run.sh's step lines, "name: what happened"
    cut = argv.index("--") if "--" in argv else len(argv)
    args = ap.parse_args(argv[:cut])
    print(report(args.out, args.dry_run, args.device, argv[cut + 1:]), end="")
    return 0


def main():
    if sys.argv[1:2] == ["report"]:
        return main_report(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["ops", "ddp"])
    ap.add_argument("--dry-run", action="store_true",
                    help="tiny sizes, 2 steps (checks the script)")
    ap.add_argument("--device", default=None,
                    help="cuda (default), cpu, simdev, ... (default with "
                         "--dry-run: cpu)")
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
    args.device = args.device or ("cpu" if dry else "cuda")
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
    load_device_type(args.device.split(":")[0])  # before torch.device() of it
    import torch_gcx
    dev = device_of(args)
    timeout = B.init_gloo_default_group()
    rank, p = dist.get_rank(), dist.get_world_size()
    gcx = dist.new_group(backend="gcx", timeout=timeout)
    if rank == 0:
        print(f"# bench_gpu {args.what}: {p} processes, device {dev}"
              f"{' (dry run)' if dry else ''}, torch {torch.__version__}, "
              f"gcx {torch_gcx.gcx_version()}", flush=True)
    out = {"ranks": p, "device": str(dev), "rows": [], "unsupported": {},
           "torch": torch.__version__, "dry_run": dry,
           "gcx": torch_gcx.gcx_version()}
    if args.what == "ops":
        out["tables"] = {}
    else:
        out["markdown"] = []
    signal.signal(signal.SIGTERM, on_sigterm)
    bad, failed = 0, False
    try:
        if args.what == "ops":
            bad = run_ops(args, dev, gcx, rank, p, out)
        else:
            bad = run_ddp(args, dev, gcx, rank, p, out)
    except (Exception, Stopped) as e:  # noqa: BLE001 (the file is written)
        failed = True
        out["error"] = f"{type(e).__name__}: {e}"
        print(f"# rank {rank}: {out['error']}\n{traceback.format_exc()}",
              file=sys.stderr, flush=True)
        if args.what == "ops":
            out["tables"] = ops_tables(out["rows"], out["unsupported"], p)
        else:
            out["markdown"] = ddp_markdown(out["rows"], out["unsupported"])
    if rank == 0 and args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, f"{args.what}-p{p}.json")
        write_json(path, out)
        print(f"\n# wrote {path}", flush=True)
    if failed:  # the others may be inside a collective: no goodbyes
        return 1
    dist.destroy_process_group(gcx)
    dist.destroy_process_group()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
