"""torch_gcx.elastic: DDP training that goes on when a rank dies.

Idea: a dead rank fails the gcx communicator of the default group on every
survivor (at once when it was a local process, which gcx watches; within
GCX_TIMEOUT otherwise). The survivors catch the failed step, agree on who is
gone (gcx_comm_shrink_ranks: ULFM's agreement, which holds when more ranks
die during it), shrink the default group to themselves through torch's own
torch.distributed.shrink_group (a new default group; every other group is
destroyed, as torch does for a shrink of the default group), wrap the same
module in a new DDP, and redo the failed step with the epoch's remaining
samples shared among them. No restart, no checkpoint: a failed step changes
no parameter (DDP's allreduce fails inside backward(), before
optimizer.step()), so the parameters are the last committed step's. A
survivor that did commit the step (its allreduce finished before the death)
is one step ahead; the others take its module and optimizer state
(torchft's rule: a step counts once some rank committed it with every
rank's gradient).

    from torch_gcx import elastic
    job = elastic.ElasticDDP(model, optimizer, num_samples=len(ds),
                             batch_size=32, seed=0)
    for epoch in range(epochs):
        job.train_epoch(epoch, step_fn)    # step_fn(ddp_model, idx, denom)

Data: each epoch is one seeded permutation of the sample indices; a step
takes the next world_size * batch_size of them and rank r the r-th of
world_size near-equal slices; after a shrink the remaining ones are shared
among the survivors in the same way. step_fn(ddp, idx, denom) must call
backward() on a loss that sums the per-sample losses of its slice and
divides by denom, the step's sample count on all ranks together over the
world size: DDP averages the ranks' gradients, so the gradient is the mean
over the step's samples, every sample weighs the same whatever the world
size, and the learning rate means the same after a shrink.

The same by hand (the recipe in plugin/torch/README.md):
    dead = elastic.agree_failed()          # the agreed dead ranks
    elastic.shrink_group(dead)             # reuses that agreement
(elastic.shrink_group is torch's, with the new group's backend type put
right for a custom backend; elastic.shrink() is both lines.)

Cost: nothing per step but a try block; on a failure the agreement (a few
rounds of small messages, bounded by GCX_TIMEOUT each), the construction of
one DDP (an allgather of parameter shapes and a broadcast of the module)
and an allgather of three int64; the state of the most advanced survivor
(a broadcast of the module and optimizer state) only when survivors
disagree on the committed step.

Launch: a launcher must leave the survivors running. torchrun does not
(its agent SIGTERMs the other workers ~0.1 s after one dies; ElasticDDP
warns when it runs under torchrun, launcher_warning()); on one host use
python -m torch_gcx.run -n N script.py (torch_gcx/run.py), which also
serves the Store, so any rank may die.

Limits: the process that serves the c10d Store (rank 0 with a TCPStore)
must survive (a FileStore, torchrun's agent store or torch_gcx.run's has
no such rank); with more deaths during the recovery the recovery runs
again.
"""
import gc
import os
import time
import warnings
import weakref

import torch
import torch.distributed as dist

from . import _C

__all__ = ["agree_failed", "shrink", "shrink_group", "ElasticDDP", "epoch_order",
           "is_comm_failure", "launcher_warning"]


def launcher_warning(environ=None):
    """Why the launcher of this process will not let the survivors of a
    dead rank go on, or None. torchrun (torch.distributed.elastic) sets
    TORCHELASTIC_RUN_ID in every worker; its agent ends every other worker
    of its group (SIGTERM, then SIGKILL) about one monitor interval (0.1 s)
    after one fails, whatever its options, so a shrink never gets to run.
    ElasticDDP warns with this text when it is created."""
    env = os.environ if environ is None else environ
    if env.get("TORCH_GCX_LAUNCHER") or not env.get("TORCHELASTIC_RUN_ID"):
        return None
    local = env.get("LOCAL_WORLD_SIZE", "?")
    if local == "1":
        return ("torch_gcx.elastic: this job runs under torchrun with one "
                "worker per agent (TORCHELASTIC_RUN_ID is set): the "
                "survivors of a dead rank go on, but their agents then wait "
                "for the dead one's in torchrun's exit barrier (300 s) and "
                "fail it if node 0's agent, which serves the store, is "
                "gone. On one host `python -m torch_gcx.run -n N script.py "
                "ARGS` keeps the survivors and serves the store itself "
                "(plugin/torch/README.md, 'Launching').")
    return ("torch_gcx.elastic: this job runs under torchrun "
            "(TORCHELASTIC_RUN_ID is set; "
            f"{local} workers under this agent): torchrun's agent ends every "
            "other worker (SIGTERM) about 0.1 s after one dies, whatever "
            "its options, so ElasticDDP's survivors cannot shrink and go "
            "on; a dead rank ends the job (or, with --max-restarts, "
            "restarts it from the start). To go on without the dead rank, "
            "launch with `python -m torch_gcx.run -n N script.py ARGS` "
            "(same environment, the store outlives every rank), or on a "
            "cluster with a launcher that keeps the survivors "
            "(plugin/torch/README.md, 'Launching').")


