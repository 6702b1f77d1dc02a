"""One rank of a hook or DDP test: python hooks_worker.py SCENARIO RANK SIZE STOREFILE.

Like worker.py (whose run_scenario() it uses: the default group is gcx, a gloo group
beside it), for torch_gcx.hooks and DDP features: the top-k hook's exact
semantics against a reference computed from every rank's gradient, DDP
parity with gloo (find_unused_parameters, buffers, two groups), convergence
of both hooks, bit-identical resume from a checkpoint, and bad use.
"""
import io
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_gcx.hooks as H
from worker import run_scenario


class FakeBucket:
    """What a DDP hook reads of a GradBucket."""

    def __init__(self, buf, index=0, last=True, params=None):
        self._buf, self._index, self._last = buf, index, last
        self._params = params if params is not None else [buf]

    def buffer(self):
        return self._buf

    def index(self):
        return self._index

    def is_last(self):
        return self._last

    def parameters(self):
        return self._params


def topk_ref(e, k):
    sel = torch.zeros_like(e)
    idx = e.abs().topk(k).indices
    sel[idx] = e[idx]
    return sel


def sc_topk_exact(rank, size, gloo):
    # three steps of one bucket: the result is the mean of every rank's
    # top-k of its residual, and the residual keeps what was not sent
    n, cf = 1000, 10.0
    k = 100
    param = torch.zeros(n)
    st = H.TopkState(cf=cf, start_iter=0)
    e_ref = torch.zeros(n)
    g = torch.Generator().manual_seed(rank)
    for step in range(3):
        grad = torch.randn(n, generator=g)
        out = grad.clone()
        res = H.topk_hook(st, FakeBucket(out, params=[param])).wait()
        e_ref += grad
        sent = topk_ref(e_ref, k)
        e_ref -= sent
        all_sent = [torch.empty(n) for _ in range(size)]
        dist.all_gather(all_sent, sent, group=gloo)
        want = torch.stack(all_sent).sum(0) / size
        torch.testing.assert_close(res, want, rtol=1e-6, atol=1e-6)
        assert res.data_ptr() == out.data_ptr()  # in the bucket itself
        torch.testing.assert_close(st._impl.residual(0), e_ref, rtol=0,
                                   atol=1e-6)
    assert [t["level"] for t in st.trace] == ["topk"] * 3
    assert all(t["bytes"] == 8 * k and t["dense_bytes"] == 4 * n
               for t in st.trace), st.trace
    assert st.bytes_sent == 3 * 8 * k
    print("topk exact ok", flush=True)


class WithUnused(torch.nn.Module):
    """A branch that forward() never uses: its parameters get no gradient."""

    def __init__(self):
        super().__init__()
        self.net = mlp()
        self.unused = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.net(x)


def mlp(seed=0, extra=False):
    if extra:
        return WithUnused()
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4))


