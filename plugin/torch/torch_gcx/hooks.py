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
"""
import torch
import torch.distributed as dist

from . import _C

__all__ = ["TopkState", "topk_hook", "GravacState", "gravac_hook"]


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

    def __init__(self, process_group, start_iter, model, impl):
        if start_iter < 0:
            raise ValueError(f"start_iter must be >= 0, got {start_iter}")
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

    def _dissolve(self, index):
        # the bucket's residual goes back to its parameters
        layout = self._layouts.pop(index)
        res = self._impl.residual(index)
        self._impl.drop(index)
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
            self._impl.set_residual(index, torch.cat([
                torch.zeros(n) if part is None else part
                for part, (_, n) in zip(parts, layout)]))
        self._layouts[index] = layout

    def _compressed(self, bucket):
        self._lay_out(bucket)
        self._used[bucket.index()] = self.iter
        work = self._impl.run(self._backend(), bucket.buffer(), bucket.index(),
                              bucket.is_last())
        return work.get_future().then(lambda f: f.value()[0])

    def _hook(self, bucket):
        if self.iter < self.start_iter:
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
        residuals = {names[pid]: r.clone() for pid, r in self._loose.items()}
        for index, layout in self._layouts.items():
            res = self._impl.residual(index)
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
            self._impl.drop(index)
        self._load_extra(state["extra"])
        self._layouts, self._used = {}, {}
        self._loose = {id(params[name]): r.detach().float().reshape(-1).clone()
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
    """

    _kind = "topk"

    def __init__(self, process_group=None, cf=100.0, compressor="topk",
                 start_iter=1, seed=0, algo=None, model=None):
        self.cf = float(cf)
        super().__init__(process_group, start_iter, model,
                         _C.TopkHook(self.cf, compressor, int(seed), algo or ""))


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
                 model=None):
        group = process_group or dist.distributed_c10d._get_default_group()
        super().__init__(process_group, start_iter, model, _C.GravacHook(
            float(theta_min), float(theta_max), float(epsilon), float(omega),
            int(window), policy, float(scale), float(ratio), float(alpha),
            group.size(), float(batch_size), compressor, int(seed),
            algo or ""))

    @property
    def controller(self):
        """The controller's state now: thetas of the next step, smoothed
        gains, whether it settled and on which CF."""
        return self._impl.controller_state()

    def _save_extra(self):
        blob, step, have, sums = self._impl.save()
        return {"controller": blob, "step": step, "have_sums": have,
                "sums": list(sums)}

    def _load_extra(self, extra):
        self._impl.load(extra["controller"], int(extra["step"]),
                        bool(extra["have_sums"]),
                        [float(x) for x in extra["sums"]])


def gravac_hook(state, bucket):
    """DDP communication hook: GraVAC's adaptive compression factor over
    two-level compression with error feedback, gcx's sparse allreduce."""
    return state._hook(bucket)
