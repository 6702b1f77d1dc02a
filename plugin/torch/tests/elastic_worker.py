"""One rank of a shrink-and-continue test:
python elastic_worker.py SCENARIO RANK SIZE STOREFILE, or, for kill and
inflight under a launcher (python -m torch_gcx.run, torchrun),
python elastic_worker.py SCENARIO (env://: RANK, WORLD_SIZE, MASTER_*).

kill: DDP (torch_gcx.elastic.ElasticDDP) of a tiny float64 MLP over
synthetic data for two epochs; rank VICTIM (ELASTIC_VICTIM, default 2)
SIGKILLs itself at the start of global step KILL_STEP (ELASTIC_KILL_STEP, or
drawn from ELASTIC_SEED inside epoch 0 but not at its first or last step).
Every committed step prints "STEP {json}" (epoch, world, the sample indices
of this rank); the survivors print "EVENT {json}" for the recovery, check
that their parameters agree bit for bit (all_gather on the shrunk group),
compare them with a single-process replay of the same schedule (world 4 up
to the kill, 3 after: the run went on from the last step's parameters) and
print "PARAMS {sha256}". ELASTIC_KILL_STAMP: a file the victim writes
time.time() into just before the kill (perf/torch/elastic_resume.py);
ELASTIC_TIMEOUT: the group's timeout, its GCX_TIMEOUT (default 60 s);
ELASTIC_HANG=1: the victim SIGSTOPs itself instead (found by timeout).

inflight: 4 ranks of ElasticDDP over a float64 MLP of several DDP buckets
(bucket_cap_mb small); rank VICTIM SIGKILLs itself inside backward() of a
seeded step while buckets' allreduces are in flight: from a gradient hook
on a parameter of a middle layer (the later layers' buckets launched), or
from a DDP comm hook after it launched bucket j's allreduce (every rank
runs the same hook; only the victim kills). Victim, step, moment and a
delay of 0-3 ms before the kill are drawn from ELASTIC_SEED (inflight_plan
prints them). The survivors must agree on exactly [VICTIM], go on at
world 3, and end with parameters equal bit for bit (all_gather) and equal
to a one-process replay (world 4 up to the step, 3 after).

on_request: 3 ranks; ranks 0 and 1 shrink the default group to themselves
excluding rank 2 (alive, it does not call), then all_reduce on it; their
other group is aborted (torch's rule for a shrink of the default group); then an
agreement with nobody dead (an empty list) leaves the group as it is.

adopt: 3 ranks; rank 0 is one step ahead (its own optimizer step) when
ElasticDDP.recover() runs with every rank alive: the others take its
module, optimizer state and position; they go on equal.

bad_use: clear errors on every rank before anything is sent (the group
works after them): a shrink that excludes the caller, a rank out of range,
one listed twice, unknown flags, torch's shrink_group excluding the
caller, agree_failed / shrink / shrink_group on a gloo group.
"""
import datetime
import hashlib
import json
import os
import random
import signal
import sys
import time

import torch
import torch.distributed as dist

import torch_gcx
from torch_gcx import elastic
from worker import init

N, FEAT, BATCH, EPOCHS, LR = 96, 8, 4, 2, 0.05


def init_job(rank, size, timeout):
    """The default group on gcx: over the FileStore of argv[4], or, started
    by a launcher (argv without RANK SIZE STOREFILE), env:// as torchrun
    and python -m torch_gcx.run set it up."""
    if len(sys.argv) < 5:
        dist.init_process_group(
            "gcx", timeout=datetime.timedelta(seconds=timeout))
        return
    if timeout < 30:
        # a short GCX_TIMEOUT bounds the group's creation too: meet first,
        # so that a rank that imported torch seconds later (a loaded box)
        # does not time the others' creation out
        open(f"{sys.argv[4]}.ready{rank}", "w").close()
        deadline = time.time() + 300
        while not all(os.path.exists(f"{sys.argv[4]}.ready{r}")
                      for r in range(size)):
            if time.time() > deadline:
                raise RuntimeError("the other ranks never started")
            time.sleep(0.02)
    init(rank, size, sys.argv[4], timeout=timeout, gloo=False)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(FEAT, 6), torch.nn.Tanh(),
                               torch.nn.Linear(6, 1)).double()


