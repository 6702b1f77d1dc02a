"""Compressed DDP communication hooks on gcx (process groups of backend "gcx").

    import torch_gcx
    from torch_gcx import hooks
    model = DDP(model)
    state = hooks.TopkState(cf=100)                 # static compression factor
    model.register_comm_hook(state, hooks.topk_hook)
    # or: the GraVAC controller picks the factor from the gradient it keeps
    state = hooks.GravacState(batch_size=64, epsilon=0.7)
    model.register_comm_hook(state, hooks.gravac_hook)

Each bucket is one composite job on the gcx engine: the gradient is added to
the bucket's error-feedback residual and compressed on the calling thread
(GIL released), then its sparse allreduce (for GraVAC also a 4-double
allreduce of its norms) runs on the engine, and the future returned to DDP
holds the averaged gradient. What is not sent stays in the residual and is
sent in later steps. The first `start_iter` steps are plain dense allreduces.
Residuals follow the parameters when DDP rebuilds its buckets.

GraVAC over buckets: the controller judges the whole model. The squared
norms of a step's buckets are summed (over ranks and buckets) and decide
the level of the NEXT step, so buckets never wait for each other; every rank
takes the same decision. See README.md, "DDP hooks".

Both states expose `trace` (one dict per compressed step: cf, level, bytes,
dense_bytes, and for GraVAC the gains, thetas and window events),
`bytes_sent`, and `state_dict()` / `load_state_dict()` for checkpoints
(residuals, controller, step counters).

Buckets on a GPU (any non-CPU device; `device_path="always"` takes the same
path for CPU buckets, which is how the CPU tests run it): the compression
stays where the gradient is. The bucket's residual lives on its device
(n + 1 floats: slot n is a padding slot, always 0); accumulation, the
selection (`select="topk"`: torch.topk of |e|; "threshold": DGC's sampled
threshold, |e| >= the top of a fixed 1% sample, at most k of the candidates
kept; "auto": the pick rule below), GraVAC's norms and both of its levels
are computed there, and only the k chosen int32 indices + float32 values
(and GraVAC's 3 norms, 24 bytes) are copied into pinned host buffers,
asynchronously; a
worker thread of the state waits for that copy (a device event, not the
stream), runs gcx's sparse allreduce on them and copies only the averaged
union back, where it is scattered into the bucket on the caller's stream.
Bytes across PCIe per compressed bucket: 8 k <= 2/CF of the dense bucket
(rounded up to whole entries) down, 8 x (union size) up; `copy_bytes` and
`copy_log` count them; with `profile = True`, `time_split()` splits the
hook's time into compression, copies and network. The worker issues in
the hook's order, so every rank issues in DDP's bucket order. Dense warm-up
steps of device buckets are staged whole through the same worker. Of the
host path's compressors the device path has only compressor="topk" (others
raise).

The pick rule (select="auto"): "topk" on a GPU, "threshold" for CPU
buckets on the device path. The sampled threshold trades exactness for
speed: it sends up to k of the entries at or above a threshold estimated
from 1% of them, so it may send fewer than k (a sample that overestimates
the tail) or miss large entries beyond its 2k candidates. On this
project's 2-core CPU box (perf/gpu/bench_select.py, 7 reps, loaded box)
torch.topk took 36 / 201 / 965 ms at 1M / 4M / 16M floats and CF 100, the
threshold 6.7 / 44 / 198 ms (4.8-5.4x faster) with a recall (|mass| sent
over the exact top-k's) of 0.95-1.0 (0.85-1.0 at CF 1000). On CUDA
torch.topk is not a full sort (25M floats in 0.6 ms on an H200, issue 32,
about 2% of a ResNet-101 step), so exactness wins there until
perf/gpu/run.sh (which runs bench_select.py on the GPU) shows the
threshold ahead by more than its recall loss.
"""
import math
import queue
import threading
import time

import torch
import torch.distributed as dist

from . import _C

__all__ = ["TopkState", "topk_hook", "GravacState", "gravac_hook",
           "k_of", "select_topk", "select_threshold"]

SELECTS = ("auto", "topk", "threshold")


