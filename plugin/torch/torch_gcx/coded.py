"""Coded data-parallel training of any torch model on gcx (gradient coding).

    import torch_gcx
    from torch_gcx import coded
    model = coded.CodedDataParallel(net, code="pgc-fr", s=1)  # gcx group
    sampler = model.sampler(len(dataset), batch_size=32)  # per partition
    for epoch in range(epochs):
        for step in sampler:                          # a CodedStep
            loss = model.backward(step, lambda idx: F.cross_entropy(
                net(X[idx]), Y[idx]))
            opt.step()     # .grad: the averaged gradient, as after DDP

The global batch of a step is cut into n partitions (n = workers); the code
gives each worker the partitions it computes. gc-fr / gc-cr (gradient
coding, Tandon et al.): every step a worker computes the s+1 partitions of
its row, one backward each, and sends their coded combination. ignore (the
baseline both papers compare with, no code): every step a worker computes
its own partition and sends it; the root sums the first n-s to arrive and
scales the sum by n/(n-s), an estimate that drops the stragglers' data.
pgc-fr /
pgc-cr (pipelined gradient coding, Su & Li): every step a worker computes
ONE partition (slot t mod (s+1)) and sends the combination of its latest s+1
partition gradients, one fresh and one of each staleness 1..s. The root
decodes the sum of all partition gradients from the first decodable set of
workers (the fastest n-s at worst; FR: one per group), so up to s slow or
dead workers never hold a step up. Encoding, the coded gather and decoding
are libgcx's (gcx/coding.h, gcx/coded.h), run by the C++ half (csrc/coded.cc)
as one composite job on the engine, with the GIL released. FR takes any n:
when s+1 does not divide n its floor(n/(s+1)) groups are s+1 or more workers
(gcx/coding.h), so a worker computes up to ceil(n/floor(n/(s+1))) partitions
(gc) and pgc's period is that many steps instead of s+1.

Learning rate: a pgc partition gradient is the latest of its slot for s+1
steps, so it enters s+1 decoded sums, and at DDP's learning rate every
sample moves the weights s+1 times; divide the lr by s+1 (measured in
perf/torch/README.md: at DDP's lr pgc stalled near 80-84% accuracy until the
schedule brought the lr down, at lr/(s+1) it ended within 0.1 point of DDP).

A worker whose step is already decoded when it gets there computes nothing
and catches up. A pipelined worker that skipped a step abstains until its
stale slot is recomputed. A step that abstentions leave undecodable
(pgc: a dead worker's group-mate still has a skipped slot) is lost on every
rank alike: a zero gradient, counted in `lost_rounds`. With more than s
workers gone (or the root gone) the round fails on every rank and
`backward()` raises CodedRoundError; the group's communicator is then failed,
and `model = model.shrink()` goes on over the survivors (a new model over
the shrunk group, from the last completed round's parameters; its samplers
start at the failed step's batch):

    while epoch < epochs:
        try:
            for step in sampler:
                model.backward(step, loss_fn); opt.step()
            epoch += 1
        except coded.CodedRoundError:
            model = model.shrink()
            sampler = model.sampler(len(dataset), batch_size=32)
            epoch = sampler.epoch

See README.md, "Coded training".
"""
import random
import time
import zlib

import torch
import torch.distributed as dist

from . import _C

__all__ = ["CodedDataParallel", "CodedSampler", "CodedStep",
           "CodedRoundError", "topk", "CODES"]

# name -> (code family, pipelined); "ignore" is the no-code baseline (each
# worker sends its own partition, the root sums the first n-s to arrive,
# scaled by n/(n-s)), run on a CR code's weighted decoding
CODES = {"gc-fr": ("fr", False), "gc-cr": ("cr", False),
         "pgc-fr": ("fr", True), "pgc-cr": ("cr", True),
         "ignore": ("cr", False)}


class topk:  # noqa: N801  (reads as compress=topk(100))
    """compress=topk(cf): each worker adds its coded message to an
    error-feedback residual and sends the top n/cf entries of it (FR codes:
    gc-fr, pgc-fr)."""

    def __init__(self, cf):
        if not (isinstance(cf, (int, float)) and cf >= 1):
            raise ValueError(f"torch_gcx.coded.topk: cf must be a number "
                             f">= 1, got {cf!r}")
        self.cf = float(cf)

    def __repr__(self):
        return f"topk({self.cf:g})"


class CodedRoundError(RuntimeError):
    """A coded round failed on every rank: more than s workers gone, the root
    gone, or a timeout. The group's communicator has failed."""


