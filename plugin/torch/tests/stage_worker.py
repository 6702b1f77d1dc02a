"""One rank of a staging test: python stage_worker.py SCENARIO RANK SIZE
STOREFILE.

The launcher (test_stage.py) sets GCX_TORCH_STAGE=always and a small
GCX_TORCH_STAGE_CHUNK, so CPU tensors take the chunked staging pipeline of
device tensors (host buffer pool, one gcx call per chunk, copies in and
out) and the host mirrors of the calls that are not chunked. TEST_DEVICE
(default cpu) is the device of the tensors: test_cuda_collectives.py runs
the same scenarios with "cuda" and with the simulated device "simdev"
(simdev_env.py: asynchronous copies, strict allocator, its counters
checked at the end). Results are compared with gloo's on the same data
(CPU copies).
"""
import datetime
import os
import sys
import time

import simdev_env  # noqa: I100  (the simulated device, before torch_gcx)
import torch
import torch.distributed as dist

import torch_gcx
from worker import data  # small integers: exact sums in any order

DEV = torch.device(os.environ.get("TEST_DEVICE", "cpu"))
if DEV.type != "cpu" and DEV.index is None:
    DEV = torch.device(DEV.type, 0)  # what tensors report: cuda:0, ...
MOD = None if DEV.type == "cpu" else torch.get_device_module(DEV)
CHUNK = int(os.environ.get("GCX_TORCH_STAGE_CHUNK", 4 << 20))


def busy():
    """Queue tens of ms of device time on the current stream (a long
    kernel): work queued behind it runs late."""
    if DEV.type == "cuda":
        busy()
    else:
        MOD.sleep_on_stream(30_000)


def init(rank, size, store_file, timeout=60, gloo=True):
    if MOD is not None:
        MOD.set_device(0)  # the ranks share one device
    dist.init_process_group("gcx", init_method="file://" + store_file,
                            rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=timeout))
    return dist.new_group(backend="gloo") if gloo else None


def same(a, b, what):
    a, b = a.cpu(), b.cpu()
    if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
        raise AssertionError(f"{what}: gcx {a.dtype} {tuple(a.shape)} and "
                             f"gloo {b.dtype} {tuple(b.shape)} differ")


def dev(t):
    # a copy on every device (x.to("cpu") would be x itself)
    return t.clone().to(DEV)