def k_of(n, cf):
    """gcx_compress_k(): the smallest k with k * cf >= n, at most n (0 for
    cf = inf)."""
    if not cf >= 1.0:
        raise ValueError(f"cf must be >= 1, got {cf}")
    if math.isinf(cf) or n == 0:
        return 0
    k = math.ceil(n / cf)
    while k > 0 and (k - 1) * cf >= n:
        k -= 1
    while k * cf < n:
        k += 1
    return min(k, n)


def select_topk(mag, n, k):
    """The k largest of mag[:n] (|e|, on any device): their indices, int64,
    increasing. No host synchronisation."""
    if k == 0:
        return torch.empty(0, dtype=torch.int64, device=mag.device)
    idx = torch.topk(mag[:n], k, sorted=False).indices
    return idx.sort().values


def _sample_of(n, device, seed):
    # DGC's sample: 1% of the entries (at least 256, at most n), fixed per
    # bucket, the same on every rank
    m = min(n, max(256, math.ceil(n / 100)))
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, (m,), generator=g).to(device)


def select_threshold(mag, n, k, sample):
    """DGC's sampled threshold (Lin et al.): the threshold is the top
    k m / n of |e| at the m sampled positions; of the entries at or above
    it, the first 2k in index order are candidates and the k largest of
    them are kept. Returns k int64 indices, increasing; fewer than k
    entries pass when the sample overestimates the threshold, and the
    rest are padding (index n, sorted last). mag has n + 1 entries, mag[n]
    < 0. No host synchronisation (nonzero_static)."""
    if k == 0:
        return torch.empty(0, dtype=torch.int64, device=mag.device)
    m = sample.numel()
    ks = max(1, min(m, math.ceil(k * m / n)))
    thr = torch.topk(mag[sample], ks, sorted=False).values.min()
    cap = min(n, 2 * k)
    cand = _first_true(mag[:n] >= thr, cap, n)
    if cap > k:
        cand = cand[torch.topk(mag[cand], k, sorted=False).indices]
    return cand.sort().values


def _first_true(mask, cap, fill):
    """The indices of the first `cap` True entries of mask, padded with
    `fill`, without a host synchronisation: torch.nonzero_static where the
    device has it, else a prefix sum and a scatter."""
    try:
        return torch.nonzero_static(mask, size=cap,
                                    fill_value=fill).squeeze(1)
    except (NotImplementedError, RuntimeError):
        pass
    pos = torch.cumsum(mask, 0) - 1
    keep = mask & (pos < cap)
    out = torch.full((cap + 1,), fill, dtype=torch.int64, device=mask.device)
    dst = torch.where(keep, pos, torch.full_like(pos, cap))
    out.scatter_(0, dst, torch.arange(mask.numel(), device=mask.device))
    return out[:cap]


def _sqnorm(x):
    return torch.dot(x, x) if x.numel() else x.new_zeros(())


class _Dev:
    """Device-generic pieces: streams and events of a non-CPU device (one
    module of torch: torch.cuda, ...), nothing for the CPU."""

    def __init__(self, device):
        self.device = device
        self.cpu = device.type == "cpu"
        self.mod = None if self.cpu else torch.get_device_module(device)

    def host(self, numel, dtype):
        return torch.empty(numel, dtype=dtype, pin_memory=not self.cpu)

    def stream(self):
        return None if self.cpu else self.mod.current_stream(self.device)

    def event(self, timing=False):
        if self.cpu:
            return None
        ev = self.mod.Event(enable_timing=timing)
        ev.record(self.mod.current_stream(self.device))
        return ev

    def on(self, stream):
        class _Null:
            def __enter__(self):
                return None

            def __exit__(self, *exc):
                return False
        return _Null() if stream is None else self.mod.stream(stream)

    def future(self):
        if self.cpu:
            return torch.futures.Future()
        return torch.futures.Future(devices=[self.device])