class CodedStep:
    """One step of a CodedSampler: the round number, the epoch, the global
    batch, and the dataset indices of each partition this worker computes
    ({partition: LongTensor}; empty for a master)."""

    __slots__ = ("round", "epoch", "batch", "partitions", "_sampler")

    def __init__(self, round_, epoch, batch, partitions, sampler):
        self.round, self.epoch, self.batch = round_, epoch, batch
        self.partitions, self._sampler = partitions, sampler

    def __repr__(self):
        return (f"CodedStep(round={self.round}, epoch={self.epoch}, "
                f"batch={self.batch}, partitions={sorted(self.partitions)})")


def _check_code(code, s, n):
    """The rules a (code, s, n) must follow; raises ValueError."""
    if code not in CODES:
        raise ValueError(f"torch_gcx.coded: unknown code {code!r} "
                         f"(one of {', '.join(CODES)})")
    if not isinstance(s, int) or isinstance(s, bool) or s < 0:
        raise ValueError(f"torch_gcx.coded: s must be an integer >= 0, "
                         f"got {s!r}")
    # gcx/coding.h: FR codes go up to GCX_CODE_MAX_WORKERS workers; CR
    # codes (exact or weighted: ignore too) are decoded by a dense
    # least-squares solve and stop at GCX_CODE_MAX_SOLVED_WORKERS
    if CODES[code][0] == "fr":
        most, why = _C.CODE_MAX_WORKERS, "FR codes have"
    else:
        most, why = _C.CODE_MAX_SOLVED_WORKERS, \
            "CR codes (decoded by a least-squares solve) have"
    if n < 1 or n > most:
        raise ValueError(f"torch_gcx.coded: n = {n} workers: gcx {why} "
                         f"1..{most} workers" +
                         ("; use an FR code (gc-fr, pgc-fr) for more"
                          if n > most and CODES[code][0] == "cr" else ""))
    if s >= n:
        raise ValueError(f"torch_gcx.coded: s = {s} stragglers needs more "
                         f"than s workers, there are n = {n} (s < n)")


