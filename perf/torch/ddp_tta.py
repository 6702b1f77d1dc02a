#!/usr/bin/env python3
"""ddp_tta.py: time-to-accuracy of torch DDP on Fashion-MNIST, one
configuration (backend + communication hook) per launch.

Idea: the model, data order and optimiser of gcx-train's compress set
(programs/train, perf/train/time_to_accuracy.sh), in torch, so that the
only thing that changes between configurations is how DDP exchanges the
gradient:

    gloo-dense      backend gloo, DDP's default allreduce
    gloo-powersgd   backend gloo, torch's PowerSGD hook (rank PSGD_RANK, default 2,
                    start_powerSGD_iter 2)
    gcx-dense       backend gcx, DDP's default allreduce
    gcx-topk        backend gcx, torch_gcx.hooks.topk_hook (CF TOPK_CF, default 100)
    gcx-gravac      backend gcx, torch_gcx.hooks.gravac_hook (eps 0.2, theta 50..1000,
                    window 100, exponential policy, top-k)
    gcx-powersgd    (extra, not in run_tta.sh's list) backend gcx, torch's PowerSGD hook:
                    deadlocks today, its callbacks wait() on another collective's
                    Future, which torch_gcx's single completer thread cannot finish

DDP gets bucket_cap_mb 64 (--bucket-cap-mb): the whole 7.5 MB gradient is one
bucket in every configuration. With torch's default buckets (1 MiB first,
then 25 MiB) PowerSGD's chained callbacks of the two buckets issue their
allreduces in different orders on different ranks: gloo aborts ("Received
data size doesn't match expected size") or hangs, gcx reports
GCX_ERR_MISMATCH. One bucket gives every configuration the same, single
exchange per step.

Model: MLP 784-1024-1024-10 with ReLU (gcx-train's default; 1.86 M parameters),
He-normal weights (std sqrt(2/fan_in)) from --seed, zero biases; DDP
broadcasts rank 0's weights anyway. Data: the IDX files of the Debian
package dataset-fashion-mnist, pixels normalised with the training set's
mean and std (0.2860, 0.3530) like gcx-train. Each epoch draws one
permutation from the seed and the epoch (the same on every rank); step s
uses the global batch perm[s*G, (s+1)*G) with G = batch x ranks, rank r its
slice [s*G + r*batch, ...); the tail is skipped. SGD with momentum 0.9,
weight decay 1e-4, lr 0.05, cosine schedule over the run with half an epoch
of linear warm-up, batch 16 per rank, 2 epochs, evaluation every 50 steps
(gcx-train's compress set, perf/train/results.md). The
permutation comes from torch's generator, not gcx-train's SplitMix64, so
the sample order differs from gcx-train's; everything else is its recipe.

Evaluation: every --eval-every steps and at each epoch end every rank
evaluates its contiguous 1/P of the test set and the hit counts are summed
with one all_reduce (of the run's backend). Evaluation is not training
time: the training clock stops before and restarts after it. At each epoch
end an all_reduce(MAX) of (s, -s, q, -q), s and q the sum and the sum of
squares of all weights, checks that every rank holds the same weights.

Bytes sent per rank (this rank's share of the gradient exchange):
  dense:     per step 4 B x params x 2(P-1)/P (what a ring allreduce sends per rank)
  powersgd:  the same ring model over what PowerSGD allreduces: the dense bucket in
             its first start_powerSGD_iter steps, then P and Q of the compressed
             matrices plus the uncompressed tensors (PowerSGDState's element counts)
  gcx hooks: the hook state's st.bytes_sent (payload bytes this rank contributed)
  dense_bytes is the dense ring formula for the same steps, for every configuration;
  "x fewer" in the table divides by the dense equivalent in the same byte model
  (ring for dense and PowerSGD, the hook trace's dense_bytes = 4 B x params per
  compressed step for the gcx hooks, whose bytes_sent is payload, not ring traffic).

Output under --out (rank 0): NAME.csv (one row per evaluation), NAME.json
(summary), NAME.trace.csv (the gcx hooks' per-step trace). `ddp_tta.py --table
DIR` prints the markdown table of all NAME.json in DIR (and writes
DIR/results.md); plot_tta.py draws accuracy against training time.
A gcx hook configuration without torch_gcx.hooks exits with status 77
(skipped) before touching the network.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT:
    perf/cluster/emulate.sh -n 4 --rate 1gbit -q -- python perf/torch/ddp_tta.py --config gcx-dense --out DIR
(perf/torch/run_tta.sh runs all five). Cost per rank: the training set as
bytes (47 MB) and the test set, the model, its gradient, momentum and DDP's
buckets (~40 MB); per step the forward/backward of 16 samples (~0.2 Gflop)
and the exchange (7.5 MB dense: ~0.1 s on 1 Gbit/s links with 4 ranks), so
937 steps an epoch: measured in a smoke run on this 2-core box, ~134 ms a
step for gloo dense, ~160 ms gcx dense, ~115 PowerSGD, ~100 top-k, ~170
GraVAC (at CF 10), i.e. 1.5-2.7 min an epoch, plus ~0.5 s per evaluation.
"""
import argparse
import csv
import datetime
import gzip
import json
import math
import os
import statistics
import struct
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = ("gloo-dense", "gloo-powersgd", "gcx-dense", "gcx-topk", "gcx-gravac")
EXTRA = ("gcx-powersgd",)   # not in run_tta.sh's default list
SKIP_STATUS = 77
MEAN, STD = 0.2860, 0.3530          # gcx-train's normalisation (training set)
DATA_DIR = "/usr/share/datasets/fashion-mnist"