def make_data():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N, FEAT, generator=g, dtype=torch.float64)
    y = x[:, :1] * 0.5 - x[:, 1:2] + 0.1 * torch.randn(N, 1, generator=g,
                                                       dtype=torch.float64)
    return x, y


def kill_step(size):
    if "ELASTIC_KILL_STEP" in os.environ:
        return int(os.environ["ELASTIC_KILL_STEP"])
    steps = N // (size * BATCH)
    rng = random.Random(int(os.environ.get("ELASTIC_SEED", "7")))
    return rng.randrange(1, steps - 1)


def flat(module):
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def check_survivors_agree(rank, job, model, ref, tol):
    """The end of a run with a death: prints the job's recoveries (EVENT),
    checks that every survivor holds the same parameters bit for bit (an
    all_gather on the shrunk group) and that they are within `tol` of
    `ref`, the one-process replay of the schedule, then prints their hash
    (PARAMS). Returns the largest difference from the replay."""
    for ev in job.events:
        print("EVENT " + json.dumps(ev), flush=True)
    p = flat(model)
    rows = [torch.empty_like(p) for _ in range(dist.get_world_size())]
    dist.all_gather(rows, p)
    for r, q in enumerate(rows):
        if not torch.equal(q, p):
            raise AssertionError(f"rank {rank}: parameters differ from "
                                 f"survivor {r} (max |diff| "
                                 f"{(q - p).abs().max().item()})")
    diff = (ref - p).abs().max().item()
    if diff > tol:
        raise AssertionError(f"rank {rank}: parameters differ from the "
                             f"replay of the schedule by {diff}")
    print("PARAMS " + hashlib.sha256(p.numpy().tobytes()).hexdigest(),
          flush=True)
    return diff


def replay(k, size, model=None, data=None, n=None, batch=None):
    """The run in one process: world `size` up to global step k, size - 1
    after, each step's gradient the mean over its samples (what DDP's
    average of the ranks' step_fn gradients is, whatever the world size).
    The kill scenario's model, data and sizes unless given."""
    model = make_model() if model is None else model
    x, y = make_data() if data is None else data
    n = N if n is None else n
    batch = BATCH if batch is None else batch
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    step = 0
    for epoch in range(EPOCHS):
        perm = elastic.epoch_order(n, 0, epoch)
        pos = 0
        while pos < n:
            world = size if step < k else size - 1
            block = perm[pos:pos + world * batch]
            opt.zero_grad()
            loss = ((model(x[block]) - y[block]) ** 2).sum() / len(block)
            loss.backward()
            opt.step()
            pos += len(block)
            step += 1
    return flat(model)


def sc_kill(rank, size):
    # the group's timeout is its GCX_TIMEOUT (ELASTIC_TIMEOUT seconds)
    init_job(rank, size,
             timeout=float(os.environ.get("ELASTIC_TIMEOUT", "60")))
    victim = int(os.environ.get("ELASTIC_VICTIM", "2"))
    k = kill_step(size)
    x, y = make_data()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    def log_step(epoch, idx):
        print("STEP " + json.dumps({"epoch": epoch, "world":
                                    dist.get_world_size(),
                                    "idx": idx.tolist()}), flush=True)

    job = elastic.ElasticDDP(model, opt, num_samples=N, batch_size=BATCH,
                             seed=0, on_step=log_step)

    def step_fn(ddp, idx, denom):
        if rank == victim and job.step == k:
            stamp = os.environ.get("ELASTIC_KILL_STAMP")
            if stamp:
                with open(stamp, "w") as f:
                    f.write(repr(time.time()))
                    f.flush()
                    os.fsync(f.fileno())
            # ELASTIC_HANG: stop instead (a hung rank, found by timeout;
            # perf/torch/elastic_resume.py --hang kills it at the end)
            os.kill(os.getpid(), signal.SIGSTOP
                    if os.environ.get("ELASTIC_HANG") else signal.SIGKILL)
        loss = ((ddp(x[idx]) - y[idx]) ** 2).sum() / denom
        loss.backward()

    for epoch in range(EPOCHS):
        job.train_epoch(epoch, step_fn)
    diff = check_survivors_agree(rank, job, model, replay(k, size), 1e-12)
    print(f"REPLAY max |diff| {diff:.3g}", flush=True)
    print(f"SEEN {job.seen} STEPS {job.step} WORLD {dist.get_world_size()}",
          flush=True)
    dist.destroy_process_group()