class CodedSampler:
    """Which samples each worker computes at each step.

    Every epoch, a permutation of range(dataset_len) (seeded by `seed` and
    the epoch, the same on every rank) is cut into global batches of
    n * batch_size samples, each into n partitions of batch_size. gc: one
    step per global batch; the worker computes the s+1 partitions of its row
    of the code. pgc: s+1 steps per global batch (steps u(s+1) ...
    u(s+1)+s use global batch u); at round t the worker computes the one
    partition of slot t mod (s+1), so over the s+1 steps of a global batch
    it computes each of its partitions once, and an epoch is still one pass
    over the data. The tail that does not fill a global batch is dropped.

    Made from a CodedDataParallel (`model.sampler(...)` or coded=model), or
    from (code, s, n, worker) alone. Iterating yields the CodedSteps of the
    current epoch, then moves to the next epoch (or call set_epoch).
    """

    def __init__(self, dataset_len, batch_size, code=None, s=None, n=None,
                 worker=None, coded=None, seed=0, shuffle=True, start=None):
        if coded is not None:
            code = coded.code if code is None else code
            s = coded.s if s is None else s
            n = coded.n if n is None else n
            worker = coded.worker if worker is None else worker
        if code is None or s is None or n is None:
            raise ValueError("torch_gcx.coded.CodedSampler: give coded= or "
                             "code=, s= and n=")
        _check_code(code, s, n)
        if worker is not None and not 0 <= worker < n:
            raise ValueError(f"torch_gcx.coded.CodedSampler: worker {worker} "
                             f"out of range 0..{n - 1} (None: a master)")
        if not batch_size >= 1 or not dataset_len >= 0:
            raise ValueError("torch_gcx.coded.CodedSampler: batch_size >= 1 "
                             "and dataset_len >= 0")
        self.code, self.s, self.n, self.worker = code, s, n, worker
        self.dataset_len, self.batch_size = int(dataset_len), int(batch_size)
        self.seed, self.shuffle = int(seed), bool(shuffle)
        kind, pipelined = CODES[code]
        self._info = _C.CodeInfo(kind, pipelined, n, s)
        # pgc: the period, s+1 (an FR code whose s+1 does not divide n has
        # larger groups: its period is the largest group)
        self.steps_per_batch = self._info.load() if pipelined else 1
        self.batches = self.dataset_len // (n * self.batch_size)
        if self.batches == 0:
            raise ValueError(
                f"torch_gcx.coded.CodedSampler: {dataset_len} samples do not "
                f"fill one global batch of n * batch_size = "
                f"{n * self.batch_size}")
        if start is None and coded is not None:
            start = coded.resume_at
        start_epoch, start_pos = (0, 0) if start is None else start
        if not (isinstance(start_epoch, int) and isinstance(start_pos, int)
                and start_epoch >= 0 and 0 <= start_pos <= self.dataset_len):
            raise ValueError(f"torch_gcx.coded.CodedSampler: start must be "
                             f"(epoch >= 0, sample position in 0.."
                             f"{self.dataset_len}), got {start!r}")
        self.epoch = start_epoch
        self.start = (start_epoch, start_pos)
        # steps of the first epoch, the rest of it from start_pos
        self._first_steps = ((self.dataset_len - start_pos) //
                             (n * self.batch_size)) * self.steps_per_batch

    def __len__(self):
        """Steps per (whole) epoch."""
        return self.batches * self.steps_per_batch

    def _round_of(self, epoch, t):
        # rounds count from the start: the first epoch's steps, then whole
        # epochs (without start: epoch * len(self) + t)
        first = self.start[0]
        if epoch == first:
            return t
        return self._first_steps + (epoch - first - 1) * len(self) + t

    def _offset(self, epoch):
        return self.start[1] if epoch == self.start[0] else 0

    def indices(self, step, j):
        """The dataset indices of partition j of the step's global batch
        (any partition, not only this worker's: what a reference needs)."""
        g, b = self.n * self.batch_size, self.batch_size
        lo = self._offset(step.epoch) + step.batch * g + j * b
        return self._perm(step.epoch)[lo:lo + b]

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def partitions(self, round_):
        """The partitions the worker computes at a round (a list)."""
        if self.worker is None:
            return []
        if self.code == "ignore":
            return [self.worker]
        if self.steps_per_batch == 1:
            return list(self._info.assignment(self.worker)[0])
        part = self._info.compute(self.worker, round_)[1]
        return [part] if part >= 0 else []

    def _perm(self, epoch):
        if not self.shuffle:
            return torch.arange(self.dataset_len)
        g = torch.Generator().manual_seed(self.seed * 1000003 + epoch)
        return torch.randperm(self.dataset_len, generator=g)

    def __iter__(self):
        epoch = self.epoch
        if epoch < self.start[0]:
            raise ValueError(f"torch_gcx.coded.CodedSampler: epoch {epoch} "
                             f"is before the sampler's start {self.start}")
        perm = self._perm(epoch)[self._offset(epoch):]
        g, b = self.n * self.batch_size, self.batch_size
        steps = self._first_steps if epoch == self.start[0] else len(self)
        for t in range(steps):
            round_ = self._round_of(epoch, t)
            u = t // self.steps_per_batch
            parts = {j: perm[u * g + j * b:u * g + (j + 1) * b]
                     for j in self.partitions(round_)}
            yield CodedStep(round_, epoch, u, parts, self)
        self.epoch = epoch + 1

    def _fingerprint(self):
        # what every rank's sampler must agree on, and what its own model's
        # code must match: [code, s, n, worker, len, batch, seed, shuffle,
        # start epoch, start position]
        return [list(CODES).index(self.code), self.s, self.n,
                -1 if self.worker is None else self.worker, self.dataset_len,
                self.batch_size, self.seed, int(self.shuffle), *self.start]


def _parse_straggler(straggler):
    """None | "exp:M" | (rank, ms) | "R:MS" -> (mean multiple, rank, ms)."""
    if straggler is None:
        return 0.0, -1, 0.0
    bad = ValueError(f"torch_gcx.coded: straggler must be None, 'exp:M' "
                     f"(M > 0), (rank, ms) or 'R:MS', got {straggler!r}")
    if isinstance(straggler, str):
        head, _, tail = straggler.partition(":")
        try:
            if head == "exp":
                m = float(tail)
                if not m > 0:
                    raise bad
                return m, -1, 0.0
            straggler = (int(head), float(tail))
        except ValueError:
            raise bad from None
    try:
        rank, ms = straggler
        rank, ms = int(rank), float(ms)
    except (TypeError, ValueError):
        raise bad from None
    if rank < 0 or not ms >= 0:
        raise bad
    return 0.0, rank, ms


def _num(x):
    # an argument as a float for the agreement check; a value that is not a
    # number still takes part (and is refused afterwards, on every rank)
    try:
        return float(x)
    except (TypeError, ValueError):
        return -1.5e300


def _exp_draw(seed, round_, worker, part):
    """Exp(1) from (seed, round, worker, partition): repeatable, independent."""
    return random.Random(f"gcx-straggler:{seed}:{round_}:{worker}:{part}") \
        .expovariate(1.0)


