"""One rank of a device-path compression test (torch_gcx.hooks with the
residual and the selection on the bucket's device):
python gpu_compress_worker.py SCENARIO RANK SIZE STOREFILE, with
TEST_DEVICE=cpu (the device path forced for CPU buckets,
device_path="always") or TEST_DEVICE=cuda.

References are independent of the code under test: numpy's argpartition
for top-k with error feedback, every rank's selection gathered over gloo
for the mean, the C++ host path (gcx's compressors) for GraVAC and DDP.
"""
import io
import math
import os
import sys

import numpy as np
import simdev_env  # noqa: I100  (the simulated device, before torch_gcx)
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_gcx.hooks as H
from hooks_worker import FakeBucket, mlp, same_params
from worker import run_scenario

DEV = torch.device(os.environ.get("TEST_DEVICE", "cpu"))
if DEV.type != "cpu" and DEV.index is None:
    # what tensors report (cuda:0, simdev:0): torch.device("cuda") is not
    # equal to torch.device("cuda", 0)
    DEV = torch.device(DEV.type, 0)


def np_topk_mask(e, k):
    """numpy reference: a 0/1 mask of the k largest |e| (no ties: random
    normal data)."""
    m = np.zeros(e.shape[0], dtype=bool)
    if k:
        m[np.argpartition(-np.abs(e), k - 1)[:k]] = True
    return m


def gather_sum(x, size, gloo):
    parts = [torch.empty_like(x) for _ in range(size)]
    dist.all_gather(parts, x, group=gloo)
    return torch.stack(parts).sum(0)


def check_bound(st, cf):
    # every compressed bucket: down <= 2/CF of the dense bucket, rounded
    # up to whole entries (8 ceil(n / CF)); up = 8 x the union it got
    for rec in st.copy_log:
        if rec["level"] == "warm":
            continue
        n = rec["n"]
        bound = 8 * math.ceil(n / cf)
        assert rec["d2h"] <= bound, (rec, bound)
        assert rec["d2h"] <= 2 / cf * 4 * n + 8, (rec, n, cf)