def env_num(name, default, kind=float):
    return kind(os.environ.get(name, default))


# ---- data ---------------------------------------------------------------------------

def read_idx(path, ndims):
    """An unsigned-byte IDX file (gzip or plain) -> uint8 tensor of its shape."""
    if not os.path.exists(path) and path.endswith(".gz") and os.path.exists(path[:-3]):
        path = path[:-3]
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    magic = raw[:4]
    if magic[0] != 0 or magic[1] != 0 or magic[2] != 0x08 or magic[3] != ndims:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes with {ndims} dimensions")
    dims = struct.unpack(">" + "I" * ndims, raw[4:4 + 4 * ndims])
    data = raw[4 + 4 * ndims:]
    if len(data) != math.prod(dims):
        raise ValueError(f"{path}: {len(data)} data bytes for dimensions {dims}")
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(*dims)


def load_split(data_dir, prefix, limit):
    x = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), 3)
    y = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), 1)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{prefix}: {x.shape[0]} images but {y.shape[0]} labels")
    if limit:
        x, y = x[:limit], y[:limit]
    return x.reshape(x.shape[0], -1).contiguous(), y.long()


LUT = ((torch.arange(256, dtype=torch.float32) / 255.0) - MEAN) / STD


def batch_of(x_u8, idx):
    return LUT[x_u8[idx].long()]


# ---- model and schedule -------------------------------------------------------------

def make_mlp(seed, hidden=(1024, 1024), classes=10, inputs=784):
    torch.manual_seed(seed)
    layers, width = [], inputs
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, classes))
    model = nn.Sequential(*layers)
    with torch.no_grad():
        for m in model:
            if isinstance(m, nn.Linear):
                m.weight.normal_(0.0, math.sqrt(2.0 / m.in_features))
                m.bias.zero_()
    return model


def cosine_lr(base, step, warmup, total, min_lr=0.0):
    """gcx-train's schedule: linear warm-up over `warmup` steps, then cosine to min_lr."""
    if step < warmup:
        return base * (step + 1) / warmup
    t, span = step - warmup, total - warmup
    if span <= 0 or t >= span:
        return min_lr
    return min_lr + (base - min_lr) * 0.5 * (1.0 + math.cos(math.pi * t / span))


# ---- communication hooks --------------------------------------------------------------

class Dense:
    """DDP's default allreduce; bytes by the ring model."""
    name, formula = "dense", "4 B x params x 2(P-1)/P per step (ring allreduce, per rank)"

    def __init__(self, ddp, nparams, p):
        self.per_step = 4.0 * nparams * (2.0 * (p - 1) / p if p > 1 else 0.0)
        self.steps = 0

    def step_done(self):
        self.steps += 1

    def bytes_sent(self):
        return self.per_step * self.steps

    def trace(self):
        return None