def _gcx_backend(group, what):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    try:
        backend = pg._get_backend(torch.device("cpu"))
    except RuntimeError as e:
        raise TypeError(f"torch_gcx.elastic.{what}: the group has no CPU "
                        f"backend ({e})") from None
    if backend.name() != "gcx":
        raise TypeError(f"torch_gcx.elastic.{what}: the group's backend is "
                        f"{backend.name()}, not gcx (shrinking needs gcx's "
                        f"agreement)")
    return backend


def agree_failed(group=None):
    """The survivors' agreement on `group` (default: the default group):
    the group ranks that are gone (dead, or not heard from within
    GCX_TIMEOUT), ascending, the same list on every survivor. Revokes the
    group's communicator first, so every survivor's pending and later
    collectives on it fail and it comes to agree too. Collective over the
    survivors. The agreed communicator is kept: a
    torch.distributed.shrink_group(that list, group) that follows uses it
    instead of agreeing again."""
    return _C.agree_failed(_gcx_backend(group, "agree_failed"))


def shrink_group(ranks_to_exclude, group=None):
    """torch.distributed.shrink_group for a gcx group: the same, and the new
    group's backend is registered as the custom backend it is. (torch's
    shrink_group registers the new backend as gloo's, or nccl's: it knows no
    other; DDP then takes it for a ProcessGroupGloo and crashes in its
    logger.)"""
    _gcx_backend(group, "shrink_group")
    pg = dist.shrink_group(ranks_to_exclude, group=group)
    custom = dist.ProcessGroup.BackendType.CUSTOM
    pg._register_backend(torch.device("cpu"), custom,
                         pg._get_backend(torch.device("cpu")))
    pg._set_default_backend(custom)
    return pg


def shrink(group=None):
    """agree_failed(group), then shrink_group by its list: returns (the new
    group, the ranks left out); a shrink of the default group makes the
    new group the default and destroys every other group (torch's rule).
    With no rank left out (the failure was a timeout or a revoke, every rank
    is alive) the group goes on over the agreed communicator and is
    returned itself."""
    backend = _gcx_backend(group, "shrink")
    dead = _C.agree_failed(backend)
    if not dead:
        _C.adopt_agreed(backend)
        return (group if group is not None
                else dist.distributed_c10d._get_default_group()), dead
    return shrink_group(dead, group=group), dead


def is_comm_failure(group=None):
    """Whether the gcx communicator of `group` has failed (a collective on
    it failed or a peer revoked it): what tells a failed step from a bug in
    the step."""
    backend = _gcx_backend(group, "is_comm_failure")
    return _C.get_error(backend) != torch._C._distributed_c10d.ErrorType.SUCCESS


def epoch_order(num_samples, seed, epoch):
    """ElasticDDP's sample order of an epoch: a permutation of
    range(num_samples) drawn from (seed, epoch)."""
    g = torch.Generator().manual_seed(seed * 1000003 + epoch)
    return torch.randperm(num_samples, generator=g)


