"""Per-partition gradients for gradient coding: one backward per partition
against torch.func (vmap of grad over the stacked partitions), on a small CNN.

A gradient-coding worker needs the gradient of each of its s+1 partitions
separately (it weights them by its row of the code), not their sum. Two ways:
a loop of forward+backward per partition (what torch_gcx.coded does), or one
vmapped functional call over the partitions. This script times both,
alternating, and checks that they agree.

    python bench/coded_partition_grad.py [--parts 2] [--batch 32] [--reps 30]

Cost: a few seconds per setting on one core (OMP_NUM_THREADS=1 advised, as
in a multi-rank run on one machine).
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap


class CNN(torch.nn.Module):
    """Fashion-MNIST sized, as gcx-train's CNN: conv 16 and 32 filters of
    5x5, FC 128."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 16, 5, padding=2)
        self.c2 = torch.nn.Conv2d(16, 32, 5, padding=2)
        self.f1 = torch.nn.Linear(32 * 7 * 7, 128)
        self.f2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.f2(F.relu(self.f1(x.flatten(1))))


def loop_grads(model, xs, ys):
    params = [p for p in model.parameters()]
    out = []
    for x, y in zip(xs, ys):
        for p in params:
            p.grad = None
        F.cross_entropy(model(x), y).backward()
        out.append(torch.cat([p.grad.reshape(-1) for p in params]))
    return torch.stack(out)


def vmap_grads(model, xs, ys):
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, x, y):
        return F.cross_entropy(functional_call(model, p, (x,)), y)

    g = vmap(grad(loss), in_dims=(None, 0, 0))(params, xs, ys)
    return torch.cat([g[k].reshape(xs.shape[0], -1) for k in params], 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = CNN()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"CNN {sum(p.numel() for p in model.parameters())} parameters, "
          f"partition of {args.batch} samples")
    print("parts  loop_ms  vmap_ms  vmap/loop  max|diff|")
    for k in args.parts:
        xs = torch.randn(k, args.batch, 1, 28, 28)
        ys = torch.randint(0, 10, (k, args.batch))
        a, b = loop_grads(model, xs, ys), vmap_grads(model, xs, ys)
        diff = (a - b).abs().max().item()
        tl, tv = [], []
        for _ in range(args.reps):  # alternate, so load hits both alike
            t0 = time.perf_counter()
            loop_grads(model, xs, ys)
            t1 = time.perf_counter()
            vmap_grads(model, xs, ys)
            t2 = time.perf_counter()
            tl.append(t1 - t0)
            tv.append(t2 - t1)
        ml = sorted(tl)[len(tl) // 2] * 1e3
        mv = sorted(tv)[len(tv) // 2] * 1e3
        print(f"{k:5d}  {ml:7.2f}  {mv:7.2f}  {mv / ml:9.2f}  {diff:.1e}")


if __name__ == "__main__":
    main()
