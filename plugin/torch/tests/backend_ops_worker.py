"""One rank of a test of the backend calls FSDP2, DeviceMesh and torchft-style
wrappers use: python backend_ops_worker.py SCENARIO RANK SIZE STOREFILE.

The default group is gcx, a gloo group of the same ranks beside it; results
are compared with gloo's (or, where gloo lacks the call, with gloo's SUM of
what gcx must compute). A failed check raises (non-zero exit).
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ErrorType
from torch.distributed.distributed_c10d import _coalescing_manager

import torch_gcx  # noqa: F401  (registers "gcx")
from worker import init

CPU = torch.device("cpu")
RED_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int32,
              torch.int64]


def data(rank, n, dtype, salt=0):
    # small integers: sums are exact in every dtype, so any order agrees
    g = torch.Generator().manual_seed(1000 * rank + 7 * n + salt)
    return torch.randint(-8, 9, (n,), generator=g).to(dtype)


def same(a, b, what):
    if not torch.equal(a, b):
        d = (a.double() - b.double()).abs().max().item() if a.numel() else 0
        raise AssertionError(f"{what}: gcx and the reference differ "
                             f"(max |diff| {d})\n{a}\n{b}")


def mean_of(s, n):
    """What AVG must give from the SUM s over n ranks: the float quotient,
    rounded once to the dtype; integers truncated (C division)."""
    if s.dtype.is_floating_point:
        return (s.double() / n).to(s.dtype)
    return torch.div(s, n, rounding_mode="trunc")


def raises(fn, words, what):
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        for w in words:
            assert w in str(e), f"{what}: {w!r} not in {e}"
        print(f"{what}: {str(e).splitlines()[0]}", flush=True)
        return
    raise AssertionError(f"{what} did not raise")


def sc_reductions(rank, size, gloo):
    n = size
    for dtype in RED_DTYPES:
        # AVG is the mean (not the sum) in every reduction
        a = data(rank, 37, dtype)
        s = a.clone()
        dist.all_reduce(a, op=dist.ReduceOp.AVG)
        dist.all_reduce(s, group=gloo)
        same(a, mean_of(s, n), f"all_reduce AVG {dtype}")
        if dtype.is_floating_point:
            b = data(rank, 37, dtype)
            dist.all_reduce(b, op=dist.ReduceOp.AVG, group=gloo)
            same(a, b, f"all_reduce AVG {dtype} vs gloo's AVG")
        a = data(rank, 11, dtype, salt=1)
        s = a.clone()
        dist.reduce(a, dst=n - 1, op=dist.ReduceOp.AVG)
        dist.all_reduce(s, group=gloo)
        if rank == n - 1:
            same(a, mean_of(s, n), f"reduce AVG {dtype}")
        x = data(rank, 5 * n, dtype, salt=2)
        out = torch.empty(5, dtype=dtype)
        dist.reduce_scatter_tensor(out, x, op=dist.ReduceOp.AVG)
        s = x.clone()
        dist.all_reduce(s, group=gloo)
        same(out, mean_of(s, n)[5 * rank:5 * rank + 5],
             f"reduce_scatter_tensor AVG {dtype}")
        outl = torch.empty(5, dtype=dtype)
        dist.reduce_scatter(outl, list(x.chunk(n)), op=dist.ReduceOp.AVG)
        same(outl, out, f"reduce_scatter (list) AVG {dtype}")
    # PREMUL_SUM: sum of factor * input; a float or a one-element tensor
    for factor in [0.25, torch.tensor(3.0)]:
        op = dist._make_nccl_premul_sum(factor)
        f = float(factor)
        for dtype in [torch.float32, torch.float64, torch.bfloat16]:
            a = data(rank, 19, dtype, salt=3)
            ref = a * f
            dist.all_reduce(ref, group=gloo)
            dist.all_reduce(a, op=op)
            same(a, ref, f"all_reduce PREMUL_SUM({f}) {dtype}")
            x = data(rank, 3 * n, dtype, salt=4)
            keep = x.clone()
            out = torch.empty(3, dtype=dtype)
            dist.reduce_scatter_tensor(out, x, op=op)
            same(x, keep, "reduce_scatter_tensor PREMUL_SUM left its input")
            ref = x * f
            dist.all_reduce(ref, group=gloo)
            same(out, ref[3 * rank:3 * rank + 3],
                 f"reduce_scatter_tensor PREMUL_SUM({f}) {dtype}")
            a = data(rank, 7, dtype, salt=5)
            keep = a.clone()
            ref = a * f
            dist.all_reduce(ref, group=gloo)
            dist.reduce(a, dst=0, op=op)
            same(a, ref if rank == 0 else keep, f"reduce PREMUL_SUM {dtype}")
    # the ops gcx has no operation for, combined in rank order: gloo's
    for op in ["PRODUCT", "BAND", "BOR", "BXOR"]:
        rop = getattr(dist.ReduceOp, op)
        dtypes = [torch.int32, torch.int64, torch.uint8] + \
            ([torch.float32, torch.float64] if op == "PRODUCT" else [])
        for dtype in dtypes:
            a = (data(rank, 23, dtype, salt=6) % 4 + 1) if op == "PRODUCT" \
                else torch.randint(0, 256, (23,), generator=torch.Generator()
                                   .manual_seed(rank)).to(dtype)
            b = a.clone()
            dist.all_reduce(a, op=rop)
            dist.all_reduce(b, op=rop, group=gloo)
            same(a, b, f"all_reduce {op} {dtype}")
        a = data(rank, 9, torch.float32, salt=7) % 3 + 1
        b = a.clone()
        keep = a.clone()
        dist.reduce(a, dst=1, op=rop if op == "PRODUCT" else
                    dist.ReduceOp.PRODUCT)
        dist.reduce(b, dst=1, op=rop if op == "PRODUCT" else
                    dist.ReduceOp.PRODUCT, group=gloo)
        same(a, b if rank == 1 else keep, "reduce PRODUCT")
    # dtypes libgcx does not reduce (gathered and combined): what gloo does
    for dtype in [torch.uint8, torch.int8, torch.bool]:
        for op in ["SUM", "MIN", "MAX"]:
            rop = getattr(dist.ReduceOp, op)
            g = torch.Generator().manual_seed(100 + rank)
            a = torch.randint(0, 200, (29,), generator=g).to(dtype)
            b = a.clone()
            dist.all_reduce(a, op=rop)
            dist.all_reduce(b, op=rop, group=gloo)
            same(a, b, f"all_reduce {op} {dtype}")
            a = torch.randint(0, 200, (13,), generator=g).to(dtype)
            b, keep = a.clone(), a.clone()
            dist.reduce(a, dst=n - 1, op=rop)
            dist.reduce(b, dst=n - 1, op=rop, group=gloo)
            same(a, b if rank == n - 1 else keep, f"reduce {op} {dtype}")
        ts = [torch.randint(0, 9, (k,)).to(dtype) for k in (3, 5)]
        refs = [t.clone() for t in ts]
        dist.all_reduce_coalesced(ts)
        dist.all_reduce_coalesced(refs, group=gloo)
        for t, r in zip(ts, refs):
            same(t, r, f"all_reduce_coalesced SUM {dtype}")
    # PRODUCT and the bitwise ops in reduce_scatter (gcx's own ops)
    for op in ["PRODUCT", "BOR"]:
        x = data(rank, 4 * n, torch.int64, salt=8) % 5
        out = torch.empty(4, dtype=torch.int64)
        ref = torch.empty(4, dtype=torch.int64)
        dist.reduce_scatter_tensor(out, x, op=getattr(dist.ReduceOp, op))
        dist.reduce_scatter_tensor(ref, x, op=getattr(dist.ReduceOp, op),
                                   group=gloo)
        same(out, ref, f"reduce_scatter_tensor {op}")
    raises(lambda: dist.reduce_scatter_tensor(
        torch.empty(2), torch.ones(2 * n), op=dist.ReduceOp.BXOR),
        ["BXOR", "integer"], "reduce_scatter_tensor BXOR on float32")
    # bad use: clear errors, the group still works
    raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int64),
                                   op=dist._make_nccl_premul_sum(2.0)),
           ["PREMUL_SUM", "floating"], "PREMUL_SUM on int64")
    raises(lambda: dist.all_reduce(torch.ones(3), op=dist.ReduceOp.BAND),
           ["BAND", "integer"], "BAND on float32")
    a = torch.full((4,), float(rank))
    dist.all_reduce(a)
    assert a[0].item() == sum(range(size))


def sc_coalesced(rank, size, gloo):
    n = size
    # all_reduce_coalesced: one flat allreduce per dtype
    ts = [data(rank, k, dt, salt=k) for k, dt in
          [(5, torch.float32), (0, torch.float32), (9, torch.int64),
           (3, torch.float32), (4, torch.bfloat16)]]
    refs = [t.clone() for t in ts]
    # (torch's dist.all_reduce_coalesced wants one dtype; the group's
    # method takes any mix)
    pg = dist.distributed_c10d._get_default_group()
    pg.allreduce_coalesced(ts).wait()
    same_dtype = [data(rank, k, torch.float64, salt=k) for k in (3, 0, 6)]
    want = [t.clone() for t in same_dtype]
    dist.all_reduce_coalesced(same_dtype)
    for t, r in zip(same_dtype, want):
        dist.all_reduce(r, group=gloo)
        same(t, r, "dist.all_reduce_coalesced")
    for r in refs:
        dist.all_reduce(r, group=gloo)
    for t, r in zip(ts, refs):
        same(t, r, f"all_reduce_coalesced {t.dtype}")
    # PRODUCT and the bitwise ops coalesced: gloo's
    for op in [dist.ReduceOp.PRODUCT, dist.ReduceOp.BXOR]:
        ts = [data(rank, k, torch.int64, salt=90 + k) for k in (4, 0, 3)]
        refs = [t.clone() for t in ts]
        dist.all_reduce_coalesced(ts, op=op)
        dist.all_reduce_coalesced(refs, op=op, group=gloo)
        for t, r in zip(ts, refs):
            same(t, r, f"all_reduce_coalesced {op}")
    # _coalescing_manager: all_reduce, all_gather_into_tensor and
    # reduce_scatter_tensor calls become one coalesced call each
    ts = [data(rank, k, torch.float32, salt=10 + k) for k in (6, 1, 8)]
    refs = [t.clone() for t in ts]
    with _coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
    cm.wait()
    for r in refs:
        dist.all_reduce(r, group=gloo)
    for t, r in zip(ts, refs):
        same(t, mean_of(r, n), "coalesced all_reduce AVG")
    ins = [data(rank, k, dt, salt=20 + k) for k, dt in
           [(4, torch.float32), (3, torch.int32), (0, torch.float64),
            (5, torch.bfloat16)]]
    outs = [torch.empty(n * i.numel(), dtype=i.dtype) for i in ins]
    with _coalescing_manager():
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    for o, i in zip(outs, ins):
        r = torch.empty_like(o)
        dist.all_gather_into_tensor(r, i, group=gloo)
        same(o, r, f"coalesced all_gather_into_tensor {i.dtype}")
    ins = [data(rank, n * k, dt, salt=30 + k) for k, dt in
           [(3, torch.float32), (2, torch.int64), (4, torch.float32),
            (1, torch.float64)]]
    outs = [torch.empty(i.numel() // n, dtype=i.dtype) for i in ins]
    with _coalescing_manager():
        for o, i in zip(outs, ins):
            dist.reduce_scatter_tensor(o, i)
    for o, i in zip(outs, ins):
        s = i.clone()
        dist.all_reduce(s, group=gloo)
        k = o.numel()
        same(o, s[rank * k:(rank + 1) * k],
             f"coalesced reduce_scatter_tensor {i.dtype}")
    premul = dist._make_nccl_premul_sum(0.5)
    o = torch.empty(2)
    i = data(rank, 2 * n, torch.float32, salt=40)
    with _coalescing_manager():
        dist.reduce_scatter_tensor(o, i, op=premul)
        dist.reduce_scatter_tensor(torch.empty(1), torch.ones(n), op=premul)
    s = i * 0.5
    dist.all_reduce(s, group=gloo)
    same(o, s[2 * rank:2 * rank + 2], "coalesced PREMUL_SUM")
    # dist.all_gather_coalesced (lists of tensors of any shapes, empty too)
    ins = [data(rank, 3, torch.float32, salt=50).view(3, 1),
           torch.empty(0), data(rank, 4, torch.float32, salt=51)]
    outs = [[torch.empty_like(i) for i in ins] for _ in range(n)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(n):
        for k, i in enumerate(ins):
            want = [data(r, 3, torch.float32, salt=50).view(3, 1),
                    torch.empty(0), data(r, 4, torch.float32, salt=51)][k]
            same(outs[r][k], want, "all_gather_coalesced")
    # startCoalescing/endCoalescing: the calls between are one Work
    assert pg._get_backend(CPU).supports_coalescing
    a = data(rank, 6, torch.float32, salt=60)
    b = data(rank, 5, torch.int64, salt=61)
    ra, rb = a.clone(), b.clone()
    with _coalescing_manager(device=CPU, async_ops=True) as cm:
        w = dist.broadcast(a, src=n - 1, async_op=True)
        dist.all_reduce(b, op=dist.ReduceOp.MAX)
        # nothing has run yet: waiting for the block's Work raises
        raises(w.wait, ["coalesced block"], "wait inside a coalesced block")
    assert len(cm.works) == 1, cm.works
    cm.wait()
    dist.broadcast(ra, src=n - 1, group=gloo)
    dist.all_reduce(rb, op=dist.ReduceOp.MAX, group=gloo)
    same(a, ra, "broadcast in a coalesced block")
    same(b, rb, "all_reduce in a coalesced block")
    # batch_isend_irecv goes through the block (supports_coalescing)
    send = data(rank, 7, torch.float32, salt=70)
    recv = torch.empty(7)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % n),
           dist.P2POp(dist.irecv, recv, (rank - 1) % n)]
    works = dist.batch_isend_irecv(ops)
    assert len(works) == 1, works
    for w in works:
        w.wait()
    same(recv, data((rank - 1) % n, 7, torch.float32, salt=70),
         "batch_isend_irecv")
    # recv from any source: the sender is the Work's source rank
    if rank == 0:
        got = set()
        for _ in range(n - 1):
            t = torch.empty(3)
            src = dist.recv(t, tag=5)
            same(t, torch.full((3,), float(src)), "recv from any source")
            got.add(src)
        assert got == set(range(1, n)), got
    else:
        dist.send(torch.full((3,), float(rank)), 0, tag=5)
    # bad use
    raises(lambda: pg._end_coalescing(CPU), ["endCoalescing", "no coalesced"],
           "endCoalescing without startCoalescing")
    pg._start_coalescing(CPU)
    raises(lambda: pg._start_coalescing(CPU), ["already open"],
           "startCoalescing twice")
    pg._end_coalescing(CPU).wait()  # an empty block is fine
    raises(lambda: dist.all_reduce_coalesced(
        [torch.ones(2), torch.ones(2, 2).t()]), ["contiguous"],
        "all_reduce_coalesced of a non-contiguous tensor")
    with _coalescing_manager():
        dist.all_gather_into_tensor(torch.empty(3 * n), torch.ones(3))
    raises(lambda: pg.allgather_into_tensor_coalesced(
        [torch.empty(n + 1)], [torch.ones(1)]).wait(),
        ["allgather_into_tensor_coalesced", "must hold"],
        "allgather_into_tensor_coalesced with a wrong output size")
    raises(lambda: pg.reduce_scatter_tensor_coalesced(
        [torch.empty(1), torch.empty(1)], [torch.ones(n)]).wait(),
        ["reduce_scatter_tensor_coalesced", "as many"],
        "reduce_scatter_tensor_coalesced with unpaired lists")
    a = torch.full((4,), float(rank))
    dist.all_reduce(a)
    assert a[0].item() == sum(range(size))


def sc_split(rank, size, gloo):
    # ProcessGroup.split_group over gcx_comm_split: every rank calls with
    # its own group's ranks; halves, then one group of ranks {0, 1} only
    pg = dist.distributed_c10d._get_default_group()
    assert pg._get_backend(CPU).supports_splitting
    halves = [list(range(0, size // 2)), list(range(size // 2, size))]
    gloos = [dist.new_group(h, backend="gloo") for h in halves]
    mine = 0 if rank < size // 2 else 1
    sub = pg.split_group(halves[mine], timeout=datetime.timedelta(seconds=30))
    assert sub is not None and sub.size() == len(halves[mine])
    assert sub.rank() == halves[mine].index(rank)
    assert torch_gcx.group_creation(sub) == "split"
    for dtype in [torch.float32, torch.int64]:
        a = data(rank, 13, dtype, salt=80)
        b = a.clone()
        sub.allreduce([a]).wait()
        dist.all_reduce(b, group=gloos[mine])
        same(a, b, f"allreduce on a split half {dtype}")
    x = data(rank, 4, torch.float32, salt=81)
    o = torch.empty(4 * sub.size())
    sub._allgather_base(o, x).wait()
    r = torch.empty_like(o)
    dist.all_gather_into_tensor(r, x, group=gloos[mine])
    same(o, r, "allgather on a split half")
    # ranks outside the listed group get none
    pair = pg.split_group([0, 1])
    if rank < 2:
        assert pair is not None and pair.size() == 2
        a = torch.full((3,), float(rank + 1))
        pair.allreduce([a]).wait()
        assert a[0].item() == 3.0, a
    else:
        assert pair is None
    # a split of a split
    if sub.size() >= 2:
        one = sub.split_group([sub.rank()])
        assert one is not None and one.size() == 1
    else:
        one = sub.split_group([0])
    a = torch.full((2,), float(rank))
    one.allreduce([a]).wait()
    assert a[0].item() == float(rank)
    raises(lambda: pg.split_group([size]), ["out of range"],
           "split with a bad rank")
    # the parent still works
    a = torch.full((4,), float(rank))
    dist.all_reduce(a)
    assert a[0].item() == sum(range(size))


def sc_monitored(rank, size, gloo):
    assert size == 3
    pg = dist.distributed_c10d._get_default_group()
    t = datetime.timedelta(seconds=30)
    pg.monitored_barrier(t)
    pg.monitored_barrier(t, wait_all_ranks=True)
    raises(lambda: dist.send(torch.ones(1), (rank + 1) % size,
                             tag=2 ** 31 - 1),
           ["tag", "monitored_barrier"], "send with the reserved tag")
    dist.barrier(group=gloo)
    # rank 2 does not come: ranks 0 and 1 both fail, naming it
    timeout = datetime.timedelta(seconds=6)
    if rank < 2:
        t0 = time.monotonic()
        raises(lambda: pg.monitored_barrier(timeout, wait_all_ranks=True),
               ["Rank 2 failed to pass monitoredBarrier in 6000 ms"]
               + (["successfully reached"] if rank == 1 else []),
               "monitored_barrier without rank 2")
        took = time.monotonic() - t0
        assert took >= 5.9, f"rank {rank} gave up after {took:.2f} s"
    dist.barrier(group=gloo)
    # the group still works (rank 2's barrier messages are never sent)
    a = torch.full((4,), float(rank))
    dist.all_reduce(a)
    assert a[0].item() == 3.0


def sc_get_error(rank, size, gloo):
    # healthy: SUCCESS; after a peer died: the error the collective saw
    assert torch_gcx.get_error() == ErrorType.SUCCESS, \
        torch_gcx.get_error()
    dist.barrier()
    if rank == 1:
        os._exit(0)
    try:
        dist.all_reduce(torch.ones(1000))
    except RuntimeError as e:
        msg = str(e)
    else:
        raise AssertionError("allreduce with a dead peer did not raise")
    want = ErrorType.TIMEOUT if "GCX_ERR_TIMEOUT" in msg else \
        ErrorType.REMOTE_ERROR
    assert "GCX_ERR_PEER" in msg or "GCX_ERR_TIMEOUT" in msg, msg
    got = torch_gcx.get_error()
    assert got == want, (got, msg)
    print(f"get_error after a peer death: {got} ({msg.splitlines()[0]})",
          flush=True)
    print(f"rank {rank}: get_error ok", flush=True)
    os._exit(0)  # the store's peer is gone: no teardown


SCENARIOS = {name[3:]: fn for name, fn in globals().items()
             if name.startswith("sc_")}


def main():
    scenario, rank, size, store = sys.argv[1], int(sys.argv[2]), \
        int(sys.argv[3]), sys.argv[4]
    # no gloo group where a rank dies: its sockets would close under it
    dying = scenario == "get_error"
    gloo = init(rank, size, store, timeout=5 if dying else 60, gloo=not dying)
    SCENARIOS[scenario](rank, size, gloo)
    dist.barrier(group=gloo)
    dist.destroy_process_group()
    print(f"rank {rank}: {scenario} ok", flush=True)


if __name__ == "__main__":
    main()
