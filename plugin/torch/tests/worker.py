"""One rank of a multi-process test: python worker.py SCENARIO RANK SIZE STOREFILE.

Each scenario initialises the default group with the gcx backend (FileStore
at STOREFILE), makes a gloo group beside it over the same ranks, and checks
gcx's results against gloo's. A failed check raises (non-zero exit); the
launcher (launch.py) kills every rank when one hangs.
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_gcx  # noqa: F401  (registers "gcx")

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64,
          torch.float16, torch.bfloat16]
SIZES = [0, 1, 7, 1000, 1 << 20]
OPS = [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN]


def init(rank, size, store_file, timeout=60, gloo=True):
    """The default group on gcx, and (gloo=True) a gloo group of every rank
    beside it to compare with.

    A scenario in which a rank exits (or dies) on purpose right after init
    passes gloo=False: gloo's connectFullMesh is not done on every rank when
    it returns on one, so a rank that leaves at once can close the pair while
    its peer still connects ("Gloo connectFullMesh failed ... Connection
    closed by peer"), a failure of the test's own gloo group, not of gcx."""
    # TEST_TCP_PORT set: a TCPStore on that port (rank 0 serves it)
    port = os.environ.get("TEST_TCP_PORT")
    method = f"tcp://127.0.0.1:{port}" if port else "file://" + store_file
    dist.init_process_group("gcx", init_method=method,
                            rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=timeout))
    return dist.new_group(backend="gloo") if gloo else None


def data(rank, n, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + 7 * n + salt)
    if dtype.is_floating_point:
        # small integers: sums are exact in every float type, so gcx and
        # gloo must agree exactly whatever order they add in
        return torch.randint(-8, 9, (n,), generator=g).to(dtype)
    return torch.randint(-1000, 1000, (n,), generator=g, dtype=dtype)


def same(a, b, what):
    if not torch.equal(a, b):
        diff = (a.double() - b.double()).abs().max().item() if a.numel() else 0
        raise AssertionError(f"{what}: gcx and gloo differ (max |diff| {diff})")


def sc_allreduce(rank, size, gloo):
    for dtype in DTYPES:
        for n in SIZES:
            if n == 1 << 20 and dtype not in (torch.float32, torch.bfloat16):
                continue  # one large size per width class is enough
            for op in OPS:
                a = data(rank, n, dtype)
                b = a.clone()
                dist.all_reduce(a, op=op)
                dist.all_reduce(b, op=op, group=gloo)
                same(a, b, f"allreduce {op} {dtype} n={n}")
            if dtype.is_floating_point:
                a = data(rank, n, dtype)
                b = a.clone()
                dist.all_reduce(a, op=dist.ReduceOp.AVG)
                dist.all_reduce(b, group=gloo)
                torch.testing.assert_close(a, b / size, msg=f"avg {dtype} {n}")
    # async: several in flight, completed through wait() and the future
    ts = [data(rank, 1000 + i, torch.float32) for i in range(8)]
    ref = [t.clone() for t in ts]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for r in ref:
        dist.all_reduce(r, group=gloo)
    for i, w in enumerate(works):
        if i % 2:
            w.wait()
        else:
            out = w.get_future().wait()
            assert isinstance(out, list) and out[0] is not None
        assert w.is_completed() and w.is_success() and w.exception() is None
    for t, r in zip(ts, ref):
        same(t, r, "async allreduce")
    # allreduce_coalesced (several tensors of one dtype, as torch requires)
    ts = [data(rank, n, torch.float64) for n in [5, 0, 3000]]
    ref = [t.clone() for t in ts]
    dist.all_reduce_coalesced(ts)
    for r in ref:
        dist.all_reduce(r, group=gloo)
    for t, r in zip(ts, ref):
        same(t, r, "allreduce_coalesced")