class ElasticDDP:
    """DDP over the default (gcx) group with shrink-and-continue.

    module and optimizer: the model (on CPU) and its optimizer; the module
    is wrapped in DistributedDataParallel(module, **ddp_kwargs) again after
    each shrink. num_samples, batch_size (per rank), seed: the epoch's
    sample order (module docstring). on_shrink(event): called on each
    survivor after a recovery, before the failed step is redone.
    on_step(epoch, idx): called after each committed step with this rank's
    sample indices.

    Attributes: ddp (the current DDP), step (committed steps in all),
    epoch and pos (where in which epoch), seen (samples of committed steps
    on this rank), events (one dict per recovery: dead (global ranks of the
    group before), world (its size after), t_failed, t_agreed, t_dropped
    (the old DDP gone), t_shrunk, t_ready (time.time() stamps), adopted_from (the group rank whose state
    was taken, or None), t_resumed (the first committed step after it))."""

    def __init__(self, module, optimizer, num_samples, batch_size, seed=0,
                 ddp_kwargs=None, on_shrink=None, on_step=None):
        if num_samples <= 0 or batch_size <= 0:
            raise ValueError(f"torch_gcx.elastic.ElasticDDP: num_samples "
                             f"({num_samples}) and batch_size ({batch_size}) "
                             f"must be > 0")
        _gcx_backend(None, "ElasticDDP")
        why = launcher_warning()
        if why is not None:
            warnings.warn(why, RuntimeWarning, stacklevel=2)
        self.module = module
        self.optimizer = optimizer
        self.num_samples = num_samples
        self.batch_size = batch_size
        self.seed = seed
        self.ddp_kwargs = dict(ddp_kwargs or {})
        self.on_shrink = on_shrink
        self.on_step = on_step
        self.step = 0
        self.epoch = -1
        self.pos = 0
        self.seen = 0
        self.events = []
        self.ddp = self._wrap()

    def _wrap(self):
        return torch.nn.parallel.DistributedDataParallel(self.module,
                                                         **self.ddp_kwargs)

    def order(self, epoch):
        """The epoch's sample order (the same on every rank)."""
        return epoch_order(self.num_samples, self.seed, epoch)

    def train_epoch(self, epoch, step_fn):
        """Run the rest of `epoch`: for each step, zero the gradients,
        step_fn(ddp, idx, denom) (forward and backward of this rank's
        sample indices idx; denom: the step's sample count on all ranks
        over the world size, the divisor of the summed loss), then
        optimizer.step(). A step that fails because the group lost a rank
        is redone after the recovery; any other error is raised."""
        if epoch < self.epoch:
            return  # the state taken from a survivor was past this epoch
        if epoch > self.epoch:
            self.epoch, self.pos = epoch, 0
        perm = self.order(epoch)
        while self.pos < self.num_samples:
            world, rank = dist.get_world_size(), dist.get_rank()
            block = perm[self.pos:self.pos + world * self.batch_size]
            idx = torch.tensor_split(block, world)[rank]
            failed = False
            try:
                self.optimizer.zero_grad(set_to_none=True)
                step_fn(self.ddp, idx, len(block) / world)
                self.optimizer.step()
            except Exception:
                if not is_comm_failure():
                    raise
                failed = True
            if failed:
                # out of the except block: its traceback holds the old DDP
                # (step_fn's argument), whose reducer must go first
                self.recover()
                if self.epoch != epoch:
                    return
                continue
            self.pos += len(block)
            self.step += 1
            self.seen += len(idx)
            if self.on_step is not None:
                self.on_step(epoch, idx)
            if self.events and self.events[-1]["t_resumed"] is None:
                self.events[-1]["t_resumed"] = time.time()

    def recover(self):
        """The recovery train_epoch runs after a failed step: agree on who
        is gone (revoking the group), shrink the default group to the
        survivors (or, with nobody gone, go on over the agreed
        communicator), take the most advanced survivor's state if they
        disagree on the step, and wrap the module in a new DDP. Collective
        over the survivors; callable by hand (e.g. after a failure caught
        outside train_epoch)."""
        ev = {"t_failed": time.time()}
        before = dist.get_process_group_ranks(
            dist.distributed_c10d._get_default_group())
        self.optimizer.zero_grad(set_to_none=True)
        dead = agree_failed()
        ev["t_agreed"] = time.time()
        # drop the DDP of the old group (its reducer's hooks on the module);
        # a full gc.collect() costs 0.4-0.7 s here, so only if it lives on
        old = weakref.ref(self.ddp)
        self.ddp = None
        if old() is not None:
            gc.collect()
        if old() is not None:
            raise RuntimeError(
                "torch_gcx.elastic.ElasticDDP: the DDP of the failed group is "
                "still referenced (keep job.ddp, not a copy of it): its "
                "reducer's hooks would run on the shrunk group")
        ev["t_dropped"] = time.time()
        if dead:
            shrink_group(dead)
        else:
            _C.adopt_agreed(_gcx_backend(None, "ElasticDDP"))
        ev["t_shrunk"] = time.time()
        ev["dead"] = [before[r] for r in dead]
        ev["world"] = dist.get_world_size()
        ev["adopted_from"] = self._agree_state()
        self.ddp = self._wrap()
        ev["t_ready"] = time.time()
        ev["t_resumed"] = None
        self.events.append(ev)
        if self.on_shrink is not None:
            self.on_shrink(ev)

    def _agree_state(self):
        # every survivor's (step, epoch, pos); the first of the most advanced
        # gives the others its module and optimizer state
        mine = torch.tensor([self.step, self.epoch, self.pos],
                            dtype=torch.int64)
        rows = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
        dist.all_gather(rows, mine)
        steps = [int(r[0]) for r in rows]
        if min(steps) == max(steps):
            return None
        src = steps.index(max(steps))
        obj = [(self.module.state_dict(), self.optimizer.state_dict())
               if dist.get_rank() == src else None]
        dist.broadcast_object_list(obj, src=src)
        if dist.get_rank() != src:
            self.module.load_state_dict(obj[0][0])
            self.optimizer.load_state_dict(obj[0][1])
        self.step, self.epoch, self.pos = (int(v) for v in rows[src])
        return src
