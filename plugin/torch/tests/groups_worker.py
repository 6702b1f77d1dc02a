"""One rank of a sub-group test: python groups_worker.py SCENARIO RANK SIZE STOREFILE.

Sub-groups of a gcx default group are made by their members from the
default group's communicator (gcx_comm_create_group); under a gloo default
group a gcx group is made over its own Store. Each scenario checks which
way was taken (torch_gcx.group_creation) and compares results with gloo
groups of the same ranks. A failed check raises (non-zero exit).
"""
import datetime
import sys

import torch
import torch.distributed as dist

import torch_gcx
from worker import data, init, run_scenario, same


def check_ops(rank, g, g_gloo, what):
    """allreduce (sum, max), broadcast and allgather on g against g_gloo."""
    n = g.size()
    for i, dtype in enumerate([torch.float32, torch.int64]):
        a = data(rank, 100 + i, dtype)
        b = a.clone()
        dist.all_reduce(a, group=g)
        dist.all_reduce(b, group=g_gloo)
        same(a, b, f"{what}: allreduce {dtype}")
        a = data(rank, 33, dtype, salt=1)
        b = a.clone()
        dist.all_reduce(a, op=dist.ReduceOp.MAX, group=g)
        dist.all_reduce(b, op=dist.ReduceOp.MAX, group=g_gloo)
        same(a, b, f"{what}: allreduce max {dtype}")
    root = dist.get_global_rank(g, n - 1)
    a = data(rank, 17, torch.float32, salt=2)
    b = a.clone()
    dist.broadcast(a, src=root, group=g)
    dist.broadcast(b, src=root, group=g_gloo)
    same(a, b, f"{what}: broadcast")
    x = data(rank, 9, torch.float32, salt=3)
    outs = [torch.empty_like(x) for _ in range(n)]
    refs = [torch.empty_like(x) for _ in range(n)]
    dist.all_gather(outs, x, group=g)
    dist.all_gather(refs, x, group=g_gloo)
    for o, r in zip(outs, refs):
        same(o, r, f"{what}: allgather")


def expect_creation(g, want, what):
    got = torch_gcx.group_creation(g)
    if got != want:
        raise AssertionError(f"{what}: made by {got}, expected {want}")


def sc_new_group(rank, size, gloo):
    # the default group over the Store, its sub-groups from it
    expect_creation(None, "store", "default group")
    halves = [list(range(0, size, 2)), list(range(1, size, 2))]
    groups = [(r, dist.new_group(r, backend="gcx"),
               dist.new_group(r, backend="gloo")) for r in halves if r]
    whole = dist.new_group(list(range(size)), backend="gcx")
    expect_creation(whole, "create_group", "new_group of every rank")
    check_ops(rank, whole, gloo, "new_group of every rank")
    for ranks, g, g_gloo in groups:
        if rank in ranks:
            expect_creation(g, "create_group", f"new_group {ranks}")
            check_ops(rank, g, g_gloo, f"new_group {ranks}")
    # the group's timeout is its communicator's GCX_TIMEOUT
    t = dist.new_group(list(range(size)), backend="gcx",
                       timeout=datetime.timedelta(seconds=7))
    if float(torch_gcx.group_config("TIMEOUT", t)) != 7.0:
        raise AssertionError("the group's timeout is not its GCX_TIMEOUT: "
                             + torch_gcx.group_config("TIMEOUT", t))
    # made by the members alone (torch calls no one else)
    if size > 2 and rank < 2:
        local = dist.new_group([0, 1], backend="gcx",
                               use_local_synchronization=True)
        expect_creation(local, "create_group", "a local new_group")
        a = data(rank, 50, torch.float32)
        dist.all_reduce(a, group=local)
        same(a, data(0, 50, torch.float32) + data(1, 50, torch.float32),
             "allreduce on a local group")
    dist.barrier()
    for ranks, g, _ in groups:
        if rank in ranks:
            dist.destroy_process_group(g)


def sc_new_subgroups(rank, size, gloo):
    sub, subs = dist.new_subgroups(group_size=2, backend="gcx")
    sub_gloo, _ = dist.new_subgroups(group_size=2, backend="gloo")
    expect_creation(sub, "create_group", "new_subgroups")
    for i in range(3):
        check_ops(rank, sub, sub_gloo, f"new_subgroups round {i}")
        a = data(rank, 1000, torch.float32, salt=i)
        b = a.clone()
        dist.all_reduce(a)
        dist.all_reduce(b, group=gloo)
        same(a, b, "the default group between sub-group calls")


def sc_two_groups(rank, size, gloo):
    # overlapping groups, in flight at the same time with the default group
    a_ranks, b_ranks = list(range(size - 1)), list(range(1, size))
    ga = dist.new_group(a_ranks, backend="gcx")
    gb = dist.new_group(b_ranks, backend="gcx")
    ga_gloo = dist.new_group(a_ranks, backend="gloo")
    gb_gloo = dist.new_group(b_ranks, backend="gloo")
    for i in range(4):
        works, pairs = [], []
        for ranks, g, g_gloo in [(a_ranks, ga, ga_gloo), (b_ranks, gb, gb_gloo),
                                 (list(range(size)), None, gloo)]:
            if rank not in ranks:
                continue
            x = data(rank, 500 + i, torch.float32, salt=len(ranks))
            y = x.clone()
            works.append(dist.all_reduce(x, group=g, async_op=True))
            dist.all_reduce(y, group=g_gloo)
            pairs.append((x, y))
        for w in works:
            w.wait()
        for x, y in pairs:
            same(x, y, "allreduce on two groups and the default group")
    for g, ranks in [(ga, a_ranks), (gb, b_ranks)]:
        if rank in ranks:
            expect_creation(g, "create_group", f"group {ranks}")


def sc_gloo_default(rank, size, _gloo):
    # a gcx group under a gloo default group: made over its own Store
    dist.init_process_group("gloo", init_method="file://" + sys.argv[4],
                            rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=60))
    ranks = list(range(size))
    g = dist.new_group(ranks, backend="gcx")
    sub = dist.new_group(ranks[:2], backend="gcx")
    sub_gloo = dist.new_group(ranks[:2], backend="gloo")
    expect_creation(g, "store", "a gcx group under gloo")
    check_ops(rank, g, dist.group.WORLD, "a gcx group under gloo")
    if rank < 2:
        expect_creation(sub, "store", "a gcx sub-group under gloo")
        check_ops(rank, sub, sub_gloo, "a gcx sub-group under gloo")
    # groups made and destroyed in turn: each creation's Store keys are its
    # own on every member (they were keyed by the store object's address,
    # which the allocator reuses on some ranks and not on others)
    halves = [ranks[0::2], ranks[1::2]]
    for i in range(20):
        for half in halves:
            h = dist.new_group(half, backend="gcx")
            if rank in half:
                x = torch.ones(3)
                dist.all_reduce(x, group=h)
                same(x, torch.full((3,), float(len(half))), f"cycle {i}")
                dist.destroy_process_group(h)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: gloo_default ok", flush=True)


SCENARIOS = {
    "new_group": sc_new_group,
    "new_subgroups": sc_new_subgroups,
    "two_groups": sc_two_groups,
}


def main():
    scenario, rank, size, store = sys.argv[1], int(sys.argv[2]), \
        int(sys.argv[3]), sys.argv[4]
    if scenario == "gloo_default":
        sc_gloo_default(rank, size, None)
        return
    run_scenario(SCENARIOS, scenario, rank, size, store)


if __name__ == "__main__":
    main()