class PowerSGD:
    """torch's PowerSGD hook; bytes = the ring model over the elements it allreduces."""
    name = "powersgd"
    formula = ("4 B x (elements allreduced: the bucket before start_powerSGD_iter, then "
               "P + Q + uncompressed tensors) x 2(P-1)/P (ring model, per rank)")

    def __init__(self, ddp, nparams, p, rank_r):
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        self.state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=rank_r,
                                        start_powerSGD_iter=2)
        self.factor = 2.0 * (p - 1) / p if p > 1 else 0.0
        self.elements = 0
        hook = psgd.powerSGD_hook

        def counting_hook(state, bucket):
            if state.iter < state.start_powerSGD_iter:
                self.elements += bucket.buffer().numel()
                return hook(state, bucket)
            before = state.total_numel_after_compression
            fut = hook(state, bucket)
            self.elements += state.total_numel_after_compression - before
            return fut

        ddp.register_comm_hook(self.state, counting_hook)
        self.rank_r = rank_r

    def step_done(self):
        pass

    def bytes_sent(self):
        return 4.0 * self.elements * self.factor

    def trace(self):
        return None


class GcxHook:
    """torch_gcx.hooks' top-k or GraVAC hook; bytes = the state's bytes_sent."""
    formula = ("the hook state's st.bytes_sent (payload this rank contributed in compressed "
               "steps: 8 B per sent entry, index + value; 4 B per float of a dense send); "
               "its dense equivalent: the trace's dense_bytes, 4 B x params per step")

    def __init__(self, ddp, kind, batch):
        import torch_gcx.hooks as H
        self.name = kind
        if kind == "topk":
            self.state = H.TopkState(process_group=None, cf=env_num("TOPK_CF", "100"),
                                     compressor="topk", start_iter=1)
            ddp.register_comm_hook(self.state, H.topk_hook)
        else:
            self.state = H.GravacState(process_group=None, batch_size=batch,
                                       epsilon=env_num("GRAVAC_EPS", "0.2"),
                                       theta_min=env_num("GRAVAC_THETA_MIN", "50"),
                                       theta_max=env_num("GRAVAC_THETA_MAX", "1000"),
                                       window=env_num("GRAVAC_WINDOW", "100", int),
                                       policy="exponential", compressor="topk", start_iter=1)
            ddp.register_comm_hook(self.state, H.gravac_hook)

    def step_done(self):
        pass

    def bytes_sent(self):
        return float(self.state.bytes_sent)

    def dense_same_model(self):
        return float(sum(t.get("dense_bytes", 0) for t in self.trace()))

    def trace(self):
        return list(getattr(self.state, "trace", []) or [])


def hooks_missing():
    try:
        import torch_gcx.hooks  # noqa: F401
    except ImportError as e:
        return str(e)
    return None


# ---- training -------------------------------------------------------------------------

def evaluate(model, x, y, rank, p):
    """Accuracy and mean loss on the test set, each rank its contiguous 1/P."""
    n = x.shape[0]
    lo, hi = n * rank // p, n * (rank + 1) // p
    hits = loss = 0.0
    with torch.no_grad():
        for b in range(lo, hi, 1000):
            idx = torch.arange(b, min(b + 1000, hi))
            out = model(batch_of(x, idx))
            loss += float(F.cross_entropy(out, y[idx], reduction="sum"))
            hits += float((out.argmax(1) == y[idx]).sum())
    t = torch.tensor([hits, loss, float(hi - lo)], dtype=torch.float64)
    dist.all_reduce(t)
    return t[0].item() / t[2].item(), t[1].item() / t[2].item()


def weights_equal(model):
    s = q = 0.0
    with torch.no_grad():
        for prm in model.parameters():
            d = prm.detach().double()
            s += float(d.sum())
            q += float((d * d).sum())
    t = torch.tensor([s, -s, q, -q], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t[0] == -t[1] and t[2] == -t[3])


def write_table(folder, make_table):
    """The --table of both drivers: make_table(folder)'s markdown to folder/results.md and
    stdout; 0 (the exit status), or exit with a message when folder is not one."""
    if not os.path.isdir(folder):
        sys.exit(f"--table {folder}: not a folder")
    text = make_table(folder)
    with open(os.path.join(folder, "results.md"), "w") as f:
        f.write(text)
    print(text, end="")
    return 0