# sizes around the chunk: one element, less than a chunk, several chunks
# with a tail, empty
def sizes(elem):
    per = max(1, CHUNK // elem)
    return [0, 1, per - 1, per, 3 * per + 5]


def sc_collectives(rank, size, gloo):
    """Every collective on staged tensors against gloo."""
    for dtype in [torch.float32, torch.float64, torch.int64, torch.bfloat16,
                  torch.float16, torch.int32]:
        elem = torch.tensor([], dtype=dtype).element_size()
        for n in sizes(elem):
            what = f"{dtype} n={n}"
            for op in [dist.ReduceOp.SUM, dist.ReduceOp.MAX,
                       dist.ReduceOp.AVG]:
                if op == dist.ReduceOp.AVG and not dtype.is_floating_point:
                    continue
                x = data(rank, n, dtype)
                if op == dist.ReduceOp.AVG:
                    x = x * size  # exact averages
                ref = x.clone()
                t = dev(x)
                dist.all_reduce(t, op=op)
                dist.all_reduce(ref, op=op, group=gloo)
                same(t, ref, f"all_reduce {op} {what}")
            for root in range(size):
                x = data(rank, n, dtype, salt=root)
                t, ref = dev(x), x.clone()
                dist.broadcast(t, src=root)
                dist.broadcast(ref, src=root, group=gloo)
                same(t, ref, f"broadcast from {root} {what}")
                t, ref = dev(x), x.clone()
                dist.reduce(t, dst=root)
                dist.reduce(ref, dst=root, group=gloo)
                if rank == root:
                    same(t, ref, f"reduce to {root} {what}")
                else:
                    same(t, x, f"reduce keeps the input {what}")
            x = data(rank, n, dtype, salt=3)
            out = dev(torch.full((size * n,), 7, dtype=dtype))
            ref = torch.empty(size * n, dtype=dtype)
            dist.all_gather_into_tensor(out, dev(x))
            dist.all_gather_into_tensor(ref, x, group=gloo)
            same(out, ref, f"all_gather_into_tensor {what}")
            x = data(rank, size * n, dtype, salt=4)
            out = dev(torch.full((n,), 7, dtype=dtype))
            ref = torch.empty(n, dtype=dtype)
            dist.reduce_scatter_tensor(out, dev(x))
            if n:
                dist.reduce_scatter_tensor(ref, x, group=gloo)
            same(out, ref, f"reduce_scatter_tensor {what}")
    # PREMUL_SUM (FSDP2's scaling), through the chunks
    n = 3 * (CHUNK // 4) + 1
    x = data(rank, n, torch.float32)
    t = dev(x)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    ref = x.clone()
    dist.all_reduce(ref, group=gloo)
    same(t, ref * 0.5, "all_reduce PREMUL_SUM")
    # a dtype gcx does not reduce (combined from a gather, on mirrors)
    x = torch.arange(10, dtype=torch.uint8) + rank
    t, ref = dev(x), x.clone()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    dist.all_reduce(ref, op=dist.ReduceOp.MAX, group=gloo)
    same(t, ref, "all_reduce uint8 MAX")
    # the calls that are not chunked (host mirrors)
    x = data(rank, 1000, torch.float32)
    outs = [dev(torch.empty(1000)) for _ in range(size)]
    refs = [torch.empty(1000) for _ in range(size)]
    dist.all_gather(outs, dev(x))
    dist.all_gather(refs, x, group=gloo)
    for r in range(size):
        same(outs[r], refs[r], f"all_gather list [{r}]")
    ins = [data(rank, 100, torch.float32, salt=r) for r in range(size)]
    out, ref = dev(torch.empty(100)), torch.empty(100)
    dist.reduce_scatter(out, [dev(i) for i in ins])
    dist.reduce_scatter(ref, ins, group=gloo)
    same(out, ref, "reduce_scatter list")
    x = data(rank, 4 * size, torch.int64)
    out, ref = dev(torch.empty(4 * size, dtype=torch.int64)), \
        torch.empty(4 * size, dtype=torch.int64)
    dist.all_to_all_single(out, dev(x))
    dist.all_to_all_single(ref, x, group=gloo)
    same(out, ref, "all_to_all_single")
    x = data(rank, 50, torch.float64)
    gl = [dev(torch.empty(50, dtype=torch.float64)) for _ in range(size)] \
        if rank == 0 else None
    gr = [torch.empty(50, dtype=torch.float64) for _ in range(size)] \
        if rank == 0 else None
    dist.gather(dev(x), gl, dst=0)
    dist.gather(x, gr, dst=0, group=gloo)
    if rank == 0:
        for r in range(size):
            same(gl[r], gr[r], f"gather [{r}]")
    sl = [data(0, 30, torch.float32, salt=r) for r in range(size)]
    out, ref = dev(torch.empty(30)), torch.empty(30)
    dist.scatter(out, [dev(s) for s in sl] if rank == 0 else None, src=0)
    dist.scatter(ref, sl if rank == 0 else None, src=0, group=gloo)
    same(out, ref, "scatter")
    ts = [dev(data(rank, 10, torch.float32)), dev(data(rank, 5, torch.float32))]
    rs = [t.cpu() for t in ts]
    dist.all_reduce_coalesced(ts)
    dist.all_reduce_coalesced(rs, group=gloo)
    for a, b in zip(ts, rs):
        same(a, b, "all_reduce_coalesced")
    # send/recv around the ring
    if size > 1:
        x = dev(data(rank, 64, torch.float32))
        got = dev(torch.empty(64))
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        reqs = [dist.isend(x, nxt), dist.irecv(got, prv)]
        for r in reqs:
            r.wait()
        same(got, data(prv, 64, torch.float32), "send/recv")
    # a coalesced block of chunked calls (host mirrors inside the block)
    a = dev(data(rank, 3 * (CHUNK // 4), torch.float32))
    b = dev(data(rank, 9, torch.float32))
    ra, rb = a.cpu(), b.cpu()
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    dist.all_reduce(ra, group=gloo)
    dist.all_reduce(rb, group=gloo)
    same(a, ra, "coalesced block a")
    same(b, rb, "coalesced block b")


def sc_pipeline(rank, size, gloo):
    """The chunks, the pool's reuse, order of many calls in flight, the
    Future's value."""
    n = 10 * (CHUNK // 4) + 3  # 11 chunks of float32
    s0 = torch_gcx.stage_stats()
    x = dev(data(rank, n, torch.float32))
    dist.all_reduce(x)
    s1 = torch_gcx.stage_stats()
    assert s1["calls"] - s0["calls"] == 1, (s0, s1)
    assert s1["chunks"] - s0["chunks"] == 11, (s0, s1)
    # the same size again: the pool gives the buffer back, allocates none
    y = dev(data(rank, n, torch.float32, salt=1))
    # the Future: complete once the buffers went back to the pool (with
    # stream-mode waits, wait() returns before that)
    dist.all_reduce(y, async_op=True).get_future().wait()
    s2 = torch_gcx.stage_stats()
    assert s2["allocs"] == s1["allocs"], (s1, s2)
    assert s2["reuses"] > s1["reuses"], (s1, s2)
    assert s2["cached_bytes"] >= 4 * n, s2
    # many calls in flight, of different sizes and kinds, waited out of
    # order: every result as gloo's
    ts, refs, works = [], [], []
    for i in range(12):
        m = [1, CHUNK // 4 - 1, 2 * (CHUNK // 4) + 7][i % 3]
        x = data(rank, m, torch.float32, salt=10 + i)
        t = dev(x)
        if i % 4 == 3:
            works.append(dist.broadcast(t, src=i % size, async_op=True))
            dist.broadcast(x, src=i % size, group=gloo)
        else:
            works.append(dist.all_reduce(t, async_op=True))
            dist.all_reduce(x, group=gloo)
        ts.append(t)
        refs.append(x)
    for w in reversed(works):
        w.wait()
    for i, (t, x) in enumerate(zip(ts, refs)):
        same(t, x, f"in flight {i}")
    # the Future: its value is the tensor, complete with the result in it
    x = data(rank, 2 * (CHUNK // 4) + 1, torch.float32, salt=99)
    t = dev(x)
    fut = dist.all_reduce(t, async_op=True).get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)
    dist.all_reduce(x, group=gloo)
    same(doubled.wait(), x * 2, "future then")
    same(fut.value()[0], x, "future value")
    # reduce_scatter_tensor and all_gather_into_tensor of many chunks,
    # async, then wait
    m = 5 * (CHUNK // 8) + 3
    x = data(rank, size * m, torch.float64, salt=5)
    out = dev(torch.empty(m, dtype=torch.float64))
    w1 = dist.reduce_scatter_tensor(out, dev(x), async_op=True)
    g_out = dev(torch.empty(size * m, dtype=torch.float64))
    # a staged call reads its input at the call (after the current
    # stream's work): wait for the call that writes it first (no host sync
    # for device tensors), unlike NCCL, which orders both on its stream
    w1.wait()
    w2 = dist.all_gather_into_tensor(g_out, out, async_op=True)
    w2.wait()
    ref = torch.empty(m, dtype=torch.float64)
    dist.reduce_scatter_tensor(ref, x, group=gloo)
    g_ref = torch.empty(size * m, dtype=torch.float64)
    dist.all_gather_into_tensor(g_ref, ref, group=gloo)
    same(out, ref, "async reduce_scatter_tensor")
    same(g_out, g_ref, "all_gather_into_tensor after it")


def sc_errors(rank, size, gloo):
    """Bad device arguments raise on every rank, naming the devices; the
    group goes on."""
    meta = torch.empty(4, device="meta")
    cases = [
        ("more than one device",
         lambda: dist.all_gather([dev(torch.empty(4)), meta] +
                                 [dev(torch.empty(4))] * (size - 2),
                                 dev(torch.ones(4)))
         if size >= 2 else dist.all_gather([meta], dev(torch.ones(4)))),
        # (a meta tensor as the first or only one is dispatched by torch to
        # its meta kernels, never to the backend: only lists reach it)
        ("must be contiguous",
         lambda: dist.all_reduce(dev(torch.ones(4, 4)).t())),
    ]
    for what, fn in cases:
        try:
            fn()
        except (RuntimeError, ValueError) as e:
            assert what in str(e), str(e)
            print("device error:", str(e).splitlines()[0], flush=True)
        else:
            raise AssertionError(f"{what}: did not raise")
    t = dev(torch.full((5,), float(rank)))
    dist.all_reduce(t)
    assert t[0].item() == sum(range(size)), t


def sc_streams(rank, size, gloo):
    """A device (CUDA, the simulated one): NCCL's stream semantics. The
    call is ordered after what the current stream had queued (a fill
    queued behind a long kernel is what gets reduced); work.wait() orders
    the current stream after the copy back without a host sync, so a read
    queued on the stream right after it sees the result; a call made on a
    side stream is ordered after that stream's work; work.synchronize() orders the stream as
    wait() does; the Future's value is the result, and then() runs on a
    device stream, for staged and mirrored calls."""
    assert MOD is not None, DEV
    n = 3 * (CHUNK // 4) + 11  # several chunks
    want = float(sum(r + 1 for r in range(size)))
    for i in range(3):
        t = torch.zeros(n, device=DEV)
        busy()  # ~tens of ms of GPU time
        t.fill_(rank + 1)  # queued behind the sleep
        work = dist.all_reduce(t, async_op=True)
        work.wait()  # no host sync: the stream waits
        r = t + 0  # queued on the current stream after wait()
        got = r.cpu()
        assert torch.all(got == want), (i, got[:4], want)
    # all_gather_into_tensor and reduce_scatter_tensor the same way
    x = torch.zeros(n, device=DEV)
    busy()
    x.fill_(rank + 1)
    out = torch.empty(size * n, device=DEV)
    dist.all_gather_into_tensor(out, x, async_op=True).wait()
    exp = torch.cat([torch.full((n,), r + 1.0) for r in range(size)])
    assert torch.equal(out.cpu(), exp), "all_gather_into_tensor order"
    big = torch.zeros(size * n, device=DEV)
    busy()
    big.fill_(rank + 1)
    small = torch.empty(n, device=DEV)
    dist.reduce_scatter_tensor(small, big, async_op=True).wait()
    assert torch.all(small.cpu() == want), "reduce_scatter_tensor order"
    # a side stream: the call follows that stream's work, wait() orders it
    side = torch.Stream(device=DEV)
    with side:
        t = torch.zeros(n, device=DEV)
        busy()
        t.fill_(rank + 1)
        w = dist.all_reduce(t, async_op=True)
        w.wait()
        got = (t * 2).cpu()
    assert torch.all(got == 2 * want), got[:4]
    # work.synchronize(): the current stream waits for the result (no host
    # wait for the copies), as after wait()
    t = torch.zeros(n, device=DEV)
    busy()
    t.fill_(rank + 1)
    w = dist.all_reduce(t, async_op=True)
    while not w.is_completed():  # the host learns it is over; copies may
        time.sleep(0.001)        # still be queued on the device
    w.synchronize()
    got = (t + 0).cpu()
    assert torch.all(got == want), ("synchronize", got[:4])
    # the Future: complete when the result is in the tensor
    t = torch.zeros(n, device=DEV)
    busy()
    t.fill_(rank + 1)
    fut = dist.all_reduce(t, async_op=True).get_future()
    val = fut.wait()[0]
    assert torch.all(val.cpu() == want), val[:4]
    assert torch.all(t.cpu() == want)
    # broadcast of what the root queued behind a kernel
    t = torch.zeros(n, device=DEV)
    busy()
    t.fill_(rank + 5)
    dist.broadcast(t, src=size - 1, async_op=True).wait()
    assert torch.all(t.cpu() == size + 4), t[:4]
    # staged through the pool: host buffers reused across calls
    s = torch_gcx.stage_stats()
    assert s["calls"] > 0 and s["reuses"] > 0, s
    # the Futures of staged and of mirrored calls (all_to_all_single goes
    # through host mirrors) are device-aware: then() runs its callback on
    # a stream of the device that waited for the result, not on the
    # thread's current (default) stream
    default = MOD.default_stream(DEV)
    for what, call in [
            ("staged all_reduce", lambda t, o: dist.all_reduce(
                t, async_op=True)),
            ("mirrored all_to_all_single", lambda t, o: dist.all_to_all_single(
                o, t, async_op=True))]:
        t = torch.full((4 * size,), float(rank + 1), device=DEV)
        o = torch.empty(4 * size, device=DEV)
        seen = {}

        def cb(f):
            seen["stream"] = MOD.current_stream(DEV)
            return f.value()[0] * 1

        got = call(t, o).get_future().then(cb).wait()
        assert seen["stream"] != default, (what, seen, default)
        want = torch.full((4 * size,), float(sum(range(1, size + 1)))) \
            if what.startswith("staged") else \
            torch.cat([torch.full((4,), r + 1.0) for r in range(size)])
        assert torch.equal(got.cpu(), want), (what, got)


def sc_wait_nonblocking(rank, size, gloo):
    """work.wait() of a staged call does not block the host (stream mode,
    GCX_TORCH_WAIT unset): rank 0 calls all_reduce and wait() while the
    other ranks have not called it yet (they wait for rank 0's store key,
    set after its wait() returned), so the collective cannot be over: wait()
    returned with the current stream, not the host, waiting. Reading the
    tensor then (a copy queued on that stream) gives the sum once the others
    joined. With GCX_TORCH_WAIT=host, wait() blocks the host until the
    network part is over: it times out here (printed, and checked)."""
    import datetime
    store = dist.distributed_c10d._get_default_store()
    n = 3 * (CHUNK // 4) + 5
    want = float(sum(r + 1 for r in range(size)))
    host_mode = os.environ.get("GCX_TORCH_WAIT") == "host"
    assert torch_gcx._C.stream_waits(str(DEV)) != host_mode
    for i in range(1 if host_mode else 3):
        t = dev(torch.full((n,), float(rank + 1)))
        if rank == 0:
            work = dist.all_reduce(t, async_op=True)
            try:
                work.wait(timeout=datetime.timedelta(seconds=2))
            except RuntimeError as e:
                assert host_mode, e
                print(f"host wait timed out: {str(e).splitlines()[0]}",
                      flush=True)
                store.set(f"go{i}", "1")
                work.wait()
            else:
                assert not host_mode
                assert not work.is_completed(), "the others have not called it"
                print("wait returned before the collective", flush=True)
                store.set(f"go{i}", "1")
        else:
            store.wait([f"go{i}"])
            work = dist.all_reduce(t, async_op=True)
            work.wait()
        got = t.cpu()  # queued on the current stream, after wait()
        assert torch.all(got == want), (i, got[:4], want)
        assert work.is_completed() or not host_mode


def sc_mixed_devices(rank, size, gloo):
    """A device: a CPU/device mix, and two devices in one call, raise on
    every rank naming the devices; the group goes on."""
    assert MOD is not None, DEV
    cases = [
        lambda: dist.all_gather([torch.empty(4)] +
                                [torch.empty(4, device=DEV)] * (size - 1),
                                torch.ones(4, device=DEV)),
        lambda: dist.all_gather_into_tensor(torch.empty(4 * size),
                                            torch.ones(4, device=DEV)),
        lambda: dist.reduce_scatter_tensor(torch.empty(4, device=DEV),
                                           torch.ones(4 * size)),
        lambda: dist.all_to_all_single(torch.empty(4 * size),
                                       torch.ones(4 * size, device=DEV)),
        lambda: dist.all_reduce_coalesced([torch.ones(4),
                                           torch.ones(4, device=DEV)]),
    ]
    if MOD.device_count() > 1:
        cases.append(lambda: dist.all_gather_into_tensor(
            torch.empty(4 * size, device=torch.device(DEV.type, 1)),
            torch.ones(4, device=torch.device(DEV.type, 0))))
    for fn in cases:
        try:
            fn()
        except (RuntimeError, ValueError) as e:
            assert "more than one device" in str(e) or \
                "same device" in str(e), str(e)
            print("mixed device error:", str(e).splitlines()[0], flush=True)
        else:
            raise AssertionError("a mixed-device call did not raise")
    t = torch.full((5,), float(rank), device=DEV)
    dist.all_reduce(t)
    assert t[0].item() == sum(range(size)), t


def sc_ddp(rank, size, gloo):
    """DDP of a model on TEST_DEVICE over gcx: its gradients are the mean
    of the ranks' (checked against gloo's all_reduce of the local ones)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 300),
                                torch.nn.ReLU(),
                                torch.nn.Linear(300, 10)).to(DEV)
    ref = torch.nn.Sequential(torch.nn.Linear(64, 300), torch.nn.ReLU(),
                              torch.nn.Linear(300, 10))
    ref.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=0.05)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(16, 64, generator=g)
    ddp(x.to(DEV)).square().mean().backward()
    ref(x).square().mean().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        want = q.grad.clone()
        dist.all_reduce(want, group=gloo)
        want /= size
        got = p.grad.cpu()
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), name


SCENARIOS = {name[3:]: fn for name, fn in globals().items()
             if name.startswith("sc_")}


def main():
    scenario, rank, size, store = sys.argv[1], int(sys.argv[2]), \
        int(sys.argv[3]), sys.argv[4]
    if scenario == "peer_death":
        # the last rank dies after creation; the others' next staged
        # collective (many chunks in flight) must fail within the group's
        # timeout, not hang, and the process must exit cleanly
        init(rank, size, store, timeout=3, gloo=False)
        if rank == size - 1:
            os._exit(0)
        t = dev(torch.ones(20 * (CHUNK // 4)))
        work = dist.all_reduce(t, async_op=True)
        try:
            # host mode: wait() raises; stream mode (NCCL's semantics):
            # wait() may return before the failure is known, the Future
            # (and every later call on the group) raises
            work.wait()
            work.get_future().wait()
        except RuntimeError as e:
            msg = str(e)
            assert "GCX_ERR_PEER" in msg or "GCX_ERR_TIMEOUT" in msg, msg
            print("peer death error:", msg.splitlines()[0], flush=True)
        else:
            raise AssertionError("staged allreduce with a dead peer did "
                                 "not raise")
        try:
            dist.all_reduce(dev(torch.ones(4)))
            torch.distributed.barrier()
        except RuntimeError as e:
            print("next call error:", str(e).splitlines()[0], flush=True)
        else:
            raise AssertionError("a call after the failure did not raise")
        if MOD is not None:
            MOD.synchronize()  # no stream left waiting
            print("streams idle", flush=True)
        os._exit(0)
    if scenario == "badenv":
        init(rank, size, store, gloo=False)
        try:
            dist.all_reduce(torch.ones(4))
        except RuntimeError as e:
            print("stage env error:", str(e).splitlines()[0], flush=True)
            os._exit(3)
        os._exit(0)
    gloo = init(rank, size, store)
    SCENARIOS[scenario](rank, size, gloo)
    dist.barrier(group=gloo)
    dist.destroy_process_group()
    simdev_env.check(rank)
    print(f"rank {rank}: {scenario} ok", flush=True)


if __name__ == "__main__":
    main()
