#!/usr/bin/env python3
"""coded_tta.py: time to accuracy of coded data-parallel training in torch
(torch_gcx.coded) against DDP, under exponential stragglers; one
configuration per launch.

Idea: gcx-train's CNN on Fashion-MNIST with one recipe (seed, data order,
initialisation, optimiser, schedule), so that only the way the step's
gradient is assembled changes between configurations:

    ddp-gloo     torch DDP, backend gloo, DDP's allreduce
    ddp-gcx      torch DDP, backend gcx, DDP's allreduce
    ignore       CodedDataParallel(code="ignore", s=S): each worker computes its
                 own partition, the root sums the first n-s to arrive, scaled
                 by n/(n-s) (the papers' "ignore stragglers" baseline; S = 0: an
                 uncoded gather, the coded path's own uncoded step)
    gc-fr gc-cr pgc-fr pgc-cr
                 CodedDataParallel(code=..., s=S)
    pgc-fr-topk  CodedDataParallel(code="pgc-fr", s=S, compress=topk(CF))
    ddp-elastic  (for the kill set) torch_gcx.elastic.ElasticDDP over gcx: DDP
                 that shrinks to the survivors when a rank dies and redoes the
                 failed step; without a kill it computes what ddp-gcx does, plus
                 one short step per epoch of the tail ddp-gcx drops (ElasticDDP
                 shares out every sample)

Model: gcx-train's CNN (programs/train/nn/model_cnn.c): 28x28 -> conv 16
(k x k, same padding) ReLU maxpool 2 -> conv 32 ReLU maxpool 2 -> dense 128
ReLU -> dense 10, k = --ksize (default 5, gcx-train's default: 215,370
parameters, ~0.22 M; k = 3 gives 206,922), He-normal weights from --seed,
zero biases. Data, normalisation and sample order as ddp_tta.py (imported
from it): each epoch one permutation from (seed, epoch), epochs counted from
0 as CodedSampler and ElasticDDP count them, so every configuration draws the
same permutations. DDP: step t uses the global batch perm[tG, (t+1)G), G =
B x ranks, rank r its slice of B. Coded: the same global batches of n = ranks
partitions of B samples (gc, ignore: one step per global batch; gc computes
the s+1 partitions of its row, ignore its own one); pgc takes s+1 steps per
global batch, one partition each, so its epoch has (s+1)x the steps at one
partition's compute per step. Optimiser: SGD momentum 0.9, weight decay 1e-4,
lr --lr (0.05) with half an epoch of linear warm-up then cosine to 0 over the
run, as a function of the epoch fraction (the schedule of ddp_tta.py,
ddp_tta.cosine_lr over each configuration's own steps per epoch): at the
same point of the data every configuration has the same lr.

Stragglers (--straggler exp:M, default exp:1; --no-straggler): every worker,
after computing a partition gradient, sleeps M x that computation's time x
an Exp(1) draw, the papers' model (M = 1: mean delay = one step's compute).
Coded: CodedDataParallel(straggler="exp:M") does it, the draw from (seed,
round, worker, partition). DDP: a DDP communication hook (the model is one
bucket, bucket_cap_mb 64): when DDP hands it the bucket, the rank's
forward+backward is done; the hook measures it (from just before the
forward), sleeps M x that x Exp(1) drawn from (seed, step, rank, rank) with
the same generator as coded's (the draw gc would use for a worker computing
partition = rank), then returns torch's allreduce_hook (average over the
group). So the delay lands before the gradient allreduce, and the same hook
runs for ddp-gloo, ddp-gcx and ddp-elastic. With no straggler no hook is
registered: DDP's own allreduce.

Clock and evaluation: rank 0's training clock (perf_counter) runs from
before a step's forward (or backward()) to after optimizer.step(). Every
--eval-every steps, at each epoch end and at the end, rank 0 alone
evaluates the test set (or its first --test-subset samples) with
--eval-threads torch threads while its clock is paused; the other ranks
wait for its "evaluated" key in the c10d store (no collective, so a dead
rank changes nothing). A straggler's pending sleep runs on during an
evaluation (it is not paused), as the others wait: the same for every
configuration, one evaluation per --eval-every steps. At the end every
rank puts a digest of its parameters and its counters in the store; rank 0
checks that the survivors' parameters are equal bit for bit.
Loss column: DDP, rank 0's local mean loss; coded, the decoded mean loss
backward() returns (lost rounds: none); the mean over the steps since the
last evaluation.

Kill (--kill-rank R --kill-step T, R in 1..ranks-1: rank 0 is the root and
serves the store): rank R SIGKILLs itself at the start of its step T (T
counts this configuration's steps: a pgc step is 1/(s+1) of a global batch,
so run_coded_tta.sh gives pgc (s+1)x the dense step for the same point of
the data), after putting time.time() in the store. Coded (s >= 1, ignore
too): the survivors go on; recorded: lost_rounds, each survivor's rounds
(all must complete), the time from the kill to the end of step T on rank 0,
the root's gone set (gone_mask: bit w for worker w, any width; gone_workers:
the same as a list). ddp-elastic: each survivor's recovery (ElasticDDP's
events): detect, agree, shrink, resume = time from the kill to its first
committed step after the shrink; seconds lost = max resume - the median
step. ddp-gloo / ddp-gcx cannot lose a rank (the error says so).

Output under --out (rank 0): NAME.csv (one row per evaluation: step, epoch,
train_time_s, test_acc, loss, ...), NAME.steps.csv (rank 0's time of every
step), NAME.json (summary: config, ranks, link,
straggler, steps, epochs, final accuracy, time to --target, mean / median
step, epoch time, coded stats, kill record). NAME defaults to
CONFIG[-sS]-rRANKS-STRAGGLER[-kill][-stepsN] (-sS only when S != 1 for a
coded config). `coded_tta.py --table DIR` prints the markdown tables of all
NAME.json in DIR and writes DIR/results.md; plot_coded_tta.py draws
accuracy against training time. A configuration this torch_gcx lacks
(ignore, before it is built) exits 77 (skipped) before touching the network.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT:
    perf/cluster/emulate.sh -n 4 --rate 1gbit -q --no-prefix -- \\
        python perf/torch/coded_tta.py --config pgc-fr --out DIR
(perf/torch/run_coded_tta.sh runs the study). Cost per rank: the training
set as bytes (47 MB), the test set, the model (0.86 MB), its gradient,
momentum and the coded slot buffers (s+1 copies of the gradient) or DDP's
bucket; per partition ~6 Mflop forward per sample, ~0.3 Gflop
forward+backward for 16 samples; the exchange is small (0.86 MB a message;
the coded gather sends the decoded sum from the root to every rank). Rank
0's evaluation: ~6 Mflop per test sample (10000: ~60 Gflop, seconds).
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import random
import signal
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from ddp_tta import (DATA_DIR, SKIP_STATUS, add_recipe_args, batch_of, cosine_lr, env_num,  # noqa: E402
                     start_run, write_csv, write_table)

DDP_CONFIGS = ("ddp-gloo", "ddp-gcx")
CODED_CONFIGS = ("ignore", "gc-fr", "gc-cr", "pgc-fr", "pgc-cr", "pgc-fr-topk")
CONFIGS = DDP_CONFIGS + CODED_CONFIGS
EXTRA = ("ddp-elastic",)                 # the dense side of the kill set
ORDER = CONFIGS + EXTRA
KEY = "coded_tta"                        # prefix of this driver's store keys


def coded_code(config):
    """The torch_gcx.coded code name of a coded configuration."""
    return "pgc-fr" if config == "pgc-fr-topk" else config


# ---- model ----------------------------------------------------------------------------

def make_cnn(seed, ksize=5, channels=(16, 32), hidden=128, classes=10):
    """gcx-train's CNN on 784-float rows (reshaped to 1x28x28 inside)."""
    torch.manual_seed(seed)
    layers, c, side = [nn.Unflatten(1, (1, 28, 28))], 1, 28
    for k in channels:
        layers += [nn.Conv2d(c, k, ksize, padding=ksize // 2), nn.ReLU(), nn.MaxPool2d(2)]
        c, side = k, side // 2
    layers += [nn.Flatten(), nn.Linear(c * side * side, hidden), nn.ReLU(),
               nn.Linear(hidden, classes)]
    model = nn.Sequential(*layers)
    with torch.no_grad():
        for m in model:
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0.0, math.sqrt(2.0 / fan_in))
                m.bias.zero_()
    return model


def param_digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


# ---- stragglers -------------------------------------------------------------------------

def parse_straggler(text):
    """"exp:M" (M > 0) -> M; "none" / "" / "0" -> 0.0."""
    if text in (None, "", "none", "0"):
        return 0.0
    head, _, tail = text.partition(":")
    try:
        m = float(tail)
    except ValueError:
        m = -1.0
    if head != "exp" or not m > 0:
        raise ValueError(f"--straggler must be exp:M with M > 0, or none; got {text!r}")
    return m


def straggler_tag(m):
    return "none" if m == 0 else f"exp{m:g}".replace(".", "p")


def exp_draw(seed, step, rank):
    """Exp(1) from (seed, step, rank): torch_gcx.coded's draw for worker = partition = rank."""
    return random.Random(f"gcx-straggler:{seed}:{step}:{rank}:{rank}").expovariate(1.0)


class DDPStraggler:
    """The exponential straggler as a DDP communication hook: sleep M x (the
    forward+backward time since start()) x Exp(1) once per step, before
    torch's allreduce_hook (average over the current default group)."""

    def __init__(self, m, seed, rank):
        self.m, self.seed, self.rank = m, seed, rank
        self.step, self.t0, self.slept = 0, 0.0, True
        self.delay_s = 0.0
        self.compute_s = 0.0

    def start(self, step):
        self.step, self.t0, self.slept = step, time.perf_counter(), False

    def register(self, ddp):
        if self.m > 0:
            ddp.register_comm_hook(self, DDPStraggler.hook)

    @staticmethod
    def hook(state, bucket):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        if not state.slept:             # once per step (the model is one bucket)
            state.slept = True
            c = time.perf_counter() - state.t0
            d = state.m * c * exp_draw(state.seed, state.step, state.rank)
            state.compute_s += c
            state.delay_s += d
            time.sleep(d)
        return default_hooks.allreduce_hook(None, bucket)


# ---- the run ----------------------------------------------------------------------------

class Run:
    """Clock, evaluations, CSV rows and the rank-0-only evaluation protocol."""

    def __init__(self, args, model, xte, yte, store, rank, opt):
        self.args, self.model, self.xte, self.yte = args, model, xte, yte
        self.store, self.rank, self.opt = store, rank, opt
        self.rows, self.step_times = [], []
        self.train_s = self.eval_s = 0.0
        self.loss_sum, self.loss_n = 0.0, 0
        self.tta = None
        self.n_eval = 0
        self.t_wall0 = time.perf_counter()

    def step_done(self, seconds, loss):
        self.step_times.append(seconds)
        self.train_s += seconds
        if loss is not None:
            self.loss_sum += float(loss)
            self.loss_n += 1

    def evaluate(self, step, epoch, epoch_end):
        """Rank 0 evaluates while the others wait for its store key."""
        self.n_eval += 1
        key = f"{KEY}/eval/{self.n_eval}"
        t0 = time.perf_counter()
        if self.rank != 0:
            self.store.wait([key], datetime.timedelta(seconds=self.args.timeout))
            return
        torch.set_num_threads(self.args.eval_threads)
        hits = loss = 0.0
        n = self.xte.shape[0]
        self.model.eval()
        with torch.no_grad():
            for b in range(0, n, 1000):
                idx = torch.arange(b, min(b + 1000, n))
                out = self.model(batch_of(self.xte, idx))
                loss += float(F.cross_entropy(out, self.yte[idx], reduction="sum"))
                hits += float((out.argmax(1) == self.yte[idx]).sum())
        self.model.train()
        torch.set_num_threads(self.args.threads)
        acc, tloss = hits / n, loss / n
        self.eval_s += time.perf_counter() - t0
        if self.tta is None and acc >= self.args.target:
            self.tta = (self.train_s, step, epoch)
        steps = len(self.step_times)
        row = {"config": self.args.config, "step": step, "epoch": epoch,
               "epoch_end": int(epoch_end), "train_time_s": round(self.train_s, 3),
               "test_acc": round(acc, 5),
               "loss": round(self.loss_sum / self.loss_n, 5) if self.loss_n else "",
               "test_loss": round(tloss, 5), "lr": self.opt.param_groups[0]["lr"],
               "wall_time_s": round(time.perf_counter() - self.t_wall0, 3),
               "eval_time_s": round(self.eval_s, 3),
               "mean_step_ms": round(1e3 * self.train_s / steps, 2) if steps else ""}
        self.rows.append(row)
        self.loss_sum, self.loss_n = 0.0, 0
        if epoch_end or self.args.verbose:
            print(f"  epoch {epoch} step {step}: train {self.train_s:.1f} s, test acc {acc:.4f}, "
                  f"loss {row['loss']}, {row['mean_step_ms']} ms/step", flush=True)
        self.store.set(key, "1")

    def due(self, step, epoch_end, last):
        every = self.args.eval_every
        return last or epoch_end or (every and step % every == 0)

    def end_step(self, step, epoch, epoch_end, stop):
        """After step `step` (counted from 1) of `epoch`: evaluates when due;
        whether it was the run's last (`stop` steps)."""
        last = step >= stop
        if self.due(step, epoch_end, last):
            self.evaluate(step, epoch, epoch_end)
        return last


def lr_at(args, progress_steps, spe):
    """ddp_tta's schedule over this configuration's steps: half an epoch of
    warm-up, cosine to 0 at the end of --epochs."""
    return cosine_lr(args.lr, progress_steps, max(1, round(0.5 * spe)), spe * args.epochs)


def set_lr(opt, lr):
    for g in opt.param_groups:
        g["lr"] = lr


def kill_self(store, rank, step):
    store.set(f"{KEY}/kill/t", repr(time.time()))
    print(f"coded_tta: rank {rank} SIGKILLs itself at step {step}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def train_ddp(args, run, model, opt, xtr, ytr, rank, p, straggler_m):
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=64)
    hook = DDPStraggler(straggler_m, args.seed, rank)
    hook.register(ddp)
    g = args.batch * p
    spe = xtr.shape[0] // g
    if spe < 1:
        raise SystemExit(f"{xtr.shape[0]} training samples do not fill one global batch of {g}")
    run.spe = spe
    step = 0
    stop = args.max_steps or spe * args.epochs
    for epoch in range(args.epochs):
        gen = torch.Generator().manual_seed(args.seed * 1000003 + epoch)
        perm = torch.randperm(xtr.shape[0], generator=gen)
        for t in range(spe):
            t0 = time.perf_counter()
            set_lr(opt, lr_at(args, step, spe))
            idx = perm[t * g + rank * args.batch: t * g + (rank + 1) * args.batch]
            hook.start(step)
            loss = F.cross_entropy(ddp(batch_of(xtr, idx)), ytr[idx])
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
            step += 1
            run.step_done(time.perf_counter() - t0, loss.detach())
            if run.end_step(step, epoch, t == spe - 1, stop):
                break
        if step >= stop:
            break
    return {"ddp_buckets": len(str(ddp._get_ddp_logging_data().get("bucket_sizes", "")).split(",")),
            "straggler_delay_s": round(hook.delay_s, 3),
            "compute_s": round(hook.compute_s, 3) if straggler_m > 0 else None}, step


def train_elastic(args, run, model, opt, xtr, ytr, rank, p, straggler_m, store):
    from torch_gcx import elastic
    hook = DDPStraggler(straggler_m, args.seed, rank)
    spe0 = xtr.shape[0] // (args.batch * p)
    if spe0 < 1:
        raise SystemExit(f"{xtr.shape[0]} training samples do not fill one global batch of "
                         f"{args.batch * p}")
    run.spe = spe0
    state = {"t_last": None, "epoch_end": False, "kill_step_train_s": None}
    job = None

    def on_shrink(ev):
        hook.rank = dist.get_rank()    # the draws follow the rank in the shrunk group
        hook.register(job.ddp)

    def on_step(epoch, idx):
        now = time.perf_counter()
        run.step_done(now - state["t_last"], state.get("loss"))
        stop = bool(args.max_steps) and job.step >= args.max_steps
        end = job.pos >= job.num_samples          # ElasticDDP moved pos before on_step
        if run.due(job.step, end, stop or (end and epoch == args.epochs - 1)):
            run.evaluate(job.step, epoch, end)
        if stop:
            raise StopTraining
        state["t_last"] = time.perf_counter()

    def step_fn(ddp, idx, denom):
        if state["t_last"] is None:
            state["t_last"] = time.perf_counter()
        if args.kill_rank == run.start_rank and job.step == args.kill_step:
            kill_self(store, run.start_rank, job.step)
        if job.step == args.kill_step and rank == 0:
            state["kill_step_train_s"] = run.train_s
        # the schedule by the data position (steps of the world at the start)
        pos_steps = (job.epoch * job.num_samples + job.pos) / (p * args.batch)
        set_lr(opt, lr_at(args, pos_steps, spe0))
        hook.start(job.step)
        # ElasticDDP's recipe: the sum over the slice / denom, which DDP's
        # average over the ranks makes the mean over the step's samples
        loss = F.cross_entropy(ddp(batch_of(xtr, idx)), ytr[idx], reduction="sum")
        state["loss"] = float(loss.detach()) / max(1, len(idx))
        (loss / denom).backward()

    # num_samples = all of them: ElasticDDP's permutation is then DDP's
    # (randperm(N) from seed * 1000003 + epoch), its first spe0 steps of an
    # epoch are ddp-gcx's, and the tail that DDP drops is one short last step
    job = elastic.ElasticDDP(model, opt, num_samples=xtr.shape[0],
                             batch_size=args.batch, seed=args.seed,
                             ddp_kwargs={"bucket_cap_mb": 64}, on_shrink=on_shrink,
                             on_step=on_step)
    hook.register(job.ddp)
    try:
        for epoch in range(args.epochs):
            job.train_epoch(epoch, step_fn)
    except StopTraining:
        pass
    run.kill_step_train_s = state["kill_step_train_s"]
    events = [{k: v for k, v in ev.items()} for ev in job.events]
    return {"straggler_delay_s": round(hook.delay_s, 3), "elastic_events": events,
            "world_after": dist.get_world_size(), "seen": job.seen}, job.step


class StopTraining(Exception):
    pass


def train_coded(args, run, model, opt, xtr, ytr, rank, p, straggler_m, store):
    from torch_gcx import coded
    code = coded_code(args.config)
    compress = coded.topk(args.topk_cf) if args.config == "pgc-fr-topk" else None
    cdp = coded.CodedDataParallel(model, code=code, s=args.s,
                                  straggler=f"exp:{straggler_m:g}" if straggler_m > 0 else None,
                                  compress=compress, seed=args.seed)
    sampler = cdp.sampler(xtr.shape[0], args.batch, seed=args.seed)
    spe = len(sampler)
    run.spe = spe
    stop = args.max_steps or spe * args.epochs
    step, lost_after_kill, t_kill_done = 0, 0, None

    def loss_fn(idx):
        return F.cross_entropy(model(batch_of(xtr, idx)), ytr[idx])

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for t, cstep in enumerate(sampler):
            if rank == args.kill_rank and step == args.kill_step:
                kill_self(store, rank, step)
            if step == args.kill_step and rank == 0:
                run.kill_step_train_s = run.train_s
            t0 = time.perf_counter()
            set_lr(opt, lr_at(args, step, spe))
            loss = cdp.backward(cstep, loss_fn)
            opt.step()
            step += 1
            run.step_done(time.perf_counter() - t0, loss)
            if args.kill_step is not None and step > args.kill_step and loss is None:
                lost_after_kill += 1
            if args.kill_step is not None and step == args.kill_step + 1:
                t_kill_done = time.time()
            if run.end_step(step, epoch, t == spe - 1, stop):
                break
        if step >= stop:
            break
    st = cdp.stats()
    extra = {"code": code, "s": args.s, "compress": repr(compress) if compress else None,
             "coded_stats": {k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v))
                             for k, v in st.items()},
             "lost_rounds": cdp.lost_rounds, "skipped": cdp.skipped, "abstained": cdp.abstained,
             "lost_after_kill": lost_after_kill, "t_kill_step_done": t_kill_done}
    return extra, step, cdp