class CodedDataParallel(torch.nn.Module):
    """Wrap a model for coded data-parallel training over a gcx group.

    code: "gc-fr", "gc-cr", "pgc-fr", "pgc-cr", or "ignore" (no code: the
    root averages the first n-s own-partition gradients to arrive; an
    estimate, the baseline to compare with). s: stragglers (slow or dead
    workers) tolerated. n: the number of workers if given, which must be the
    group size (master_is_worker=True) or one less (False: the root, rank
    `root` of the group, decodes and computes nothing, as in the papers).
    straggler: None; "exp:M" (every worker, after each partition gradient it
    computes, sleeps M x that computation's time x an Exp(1) draw from
    (seed, round, worker, partition): the papers' model); (rank, ms) or
    "R:MS" (that rank sleeps ms in every step it computes in). compress:
    None or topk(cf) (FR codes). catch_up: True (default), a worker whose
    round is already decoded when it gets there skips computing it; False,
    it always computes (with compress this keeps an FR group's residuals
    equal even when a member falls behind; see README.md). decoding:
    "exact", or "weighted" for CR (Su & Li's approximate decoding; ignore
    always folds with weights). group:
    the process group (backend gcx; default: the default group).

    Every rank must pass the same arguments: they are compared first, and a
    difference, or a bad value, raises ValueError on every rank. Parameters
    are float32 CPU tensors; rank `root`'s values are broadcast at creation.
    After `backward(step, loss_fn)` every parameter's .grad holds the
    averaged gradient, the same bits on every rank.
    """

    def __init__(self, module, code="pgc-fr", s=1, n=None,
                 master_is_worker=True, root=0, straggler=None,
                 compress=None, group=None, decoding="exact", seed=0,
                 catch_up=True, device_path="auto"):
        super().__init__()
        self.module = module
        self.group = group if group is not None else \
            dist.distributed_c10d._get_default_group()
        size = dist.get_world_size(self.group)
        self.rank = dist.get_rank(self.group)
        params = [p for p in module.parameters() if p.requires_grad]
        cf = compress.cf if isinstance(compress, topk) else \
            (-1.0 if compress is not None else 0.0)
        # compare every rank's arguments before judging them, so that one
        # rank's bad value is an error on every rank, not a hang
        try:
            strag = _parse_straggler(straggler)
            strag_fp = [strag[0], strag[1], strag[2]]
        except ValueError:
            strag, strag_fp = None, [-1.0, -2.0, -1.0]
        mine = [float(list(CODES).index(code)) if code in CODES else -1.0,
                _num(s), -1.0 if n is None else _num(n),
                float(bool(master_is_worker)), _num(root), cf,
                float(sum(p.numel() for p in params)),
                float(zlib.crc32(str(decoding).encode())), _num(seed),
                float(bool(catch_up))] + strag_fp
        names = ["code", "s", "n", "master_is_worker", "root", "compress",
                 "parameter count", "decoding", "seed", "catch_up",
                 "straggler", "straggler", "straggler"]
        table = self._all_gather(mine)
        for i, name in enumerate(names):
            col = [row[i] for row in table]
            if any(v != col[0] for v in col):
                raise ValueError(f"torch_gcx.coded.CodedDataParallel: the "
                                 f"ranks disagree on {name} (per rank: "
                                 f"{col})")
        workers = size - (0 if master_is_worker else 1)
        if n is not None and n != workers:
            raise ValueError(
                f"torch_gcx.coded: n = {n} but the group of {size} ranks has "
                f"{workers} workers (n is the group size"
                f"{'' if master_is_worker else ' minus the master'})")
        if size < 2:
            raise ValueError("torch_gcx.coded: needs a group of at least 2 "
                             "ranks")
        for name, v in (("n", n), ("root", root), ("seed", seed)):
            if v is not None and (not isinstance(v, int) or
                                  isinstance(v, bool)):
                raise ValueError(f"torch_gcx.coded: {name} must be an "
                                 f"integer, got {v!r}")
        if not 0 <= root < size:
            raise ValueError(f"torch_gcx.coded: root {root} out of range "
                             f"0..{size - 1}")
        _check_code(code, s, workers)
        if strag is None:
            _parse_straggler(straggler)  # raises, naming the value
        if compress is not None and not isinstance(compress, topk):
            raise ValueError(f"torch_gcx.coded: compress must be None or "
                             f"topk(cf), got {compress!r}")
        if compress is not None and CODES[code][0] != "fr":
            raise ValueError(f"torch_gcx.coded: compress={compress!r} is for "
                             f"FR codes (gc-fr, pgc-fr), not {code}")
        if decoding not in ("exact", "weighted") or \
                (decoding == "weighted" and CODES[code][0] != "cr"):
            raise ValueError(f"torch_gcx.coded: decoding must be 'exact', or "
                             f"'weighted' for CR codes; got {decoding!r} "
                             f"for {code}")
        devices = {p.device for p in params}
        for name, p in module.named_parameters():
            if p.requires_grad and (p.dtype != torch.float32 or
                                    len(devices) > 1):
                raise ValueError(f"torch_gcx.coded: parameter {name} is "
                                 f"{p.dtype} on {p.device}; coded training "
                                 f"takes float32 parameters on one device "
                                 f"(here: {sorted(map(str, devices))})")
        if device_path not in ("auto", "always"):
            raise ValueError(f"torch_gcx.coded: device_path must be 'auto' "
                             f"or 'always', got {device_path!r}")
        self.device = next(iter(devices)) if devices else \
            torch.device("cpu")
        # the device path: partition gradients, encoding and the top-k
        # residual on the parameters' device, only the message staged
        self.on_device = self.device.type != "cpu" or \
            device_path == "always"
        self.code, self.s, self.n = code, s, workers
        self.master_is_worker, self.root = bool(master_is_worker), root
        self.compress, self.decoding, self.seed = compress, decoding, seed
        self.catch_up = bool(catch_up)
        self.device_path = device_path
        self._exp_m, self._slow_rank, self._slow_ms = strag
        self.pipelined = CODES[code][1]
        self._params = params
        with torch.no_grad():  # start from the root's parameters, as DDP
            src = dist.get_global_rank(self.group, root)
            for p in params:
                dist.broadcast(p, src=src, group=self.group)
        nfloats = sum(p.numel() for p in params)
        self._impl = _C.CodedGather(
            self.group._get_backend(torch.device("cpu")), CODES[code][0],
            self.pipelined, s, not master_is_worker, root, nfloats,
            decoding == "weighted" or code == "ignore",
            compress.cf if compress and not self.on_device else 0.0, seed,
            ignore=code == "ignore")
        w = self._impl.worker()
        self.worker = w if w >= 0 else None
        self.copy_bytes = {"d2h": 0, "h2d": 0}  # the device path's staging
        self._sent_entries = 0
        if self.on_device:
            load = 1 if code == "ignore" else self._impl.load()
            self._bufs = [torch.zeros(nfloats + 1, device=self.device)
                          for _ in range(load)]
            self._grad = torch.zeros(nfloats, device=self.device)
            self._residual = torch.zeros(nfloats, device=self.device) \
                if compress else None
        else:
            self._bufs = [self._impl.buffer(k)
                          for k in range(self._impl.load())]
            self._grad = self._impl.grad()
        self._buf_views = [self._views(b) for b in self._bufs]
        self._grad_views = self._views(self._grad)
        self.round = 0
        self.lost_rounds = 0     # rounds every rank stepped with zero
        self.skipped = 0         # rounds decoded before this rank got there
        self.abstained = 0       # pgc: rounds this worker abstained from
        self.computed = 0        # partition gradients computed here
        self.compute_s = 0.0     # seconds in partition gradients
        self.delay_s = 0.0       # seconds of injected straggler delay
        self._checked = None     # the sampler fingerprint checked at round 0
        self.resume_at = None    # (epoch, sample position) its samplers
        #                          start at (set by shrink(); None: (0, 0))
        self.shrinks = []        # one dict per shrink() so far (see there)
        self._at = None          # (epoch, position) of the step in backward

    # ---- the model --------------------------------------------------------

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def sampler(self, dataset_len, batch_size, seed=0, shuffle=True):
        """A CodedSampler for this model's code and worker (after a
        shrink(), it starts at the failed step's global batch)."""
        return CodedSampler(dataset_len, batch_size, coded=self, seed=seed,
                            shuffle=shuffle)

    # ---- more than s gone: shrink and continue --------------------------

    def shrink(self, s=None, optimizer=None):
        """Go on over the survivors after a CodedRoundError (more than s
        workers gone, or the root): they agree on who is gone
        (torch_gcx.elastic.agree_failed, ULFM's agreement, which holds when
        more ranks die during it), shrink the group to themselves
        (elastic.shrink_group: a shrink of the default group makes the new
        group the default and destroys the other groups, torch's rule) and
        get a new CodedDataParallel of the same module, code and options
        over it, which this one's work is handed to; this one is closed.
        Collective over the survivors.

        The failed round changed no parameter (its gradient never came), so
        the survivors go on from the last completed round's parameters.
        A survivor may be a round behind the others: the root decoded round
        r, sent the sum to some ranks and died before the others got it
        (they fail in round r, the rest in r + 1). The survivors compare
        their rounds (one all_gather) and, if they differ, take the module
        state and position of the first survivor of the latest round (a
        broadcast), and optimizer's state if `optimizer` is given (pass it
        when it keeps state, e.g. momentum: the laggard's lacks round r's
        step). The new model's samplers (new.sampler(...))
        start at the failed step's global batch, the rest of its epoch cut
        into global batches for the new n (pgc: the steps of that batch
        done before the failure are redone). s: the stragglers the new
        code tolerates; default: this one's s, or the largest smaller one
        the new worker count allows (s < n; FR takes any n). The
        root stays the same process unless it died (then the new group's
        rank 0); straggler=(rank, ms) follows its process (dropped if it
        died); a top-k residual starts empty. Returns the new model; its
        `shrinks` lists every shrink so far: dead (global ranks), world,
        n, s, adopted_from (the new group rank whose state was taken, or
        None), t_failed, t_agreed, t_ready (time.time() stamps)."""
        from . import elastic  # the agreement and torch's shrink_group

        if s is not None and (not isinstance(s, int) or
                              isinstance(s, bool) or s < 0):
            raise ValueError(f"torch_gcx.coded.shrink: s must be an "
                             f"integer >= 0, got {s!r}")
        ev = {"t_failed": time.time()}
        default = dist.distributed_c10d._get_default_group()
        is_default = self.group is default
        before = dist.get_process_group_ranks(self.group)
        root_global = before[self.root]
        self.close()
        dead = elastic.agree_failed(None if is_default else self.group)
        ev["t_agreed"] = time.time()
        if dead:
            group = elastic.shrink_group(dead, None if is_default
                                         else self.group)
        else:  # nobody gone (a timeout, a revoke): the agreed communicator
            _C.adopt_agreed(self.group._get_backend(torch.device("cpu")))
            group = self.group
        after = [g for i, g in enumerate(before) if i not in dead]
        size = len(after)
        if size < 2:
            raise CodedRoundError(f"torch_gcx.coded.shrink: {size} rank "
                                  f"left of {len(before)}: coded training "
                                  f"needs at least 2")
        # a survivor whose last decoded sum never came (the root died
        # while sending it) is a round behind: all take the most advanced
        # one's state and position
        at = self._at if self._at is not None else self.resume_at
        mine = torch.tensor([self.round] + list(at if at is not None
                                                else (-1, -1)),
                            dtype=torch.int64)
        rows = [torch.empty_like(mine) for _ in range(size)]
        dist.all_gather(rows, mine, group=group)
        rounds = [int(r[0]) for r in rows]
        adopted = None
        if min(rounds) != max(rounds):
            adopted = rounds.index(max(rounds))
            me = dist.get_rank(group)
            obj = [(self.module.state_dict(),
                    optimizer.state_dict() if optimizer is not None
                    else None) if me == adopted else None]
            dist.broadcast_object_list(obj, group_src=adopted, group=group)
            if me != adopted:
                self.module.load_state_dict(obj[0][0])
                if optimizer is not None and obj[0][1] is not None:
                    optimizer.load_state_dict(obj[0][1])
            src_at = [int(v) for v in rows[adopted][1:]]
            at = tuple(src_at) if src_at[0] >= 0 else None
        root = after.index(root_global) if root_global in after else 0
        workers = size - (0 if self.master_is_worker else 1)
        if s is None:
            s = min(self.s, workers - 1)
        straggler = None
        if self._exp_m > 0:
            straggler = f"exp:{self._exp_m!r}"
        elif self._slow_rank >= 0 and self._slow_rank < len(before) and \
                before[self._slow_rank] in after:
            straggler = (after.index(before[self._slow_rank]), self._slow_ms)
        new = CodedDataParallel(
            self.module, code=self.code, s=s,
            master_is_worker=self.master_is_worker, root=root,
            straggler=straggler, compress=self.compress,
            group=None if is_default else group, decoding=self.decoding,
            seed=self.seed, catch_up=self.catch_up,
            device_path=self.device_path)
        new.resume_at = at
        ev.update(dead=[before[r] for r in dead], world=size, n=new.n,
                  s=new.s, adopted_from=adopted, t_ready=time.time())
        new.shrinks = self.shrinks + [ev]
        new.lost_rounds = self.lost_rounds
        return new

    # ---- one step ---------------------------------------------------------

    def backward(self, step, loss_fn):
        """Compute this worker's partition gradients of `step` (loss_fn(idx)
        returns the mean loss over the samples idx, a LongTensor of dataset
        indices), run the coded round and write the averaged gradient into
        every parameter's .grad. Returns the decoded mean loss of the step's
        partitions (pgc: some stale), or None when the round was lost."""
        if self._checked is None:
            self._check_sampler(step)
        elif not isinstance(step, CodedStep) or \
                step._sampler._fingerprint() != self._checked:
            raise ValueError("torch_gcx.coded: backward() got a step of "
                             "another sampler than the one of round 0")
        if step.round != self.round:
            raise ValueError(f"torch_gcx.coded: the sampler is at round "
                             f"{step.round}, the model at round {self.round} "
                             f"(every round must go through backward(), in "
                             f"order)")
        smp = step._sampler
        self._at = (step.epoch, smp._offset(step.epoch) +
                    step.batch * smp.n * smp.batch_size)
        computed = False
        if self.worker is not None:
            if self.catch_up and self._impl.ready():
                self.skipped += 1  # decoded without us: catch up
            else:
                self._compute(step, loss_fn)
                computed = True
        encoded = False
        if self.on_device and computed:
            encoded = self._encode_on_device()
        work = self._impl.round(self.round, computed, encoded)
        try:
            work.wait()
        except RuntimeError as e:
            raise CodedRoundError(
                f"torch_gcx.coded: round {self.round} failed on every rank: "
                f"{str(e).splitlines()[0]} ({self.code} tolerates s = "
                f"{self.s} slow or dead workers; more are gone, the root "
                f"is, or, in master-less rounds, a rank stopped past "
                f"GCX_TIMEOUT: it owns a chunk. The group's communicator has "
                f"failed: shrink() goes on without the ranks gone or "
                f"silent.)") from e
        res = self._impl.result()
        if not res["sent"] and not res["skipped"] and self.worker is not None:
            self.abstained += 1
        if self.on_device:
            # the decoded gradient, the only other crossing (host to device)
            self._grad.copy_(self._impl.grad(), non_blocking=True)
            self.copy_bytes["h2d"] += 4 * self._grad.numel()
        self.round += 1
        for p, v in zip(self._params, self._grad_views):
            p.grad = v
        if res["lost"]:
            self.lost_rounds += 1
            return None
        return self._impl.loss()

    def _compute(self, step, loss_fn):
        if self.pipelined:
            slot, part = self._impl.pgc_compute(self.round)
            work = [(slot, part)] if part >= 0 else []
        else:
            work = list(enumerate(self._impl.assignment()[0]))
        if sorted(j for _, j in work) != sorted(step.partitions):
            raise ValueError(f"torch_gcx.coded: round {self.round}: the code "
                             f"has worker {self.worker} compute partitions "
                             f"{sorted(j for _, j in work)}, the step gives "
                             f"{sorted(step.partitions)}")
        delay = 0.0
        for k, j in work:
            t0 = time.perf_counter()
            self._grad_into(k, loss_fn, step.partitions[j])
            c = time.perf_counter() - t0
            self.compute_s += c
            self.computed += 1
            if self._exp_m > 0:
                delay += self._exp_m * c * _exp_draw(self.seed, self.round,
                                                     self.worker, j)
            if self.pipelined:
                self._impl.computed(k, self.round)
        if self.rank == self._slow_rank:
            delay += self._slow_ms / 1000.0
        if delay > 0:
            self.delay_s += delay
            time.sleep(delay)

    def _encode_on_device(self):
        """The device path: this round's coded message from the slot
        buffers, on the device (top-k with error feedback for compress),
        staged into the C++ half's message. True when staged (False: no
        message of this rank's own; round() abstains)."""
        coeffs = self._impl.coefficients(self.round)
        if coeffs is None:
            return False
        msg = torch.zeros_like(self._bufs[0])
        for c, buf in zip(coeffs, self._bufs):
            if c != 0.0:
                msg.add_(buf, alpha=c)
        host = self._impl.message()
        nf = msg.numel() - 1
        if self._residual is None:
            host.copy_(msg)  # waits for the device: the message is ready
            self.copy_bytes["d2h"] += 4 * (nf + 1)
            return True
        from .hooks import k_of, select_topk
        if not bool(torch.isfinite(msg).all()):
            raise RuntimeError("torch_gcx.coded: the coded message holds NaN "
                               "or Inf")
        r = self._residual
        r.add_(msg[:nf])
        k = k_of(nf, self.compress.cf)
        idx = select_topk(r.abs(), nf, k)
        vals = r[idx]
        r.index_fill_(0, idx, 0.0)
        # only k indices + values (and the loss) cross to the host
        staged = torch.cat([vals, msg[nf:]]).cpu()
        hidx = idx.to(torch.int32).cpu().long()
        self.copy_bytes["d2h"] += 8 * k + 4
        self._sent_entries += k
        host.zero_()
        host[hidx] = staged[:k]
        host[nf] = staged[k]
        return True

    def _grad_into(self, k, loss_fn, idx):
        # backward accumulates in place into the parameters' .grad, which
        # are views of slot buffer k: no copy
        buf = self._bufs[k]
        buf.zero_()
        views = self._buf_views[k]
        for p, v in zip(self._params, views):
            p.grad = v
        loss = loss_fn(idx)
        loss.backward()
        for p, v in zip(self._params, views):
            if p.grad is not None and p.grad.data_ptr() != v.data_ptr():
                v.copy_(p.grad)  # autograd replaced it (e.g. another layout)
        if self.on_device:
            buf[-1:].copy_(loss.detach().reshape(1))  # no host sync
        else:
            buf[-1] = float(loss.detach())

    # ---- checks -----------------------------------------------------------

    def _all_gather(self, values):
        t = torch.tensor(values, dtype=torch.float64)
        out = [torch.empty_like(t)
               for _ in range(dist.get_world_size(self.group))]
        dist.all_gather(out, t, group=self.group)
        return [o.tolist() for o in out]

    def _check_sampler(self, step):
        # round 0, on every rank: each rank's sampler must match its model
        # and the others' samplers; one all_gather, so every rank raises
        fp = step._sampler._fingerprint() if isinstance(step, CodedStep) \
            else [-2.0] * 10
        me = [list(CODES).index(self.code), self.s, self.n,
              -1 if self.worker is None else self.worker]
        table = self._all_gather([float(v) for v in fp + me])
        fields = ["code", "s", "n", "worker"]
        for r, row in enumerate(table):
            if row[0] == -2.0:
                raise ValueError(f"torch_gcx.coded: rank {r} passed "
                                 f"backward() a step that is not a "
                                 f"CodedStep of a CodedSampler")
            for i, name in enumerate(fields):
                if row[i] != row[10 + i]:
                    raise ValueError(
                        f"torch_gcx.coded: the sampler of rank {r} disagrees "
                        f"with its CodedDataParallel on {name}: sampler "
                        f"{row[i]:g}, model {row[10 + i]:g} (code index "
                        f"into {list(CODES)}; worker -1: the master)")
        for i, name in enumerate(["dataset_len", "batch_size", "seed",
                                  "shuffle", "start epoch",
                                  "start position"], start=4):
            col = [row[i] for row in table]
            if any(v != col[0] for v in col):
                raise ValueError(f"torch_gcx.coded: the ranks' samplers "
                                 f"disagree on {name} (per rank: {col})")
        self._checked = step._sampler._fingerprint()

    # ---- state ------------------------------------------------------------

    def last_result(self):
        """What the last round was decoded from: round, arrived / used /
        abstained, skipped, lost, round_time, sent.

        arrived, used and abstained are worker sets as Python ints with bit
        w set for worker w (`used >> w & 1`), built from all the words of
        gcx's worker sets (gcx/wset.h), so they hold any number of workers
        (past 64 too); 0 before the first round and after a failed one.
        `[w for w in range(self.n) if used >> w & 1]` lists the workers."""
        return self._impl.result()

    def stats(self):
        """The coded gather's counters (gcx_coded_stats) and this rank's.

        `gone` (on the root; master-less: every rank) is the set of workers
        counted gone as a Python int with bit w for worker w, of any size
        (as last_result()'s sets), and `gone_count` how many they are."""
        d = self._impl.stats()
        d.update(rounds_here=self.round, lost_rounds=self.lost_rounds,
                 skipped_here=self.skipped, abstained_here=self.abstained,
                 computed=self.computed, compute_s=self.compute_s,
                 delay_s=self.delay_s)
        return d

    def residual(self):
        """compress only: a copy of this worker's error-feedback residual
        (a CPU tensor)."""
        if self.on_device:
            if self._residual is None:
                return self._impl.residual()  # raises as the host path
            return self._residual.cpu()
        return self._impl.residual()

    def sent_entries(self):
        """compress only: entries this worker sent so far."""
        return self._sent_entries if self.on_device else \
            self._impl.sent_entries()

    def message(self):
        """The last coded message this worker built (compressed if
        compress; its last entry is the partitions' coded loss)."""
        return self._impl.message()

    def close(self):
        """Free the coded gather (before destroy_process_group)."""
        self._impl.close()

    def _views(self, flat):
        # the parameters' shapes as views of one flat buffer
        out, off = [], 0
        for p in self._params:
            out.append(flat[off:off + p.numel()].view(p.shape))
            off += p.numel()
        return out