def sc_topk_exact(rank, size, gloo):
    # three steps of two buckets: the result is the mean of every rank's
    # top-k of its residual, the residual keeps what was not sent, and
    # only k entries go down, the union up
    ns, cf = [1000, 777], 10.0
    st = H.TopkState(cf=cf, start_iter=0, device_path="always",
                     select="topk")
    e_ref = [np.zeros(n, dtype=np.float32) for n in ns]
    params = [torch.zeros(n) for n in ns]  # a bucket's layout: its params
    g = torch.Generator().manual_seed(rank)
    for step in range(3):
        for i, n in enumerate(ns):
            k = math.ceil(n / cf)
            grad = torch.randn(n, generator=g)
            out = grad.clone().to(DEV)
            res = H.topk_hook(st, FakeBucket(out, index=i,
                                             last=i == len(ns) - 1,
                                             params=[params[i]])).wait()
            assert res.device == DEV and res.data_ptr() == out.data_ptr()
            e_ref[i] += grad.numpy()
            mask = np_topk_mask(e_ref[i], k)
            sent = np.where(mask, e_ref[i], 0).astype(np.float32)
            e_ref[i] = np.where(mask, 0, e_ref[i]).astype(np.float32)
            want = gather_sum(torch.from_numpy(sent), size, gloo) / size
            union = int(gather_sum(torch.from_numpy(mask).int(), size,
                                   gloo).ne(0).sum())
            torch.testing.assert_close(res.cpu(), want, rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(
                st._devb[i].res[:n].cpu(), torch.from_numpy(e_ref[i]),
                rtol=0, atol=1e-6)
            assert float(st._devb[i].res[n]) == 0.0
            rec = st.copy_log[-1]
            assert rec["d2h"] == 8 * k and rec["h2d"] == 8 * union, \
                (rec, k, union)
    check_bound(st, cf)
    assert st.copy_bytes["d2h"] == sum(r["d2h"] for r in st.copy_log)
    assert st.copy_bytes["h2d"] == sum(r["h2d"] for r in st.copy_log)
    tr = st.trace
    assert [t["level"] for t in tr] == ["topk"] * 3, tr
    kk = sum(math.ceil(n / cf) for n in ns)
    assert all(t["bytes"] == 8 * kk and t["dense_bytes"] == 4 * sum(ns)
               for t in tr), tr
    print("dev topk exact ok", flush=True)


def sc_threshold(rank, size, gloo):
    # DGC's sampled threshold: what is sent is at or above the threshold
    # of the sample (numpy), at most k entries, the residual keeps exactly
    # the rest, and the result is the mean of what the ranks sent
    n, cf = 20000, 50.0
    k = math.ceil(n / cf)
    st = H.TopkState(cf=cf, start_iter=0, device_path="always",
                     select="threshold", seed=3)
    g = torch.Generator().manual_seed(10 + rank)
    e = np.zeros(n, dtype=np.float32)
    param = torch.zeros(n)
    recall = []
    for step in range(4):
        grad = torch.randn(n, generator=g)
        e_before = e + grad.numpy()
        out = grad.clone().to(DEV)
        res = H.topk_hook(st, FakeBucket(out, params=[param])).wait().cpu()
        b = st._devb[0]
        after = b.res[:n].cpu().numpy()
        sent_mask = (after == 0) & (e_before != 0)
        sent = np.where(sent_mask, e_before, 0).astype(np.float32)
        np.testing.assert_array_equal(np.where(sent_mask, 0, e_before), after)
        samp = b.sample.cpu().numpy()
        ks = max(1, min(samp.size, math.ceil(k * samp.size / n)))
        thr = np.sort(np.abs(e_before[samp]))[::-1][ks - 1]
        assert sent_mask.sum() <= k, (sent_mask.sum(), k)
        assert np.all(np.abs(e_before[sent_mask]) >= thr)
        assert st.copy_log[-1]["sent"] == int(sent_mask.sum())
        want = gather_sum(torch.from_numpy(sent), size, gloo) / size
        torch.testing.assert_close(res, want, rtol=1e-6, atol=1e-6)
        best = np.abs(e_before[np_topk_mask(e_before, k)]).sum()
        recall.append(float(np.abs(sent).sum() / best))
        e = after.copy()
    check_bound(st, cf)
    assert all(r > 0.5 for r in recall), recall
    print(f"dev threshold ok (|sent| / |top-k|: "
          f"{', '.join(f'{r:.3f}' for r in recall)})", flush=True)


def gravac_pair(**kw):
    args = dict(window=2, epsilon=0.05, theta_min=2, theta_max=256,
                start_iter=0)
    args.update(kw)
    return (H.GravacState(**args),
            H.GravacState(device_path="always", select="topk", **args))


def sc_gravac_matches_host(rank, size, gloo):
    # the device path's GraVAC (levels, norms and decisions in torch) and
    # the C++ host path (gcx's compressors) on the same gradients: the same
    # levels and CFs step by step, the same averaged gradients
    host, dev = gravac_pair()
    ns = [3000, 1200]
    params = [torch.zeros(n) for n in ns]
    g = torch.Generator().manual_seed(50 + rank)
    for step in range(16):
        scale = 1.0 / (1 + step)  # shrinking gradients move the gains
        for i, n in enumerate(ns):
            grad = torch.randn(n, generator=g) * scale
            last = i == len(ns) - 1
            a = H.gravac_hook(host, FakeBucket(grad.clone(), i, last,
                                               [params[i]])).wait()
            d = H.gravac_hook(dev, FakeBucket(grad.clone().to(DEV), i, last,
                                              [params[i]])).wait()
            torch.testing.assert_close(d.cpu(), a, rtol=1e-5, atol=1e-6)
    th = [(t["cf"], t["level"], t["bytes"]) for t in host.trace]
    td = [(t["cf"], t["level"], t["bytes"]) for t in dev.trace]
    assert th == td, (th, td)
    assert len(set(t[0] for t in th)) > 1, th  # the CF moved
    for ref, got in zip(host.trace, dev.trace):
        for key in ("delta_min", "delta_c"):
            assert abs(ref[key] - got[key]) <= 1e-4 * max(1, abs(ref[key])), \
                (key, ref, got)
    for rec in dev.copy_log:  # + 24 bytes of norms per bucket
        if rec["level"] in ("min", "c"):
            assert rec["d2h"] == 8 * rec["k"] + 24, rec
            # <= 2/CF of the dense bucket at the level's CF (theta_min = 2
            # or more)
            assert rec["d2h"] <= 8 * math.ceil(rec["n"] / 2) + 24, rec
    print(f"dev gravac matches host ok: {td}", flush=True)


def train_alike(pairs, steps, seed):
    """`steps` SGD steps of every (DDP model, optimizer) pair on the same
    batches (16 x 20 -> 4, MSE), each model on its own device."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(16, 20, generator=g)
        y = torch.randn(16, 4, generator=g)
        for m, o in pairs:
            dev = next(m.parameters()).device
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x.to(dev)), y.to(dev)).backward()
            o.step()


def sc_ddp_matches_host(rank, size, gloo):
    # DDP (warm-up step, several buckets, their rebuild after step 0) with
    # the device path's top-k hook (a model on DEV; a CUDA model needs the
    # backend's CUDA tensors for DDP's own broadcasts) and with the host
    # path's (a CPU model): the same parameters
    def make(device, **kw):
        torch.manual_seed(0)
        m = DDP(mlp().to(device), bucket_cap_mb=0.001)
        st = H.TopkState(cf=4, start_iter=1, model=m, **kw)
        m.register_comm_hook(st, H.topk_hook)
        return m, st, torch.optim.SGD(m.parameters(), lr=0.1)

    a, sa, oa = make("cpu")
    b, sb, ob = make(DEV, device_path="always", select="topk")
    train_alike([(a, oa), (b, ob)], 6, seed=100 + rank)
    same_params(a, b, "device path vs host path", rtol=1e-5,
                atol=1e-6)
    assert [t["bytes"] for t in sa.trace] == [t["bytes"] for t in sb.trace]
    assert any(r["level"] == "warm" for r in sb.copy_log)
    check_bound(sb, 4)
    # checkpoints: residuals by parameter name, the same in both paths
    ra, rb = sa.state_dict()["residuals"], sb.state_dict()["residuals"]
    assert ra.keys() == rb.keys()
    for name in ra:
        torch.testing.assert_close(ra[name], rb[name], rtol=1e-5, atol=1e-6)
    print("dev ddp matches host ok", flush=True)


class Deep(torch.nn.Module):
    """Several buckets with compute between them, and a branch forward()
    never uses (no gradient: DDP's find_unused_parameters)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(20, 192), torch.nn.ReLU(),
            torch.nn.Linear(192, 192), torch.nn.ReLU(),
            torch.nn.Linear(192, 192), torch.nn.ReLU(),
            torch.nn.Linear(192, 4))
        self.unused = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.net(x)


def sc_ddp_unused_matches_host(rank, size, gloo):
    # find_unused_parameters=True: DDP's reducer all-reduces its
    # unused-parameter map on the autograd thread after the last bucket's
    # hook, while the device path issues each bucket's exchange from its
    # worker thread once the bucket's copy has landed. With copies slow on
    # one rank only (the simulated device's latency), that thread would
    # issue before the map on one rank and after it on the other
    # (GCX_ERR_MISMATCH, or a hang); the hook's place in gcx's line, taken
    # in bucket order on the autograd thread, keeps one order. Several
    # steps, the parameters equal to the host path's (a CPU model).
    if DEV.type == "simdev":
        import torch_simdev
        torch_simdev.set_latency_us(15000 if rank == 1 else 0)

    def make(device, gravac, **kw):
        m = DDP(Deep().to(device), bucket_cap_mb=0.1,
                find_unused_parameters=True)
        if gravac:
            st = H.GravacState(window=2, epsilon=0.05, theta_min=2,
                               theta_max=64, start_iter=1, model=m, **kw)
            m.register_comm_hook(st, H.gravac_hook)
        else:
            st = H.TopkState(cf=4, start_iter=1, model=m, **kw)
            m.register_comm_hook(st, H.topk_hook)
        return m, st, torch.optim.SGD(m.parameters(), lr=0.05)

    for gravac in (False, True):
        a, sa, oa = make("cpu", gravac)
        b, sb, ob = make(DEV, gravac, device_path="always", select="topk")
        train_alike([(a, oa), (b, ob)], 8, seed=300 + rank)
        same_params(a, b, f"unused params, gravac={gravac}: device "
                    f"path vs host path", rtol=1e-5, atol=1e-6)
        assert [t["bytes"] for t in sa.trace] == \
            [t["bytes"] for t in sb.trace]
        assert len(set(r["index"] for r in sb.copy_log)) >= 3, sb.copy_log
    print("dev ddp unused matches host ok", flush=True)


def sc_gravac_resume(rank, size, gloo):
    # the device path's GraVAC saved at step 6 and resumed in a fresh
    # state continues exactly like the uninterrupted run
    def make():
        torch.manual_seed(0)
        m = DDP(mlp().to(DEV), bucket_cap_mb=0.001)
        st = H.GravacState(window=2, epsilon=0.05, theta_min=2,
                           theta_max=256, model=m, device_path="always")
        m.register_comm_hook(st, H.gravac_hook)
        return m, st, torch.optim.SGD(m.parameters(), lr=0.1)

    def steps(m, o, lo, hi):
        for t in range(lo, hi):
            g = torch.Generator().manual_seed(1000 * rank + t)
            x = torch.randn(16, 20, generator=g).to(DEV)
            y = torch.randn(16, 4, generator=g).to(DEV)
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
    assert t1 == t3, (t1, t3)
    assert s1.select == ("threshold" if DEV.type == "cpu" else "topk")
    assert len(set(cf for cf, _ in t1)) > 1, t1
    print("dev gravac resume ok", flush=True)


def sc_errors(rank, size, gloo):
    msgs = []
    for make, bucket in (
            (lambda: H.TopkState(cf=4, start_iter=0, compressor="dgc",
                                 device_path="always"),
             FakeBucket(torch.ones(64, device=DEV))),
            (lambda: H.TopkState(cf=4, start_iter=0, device_path="always"),
             FakeBucket(torch.ones(64, dtype=torch.float64, device=DEV)))):
        try:
            H.topk_hook(make(), bucket).wait()
        except (ValueError, TypeError) as e:
            msgs.append(str(e))
        else:
            raise AssertionError("no error")
    for bad in ({"select": "nope"}, {"device_path": "never"}):
        try:
            H.TopkState(cf=4, **bad)
        except ValueError as e:
            msgs.append(str(e))
        else:
            raise AssertionError(f"{bad}: no error")
    assert "compressor='dgc'" in msgs[0] and "float32" in msgs[1], msgs
    print("dev errors ok:", msgs, flush=True)


def sc_coded(rank, size, gloo):
    # torch_gcx.coded with the model on DEV (device_path="always" on a
    # CPU): the partition gradients and the encoding on the device; every
    # round's gradient against coded_worker's serial reference (exact
    # codes), and top-k messages against their definition (FR groups send
    # equal messages and keep equal residuals, the gradient is the sum of
    # one message per group / n, k entries), with only k entries + the
    # loss staged down per round
    import torch.nn.functional as F
    import coded_worker as CW
    from torch_gcx import coded

    X, Y = CW.make_data(size)
    for code, comp in (("gc-fr", None), ("pgc-cr", None), ("pgc-fr", 8)):
        model = CW.make_model().to(DEV)
        cdp = coded.CodedDataParallel(
            model, code=code, s=1, catch_up=comp is None,
            compress=coded.topk(comp) if comp else None,
            device_path="always")
        assert cdp.on_device
        sampler = cdp.sampler(len(X), CW.B)
        ref = CW.Reference(cdp, sampler, X, Y)
        ref.history_dev = []
        opt = torch.optim.SGD(cdp.parameters(), lr=0.1)
        nf = sum(p.numel() for p in model.parameters())
        groups = CW.fr_groups(cdp) if comp else None
        for step in sampler:
            if step.round == 6:
                break
            if comp is None:
                want = ref.expected(step.round)
            d2h = cdp.copy_bytes["d2h"]
            loss = cdp.backward(step, lambda idx: F.cross_entropy(
                cdp(X[idx].to(DEV)), Y[idx].to(DEV)))
            got = CW.got_grad(cdp).cpu()
            assert loss is not None
            if comp is None:
                torch.testing.assert_close(got, want, rtol=1e-4, atol=2e-6)
            else:
                k = math.ceil(nf / comp)
                assert cdp.copy_bytes["d2h"] - d2h == 8 * k + 4, \
                    (cdp.copy_bytes, k)
                msgs = [torch.empty(nf + 1) for _ in range(size)]
                dist.all_gather(msgs, cdp.message().clone(), group=gloo)
                res = [torch.empty(nf) for _ in range(size)]
                dist.all_gather(res, cdp.residual(), group=gloo)
                total = torch.zeros(nf + 1)
                for g in groups:
                    for w in g[1:]:
                        assert torch.equal(res[w], res[g[0]])
                        assert torch.equal(msgs[w], msgs[g[0]])
                    total += msgs[g[0]]
                assert 0 < int((msgs[0][:nf] != 0).sum()) <= k
                torch.testing.assert_close(got, total[:nf] / cdp.n,
                                           rtol=1e-6, atol=1e-7)
            opt.step()
        CW.same_on_all(CW.flat_params(cdp.module).cpu(), gloo, "parameters")
        assert cdp.lost_rounds == 0, cdp.stats()
        print(f"coded {code} compress={comp}: {cdp.copy_bytes}", flush=True)
        cdp.close()
        dist.barrier(group=gloo)
    print("dev coded ok", flush=True)


SCENARIOS = {name[3:]: fn for name, fn in globals().items()
             if name.startswith("sc_")}

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    run_scenario(SCENARIOS, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                 sys.argv[4])
    simdev_env.check(int(sys.argv[2]))