class WithBuffers(torch.nn.Module):
    """BatchNorm's running statistics are buffers DDP broadcasts."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(20, 16)
        self.bn = torch.nn.BatchNorm1d(16)
        self.out = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.out(torch.relu(self.bn(self.fc(x))))


def train(pairs, steps, rank, lr=0.1):
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(16, 20, generator=g)
        y = torch.randn(16, 4, generator=g)
        for m, o in pairs:
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            o.step()


def same_params(a, b, what, rtol=1e-5, atol=1e-6):
    # b's parameters are read on the CPU where they are (a model on a
    # device is not moved: module.cpu() of a custom device's model makes
    # new Parameters, which a hook state keyed by parameter loses)
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        try:
            torch.testing.assert_close(p.detach().cpu(), q.detach().cpu(),
                                       rtol=rtol, atol=atol)
        except AssertionError as e:
            raise AssertionError(f"{what}: parameter {name}: {e}") from None


def sc_ddp_features(rank, size, gloo):
    steps = 4
    # find_unused_parameters: a parameter without gradient
    a = DDP(mlp(extra=True), find_unused_parameters=True, bucket_cap_mb=0.001)
    b = DDP(mlp(extra=True), process_group=gloo, find_unused_parameters=True,
            bucket_cap_mb=0.001)
    # buffers: rank-local BatchNorm statistics, broadcast from rank 0
    c = DDP(WithBuffers())
    d = DDP(WithBuffers(), process_group=gloo)
    # two gcx groups: a second group over all ranks, one model on each
    second = dist.new_group(backend="gcx")
    e = DDP(mlp(), process_group=second)
    f = DDP(mlp(), process_group=gloo)
    pairs = [(m, torch.optim.SGD(m.parameters(), lr=0.1))
             for m in (a, b, c, d, e, f)]
    train(pairs, steps, rank)
    same_params(a, b, "find_unused_parameters")
    same_params(c, d, "buffers")
    for x, y in zip(c.buffers(), d.buffers()):
        torch.testing.assert_close(x.float(), y.float(), rtol=1e-5, atol=1e-6)
    same_params(e, f, "second group")
    assert a.module.unused.weight.grad is None
    print("ddp features ok", flush=True)


def sc_topk_cf1_parity(rank, size, gloo):
    # cf 1 sends every entry: the hook must give what dense DDP gives
    a = DDP(mlp(), bucket_cap_mb=0.001)
    a.register_comm_hook(H.TopkState(cf=1.0, model=a), H.topk_hook)
    b = DDP(mlp(), process_group=gloo, bucket_cap_mb=0.001)
    pairs = [(m, torch.optim.SGD(m.parameters(), lr=0.1)) for m in (a, b)]
    train(pairs, 5, rank)
    same_params(a, b, "topk cf=1 against gloo")
    print("topk cf1 parity ok", flush=True)


def regression(rank, size, steps, hook=None, state_fn=None, group=None):
    # y = x W* + noise, a linear model from zero, SGD; returns the losses
    torch.manual_seed(1)
    w_true = torch.randn(64, 8)
    model = DDP(torch.nn.Linear(64, 8, bias=False), process_group=group,
                bucket_cap_mb=0.001)
    with torch.no_grad():
        model.module.weight.zero_()
    state = None
    if hook is not None:
        state = state_fn(model)
        model.register_comm_hook(state, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    losses = []
    for _ in range(steps):
        x = torch.randn(32, 64, generator=g)
        y = x @ w_true + 0.01 * torch.randn(32, 8, generator=g)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, state


def sc_converge(rank, size, gloo):
    steps = 300
    dense, _ = regression(rank, size, steps, group=gloo)
    topk, st_t = regression(rank, size, steps, H.topk_hook,
                            lambda m: H.TopkState(cf=20, model=m))
    grav, st_g = regression(rank, size, steps, H.gravac_hook,
                            lambda m: H.GravacState(window=20, epsilon=0.5,
                                                    model=m))
    first = dense[0]
    tail = lambda ls: sum(ls[-20:]) / 20  # noqa: E731
    print(f"loss first {first:.3f} last20: dense {tail(dense):.4f} "
          f"topk {tail(topk):.4f} gravac {tail(grav):.4f}", flush=True)
    for name, ls in [("dense", dense), ("topk", topk), ("gravac", grav)]:
        assert tail(ls) < 0.02 * first, f"{name} did not converge: {tail(ls)}"
    cfs = [t["cf"] for t in st_g.trace]
    print("gravac cfs seen:", sorted(set(cfs)), "levels:",
          sorted(set(t["level"] for t in st_g.trace)), flush=True)
    assert len(set(cfs)) > 1, "the GraVAC controller never moved the CF"
    full = 4 * 64 * 8 * len(st_g.trace)
    assert st_t.bytes_sent < full / 5 and st_g.bytes_sent < full, \
        (st_t.bytes_sent, st_g.bytes_sent, full)
    print("converge ok", flush=True)


def sc_resume(rank, size, gloo):
    # a run saved at step 6 and resumed in a fresh DDP continues exactly
    # like the uninterrupted run: same parameters, same CF trace
    def make():
        torch.manual_seed(0)
        m = DDP(mlp(), bucket_cap_mb=0.001)
        st = H.GravacState(window=2, epsilon=0.05, theta_min=2,
                           theta_max=256, model=m)
        m.register_comm_hook(st, H.gravac_hook)
        return m, st, torch.optim.SGD(m.parameters(), lr=0.1)

    def steps(m, o, lo, hi):
        for t in range(lo, hi):
            g = torch.Generator().manual_seed(1000 * rank + t)
            x = torch.randn(16, 20, generator=g)
            y = torch.randn(16, 4, generator=g)
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            o.step()

    m1, s1, o1 = make()
    steps(m1, o1, 0, 14)

    m2, s2, o2 = make()
    steps(m2, o2, 0, 6)
    buf = io.BytesIO()
    torch.save({"model": m2.state_dict(), "opt": o2.state_dict(),
                "hook": s2.state_dict()}, buf)
    del m2, s2, o2
    buf.seek(0)
    ck = torch.load(buf, weights_only=False)
    m3, s3, o3 = make()
    m3.load_state_dict(ck["model"])
    o3.load_state_dict(ck["opt"])
    s3.load_state_dict(ck["hook"])
    steps(m3, o3, 6, 14)

    same_params(m1, m3, "resumed run", rtol=0, atol=0)
    t1 = [(t["cf"], t["level"]) for t in s1.trace][-len(s3.trace):]
    t3 = [(t["cf"], t["level"]) for t in s3.trace]
    assert t1 == t3, (t1, t3, [(t["cf"], t["level"]) for t in s1.trace])
    assert len(set(cf for cf, _ in t1)) > 1, t1
    print("resume ok:", t3, flush=True)


def sc_nested_wait(rank, size, gloo):
    # a Future callback that issues a collective and waits for it, two
    # levels deep (torch's PowerSGD hook does one): must not deadlock
    def inner(f):
        u = torch.full((4,), float(rank))
        dist.all_reduce(u)  # synchronous, inside a callback
        w = dist.all_reduce(torch.ones(3), async_op=True).get_future()
        return f.value()[0] + u.sum() + w.then(
            lambda g: g.value()[0].sum() + sum(
                [dist.all_reduce(torch.ones(1)) or 0])).wait()

    fut = dist.all_reduce(torch.ones(2), async_op=True).get_future()
    got = fut.then(inner).wait()
    want = size + 4 * sum(range(size)) + 3 * size
    assert torch.equal(got, torch.full((2,), float(want))), got
    print("nested wait ok", flush=True)


def sc_powersgd_parity(rank, size, gloo):
    # torch's own PowerSGD hook on gcx gives what it gives on gloo
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as P
    models = []
    for group in (None, gloo):
        m = DDP(mlp(), process_group=group, bucket_cap_mb=64)
        st = P.PowerSGDState(process_group=group, matrix_approximation_rank=1,
                             start_powerSGD_iter=2, random_seed=0)
        m.register_comm_hook(st, P.powerSGD_hook)
        models.append((m, torch.optim.SGD(m.parameters(), lr=0.1)))
    train(models, 6, rank)
    same_params(models[0][0], models[1][0], "PowerSGD gcx against gloo")
    print("powersgd parity ok", flush=True)


def sc_hook_errors(rank, size, gloo):
    m = DDP(mlp(), process_group=gloo)
    m.register_comm_hook(H.TopkState(process_group=gloo, start_iter=0),
                         H.topk_hook)
    try:
        m(torch.randn(4, 20)).sum().backward()
    except RuntimeError as e:
        assert "gloo, not gcx" in str(e), str(e)
        print("hook on gloo error:", str(e).splitlines()[0], flush=True)
    else:
        raise AssertionError("a gcx hook on a gloo group did not raise")
    dist.barrier(group=gloo)
    m = DDP(mlp().double())
    m.register_comm_hook(H.TopkState(start_iter=0), H.topk_hook)
    try:
        m(torch.randn(4, 20, dtype=torch.float64)).sum().backward()
    except RuntimeError as e:
        assert "float32" in str(e) and "Double" in str(e), str(e)
        print("hook dtype error:", str(e).splitlines()[0], flush=True)
    else:
        raise AssertionError("a float64 bucket did not raise")
    for bad in [dict(cf=0.5), dict(compressor="best")]:
        try:
            H.TopkState(**bad)
        except (RuntimeError, ValueError) as e:
            print("bad state error:", str(e).splitlines()[0], flush=True)
        else:
            raise AssertionError(f"TopkState({bad}) did not raise")
    try:
        H.GravacState(epsilon=2.0)
    except RuntimeError as e:
        assert "epsilon" in str(e), str(e)
    else:
        raise AssertionError("GravacState(epsilon=2) did not raise")
    try:
        H.TopkState().state_dict()
    except ValueError as e:
        assert "model=" in str(e), str(e)
    else:
        raise AssertionError("state_dict() without a model did not raise")
    dist.barrier(group=gloo)
    print("hook errors ok", flush=True)


SCENARIOS = {name[3:]: fn for name, fn in globals().items()
             if name.startswith("sc_")}


if __name__ == "__main__":
    run_scenario(SCENARIOS, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                 sys.argv[4])