def add_recipe_args(ap, batch_meaning):
    """The options of the training recipe both drivers share (epochs, data, batch, lr, seed),
    each with its environment variable; batch_meaning says what BATCH counts."""
    ap.add_argument("--epochs", type=int, default=env_num("EPOCHS", "2", int),
                    help="epochs (env EPOCHS, default 2: gcx-train's compress set)")
    ap.add_argument("--subset", type=int, default=env_num("SUBSET", "0", int),
                    help="first N training samples only (env SUBSET; 0: all 60000)")
    ap.add_argument("--test-subset", type=int, default=env_num("TEST_SUBSET", "0", int),
                    help="first N test samples only (env TEST_SUBSET; 0: all 10000)")
    ap.add_argument("--batch", type=int, default=env_num("BATCH", "16", int),
                    help=f"{batch_meaning} (env BATCH, default 16)")
    ap.add_argument("--lr", type=float, default=env_num("LR", "0.05"), help="base lr (env LR, 0.05)")
    ap.add_argument("--seed", type=int, default=env_num("SEED", "1", int), help="seed (env SEED, 1)")


def write_csv(path, rows):
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def start_run(args, backend):
    """What a launch does first (coded_tta.py too): the backend (gcx: import
    torch_gcx), gloo on the emulated node's eth0, --threads, the data
    (--subset, --test-subset), the default group with --timeout. Returns
    (xtr, ytr, xte, yte, rank, world size)."""
    if backend == "gcx":
        import torch_gcx  # noqa: F401  registers the backend "gcx"
    if "GCX_EMU_NETNS" in os.environ:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    torch.set_num_threads(args.threads)
    xtr, ytr = load_split(args.data_dir, "train", args.subset)
    xte, yte = load_split(args.data_dir, "t10k", args.test_subset)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout))
    return xtr, ytr, xte, yte, dist.get_rank(), dist.get_world_size()