def train(args):
    straggler_m = 0.0 if args.no_straggler else parse_straggler(args.straggler)
    coded_cfg = args.config in CODED_CONFIGS
    backend = "gloo" if args.config == "ddp-gloo" else "gcx"
    xtr, ytr, xte, yte, rank, p = start_run(args, backend)
    store = dist.distributed_c10d._get_default_store()
    if args.kill_rank is not None and not 0 < args.kill_rank < p:
        raise SystemExit(f"coded_tta: --kill-rank {args.kill_rank} must be in 1..{p - 1} "
                         f"(rank 0 is the coded root and serves the store)")
    model = make_cnn(args.seed, args.ksize)
    nparams = sum(x.numel() for x in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    run = Run(args, model, xte, yte, store, rank, opt)
    run.start_rank = rank            # this process's rank in the group at the start
    run.kill_step_train_s = None
    name = args.name or (f"{args.config}"
                         f"{f'-s{args.s}' if coded_cfg and args.s != 1 else ''}-r{p}-"
                         f"{straggler_tag(straggler_m)}"
                         f"{'-kill' if args.kill_rank is not None else ''}"
                         f"{f'-steps{args.max_steps}' if args.max_steps else ''}")
    if rank == 0:
        print(f"coded_tta {name}: {p} ranks x batch {args.batch}, {xtr.shape[0]} train / "
              f"{xte.shape[0]} test, {args.epochs} epochs, CNN k{args.ksize} {nparams} params, "
              f"lr {args.lr} cosine, straggler {straggler_tag(straggler_m)}, seed {args.seed}"
              f"{f', s {args.s}' if coded_cfg else ''}"
              f"{f', rank {args.kill_rank} killed at step {args.kill_step}' if args.kill_rank is not None else ''}",
              flush=True)
    cdp = None
    if coded_cfg:
        extra, steps, cdp = train_coded(args, run, model, opt, xtr, ytr, rank, p, straggler_m, store)
    elif args.config == "ddp-elastic":
        extra, steps = train_elastic(args, run, model, opt, xtr, ytr, rank, p, straggler_m, store)
    else:
        extra, steps = train_ddp(args, run, model, opt, xtr, ytr, rank, p, straggler_m)

    # ---- the end: every rank's digest and counters through the store ----
    mine = {"rank": rank, "steps": steps, "digest": param_digest(model),
            "lost_rounds": extra.get("lost_rounds"), "skipped": extra.get("skipped"),
            "abstained": extra.get("abstained"), "lost_after_kill": extra.get("lost_after_kill"),
            "t_kill_step_done": extra.get("t_kill_step_done"),
            "elastic_events": extra.get("elastic_events"),
            "straggler_delay_s": extra.get("straggler_delay_s"),
            "mean_step_ms": round(1e3 * run.train_s / max(1, steps), 2)}
    store.set(f"{KEY}/done/{rank}", json.dumps(mine))
    survivors = [r for r in range(p) if r != args.kill_rank]
    rc = 0
    if rank == 0:
        wait = datetime.timedelta(seconds=args.timeout)
        store.wait([f"{KEY}/done/{r}" for r in survivors], wait)
        per_rank = [json.loads(store.get(f"{KEY}/done/{r}")) for r in survivors]
        t_kill = float(store.get(f"{KEY}/kill/t")) if args.kill_rank is not None else None
        summary = summarise(args, run, name, p, nparams, xtr, xte, straggler_m, steps, extra,
                            per_rank, t_kill, coded_cfg, backend)
        rc = 0 if summary["weights_equal"] and summary.get("kill_ok", True) else 1
        os.makedirs(args.out, exist_ok=True)
        write_csv(os.path.join(args.out, f"{name}.csv"), run.rows)
        write_csv(os.path.join(args.out, f"{name}.steps.csv"),
                  [{"step": i + 1, "step_s": round(t, 6)} for i, t in enumerate(run.step_times)])
        with open(os.path.join(args.out, f"{name}.json"), "w") as f:
            json.dump(summary, f, indent=1)
        t = summary["time_to_target_s"]
        print(f"coded_tta {name}: train {run.train_s:.1f} s, {steps} steps, "
              f"{summary['mean_step_ms']:.1f} ms/step (median {summary['median_step_ms']:.1f}), "
              f"final acc {summary['final_acc']:.4f}, time to {args.target:.0%}: "
              f"{'-' if t is None else f'{t:.1f} s'}"
              f"{'' if summary['weights_equal'] else ', PARAMETERS DIFFER'}"
              f"{kill_line(summary)}; wrote {args.out}/{name}.csv, .json", flush=True)
        store.set(f"{KEY}/release", "1")
    else:
        store.wait([f"{KEY}/release"], datetime.timedelta(seconds=args.timeout))
    if cdp is not None:
        cdp.close()
    if rank != 0:
        store.add(f"{KEY}/left", 1)
    else:   # the store lives here: wait for the others to be done with it
        end = time.monotonic() + 30
        while int(store.add(f"{KEY}/left", 0)) < len(survivors) - 1 and time.monotonic() < end:
            time.sleep(0.05)
    if args.kill_rank is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)       # a group with a dead member: no teardown collective
    dist.destroy_process_group()
    return rc