class _Issuer:
    """The state's worker thread: waits for each bucket's staging copy and
    issues its exchange, in submission (= DDP bucket) order. The exchange
    goes into a place in gcx's line taken on DDP's thread when the hook ran
    (_C.hooks_reserve), so a collective DDP calls meanwhile on the same
    group (its unused-parameter allreduce with find_unused_parameters=True)
    is issued after it on every rank, whatever the timing. The thread sets
    its device first (a device call from a thread without one works on
    device 0: with CUDA >= 12 a context there from every rank)."""

    def __init__(self):
        self._q = queue.SimpleQueue()
        self._t = None

    def submit(self, fn, dev):
        if self._t is None:
            self._t = threading.Thread(target=self._loop, args=(dev,),
                                       daemon=True, name="torch_gcx.hooks")
            self._t.start()
        self._q.put(fn)

    def _loop(self, dev):
        if not dev.cpu:
            dev.mod.set_device(dev.device)
        while True:
            fn = self._q.get()
            fn()


class _DevBucket:
    """A bucket's device-path state: its residual on the device and the
    pinned host buffers of its exchanges (reused every step)."""

    def __init__(self, dev, n, kcap, nranks, seed, residual=True):
        self.n, self.kcap = n, kcap
        self.res = torch.zeros(n + 1, device=dev.device) if residual else None
        self.sample = None
        self.seed = seed
        cap = min(n, nranks * kcap)
        self.h_idx = dev.host(kcap, torch.int32)
        self.h_vals = dev.host(kcap, torch.float32)
        self.o_idx = dev.host(cap, torch.int32)
        self.o_vals = dev.host(cap, torch.float32)
        self.o_nnz = dev.host(1, torch.int64)
        self.h_norms = dev.host(4, torch.float64)
        self.h_dense = None
        self.norms = None       # (hook step, 4 summed norms) of its last step