def train(args):
    backend = args.config.split("-")[0]
    hook_kind = args.config.split("-", 1)[1]
    xtr, ytr, xte, yte, rank, p = start_run(args, backend)
    model = make_mlp(args.seed)
    nparams = sum(x.numel() for x in model.parameters())
    if args.bucket_cap_mb > 0:
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
    else:
        ddp = nn.parallel.DistributedDataParallel(model)   # torch's buckets: 1 MiB first
    if hook_kind == "dense":
        comm = Dense(ddp, nparams, p)
    elif hook_kind == "powersgd":
        comm = PowerSGD(ddp, nparams, p, args.psgd_rank)
    else:
        comm = GcxHook(ddp, hook_kind, args.batch)
    dense_per_step = Dense(ddp, nparams, p).per_step
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)

    g = args.batch * p
    spe = xtr.shape[0] // g
    if spe < 1:
        raise SystemExit(f"{xtr.shape[0]} training samples do not fill one global batch of {g}")
    total = spe * args.epochs
    warmup = max(1, round(0.5 * spe))
    if rank == 0:
        print(f"ddp_tta {args.config}: {p} ranks x batch {args.batch}, {xtr.shape[0]} train / "
              f"{xte.shape[0]} test, {spe} steps/epoch, {args.epochs} epochs, MLP "
              f"{nparams} params, lr {args.lr} cosine, seed {args.seed}", flush=True)

    rows, train_s, eval_s, step = [], 0.0, 0.0, 0
    loss_sum, loss_n = 0.0, 0
    t_wall0 = time.perf_counter()
    tta = None
    ok_all = True

    def checkpoint(epoch, epoch_end):
        nonlocal eval_s, tta, ok_all, loss_sum, loss_n
        t0 = time.perf_counter()
        acc, tloss = evaluate(model, xte, yte, rank, p)
        same = weights_equal(model) if epoch_end else None
        if same is False:
            ok_all = False
        eval_s += time.perf_counter() - t0
        if tta is None and acc >= args.target:
            tta = (train_s, step, epoch)
        row = {"config": args.config, "epoch": epoch, "step": step, "epoch_end": int(epoch_end),
               "train_time_s": round(train_s, 3), "wall_time_s": round(time.perf_counter() - t_wall0, 3),
               "eval_time_s": round(eval_s, 3), "test_acc": round(acc, 5), "test_loss": round(tloss, 5),
               "train_loss": round(loss_sum / loss_n, 5) if loss_n else "",
               "lr": opt.param_groups[0]["lr"],
               "steps_per_s": round(step / train_s, 3) if train_s > 0 else "",
               "bytes_sent": int(comm.bytes_sent()), "dense_bytes": int(dense_per_step * step),
               "weights_equal": "" if same is None else int(same)}
        rows.append(row)
        loss_sum, loss_n = 0.0, 0
        if rank == 0 and (epoch_end or args.verbose):
            print(f"  epoch {epoch} step {step}: train {train_s:.1f} s, test acc {acc:.4f}, "
                  f"loss {tloss:.4f}, {row['steps_per_s']} steps/s, "
                  f"{row['bytes_sent'] / 1e9:.3f} GB sent"
                  f"{'' if same is None else ', weights equal' if same else ', WEIGHTS DIFFER'}",
                  flush=True)

    for epoch in range(1, args.epochs + 1):
        gen = torch.Generator().manual_seed(args.seed * 1000003 + epoch)
        perm = torch.randperm(xtr.shape[0], generator=gen)
        for s in range(spe):
            t0 = time.perf_counter()
            idx = perm[s * g + rank * args.batch: s * g + (rank + 1) * args.batch]
            for grp in opt.param_groups:
                grp["lr"] = cosine_lr(args.lr, step, warmup, total)
            out = ddp(batch_of(xtr, idx))
            loss = F.cross_entropy(out, ytr[idx])
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
            comm.step_done()
            step += 1
            loss_sum += float(loss.detach())
            loss_n += 1
            train_s += time.perf_counter() - t0
            last = s == spe - 1
            if last or (args.eval_every and step % args.eval_every == 0):
                checkpoint(epoch, last)

    final = rows[-1]
    summary = {
        "config": args.config, "backend": backend, "hook": comm.name, "ranks": p,
        "link": os.environ.get("LINK", ""), "epochs": args.epochs, "steps": step,
        "steps_per_epoch": spe, "batch_per_rank": args.batch, "params": nparams,
        "buckets": len(ddp._get_ddp_logging_data().get("bucket_sizes", "").split(",")) or None,
        "train_samples": xtr.shape[0], "test_samples": xte.shape[0],
        "train_time_s": round(train_s, 3), "eval_time_s": round(eval_s, 3),
        "wall_time_s": round(time.perf_counter() - t_wall0, 3),
        "steps_per_s": round(step / train_s, 3), "target_acc": args.target,
        "time_to_target_s": None if tta is None else round(tta[0], 3),
        "step_to_target": None if tta is None else tta[1],
        "epoch_to_target": None if tta is None else tta[2],
        "final_acc": final["test_acc"], "best_acc": max(r["test_acc"] for r in rows),
        "bytes_sent_per_rank": int(comm.bytes_sent()),
        "dense_bytes_per_rank": int(dense_per_step * step), "bytes_formula": comm.formula,
        "dense_bytes_same_model": int(comm.dense_same_model() if hasattr(comm, "dense_same_model")
                                      else dense_per_step * step),
        "weights_equal": ok_all,
        "options": {k: v for k, v in vars(args).items() if k not in ("table",)},
        "env": {k: os.environ[k] for k in ("UCX_TLS", "GLOO_SOCKET_IFNAME", "TOPK_CF",
                                           "PSGD_RANK", "GRAVAC_EPS", "GRAVAC_THETA_MIN",
                                           "GRAVAC_THETA_MAX", "GRAVAC_WINDOW") if k in os.environ},
    }
    if hook_kind == "powersgd":
        summary["powersgd_rank"] = args.psgd_rank
    tr = comm.trace()
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        write_csv(os.path.join(args.out, f"{args.config}.csv"), rows)
        if tr:
            write_csv(os.path.join(args.out, f"{args.config}.trace.csv"), tr)
            cfs = [t["cf"] for t in tr if isinstance(t, dict) and "cf" in t]
            if cfs:
                summary["cf_median"] = statistics.median(cfs)
        with open(os.path.join(args.out, f"{args.config}.json"), "w") as f:
            json.dump(summary, f, indent=1)
        print(f"ddp_tta {args.config}: train {train_s:.1f} s, {summary['steps_per_s']} steps/s, "
              f"final acc {final['test_acc']:.4f}, time to {args.target:.0%}: "
              f"{'-' if tta is None else f'{tta[0]:.1f} s'}, "
              f"{summary['bytes_sent_per_rank'] / 1e9:.3f} GB sent per rank; wrote "
              f"{args.out}/{args.config}.csv, .json", flush=True)
    dist.destroy_process_group()
    return 0 if ok_all else 1


# ---- table ----------------------------------------------------------------------------