def sc_movement(rank, size, gloo):
    for dtype in [torch.float32, torch.int64, torch.uint8, torch.float16,
                  torch.bool]:
        for n in SIZES:
            if n == 1 << 20 and dtype != torch.float32:
                continue
            base = data(rank, n, torch.int32).to(dtype)
            for root in range(size):
                a, b = base.clone(), base.clone()
                dist.broadcast(a, src=root)
                dist.broadcast(b, src=root, group=gloo)
                same(a, b, f"broadcast {dtype} n={n} root={root}")
            # allgather into a list
            outs = [torch.empty(n, dtype=dtype) for _ in range(size)]
            refs = [torch.empty(n, dtype=dtype) for _ in range(size)]
            dist.all_gather(outs, base)
            dist.all_gather(refs, base, group=gloo)
            for i in range(size):
                same(outs[i], refs[i], f"allgather {dtype} n={n} block {i}")
            # allgather into one tensor
            out = torch.empty(size * n, dtype=dtype)
            dist.all_gather_into_tensor(out, base)
            same(out, torch.cat(refs), f"allgather_into_tensor {dtype} n={n}")
            # gather / scatter at every root
            for root in range(size):
                outs = ([torch.empty(n, dtype=dtype) for _ in range(size)]
                        if rank == root else None)
                dist.gather(base, outs, dst=root)
                if rank == root:
                    for i in range(size):
                        same(outs[i], refs[i], f"gather {dtype} n={n} root={root}")
                ins = ([data(i, n, torch.int32, salt=root).to(dtype)
                        for i in range(size)] if rank == root else None)
                out = torch.empty(n, dtype=dtype)
                dist.scatter(out, ins, src=root)
                same(out, data(rank, n, torch.int32, salt=root).to(dtype),
                     f"scatter {dtype} n={n} root={root}")
    dist.barrier()


def sc_reduce(rank, size, gloo):
    for dtype in [torch.float32, torch.float64, torch.int32, torch.int64,
                  torch.float16, torch.bfloat16]:
        for n in [0, 1, 7, 5000, 300000]:
            for op in OPS:
                # reduce_scatter from a list and into a tensor
                ins = [data(rank, n, dtype, salt=i) for i in range(size)]
                out = torch.empty(n, dtype=dtype)
                ref = torch.empty(n, dtype=dtype)
                dist.reduce_scatter(out, [t.clone() for t in ins], op=op)
                # gloo has no reduce_scatter: reference = allreduce + slice
                full = torch.cat(ins)
                dist.all_reduce(full, op=op, group=gloo)
                ref = full[rank * n:(rank + 1) * n]
                same(out, ref, f"reduce_scatter {op} {dtype} n={n}")
                out2 = torch.empty(n, dtype=dtype)
                dist.reduce_scatter_tensor(out2, torch.cat(ins), op=op)
                same(out2, ref, f"reduce_scatter_tensor {op} {dtype} n={n}")
                # reduce at every root
                for root in range(size):
                    a = data(rank, n, dtype, salt=root)
                    b = a.clone()
                    dist.reduce(a, dst=root, op=op)
                    dist.reduce(b, dst=root, op=op, group=gloo)
                    if rank == root:
                        same(a, b, f"reduce {op} {dtype} n={n} root={root}")


def sc_alltoall(rank, size, gloo):
    for dtype in [torch.float32, torch.int64, torch.uint8]:
        for rows in [0, 1, 3, 1000]:
            # equal splits
            inp = data(rank, size * rows * 2, torch.int32).to(dtype).view(-1, 2)
            out = torch.empty_like(inp)
            ref = torch.empty_like(inp)
            dist.all_to_all_single(out, inp)
            dist.all_to_all_single(ref, inp, group=gloo)
            same(out, ref, f"alltoall equal {dtype} rows={rows}")
            # given split sizes: rank r sends (r + j) % 3 * rows rows to j
            ins = [((rank + j) % 3) * rows for j in range(size)]
            outs = [((i + rank) % 3) * rows for i in range(size)]
            inp = data(rank, sum(ins) * 2, torch.int32).to(dtype).view(-1, 2)
            out = torch.empty(sum(outs), 2, dtype=dtype)
            ref = torch.empty_like(out)
            dist.all_to_all_single(out, inp, outs, ins)
            dist.all_to_all_single(ref, inp, outs, ins, group=gloo)
            same(out, ref, f"alltoall splits {dtype} rows={rows}")