class _CompressedState:
    """What both hook states share: the group, warm-up, residual layout,
    trace and checkpoints.

    Residuals follow the parameters: each bucket's residual is laid out
    like its parameters, and when DDP rebuilds its buckets (after iteration
    0) or a checkpoint is restored, every parameter's share of a residual
    moves with the parameter to its new bucket. Checkpoints therefore key
    residuals by parameter name, which needs `model` (the DDP model or the
    module it wraps).
    """

    _kind = None

    def __init__(self, process_group, start_iter, model, impl,
                 device_path="auto", select="auto", compressor="topk",
                 seed=0, algo=None, min_cf=1.0):
        if start_iter < 0:
            raise ValueError(f"start_iter must be >= 0, got {start_iter}")
        if device_path not in ("auto", "always"):
            raise ValueError(f"device_path must be 'auto' or 'always', got "
                             f"{device_path!r}")
        if select not in SELECTS:
            raise ValueError(f"select must be one of {SELECTS}, got "
                             f"{select!r}")
        self.device_path = device_path
        self.select = select    # "auto" is resolved at the first bucket
        self._compressor = compressor
        self._seed = int(seed)
        self._algo = algo or ""
        self._min_cf = float(min_cf)
        self._on_device = None  # decided at the first compressed bucket
        self._dev = None        # _Dev of the buckets' device
        self._devb = {}         # bucket index -> _DevBucket
        self._warm = {}         # bucket index -> _DevBucket of warm-up steps
        self._issuer = _Issuer()
        self.copy_bytes = {"d2h": 0, "h2d": 0}
        self.copy_log = []      # one dict per compressed device-path bucket
        self.profile = False    # True: time_split() splits the hook's time
        self._times = []        # (kind, start, end) events or seconds
        self.process_group = process_group
        self.start_iter = int(start_iter)
        self.iter = 0  # steps seen (dense warm-up included)
        self.model = model
        self._impl = impl
        self._layouts = {}   # bucket index -> [(id(param), numel), ...]
        self._used = {}      # bucket index -> self.iter of its last use
        self._loose = {}     # id(param) -> its residual, not in a bucket

    # -- what the hooks use ---------------------------------------------
    def _group(self):
        return self.process_group or dist.distributed_c10d._get_default_group()

    def _backend(self):
        return self._group()._get_backend(torch.device("cpu"))

    def _dense(self, tensor):
        group = self._group()
        size = group.size()
        fut = dist.all_reduce(tensor, group=group, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0].div_(size))

    # residuals: the C++ half's (host path) or _DevBucket's (device path)
    def _residual(self, index):
        if self._on_device:
            return self._devb[index].res[:-1].clone()
        return self._impl.residual(index)

    def _drop(self, index):
        if self._on_device:
            b = self._devb.pop(index, None)
            if b is not None:
                self._carry(b)
        else:
            self._impl.drop(index)

    def _carry(self, b):
        pass

    def _zeros(self, n):
        return torch.zeros(n, device=self._dev.device if self._on_device
                           else "cpu")

    def _set_residual(self, index, value, n):
        if self._on_device:
            b = self._new_devb(index, n)
            b.res[:-1].copy_(value)
        else:
            self._impl.set_residual(index, value.cpu())

    def _dissolve(self, index):
        # the bucket's residual goes back to its parameters
        layout = self._layouts.pop(index)
        res = self._residual(index)
        self._drop(index)
        for (pid, n), part in zip(layout, res.split([n for _, n in layout])):
            self._loose[pid] = part.clone()

    def _lay_out(self, bucket):
        index = bucket.index()
        layout = [(id(p), p.numel()) for p in bucket.parameters()]
        if self._layouts.get(index) == layout:
            return
        if index in self._layouts:
            # DDP rebuilt its buckets: dissolve every bucket not in flight
            for i in [i for i, it in self._used.items()
                      if it != self.iter and i in self._layouts]:
                self._dissolve(i)
        if any(pid in self._loose for pid, _ in layout):
            parts = [self._loose.pop(pid, None) for pid, _ in layout]
            self._set_residual(index, torch.cat([
                self._zeros(n) if part is None else part.to(self._zeros(0))
                for part, (_, n) in zip(parts, layout)]),
                sum(n for _, n in layout))
        self._layouts[index] = layout

    def _decide(self, bucket):
        if self._on_device is None:
            t = bucket.buffer()
            self._on_device = (t.device.type != "cpu" or
                               self.device_path == "always")
            if self._on_device:
                self._dev = _Dev(t.device)
                if self.select == "auto":  # the pick rule (module doc)
                    self.select = "threshold" if self._dev.cpu else "topk"
                if self._compressor != "topk":
                    raise ValueError(
                        f"torch_gcx.hooks: the device path selects with "
                        f"torch (select='topk' or 'threshold'); "
                        f"compressor={self._compressor!r} is for CPU "
                        f"buckets")
                # loose residuals (a restored checkpoint) go to the device
                self._loose = {pid: r.to(t.device)
                               for pid, r in self._loose.items()}

    def _compressed(self, bucket):
        self._decide(bucket)
        self._lay_out(bucket)
        self._used[bucket.index()] = self.iter
        if self._on_device:
            return self._device_run(bucket)
        work = self._impl.run(self._backend(), bucket.buffer(), bucket.index(),
                              bucket.is_last())
        return work.get_future().then(lambda f: f.value()[0])

    # -- the device path --------------------------------------------------
    def _new_devb(self, index, n):
        b = _DevBucket(self._dev, n, k_of(n, self._min_cf),
                       self._group().size(), self._seed + index)
        self._devb[index] = b
        return b

    def _check_bucket(self, t):
        name = "topk_hook" if self._kind == "topk" else "gravac_hook"
        if t.dtype != torch.float32:
            raise TypeError(f"torch_gcx.hooks.{name} compresses float32 "
                            f"gradients; the bucket holds {t.dtype}")
        if t.device != self._dev.device:
            raise ValueError(f"torch_gcx.hooks.{name}: a bucket on "
                             f"{t.device}, the state's buckets are on "
                             f"{self._dev.device}")
        if t.numel() >= 1 << 32:
            raise ValueError(f"torch_gcx.hooks.{name}: a bucket of "
                             f"{t.numel()} entries is beyond 2^32 (lower "
                             f"bucket_cap_mb)")

    def _select(self, b, mag, n, k):
        if self.select == "threshold":
            if b.sample is None:
                b.sample = _sample_of(n, mag.device, b.seed)
            return select_threshold(mag, n, k, b.sample)
        return select_topk(mag, n, k)

    def _mark(self, kind, t0):
        # profile: one interval of `kind` ("compress", "d2h", "h2d",
        # "network"); device intervals by events, host ones by the clock
        if self.profile:
            self._times.append((kind, t0, self._now()))

    def _now(self):
        if self._dev is None or self._dev.cpu:
            return time.perf_counter()
        return self._dev.event(timing=True)

    def time_split(self, reset=True):
        """profile=True: seconds spent since the last call in "compress"
        (accumulate, select, gather, norms: device time), "d2h" and "h2d"
        (the staging copies: device time) and "network" (the exchange on
        the host, issue to completion). Synchronises the device."""
        if self._dev is not None and not self._dev.cpu:
            self._dev.mod.synchronize(self._dev.device)
        out = {"compress": 0.0, "d2h": 0.0, "h2d": 0.0, "network": 0.0}
        for kind, a, b in self._times:
            out[kind] += (b - a) if isinstance(a, float) else \
                a.elapsed_time(b) / 1000.0
        if reset:
            self._times = []
        return out

    def _plan(self, b, last):
        """(level, k) of this bucket: "topk"/"min"/"c"/"dense" and the
        entries to send; GraVAC also the second level's k. Subclasses."""
        raise NotImplementedError

    def _device_run(self, bucket, warm=False):
        # warm: a dense warm-up step (the bucket's mean, staged whole; no
        # residual, no trace)
        t = bucket.buffer()
        self._check_bucket(t)
        index, last = bucket.index(), bucket.is_last()
        n = t.numel()
        if warm:
            b = self._warm.get(index)
            if b is None or b.n != n:
                b = self._warm[index] = _DevBucket(self._dev, n, 0, 1, 0,
                                                   residual=False)
        else:
            b = self._devb.get(index)
            if b is not None and b.n != n:
                raise ValueError(
                    f"torch_gcx.hooks: bucket {index} has {n} gradient "
                    f"entries but its residual has {b.n} (its parameters "
                    f"changed without a re-layout)")
            if b is None:
                b = self._new_devb(index, n)
        dev = self._dev
        t0 = self._now() if self.profile else None
        res = b.res
        if warm:
            plan = {"level": "dense"}
        else:
            res[:n].add_(t.reshape(-1))
            plan = self._plan(b, last)
        level, norms = plan["level"], None
        idx = vals = None
        if "k1" in plan:
            # GraVAC: both levels and their norms every step (the
            # controller's gains), whichever level is sent
            mag = res.abs()
            mag[n] = -1.0
            idx1 = self._select(b, mag, n, plan["k1"])
            v1 = res[idx1]
            if plan["k2"] is not None:
                m1 = v1.abs().masked_fill(idx1 == n, -1.0)
                top = torch.topk(m1, plan["k2"], sorted=False).indices
                idx2 = idx1[top].sort().values
                v2 = res[idx2]
            else:
                idx2, v2 = idx1, v1
            norms = torch.stack([_sqnorm(res[:n]), _sqnorm(v1),
                                 _sqnorm(v2)]).double()
            if level == "min":
                idx, vals = idx1, v1
            elif level == "c":
                idx, vals = idx2, v2
        elif level != "dense":
            mag = res.abs()
            mag[n] = -1.0
            idx = self._select(b, mag, n, plan["k"])
            vals = res[idx]
        if level == "dense":
            vals = t.reshape(-1) if warm else res[:n].clone()
        # commit what is sent (undone if the exchange fails)
        if warm:
            pass
        elif idx is None:
            res.zero_()
        else:
            res.index_fill_(0, idx, 0.0)
            res[n] = 0.0
        if self.profile:
            self._mark("compress", t0)
        t1 = self._now() if self.profile else None
        # stage: only the selection (and the norms) cross to the host
        if idx is None:
            if b.h_dense is None:
                b.h_dense = dev.host(n, torch.float32)
            b.h_dense.copy_(vals, non_blocking=True)
            d2h = 4 * n
        else:
            k = idx.numel()
            b.h_idx[:k].copy_(idx.to(torch.int32), non_blocking=True)
            b.h_vals[:k].copy_(vals, non_blocking=True)
            d2h = 8 * k
        if norms is not None:
            b.h_norms[:3].copy_(norms, non_blocking=True)
            d2h += 24
        if self.profile:
            self._mark("d2h", t1)
        ready = dev.event()
        stream = dev.stream()
        fut = dev.future()
        step = self.iter
        self.copy_bytes["d2h"] += d2h
        rec = {"step": step, "index": index, "n": n,
               "level": "warm" if warm else level,
               "k": 0 if idx is None else idx.numel(), "d2h": d2h, "h2d": 0,
               "sent": 0}
        self.copy_log.append(rec)
        pg = self._backend()

        def undo():
            with dev.on(stream):
                if warm:
                    pass
                elif idx is None:
                    res[:n].add_(vals)
                else:
                    res.index_put_((idx,), vals, accumulate=True)
                    res[n] = 0.0

        def finish(f):
            try:
                f.value()
                t3 = self._now() if self.profile else None
                with dev.on(stream):
                    if idx is None:
                        t.view(-1).copy_(b.h_dense, non_blocking=True)
                        h2d = 4 * n
                    else:
                        u = int(b.o_nnz[0])
                        ui = b.o_idx[:u].to(dev.device, non_blocking=True)
                        uv = b.o_vals[:u].to(dev.device, non_blocking=True)
                        t.zero_()
                        t.view(-1).index_put_((ui.long(),), uv)
                        h2d = 8 * u
                    if self.profile:
                        self._mark("h2d", t3)
                    rec["h2d"] = h2d
                    self.copy_bytes["h2d"] += h2d
                    if norms is not None:
                        self._norms_done(index, step, b)
                    fut.set_result(t)
            except BaseException as e:  # noqa: B902  (handed to the future)
                undo()
                fut.set_exception(e)

        def issue():
            try:
                if ready is not None:
                    ready.synchronize()
                if idx is None:
                    nnz = n
                    bad = not bool(torch.isfinite(b.h_dense).all())
                else:
                    k = idx.numel()
                    hi = b.h_idx[:k]
                    # padding (index n) sorts last: the sent entries
                    nnz = int(torch.searchsorted(hi, n)) if k else 0
                    bad = not bool(torch.isfinite(b.h_vals[:nnz]).all())
                if bad:
                    raise RuntimeError(
                        f"torch_gcx.hooks: the gradient of bucket {index} "
                        f"holds NaN or Inf (or its sum with the residual "
                        f"overflows); nothing was sent")
                rec["sent"] = nnz
                if plan.get("sps") is not None:
                    b.h_norms[3] = plan["sps"]
                if not warm:
                    self._impl.device_account(8 * nnz if idx is not None
                                              else 4 * n, n, last)
                t2 = time.perf_counter()
                work = _C.hooks_exchange(
                    pg, None if idx is None else b.h_idx,
                    b.h_dense if idx is None else b.h_vals, nnz, n,
                    None if idx is None else b.o_idx,
                    None if idx is None else b.o_vals,
                    None if idx is None else b.o_nnz,
                    b.h_norms if norms is not None else None, self._algo,
                    place)

                def done(f):
                    if self.profile:
                        self._times.append(("network", t2,
                                            time.perf_counter()))
                    finish(f)
                work.get_future().add_done_callback(done)
            except BaseException as e:  # noqa: B902
                place.cancel()  # the line goes on (no-op once used)
                undo()
                fut.set_exception(e)

        # this bucket's place in gcx's line, in DDP's order (see _Issuer)
        place = _C.hooks_reserve(pg)
        self._issuer.submit(issue, dev)
        return fut

    def _norms_done(self, index, step, b):
        pass

    def _hook(self, bucket):
        if self.iter < self.start_iter:
            self._decide(bucket)
            if self._on_device:
                fut = self._device_run(bucket, warm=True)
            else:
                fut = self._dense(bucket.buffer())
        else:
            fut = self._compressed(bucket)
        if bucket.is_last():
            self.iter += 1
        return fut

    # -- what users read --------------------------------------------------
    @property
    def trace(self):
        """One dict per compressed step (see the module docstring)."""
        return self._impl.trace()

    @property
    def bytes_sent(self):
        """Payload bytes this rank contributed in compressed steps:
        8 per sent entry (uint32 index + float32 value), 4 per float of a
        dense send."""
        return self._impl.bytes_sent()

    def _names(self):
        if self.model is None:
            raise ValueError(
                f"torch_gcx.hooks.{type(self).__name__}: pass model=<the DDP "
                f"model> to the state to save or restore it (residuals are "
                f"kept by parameter name)")
        return {id(p): name for name, p in self.model.named_parameters()}

    def state_dict(self):
        """Residuals (per parameter name), step counters and, for GraVAC,
        the controller. Take it between steps, as the model's."""
        names = self._names()
        residuals = {names[pid]: r.cpu().clone()
                     for pid, r in self._loose.items()}
        for index, layout in self._layouts.items():
            res = self._residual(index).cpu()
            for (pid, n), part in zip(layout, res.split([n for _, n in layout])):
                residuals[names[pid]] = part.clone()
        return {"kind": self._kind, "version": 1, "iter": self.iter,
                "residuals": residuals, "extra": self._save_extra()}

    def load_state_dict(self, state):
        if state.get("kind") != self._kind or state.get("version") != 1:
            raise ValueError(
                f"torch_gcx.hooks: a checkpoint of kind {state.get('kind')!r} "
                f"version {state.get('version')!r} cannot be loaded into a "
                f"{type(self).__name__} (kind {self._kind!r}, version 1)")
        self._names()  # raises without a model
        params = dict(self.model.named_parameters())
        unknown = sorted(set(state["residuals"]) - set(params))
        if unknown:
            raise ValueError(f"torch_gcx.hooks: the checkpoint has residuals "
                             f"of parameters the model does not have: "
                             f"{unknown[:5]}")
        for name, r in state["residuals"].items():
            if r.numel() != params[name].numel():
                raise ValueError(
                    f"torch_gcx.hooks: the residual of {name} has {r.numel()} "
                    f"entries, the parameter {params[name].numel()}")
        for index in list(self._layouts):
            self._drop(index)
        self._load_extra(state["extra"])
        self._layouts, self._used = {}, {}
        where = self._dev.device if self._on_device else "cpu"
        self._loose = {id(params[name]):
                       r.detach().float().reshape(-1).to(where).clone()
                       for name, r in state["residuals"].items()}
        self.iter = int(state["iter"])

    def _save_extra(self):
        return None

    def _load_extra(self, extra):
        pass