# inflight: a model of several DDP buckets, a death inside backward()
IN_N, IN_FEAT, IN_BATCH = 96, 32, 4
# ELASTIC_HIDDEN: the hidden width (96: 74 KB of float64 a hidden layer);
# ELASTIC_BUCKET_MB: DDP's bucket_cap_mb (0.03: a bucket per layer)
IN_HID = int(os.environ.get("ELASTIC_HIDDEN", "96"))
IN_BUCKET_MB = float(os.environ.get("ELASTIC_BUCKET_MB", "0.03"))


def make_inflight_model():
    torch.manual_seed(3)
    layers = [torch.nn.Linear(IN_FEAT, IN_HID), torch.nn.Tanh()]
    for _ in range(3):
        layers += [torch.nn.Linear(IN_HID, IN_HID), torch.nn.Tanh()]
    layers.append(torch.nn.Linear(IN_HID, 1))
    return torch.nn.Sequential(*layers).double()


def make_inflight_data():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(IN_N, IN_FEAT, generator=g, dtype=torch.float64)
    y = (x[:, :1] - 0.5 * x[:, 2:3]).tanh()
    return x, y


def inflight_plan(size):
    """(victim, step, mode, where, delay_ms) drawn from ELASTIC_SEED;
    ELASTIC_VICTIM, ELASTIC_KILL_STEP, ELASTIC_MODE (grad|bucket),
    ELASTIC_WHERE and ELASTIC_DELAY_MS override them."""
    rng = random.Random(int(os.environ.get("ELASTIC_SEED", "1")))
    steps = IN_N // (size * IN_BATCH)
    victim = rng.randrange(size)
    step = rng.randrange(1, steps - 1)
    mode = rng.choice(["grad", "bucket"])
    # grad: the weight of Linear layer `where` (1..3: the middle ones);
    # bucket: after the allreduce of bucket `where` was launched
    where = rng.randrange(1, 4) if mode == "grad" else rng.randrange(0, 2)
    delay_ms = rng.choice([0, 0, 1, 3])
    victim = int(os.environ.get("ELASTIC_VICTIM", victim))
    step = int(os.environ.get("ELASTIC_KILL_STEP", step))
    mode = os.environ.get("ELASTIC_MODE", mode)
    where = int(os.environ.get("ELASTIC_WHERE", where))
    delay_ms = float(os.environ.get("ELASTIC_DELAY_MS", delay_ms))
    return victim, step, mode, where, delay_ms


def inflight_replay(k, size):
    return replay(k, size, make_inflight_model(), make_inflight_data(), IN_N,
                  IN_BATCH)