def sc_p2p(rank, size, gloo):
    # ring: each rank sends to the next, receives from the previous,
    # with two tags in flight at once
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    for n in [0, 1, 1000, 1 << 18]:
        a = data(rank, n, torch.float32)
        b = data(rank, n, torch.float32, salt=1)
        ra = torch.empty(n)
        rb = torch.empty(n)
        works = [dist.isend(a, nxt, tag=1), dist.isend(b, nxt, tag=2),
                 dist.irecv(rb, prv, tag=2), dist.irecv(ra, prv, tag=1)]
        for w in works:
            w.wait()
        same(ra, data(prv, n, torch.float32), f"send/recv tag 1 n={n}")
        same(rb, data(prv, n, torch.float32, salt=1), f"send/recv tag 2 n={n}")


def sc_subgroups(rank, size, gloo):
    # a sub-group of the even ranks and one of all ranks in reverse
    evens = list(range(0, size, 2))
    g_even = dist.new_group(evens, backend="gcx")
    g_rev = dist.new_group(list(reversed(range(size))), backend="gcx")
    g_even_gloo = dist.new_group(evens, backend="gloo")
    for i in range(3):
        a = data(rank, 1000 + i, torch.float32)
        b = a.clone()
        w = dist.all_reduce(a, group=g_rev, async_op=True)
        dist.all_reduce(b, group=gloo)
        w.wait()
        same(a, b, "allreduce on a sub-group")
        if rank in evens:
            a = data(rank, 77, torch.int64)
            b = a.clone()
            dist.all_reduce(a, op=dist.ReduceOp.MAX, group=g_even)
            dist.all_reduce(b, op=dist.ReduceOp.MAX, group=g_even_gloo)
            same(a, b, "allreduce on the even sub-group")
    dist.destroy_process_group(g_even) if rank in evens else None
    dist.barrier()