class TopkState(_CompressedState):
    """State of `topk_hook`: a static compression factor.

    Args:
        process_group: a group of backend "gcx" (None: the default group).
        cf: compression factor N / k (>= 1); each bucket sends ceil(N / cf)
            entries of its residual.
        compressor: "topk" (exact), "dgc", "redsync", "randomk" or "none".
        start_iter: dense allreduce steps before compression starts.
        seed: seed of randomk / dgc sampling (the same on every rank).
        algo: sparse allreduce algorithm ("auto", "allgather",
            "recursive_doubling", "split", "balanced_split"); None: the
            communicator's GCX_SPARSE_ALGO.
        model: the DDP model (or its module); needed by state_dict() and
            load_state_dict(), which key residuals by parameter name.
        device_path: "auto": buckets on a GPU are compressed there (see the
            module docstring), CPU buckets by the C++ half; "always": CPU
            buckets too take the device path (tests, measurements).
        select: the device path's selection: "topk" (torch.topk),
            "threshold" (DGC's sampled threshold) or "auto" (the pick rule
            of the module docstring: topk on a GPU, threshold on a CPU).
    """

    _kind = "topk"

    def __init__(self, process_group=None, cf=100.0, compressor="topk",
                 start_iter=1, seed=0, algo=None, model=None,
                 device_path="auto", select="auto"):
        self.cf = float(cf)
        super().__init__(process_group, start_iter, model,
                         _C.TopkHook(self.cf, compressor, int(seed), algo or ""),
                         device_path, select, compressor, seed, algo, self.cf)

    def _plan(self, b, last):
        return {"level": "topk", "k": k_of(b.n, self.cf)}