def sc_inflight(rank, size):
    init_job(rank, size,
             timeout=float(os.environ.get("ELASTIC_TIMEOUT", "60")))
    victim, k, mode, where, delay_ms = inflight_plan(size)
    if rank == 0:
        print(f"PLAN victim {victim} step {k} mode {mode} where {where} "
              f"delay_ms {delay_ms}", flush=True)
    x, y = make_inflight_data()
    model = make_inflight_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    job = None

    def die():
        if delay_ms:
            time.sleep(delay_ms / 1000)
        os.kill(os.getpid(), signal.SIGKILL)

    def armed():
        return rank == victim and job is not None and job.step == k

    def hook(state, bucket):
        # DDP's own allreduce (the mean), launched, then maybe the death
        t = bucket.buffer()
        group = dist.distributed_c10d._get_default_group()
        t.div_(group.size())
        fut = dist.all_reduce(t, group=group, async_op=True).get_future()
        if mode == "bucket" and armed() and bucket.index() >= where:
            die()
        return fut.then(lambda f: f.value()[0])

    class Job(elastic.ElasticDDP):
        def _wrap(self):
            ddp = super()._wrap()
            ddp.register_comm_hook(None, hook)
            return ddp

    def log_step(epoch, idx):
        print("STEP " + json.dumps({"epoch": epoch, "world":
                                    dist.get_world_size(),
                                    "idx": idx.tolist()}), flush=True)

    if mode == "grad":
        linears = [m for m in model if isinstance(m, torch.nn.Linear)]

        def grad_hook(g):
            if armed():
                die()
            return g
        linears[where].weight.register_hook(grad_hook)
    job = Job(model, opt, num_samples=IN_N, batch_size=IN_BATCH, seed=0,
              on_step=log_step, ddp_kwargs={"bucket_cap_mb": IN_BUCKET_MB})

    def step_fn(ddp, idx, denom):
        loss = ((ddp(x[idx]) - y[idx]) ** 2).sum() / denom
        loss.backward()

    for epoch in range(EPOCHS):
        job.train_epoch(epoch, step_fn)
    check_survivors_agree(rank, job, model, inflight_replay(k, size), 1e-9)
    dist.destroy_process_group()


def sc_on_request(rank, size):
    init(rank, size, sys.argv[4], timeout=60, gloo=False)
    # another group, which the shrink of the default group aborts
    pair = dist.new_group([0, 1], backend="gcx")
    if rank == size - 1:
        # asked to leave: it does not call shrink; it leaves the group
        dist.destroy_process_group()
        return
    g = elastic.shrink_group([size - 1])
    if g.size() != size - 1 or dist.get_world_size() != size - 1:
        raise AssertionError(f"shrunk group of {g.size()}, expected "
                             f"{size - 1}")
    if torch_gcx.group_creation() != "shrink":
        raise AssertionError("the shrunk group's communicator was made by "
                             + torch_gcx.group_creation())
    if pair in dist.distributed_c10d._world.pg_map:
        raise AssertionError("the other group outlived the shrink")
    if torch_gcx.get_error(pair) != \
            torch._C._distributed_c10d.ErrorType.COMM_ERROR:
        raise AssertionError("the other group's communicator was not "
                             "aborted: " + str(torch_gcx.get_error(pair)))
    a = torch.full((5,), float(rank + 1))
    dist.all_reduce(a)
    want = float(sum(range(1, size)))
    if not torch.equal(a, torch.full((5,), want)):
        raise AssertionError(f"allreduce on the shrunk group: {a}")
    # nobody is dead: the agreement leaves no rank out, the group goes on
    g2, dead = elastic.shrink()
    if dead or g2 is not g:
        raise AssertionError(f"agreement with every rank alive: {dead}")
    b = torch.full((3,), float(rank))
    dist.all_reduce(b)
    if not torch.equal(b, torch.full((3,), float(sum(range(size - 1))))):
        raise AssertionError(f"allreduce after the empty agreement: {b}")
    # a later group is made from the shrunk group's communicator
    sub = dist.new_group([0, 1], backend="gcx")
    if torch_gcx.group_creation(sub) != "create_group":
        raise AssertionError("a group after the shrink was made by "
                             + torch_gcx.group_creation(sub))
    dist.destroy_process_group()