def kill_line(s):
    k = s.get("kill")
    if not k:
        return ""
    if "resume_s" in k:
        return (f"; killed rank {k['rank']} at step {k['step']}: survivors resumed after "
                f"{max(k['resume_s'].values()):.2f} s (lost ~{k['seconds_lost']:.2f} s)")
    return (f"; killed rank {k['rank']} at step {k['step']}: lost rounds {k['lost_rounds']}, "
            f"every survivor completed {k['survivor_steps']} steps: "
            f"{'yes' if k['all_steps_completed'] else 'NO'}, step {k['step']} ended "
            f"{k['kill_to_step_done_s']:.2f} s after the kill")


def summarise(args, run, name, p, nparams, xtr, xte, straggler_m, steps, extra, per_rank,
              t_kill, coded_cfg, backend):
    final = run.rows[-1]
    st = run.step_times
    digests = {r["digest"] for r in per_rank}
    summary = {
        "name": name, "config": args.config, "backend": backend, "ranks": p,
        "link": os.environ.get("LINK", ""), "straggler": straggler_tag(straggler_m),
        "straggler_m": straggler_m, "s": args.s if coded_cfg else None,
        "epochs": args.epochs, "max_steps": args.max_steps, "steps": steps,
        "steps_per_epoch": run.spe, "batch": args.batch,
        "global_batch": args.batch * p, "params": nparams, "ksize": args.ksize,
        "train_samples": xtr.shape[0], "test_samples": xte.shape[0],
        "train_time_s": round(run.train_s, 3), "eval_time_s": round(run.eval_s, 3),
        "wall_time_s": round(time.perf_counter() - run.t_wall0, 3),
        "mean_step_ms": round(1e3 * run.train_s / max(1, steps), 3),
        "median_step_ms": round(1e3 * statistics.median(st), 3) if st else None,
        "p90_step_ms": round(1e3 * sorted(st)[int(0.9 * (len(st) - 1))], 3) if st else None,
        "epoch_time_s": round(run.train_s / max(1, steps) * run.spe, 3),
        "target_acc": args.target,
        "time_to_target_s": None if run.tta is None else round(run.tta[0], 3),
        "step_to_target": None if run.tta is None else run.tta[1],
        "epoch_to_target": None if run.tta is None else run.tta[2],
        "final_acc": final["test_acc"], "best_acc": max(r["test_acc"] for r in run.rows),
        "weights_equal": len(digests) == 1, "per_rank": per_rank,
        "options": {k: v for k, v in vars(args).items() if k != "table"},
        "env": {k: os.environ[k] for k in ("UCX_TLS", "GLOO_SOCKET_IFNAME", "GCX_TIMEOUT")
                if k in os.environ},
    }
    for k in ("code", "compress", "coded_stats", "lost_rounds", "skipped", "abstained",
              "straggler_delay_s", "ddp_buckets", "world_after", "seen"):
        if k in extra:
            summary[k] = extra[k]
    if args.kill_rank is not None:
        kill = {"rank": args.kill_rank, "step": args.kill_step, "t_kill": t_kill,
                "train_time_at_kill_s": None if run.kill_step_train_s is None
                else round(run.kill_step_train_s, 3),
                "survivors": [r["rank"] for r in per_rank],
                "survivor_steps": sorted({r["steps"] for r in per_rank})}
        if coded_cfg:
            kill["lost_rounds"] = extra["lost_rounds"]
            kill["lost_after_kill"] = max(r["lost_after_kill"] or 0 for r in per_rank)
            kill["all_steps_completed"] = all(r["steps"] == steps for r in per_rank) and \
                steps == (args.max_steps or run.spe * args.epochs)
            done = extra.get("t_kill_step_done")
            kill["kill_to_step_done_s"] = None if done is None or t_kill is None \
                else round(done - t_kill, 3)
            # gone: an int, bit w for worker w, of any width (torch_gcx.coded's
            # worker sets); also as the list of workers, which JSON readers
            # without big integers keep exact past 53 workers
            gone = extra["coded_stats"].get("gone")
            kill["gone_mask"] = gone
            kill["gone_workers"] = None if gone is None else \
                [w for w in range(gone.bit_length()) if gone >> w & 1]
            summary["kill_ok"] = kill["all_steps_completed"]
        else:
            resume, detect = {}, {}
            for r in per_rank:
                evs = r["elastic_events"] or []
                if evs and evs[0].get("t_resumed") is not None:
                    resume[r["rank"]] = round(evs[0]["t_resumed"] - t_kill, 3)
                    detect[r["rank"]] = round(evs[0]["t_failed"] - t_kill, 3)
            kill["resume_s"] = resume
            kill["detect_s"] = detect
            kill["events"] = {r["rank"]: r["elastic_events"] for r in per_rank}
            med = summary["median_step_ms"] or 0.0
            kill["seconds_lost"] = round(max(resume.values()) - med / 1e3, 3) if resume else None
            summary["kill_ok"] = len(resume) == len(per_rank)
        summary["kill"] = kill
    return summary