def topk_hook(state, bucket):
    """DDP communication hook: top-k (or another compressor) at a static CF,
    with error feedback, summed by gcx's sparse allreduce and averaged."""
    return state._hook(bucket)


class GravacState(_CompressedState):
    """State of `gravac_hook`: the GraVAC controller (gcx/gravac.h).

    Args:
        process_group: a group of backend "gcx" (None: the default group).
        batch_size: samples per step on this rank, for the compression
            throughput T = samples/s x gain that decides saturation; 0: not
            measured (the CF then moves on gains alone and never settles).
        epsilon, theta_min, theta_max, omega, window, policy, scale, ratio,
        alpha: the controller's parameters (see gcx/gravac.h; window counts
            compressed steps).
        compressor, start_iter, seed, algo, model: as for TopkState.
    """

    _kind = "gravac"

    def __init__(self, process_group=None, batch_size=0, epsilon=0.7,
                 theta_min=10.0, theta_max=1000.0, omega=0.01, window=500,
                 policy="exponential", scale=2.0, ratio=2.0, alpha=0.0,
                 compressor="topk", start_iter=1, seed=0, algo=None,
                 model=None, device_path="auto", select="auto"):
        group = process_group or dist.distributed_c10d._get_default_group()
        super().__init__(process_group, start_iter, model, _C.GravacHook(
            float(theta_min), float(theta_max), float(epsilon), float(omega),
            int(window), policy, float(scale), float(ratio), float(alpha),
            group.size(), float(batch_size), compressor, int(seed),
            algo or ""), device_path, select, compressor, seed, algo,
            float(theta_min))
        # the device path: the step's decision and the previous step's sums
        self._dstep = None      # (hook iter, level, theta_min, theta_s, sps)
        self._dcarried = None   # summed norms of buckets no longer kept

    def _dev_sums(self):
        # the previous step's norms, summed over ranks (the exchanges) and
        # over buckets in index order, so every rank decides alike
        sums, have = [0.0] * 4, False
        if self._dcarried is not None:
            sums, have = list(self._dcarried), True
        for index in sorted(self._devb):
            nb = self._devb[index].norms
            if nb is not None and nb[0] == self.iter - 1:
                sums = [a + float(x) for a, x in zip(sums, nb[1])]
                have = True
        return have, sums

    def _carry(self, b):
        if b.norms is not None and b.norms[0] == self.iter - 1:
            base = self._dcarried or [0.0] * 4
            self._dcarried = [a + float(x) for a, x in zip(base, b.norms[1])]

    def _plan(self, b, last):
        if self._dstep is None or self._dstep[0] != self.iter:
            have, sums = self._dev_sums()
            level, tmin, ts, sps = self._impl.device_begin(have, sums)
            self._dcarried = None
            self._dstep = (self.iter, level, tmin, ts, sps)
        _, level, tmin, ts, sps = self._dstep
        k1 = k_of(b.n, tmin)
        return {"level": level, "k1": k1,
                "k2": k_of(k1, ts) if ts > 1.0 else None,
                "sps": sps if last else 0.0}

    def _norms_done(self, index, step, b):
        b.norms = (step, b.h_norms.tolist())

    @property
    def controller(self):
        """The controller's state now: thetas of the next step, smoothed
        gains, whether it settled and on which CF."""
        return self._impl.controller_state()

    def _save_extra(self):
        blob, step, have, sums = self._impl.save()
        if self._on_device:
            have, sums = self._dev_sums()
        return {"controller": blob, "step": step, "have_sums": have,
                "sums": list(sums)}

    def _load_extra(self, extra):
        self._impl.load(extra["controller"], int(extra["step"]),
                        bool(extra["have_sums"]),
                        [float(x) for x in extra["sums"]])
        # the device path takes the sums at its next step
        self._dcarried = [float(x) for x in extra["sums"]] \
            if extra["have_sums"] else None
        self._dstep = None


def gravac_hook(state, bucket):
    """DDP communication hook: GraVAC's adaptive compression factor over
    two-level compression with error feedback, gcx's sparse allreduce."""
    return state._hook(bucket)