def sc_adopt(rank, size):
    # rank 0 is one committed step ahead when the recovery runs (as a rank
    # whose allreduce ended before a death is): nobody is gone, the group
    # goes on over the agreed communicator, and the others take rank 0's
    # module and optimizer state and position
    init(rank, size, sys.argv[4], timeout=60, gloo=False)
    x, y = make_data()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    job = elastic.ElasticDDP(model, opt, num_samples=N, batch_size=BATCH)

    def step_fn(ddp, idx, denom):
        ((ddp(x[idx]) - y[idx]) ** 2).sum().div(denom).backward()

    job.epoch = 0
    if rank == 0:
        # a step of its own (no DDP: the others are not in it)
        opt.zero_grad()
        ((model(x[:4]) - y[:4]) ** 2).sum().backward()
        opt.step()
        job.step, job.pos = 1, size * BATCH
    job.recover()
    ev = job.events[-1]
    if ev["dead"] or ev["world"] != size or ev["adopted_from"] != 0:
        raise AssertionError(f"recovery with rank 0 ahead: {ev}")
    if (job.step, job.epoch, job.pos) != (1, 0, size * BATCH):
        raise AssertionError(f"position not taken from rank 0: "
                             f"{(job.step, job.epoch, job.pos)}")
    for epoch in range(EPOCHS):
        job.train_epoch(epoch, step_fn)
    p = flat(model)
    rows = [torch.empty_like(p) for _ in range(size)]
    dist.all_gather(rows, p)
    momentum = torch.cat([opt.state[q]["momentum_buffer"].reshape(-1)
                          for q in model.parameters()])
    moms = [torch.empty_like(momentum) for _ in range(size)]
    dist.all_gather(moms, momentum)
    for r in range(size):
        if not torch.equal(rows[r], p) or not torch.equal(moms[r], momentum):
            raise AssertionError(f"rank {rank}: state differs from rank {r}")
    dist.destroy_process_group()


def expect_error(kind, words, fn, what):
    try:
        fn()
    except kind as e:
        msg = str(e)
        if not all(w in msg for w in words):
            raise AssertionError(f"{what}: the message does not name "
                                 f"{words}: {msg}") from None
        return
    raise AssertionError(f"{what}: no error")


def sc_bad_use(rank, size):
    gloo = init(rank, size, sys.argv[4], timeout=60, gloo=True)
    backend = dist.distributed_c10d._get_default_group()._get_backend(
        torch.device("cpu"))
    if not backend.supports_shrinking:
        raise AssertionError("gcx does not say it supports shrinking")
    expect_error(RuntimeError, ["excludes itself"],
                 lambda: backend.shrink([rank], 0, None), "exclude self")
    expect_error(RuntimeError, ["out of range", str(size)],
                 lambda: backend.shrink([size], 0, None), "out of range")
    other = (rank + 1) % size
    expect_error(RuntimeError, ["listed twice"],
                 lambda: backend.shrink([other, other], 0, None), "twice")
    expect_error(RuntimeError, ["shrink_flags"],
                 lambda: backend.shrink([other], 5, None), "flags")
    # torch's own checks come first through shrink_group
    expect_error(RuntimeError, ["exclusion list"],
                 lambda: dist.shrink_group([rank]), "shrink_group self")
    expect_error(TypeError, ["gloo", "not gcx"],
                 lambda: elastic.agree_failed(gloo), "agree on gloo")
    expect_error(TypeError, ["gloo", "not gcx"],
                 lambda: elastic.shrink(gloo), "shrink gloo")
    expect_error(TypeError, ["gloo", "not gcx"],
                 lambda: elastic.shrink_group([other], gloo),
                 "shrink_group gloo")
    # nothing was sent: the group still works
    if torch_gcx.get_error() != torch._C._distributed_c10d.ErrorType.SUCCESS:
        raise AssertionError("the group failed after refused shrinks")
    a = torch.ones(4)
    dist.all_reduce(a)
    if not torch.equal(a, torch.full((4,), float(size))):
        raise AssertionError(f"allreduce after refused shrinks: {a}")
    dist.barrier(group=gloo)
    dist.destroy_process_group()


SCENARIOS = {"kill": sc_kill, "inflight": sc_inflight, "on_request": sc_on_request, "adopt": sc_adopt,
             "bad_use": sc_bad_use}


def main():
    if len(sys.argv) == 2:
        # under a launcher (kill, inflight): RANK and WORLD_SIZE from it
        scenario = sys.argv[1]
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    else:
        scenario, rank, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    SCENARIOS[scenario](rank, size)
    print(f"rank {rank}: {scenario} ok", flush=True)


if __name__ == "__main__":
    main()