def fmt_bytes(b):
    return f"{b / 1e9:.3f} GB" if b >= 1e8 else f"{b / 1e6:.2f} MB"


def table(folder):
    runs = {}
    for name in os.listdir(folder):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                s = json.load(f)
            runs[s["config"]] = s
    order = [c for c in CONFIGS if c in runs] + sorted(c for c in runs if c not in CONFIGS)
    if not order:
        return "(no runs)\n"
    one = runs[order[0]]
    lines = [f"{one['ranks']} ranks{', link ' + one['link'] if one.get('link') else ''}, batch "
             f"{one['batch_per_rank']} per rank, {one['epochs']} epochs of {one['steps_per_epoch']} "
             f"steps, {one['train_samples']} train / {one['test_samples']} test samples; times "
             f"are training time (evaluations excluded); bytes per rank.", "",
             f"| config | backend | hook | time to {one['target_acc']:.0%} (s) | speed-up vs "
             f"gloo-dense | final acc | best acc | train time (s) | steps/s | bytes sent | "
             f"x fewer than dense (same byte model) | weights equal |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ref = runs.get("gloo-dense", {}).get("time_to_target_s")
    for c in order:
        s = runs[c]
        t = s["time_to_target_s"]
        hook = s["hook"] + (f" rank {s['powersgd_rank']}" if "powersgd_rank" in s else "")
        sent = s["bytes_sent_per_rank"]
        fewer = s.get("dense_bytes_same_model", s["dense_bytes_per_rank"]) / sent if sent else float("inf")
        lines.append(f"| {c} | {s['backend']} | {hook} | {'-' if t is None else f'{t:.1f}'} | "
                     f"{f'{ref / t:.2f}' if ref and t else '-'} | {s['final_acc']:.4f} | "
                     f"{s['best_acc']:.4f} | {s['train_time_s']:.1f} | {s['steps_per_s']:.2f} | "
                     f"{fmt_bytes(sent)} | {fewer:.1f} | {'yes' if s['weights_equal'] else 'NO'} |")
    by_formula = {}
    for c in order:
        names = by_formula.setdefault(runs[c]["bytes_formula"], [])
        if runs[c]["hook"] not in names:
            names.append(runs[c]["hook"])
    lines += ["", "Bytes: " + "; ".join(f"{', '.join(n)}: {f}" for f, n in by_formula.items()) + "."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=CONFIGS + EXTRA, help="what to run")
    ap.add_argument("--table", metavar="DIR", help="print the table of the runs in DIR (no training)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="output folder (rank 0)")
    add_recipe_args(ap, "samples per rank per step")
    ap.add_argument("--eval-every", type=int, default=env_num("EVAL_EVERY", "50", int),
                    help="evaluate every N steps too (env EVAL_EVERY, default 50 as gcx-train's "
                         "compress set; 0: epoch ends only)")
    ap.add_argument("--target", type=float, default=env_num("TARGET", "0.85"),
                    help="target test accuracy (env TARGET, default 0.85)")
    ap.add_argument("--psgd-rank", type=int, default=env_num("PSGD_RANK", "2", int),
                    help="PowerSGD matrix_approximation_rank (env PSGD_RANK, default 2)")
    ap.add_argument("--bucket-cap-mb", type=float, default=env_num("BUCKET_CAP_MB", "64"),
                    help="DDP bucket_cap_mb (env BUCKET_CAP_MB, default 64: the whole "
                         "7.5 MB gradient is one bucket; 0: torch's default buckets)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank (default 1)")
    ap.add_argument("--timeout", type=float, default=600, help="process group timeout, s")
    ap.add_argument("--data-dir", default=os.environ.get("GCX_DATA_DIR", DATA_DIR),
                    help=f"folder of the IDX files (env GCX_DATA_DIR, default {DATA_DIR})")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every evaluation")
    args = ap.parse_args()
    if args.table:
        return write_table(args.table, table)
    if not args.config:
        ap.error("--config or --table is needed")
    if args.epochs < 1 or args.batch < 1:
        ap.error("need --epochs >= 1 and --batch >= 1")
    if args.config in ("gcx-topk", "gcx-gravac"):
        why = hooks_missing()
        if why:
            if os.environ.get("RANK", "0") == "0":
                print(f"ddp_tta {args.config}: SKIPPED, torch_gcx.hooks is not there ({why})",
                      flush=True)
            return SKIP_STATUS
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