def sc_ddp(rank, size, gloo):
    steps = int(os.environ.get("DDP_STEPS", "5"))
    torch.manual_seed(0)

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(),
                                   torch.nn.Linear(32, 4))

    m_gcx = torch.nn.parallel.DistributedDataParallel(model(),
                                                      bucket_cap_mb=0.001)
    m_gloo = torch.nn.parallel.DistributedDataParallel(model(),
                                                       process_group=gloo,
                                                       bucket_cap_mb=0.001)
    o_gcx = torch.optim.SGD(m_gcx.parameters(), lr=0.1)
    o_gloo = torch.optim.SGD(m_gloo.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        x = torch.randn(16, 20, generator=g)
        y = torch.randn(16, 4, generator=g)
        for m, o in [(m_gcx, o_gcx), (m_gloo, o_gloo)]:
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            o.step()
    for p, q in zip(m_gcx.parameters(), m_gloo.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    # every rank holds the same parameters
    for p in m_gcx.parameters():
        ps = [torch.empty_like(p) for _ in range(size)]
        dist.all_gather(ps, p.detach())
        for q in ps:
            torch.testing.assert_close(q, ps[0], rtol=0, atol=0)
    print("ddp parity ok after", steps, "steps", flush=True)


def sparse_data(rank, shape, sparse_dim, nnz, salt=0):
    g = torch.Generator().manual_seed(100 * rank + salt)
    ind = torch.stack([torch.randint(0, shape[d], (nnz,), generator=g)
                       for d in range(sparse_dim)]) if nnz else \
        torch.zeros(sparse_dim, 0, dtype=torch.long)
    vals = torch.randint(-8, 9, (nnz,) + tuple(shape[sparse_dim:]),
                         generator=g).float()
    return torch.sparse_coo_tensor(ind, vals, shape)  # duplicates: summed


def sc_sparse(rank, size, gloo):
    # dist.all_reduce of COO tensors against gloo's sparse allreduce:
    # 1-d, fully sparse 2-d, hybrid (embedding-like rows), empty ranks
    cases = [((1000,), 1, lambda r: 30 + 17 * r), ((30, 40), 2, lambda r: 50),
             ((50, 4), 1, lambda r: 5 + r),
             ((200,), 1, lambda r: 0 if r % 2 else 20),
             ((1 << 20,), 1, lambda r: 1000)]
    for i, (shape, sd, nnz_of) in enumerate(cases):
        a = sparse_data(rank, shape, sd, nnz_of(rank), salt=i)
        b = a.clone()
        dist.all_reduce(a)
        dist.all_reduce(b, group=gloo)
        assert a.is_sparse and a.is_coalesced(), f"case {i}: not coalesced"
        same(a.to_dense(), b.to_dense(), f"sparse allreduce {shape}")
        want = sum(sparse_data(r, shape, sd, nnz_of(r), salt=i).to_dense()
                   for r in range(size))
        same(a.to_dense(), want, f"sparse allreduce {shape} vs reference")
    a = sparse_data(rank, (100,), 1, 10)
    ref = torch.zeros(100)
    for r in range(size):
        ref += sparse_data(r, (100,), 1, 10).to_dense()
    dist.all_reduce(a, op=dist.ReduceOp.AVG)
    torch.testing.assert_close(a.to_dense(), ref / size)
    for what, fn in [
        ("float32", lambda: dist.all_reduce(
            sparse_data(rank, (10,), 1, 2).double())),
        ("ReduceOp.MAX", lambda: dist.all_reduce(
            sparse_data(rank, (10,), 1, 2), op=dist.ReduceOp.MAX)),
    ]:
        try:
            fn()
        except RuntimeError as e:
            assert what in str(e), str(e)
            print("sparse bad use error:", str(e).splitlines()[0], flush=True)
        else:
            raise AssertionError(f"sparse {what} did not raise")
    print("sparse ok", flush=True)


def sc_unsupported(rank, size, gloo):
    t = torch.ones(4)
    # bitwise reductions are for integer (and bool) tensors
    for op in ["BAND", "BOR", "BXOR"]:
        try:
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        except RuntimeError as e:
            assert op in str(e), str(e)
            print("unsupported op error:", str(e).splitlines()[0], flush=True)
        else:
            raise AssertionError(f"ReduceOp.{op} on float32 did not raise")
    bad = [
        ("non-contiguous", lambda: dist.all_reduce(torch.ones(4, 4).t())),
        ("dtype", lambda: dist.all_reduce(torch.ones(3, dtype=torch.uint8),
                                          op=dist.ReduceOp.AVG)),
        ("output tensors", lambda: dist.all_gather([torch.empty(4)], t)),
    ]
    for what, fn in bad:
        try:
            fn()
        except (RuntimeError, ValueError) as e:
            assert what in str(e) or "gcx" in str(e), str(e)
            print("bad use error:", str(e).splitlines()[0], flush=True)
        else:
            raise AssertionError(f"{what} did not raise")
    # the communicator is still fine
    a = torch.full((5,), float(rank))
    dist.all_reduce(a)
    assert a[0].item() == sum(range(size))


def sc_mismatch(rank, size, gloo):
    # rank 0 passes a different count: every rank must raise, none hang
    n = 100 if rank == 0 else 101
    for name, fn in [
        ("allreduce", lambda: dist.all_reduce(torch.ones(n))),
        ("broadcast", lambda: dist.broadcast(torch.ones(n), src=0)),
        ("sparse allreduce", lambda: dist.all_reduce(
            torch.sparse_coo_tensor([[0]], [1.0], (n,)))),
    ]:
        try:
            fn()
        except RuntimeError as e:
            assert "GCX_ERR_MISMATCH" in str(e), str(e)
            print(f"{name} mismatch error:", str(e).splitlines()[0],
                  flush=True)
        else:
            raise AssertionError(f"{name} with different sizes did not raise")


def sc_wait_cpu(rank, size, gloo):
    # rank 0 waits wait_s in an all_reduce for a late rank 1: the process's
    # CPU time over that wait says whether the engine slept or polled
    wait_s = 2.0
    dist.all_reduce(torch.ones(4))  # connections made before the clock
    if rank == 1:
        time.sleep(wait_s)
    cpu0, wall0 = time.process_time(), time.monotonic()
    dist.all_reduce(torch.ones(4))
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    print(f"wait cpu {cpu:.3f} s over {wall:.3f} s", flush=True)


SCENARIOS = {name[3:]: fn for name, fn in globals().items()
             if name.startswith("sc_")}


def main():
    scenario, rank, size, store = sys.argv[1], int(sys.argv[2]), \
        int(sys.argv[3]), sys.argv[4]
    if scenario == "peer_death":
        # the last rank dies after creation; the others' next collective
        # must fail (GCX_ERR_PEER or GCX_ERR_TIMEOUT within the group's
        # 3 s timeout, which is the communicator's GCX_TIMEOUT), not hang
        init(rank, size, store, timeout=3, gloo=False)
        if rank == size - 1:
            os._exit(0)
        try:
            dist.all_reduce(torch.ones(1000))
        except RuntimeError as e:
            msg = str(e)
            assert "GCX_ERR_PEER" in msg or "GCX_ERR_TIMEOUT" in msg, msg
            print("peer death error:", msg.splitlines()[0], flush=True)
            os._exit(0)  # the store's server rank may be gone: no teardown
        raise AssertionError("allreduce with a dead peer did not raise")
    if scenario == "exit_inflight":
        # rank 0 exits with an allreduce in flight that rank 1 never joins;
        # the atexit shutdown must cancel it and let both exit, not hang
        init(rank, size, store, gloo=False)
        if rank == 0:
            dist.all_reduce(torch.ones(1 << 20), async_op=True)
            sys.exit(0)
        # the other ranks destroy their group with nothing in flight
        dist.destroy_process_group()
        sys.exit(0)
    if scenario in ("never_joins", "size_mismatch"):
        # never_joins: the last rank never calls init_process_group;
        # size_mismatch: the last rank believes the world is one larger.
        # Creation must raise, not hang: a timeout within the group's 5 s
        # for the missing rank, a mismatch for the wrong size.
        last = rank == size - 1
        if scenario == "never_joins" and last:
            time.sleep(12)
            sys.exit(0)
        t0 = time.monotonic()
        try:
            init(rank, size + 1 if last else size, store, timeout=5,
                 gloo=False)
            dist.all_reduce(torch.ones(4))
        except Exception as e:  # noqa: BLE001
            print(f"creation error after {time.monotonic() - t0:.1f} s:",
                  str(e).splitlines()[0], flush=True)
            os._exit(3)
        os._exit(0)
    if scenario == "badenv":
        # GCX_TIMEOUT=abc etc. is set by the launcher: creation must raise
        try:
            init(rank, size, store, gloo=False)
        except Exception as e:  # noqa: BLE001
            print("creation error:", e, flush=True)
            sys.exit(3)
        sys.exit(0)
    run_scenario(SCENARIOS, scenario, rank, size, store)


def run_scenario(scenarios, scenario, rank, size, store):
    """The common case: init, run, a barrier on gloo, destroy, report."""
    gloo = init(rank, size, store)
    scenarios[scenario](rank, size, gloo)
    dist.barrier(group=gloo)
    dist.destroy_process_group()
    print(f"rank {rank}: {scenario} ok", flush=True)


if __name__ == "__main__":
    main()