# ---- table ------------------------------------------------------------------------------

def load_runs(folder):
    runs = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                s = json.load(f)
            if "config" in s and "straggler" in s:
                runs.append(s)

    def key(s):
        return (s["ranks"], ORDER.index(s["config"]) if s["config"] in ORDER else len(ORDER),
                s.get("s") or 0, s["name"])
    return sorted(runs, key=key)


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def label(s, base_lr=None):
    lr = s["options"]["lr"]
    return s["config"] + (f" (s={s['s']})" if s.get("s") is not None and s["s"] != 1 else "") + \
        (f" lr {lr:g}" if base_lr is not None and lr != base_lr else "")


def median_of(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def table(folder):
    runs = load_runs(folder)
    if not runs:
        return "(no runs)\n"
    one = runs[0]
    lines = [f"Batch {one['batch']} per rank (DDP) / per partition (coded), CNN "
             f"{one['params']} parameters, {one['train_samples']} train / {one['test_samples']} "
             f"test samples; times are rank 0's training time (evaluations excluded).", ""]
    main = [s for s in runs if s["straggler"] != "none" and "kill" not in s]
    if main:
        # the lr of the DDP runs is the recipe's; a run with another says so
        base_lr = statistics.mode(s["options"]["lr"] for s in main)
        groups = {}
        for s in main:  # the seeds of one configuration together
            groups.setdefault((s["ranks"], label(s, base_lr), s["straggler"]), []).append(s)
        target = f"{one['target_acc']:.0%}"
        lines += [f"### Time to {target} under stragglers", "",
                  f"Median over the seeds (each seed: its own initialisation and data order; "
                  f"every configuration runs every seed); time to {target}: rank 0's training "
                  f"seconds at the first evaluation at or above it.", "",
                  f"| config | ranks | straggler | seeds | time to {target} (s), median | per seed "
                  f"| steps to {target}, median | final acc, median | mean step (ms), median "
                  f"| steps/epoch | epoch time (s) | lost rounds | params equal |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for (ranks, name, strag), g in groups.items():
            g.sort(key=lambda s: s["options"]["seed"])
            ttas = [s["time_to_target_s"] for s in g]
            lost = sum(s.get("lost_rounds") or 0 for s in g)
            lines.append(
                f"| {name} | {ranks} | {strag} | {len(g)} | {fmt(median_of(ttas), '.1f')} | "
                f"{' / '.join(fmt(t, '.1f') for t in ttas)} | "
                f"{fmt(median_of([s['step_to_target'] for s in g]), '.0f')} | "
                f"{median_of([s['final_acc'] for s in g]):.4f} | "
                f"{median_of([s['mean_step_ms'] for s in g]):.1f} | {g[0]['steps_per_epoch']} | "
                f"{median_of([s['epoch_time_s'] for s in g]):.1f} | "
                f"{lost if g[0].get('lost_rounds') is not None else '-'} | "
                f"{'yes' if all(s['weights_equal'] for s in g) else 'NO'} |")
        lines.append("")
    plain = [s for s in runs if s["straggler"] == "none" and "kill" not in s]
    if plain:
        # per round (seed) the ratio to that round's uncoded references, then
        # the median over the rounds: paired, as the machine's load drifts
        base_lr = statistics.mode(s["options"]["lr"] for s in plain)
        refs = {}
        for o in plain:
            key = (o["ranks"], o["options"]["seed"])
            if o["config"] == "ddp-gcx":
                refs.setdefault(key, {})["ddp"] = o["median_step_ms"]
            if o["config"] == "ignore" and o.get("s") == 0:
                refs.setdefault(key, {})["ign"] = o["median_step_ms"]
        groups = {}
        for s in plain:
            groups.setdefault((s["ranks"], label(s, base_lr)), []).append(s)

        def ratios(g, which):
            return [s["median_step_ms"] / refs[k][which] for s in g
                    for k in [(s["ranks"], s["options"]["seed"])]
                    if refs.get(k, {}).get(which)]

        def span(r):
            return "-" if not r else (f"{statistics.median(r):.2f}" + (
                f" ({min(r):.2f}-{max(r):.2f})" if len(r) > 1 else ""))
        lines += ["### Step cost without stragglers", "",
                  "Uncoded references: ddp-gcx (DDP's allreduce on gcx) and ignore with s=0 "
                  "(the coded gather with no code). Each round (seed) runs every configuration; "
                  "a ratio is of median steps within a round, then the median over the rounds "
                  "(min-max).", "",
                  "| config | ranks | rounds | steps | median step (ms), median | "
                  "step / ddp-gcx step | step / ignore s=0 step | epoch time (s) |",
                  "|---|---|---|---|---|---|---|---|"]
        for (ranks, name), g in groups.items():
            lines.append(f"| {name} | {ranks} | {len(g)} | {g[0]['steps']} | "
                         f"{median_of([s['median_step_ms'] for s in g]):.1f} | "
                         f"{span(ratios(g, 'ddp'))} | {span(ratios(g, 'ign'))} | "
                         f"{median_of([s['epoch_time_s'] for s in g]):.1f} |")
        lines.append("")
    killed = [s for s in runs if "kill" in s]
    if killed:
        lines += ["### One rank SIGKILLed", "",
                  "Undisturbed: the run of the same configuration, ranks and straggler without a "
                  "kill in this folder (ddp-elastic: ddp-gcx, the same computation but for one short "
                  "tail step per epoch). Coded: "
                  "seconds from the kill to the end of the step it happened in; ddp-elastic: "
                  "the slowest survivor's kill -> first committed step on the shrunk group, and "
                  "that minus a median step (lost).", "",
                  f"| config | ranks | straggler | killed rank @ step | lost rounds | every later "
                  f"step done | kill -> step done / resume (s) | seconds lost | time to "
                  f"{one['target_acc']:.0%} (s) | final acc | undisturbed final acc |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for s in killed:
            k = s["kill"]
            ref_cfg = "ddp-gcx" if s["config"] == "ddp-elastic" else s["config"]
            same = ("lr", "seed", "epochs", "subset")  # the same recipe and seed
            ref = next((o for o in runs if "kill" not in o and o["config"] == ref_cfg and
                        o["ranks"] == s["ranks"] and o["straggler"] == s["straggler"] and
                        o.get("s") == s.get("s") and not o.get("max_steps") and
                        all(o["options"][k] == s["options"][k] for k in same)), None)
            if "resume_s" in k:
                res = max(k["resume_s"].values()) if k["resume_s"] else None
                lost, done, rounds = k.get("seconds_lost"), "yes" if s.get("kill_ok") else "NO", "-"
            else:
                res, lost = k.get("kill_to_step_done_s"), None
                done = "yes" if k["all_steps_completed"] else "NO"
                rounds = str(k["lost_rounds"])
            lines.append(f"| {label(s)} | {s['ranks']} | {s['straggler']} | {k['rank']} @ "
                         f"{k['step']} | {rounds} | {done} | {fmt(res, '.2f')} | "
                         f"{fmt(lost, '.2f')} | {fmt(s['time_to_target_s'], '.1f')} | "
                         f"{s['final_acc']:.4f} | {fmt(ref and ref['final_acc'], '.4f')} |")
        lines.append("")
    return "\n".join(lines)


# ---- options ----------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=ORDER, help="what to run")
    ap.add_argument("--table", metavar="DIR", help="print the tables of the runs in DIR (no training)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="output folder (rank 0)")
    ap.add_argument("--name", help="output name (default CONFIG[-sS]-rRANKS-STRAGGLER[-kill][-stepsN])")
    ap.add_argument("--s", type=int, default=env_num("S", "1", int),
                    help="stragglers tolerated by the coded configurations (env S, default 1)")
    ap.add_argument("--straggler", default=os.environ.get("STRAGGLER", "exp:1"),
                    help="exp:M (M x compute x Exp(1) after each partition gradient) or none "
                         "(env STRAGGLER, default exp:1)")
    ap.add_argument("--no-straggler", action="store_true", help="no injected delay")
    add_recipe_args(ap, "samples per rank (DDP) / per partition (coded)")
    ap.add_argument("--max-steps", type=int, default=env_num("MAX_STEPS", "0", int),
                    help="stop after N steps (env MAX_STEPS; 0: all epochs); for step costs")
    ap.add_argument("--ksize", type=int, default=env_num("KSIZE", "5", int),
                    help="CNN kernel size (env KSIZE, default 5 as gcx-train)")
    ap.add_argument("--topk-cf", type=float, default=env_num("TOPK_CF", "100"),
                    help="pgc-fr-topk's compression factor (env TOPK_CF, default 100)")
    ap.add_argument("--eval-every", type=int, default=env_num("EVAL_EVERY", "50", int),
                    help="evaluate every N steps too (env EVAL_EVERY, default 50; 0: epoch ends)")
    ap.add_argument("--target", type=float, default=env_num("TARGET", "0.85"),
                    help="target test accuracy (env TARGET, default 0.85)")
    ap.add_argument("--kill-rank", type=int, help="this rank SIGKILLs itself at --kill-step")
    ap.add_argument("--kill-step", type=int, help="the step (0-based, this configuration's steps)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank (default 1)")
    ap.add_argument("--eval-threads", type=int, default=env_num("EVAL_THREADS", "2", int),
                    help="rank 0's torch threads while it evaluates (env EVAL_THREADS, default 2)")
    ap.add_argument("--timeout", type=float, default=env_num("TIMEOUT", "300"),
                    help="process group timeout (gcx: GCX_TIMEOUT) and store waits, s (env "
                         "TIMEOUT, default 300)")
    ap.add_argument("--data-dir", default=os.environ.get("GCX_DATA_DIR", DATA_DIR),
                    help=f"folder of the IDX files (env GCX_DATA_DIR, default {DATA_DIR})")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every evaluation")
    args = ap.parse_args()
    if args.table:
        return write_table(args.table, table)
    if not args.config:
        ap.error("--config or --table is needed")
    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
    if missing:
        ap.error(f"run under a launcher (perf/cluster/emulate.sh, perf/torch/launch_local.py, "
                 f"torchrun): {', '.join(missing)} not set")
    if args.epochs < 1 or args.batch < 1 or args.max_steps < 0:
        ap.error("need --epochs >= 1, --batch >= 1 and --max-steps >= 0")
    if args.eval_every < 0 or args.eval_threads < 1 or args.threads < 1:
        ap.error("need --eval-every >= 0, --threads >= 1 and --eval-threads >= 1")
    try:
        if not args.no_straggler:
            parse_straggler(args.straggler)
    except ValueError as e:
        ap.error(str(e))
    if (args.kill_rank is None) != (args.kill_step is None):
        ap.error("--kill-rank and --kill-step go together")
    if args.kill_step is not None and args.kill_step < 0:
        ap.error("--kill-step must be >= 0")
    if args.kill_rank is not None and args.config in DDP_CONFIGS:
        ap.error(f"{args.config} cannot lose a rank (DDP's allreduce fails on every survivor); "
                 f"the dense side of a kill is --config ddp-elastic")
    if args.kill_rank is not None and args.config in CODED_CONFIGS and args.s < 1:
        ap.error("a coded configuration survives a death only with --s >= 1")
    if args.config in CODED_CONFIGS:
        try:
            from torch_gcx import coded
        except ImportError as e:
            ap.error(f"torch_gcx.coded cannot be imported: {e}")
        if coded_code(args.config) not in coded.CODES:
            if os.environ.get("RANK", "0") == "0":
                print(f"coded_tta {args.config}: SKIPPED, this torch_gcx.coded has no code "
                      f"{coded_code(args.config)!r} (it has {', '.join(coded.CODES)})", flush=True)
            return SKIP_STATUS
        world = env_num("WORLD_SIZE", "0", int)
        if args.s < 0 or (world and args.s >= world):
            ap.error(f"--s {args.s}: need 0 <= s < ranks ({world})")
        if world and coded.CODES[coded_code(args.config)][0] == "fr" and world % (args.s + 1):
            ap.error(f"{args.config} (fractional repetition) needs s+1 = {args.s + 1} to divide "
                     f"the {world} ranks")
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
