"""One rank of an FSDP2 / DeviceMesh test: python fsdp_worker.py SCENARIO RANK SIZE STOREFILE.

The same small model is trained twice in one process, with FSDP2
(torch.distributed.fsdp.fully_shard) over a mesh of gcx groups and over a
mesh of gloo groups of the same ranks, from the same initial parameters on
the same per-rank batches; the trained parameters must agree. FSDP2
reduce-scatters gradients with ReduceOp.AVG (and all-reduces across
replicas with a 2-D mesh), all-gathers parameters with
all_gather_into_tensor.

make_model() and train() are what a benchmark imports (the same model and
loop on any mesh). Cost: a few steps of a 16-32-32-8 MLP, milliseconds of
compute per step; the processes' start-up dominates.
"""
import datetime
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import torch_gcx  # noqa: F401  (registers "gcx")

DIMS = (16, 32, 32, 8)


def make_model(seed=0, dims=DIMS):
    """An MLP of Linear layers (ReLU between), the same on every rank."""
    torch.manual_seed(seed)
    layers = []
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def shard(model, mesh):
    """fully_shard every Linear, then the root (one FSDP group per layer);
    a 2-D mesh is HSDP: replicated over dim 0, sharded over dim 1."""
    for m in model:
        if isinstance(m, torch.nn.Linear):
            fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def batch(rank, step, n=8, dims=DIMS):
    g = torch.Generator().manual_seed(10_000 * rank + step)
    return (torch.randn(n, dims[0], generator=g),
            torch.randn(n, dims[-1], generator=g))


def train(model, rank, steps, lr=0.05, batch_size=8):
    """SGD on MSE over this rank's batches; returns the losses."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        x, y = batch(rank, step, batch_size)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def full_params(model):
    return [p.full_tensor().detach().clone() for p in model.parameters()]


def compare(a, b, what, exact):
    """exact: bit-equal; else within float32 rounding of a different
    summation order (rtol 1e-5, atol 1e-6)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if exact:
            if not torch.equal(x, y):
                d = (x - y).abs().max().item()
                raise AssertionError(f"{what}: parameter {i} differs from "
                                     f"gloo's (max |diff| {d})")
        else:
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6,
                                       msg=lambda m: f"{what}: parameter "
                                       f"{i}: {m}")


def sc_fsdp(rank, size):
    # 1-D meshes: the gcx default group, and a gloo group of every rank
    mesh = init_device_mesh("cpu", (size,))
    mesh_gloo = init_device_mesh("cpu", (size,), backend_override={0: "gloo"})
    assert dist.get_backend(mesh.get_group()) == "gcx"
    assert dist.get_backend(mesh_gloo.get_group()) == "gloo"
    init = full_params(shard(make_model(), init_device_mesh(
        "cpu", (size,), backend_override={0: "gloo"})))
    m = shard(make_model(), mesh)
    m_gloo = shard(make_model(), mesh_gloo)
    compare(full_params(m), init, "before training", exact=True)
    steps = 4
    losses = train(m, rank, steps)
    losses_gloo = train(m_gloo, rank, steps)
    after = full_params(m)
    if all(torch.equal(a, b) for a, b in zip(after, init)):
        raise AssertionError("training did not change the parameters")
    # two ranks: every sum has two terms, the same in any order, and AVG
    # divides by 2 exactly, so gcx must give gloo's bits; more ranks add
    # in another order (gcx's ring vs gloo's algorithm)
    compare(after, full_params(m_gloo), f"FSDP2 on {size} ranks",
            exact=size == 2)
    print(f"rank {rank}: losses gcx {losses} gloo {losses_gloo}", flush=True)


def sc_hsdp(rank, size):
    # a 2 x 2 mesh: replicate over "dp" (all_reduce), shard over "shard"
    # (reduce_scatter / all_gather); every group of it is gcx
    assert size == 4
    names = ("dp", "shard")
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=names)
    mesh_gloo = init_device_mesh("cpu", (2, 2), mesh_dim_names=names,
                                 backend_override={"dp": "gloo",
                                                   "shard": "gloo"})
    for n in names:
        assert dist.get_backend(mesh[n].get_group()) == "gcx"
        assert dist.get_backend(mesh_gloo[n].get_group()) == "gloo"
        # the mesh's groups: ranks {0,2},{1,3} for dp, {0,1},{2,3} for shard
        want = ([rank % 2, rank % 2 + 2] if n == "dp"
                else [rank // 2 * 2, rank // 2 * 2 + 1])
        assert dist.get_process_group_ranks(mesh[n].get_group()) == want
    m = shard(make_model(), mesh)
    m_gloo = shard(make_model(), mesh_gloo)
    train(m, rank, 3)
    train(m_gloo, rank, 3)
    # each gradient sum has 2 terms (the all_reduce after a 2-way
    # reduce_scatter): the same in any order, and AVG's divisions by 2 are
    # exact, so the bits are gloo's
    compare(full_params(m), full_params(m_gloo), "HSDP 2x2", exact=True)
    # a plain collective on the dp dimension against gloo's
    a = torch.arange(6, dtype=torch.float32) * (rank + 1)
    b = a.clone()
    dist.all_reduce(a, group=mesh["dp"].get_group())
    dist.all_reduce(b, group=mesh_gloo["dp"].get_group())
    assert torch.equal(a, b), (a, b)


SCENARIOS = {name[3:]: fn for name, fn in globals().items()
             if name.startswith("sc_")}


def main():
    scenario, rank, size, store = sys.argv[1], int(sys.argv[2]), \
        int(sys.argv[3]), sys.argv[4]
    dist.init_process_group("gcx", init_method="file://" + store, rank=rank,
                            world_size=size,
                            timeout=datetime.timedelta(seconds=60))
    SCENARIOS[scenario](rank, size)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: {scenario} ok", flush=True)


if __name__ == "__main__":
    main()
