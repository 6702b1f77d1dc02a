"""One rank of a torch_gcx.coded test.

    python coded_worker.py SCENARIO RANK SIZE STOREFILE

SCENARIO is NAME or NAME:CODE[,CODE...] (e.g. exact:gc-fr,pgc-cr: each code
in turn in the same processes). The default group is gcx
(FileStore at STOREFILE), a gloo group beside it checks results across
ranks. Every rank holds the same small data set and recomputes, serially,
what the decoded gradient must be: for gc the full-batch mean gradient over
the step's n partitions at the current weights; for pgc what the pipeline
says (partition j last computed at the latest step t' <= t with t' = j mod
P, at that step's weights and global batch). A failed check raises
(non-zero exit); launch.py kills every rank when one hangs.

Cost: a two-layer MLP of ~400 parameters, 6-8 steps: seconds per scenario,
most of it importing torch.
"""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import torch_gcx  # noqa: F401  (registers "gcx")
from torch_gcx import coded

B = 8          # samples per partition
DIM, CLASSES = 12, 5


def init(rank, size, store_file, timeout=30):
    dist.init_process_group("gcx", init_method="file://" + store_file,
                            rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=timeout))
    return dist.new_group(backend="gloo")


def make_model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(DIM, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, CLASSES))


def make_data(n):
    g = torch.Generator().manual_seed(7)
    length = n * B * 4
    return torch.randn(length, DIM, generator=g), \
        torch.randint(0, CLASSES, (length,), generator=g)


def flat_grad(model, X, Y, idx):
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(X[idx]), Y[idx]).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def flat_params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def load_params(model, flat):
    off = 0
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(flat[off:off + p.numel()].view(p.shape))
            off += p.numel()


def period(code, n, s):
    """pgc's period from the codes' definition (gcx/coding.h): s+1, but an
    FR code whose s+1 does not divide n has floor(n/(s+1)) groups, the
    largest ceil(n/q) workers: its period."""
    if "fr" in code:
        q = n // (s + 1)
        return -(-n // q)
    return s + 1


class Reference:
    """What the decoded gradient of each round must be, computed serially."""

    def __init__(self, cdp, sampler, X, Y):
        self.cdp, self.sampler, self.X, self.Y = cdp, sampler, X, Y
        self.ref = make_model()
        self.history = []  # parameters before each round's update
        self.P = period(cdp.code, cdp.n, cdp.s) if cdp.pipelined else 1

    def indices(self, round_, j):
        per_epoch = len(self.sampler)
        epoch, t = divmod(round_, per_epoch)
        u = t // self.sampler.steps_per_batch
        perm = self.sampler._perm(epoch)
        g = self.cdp.n * B
        return perm[u * g + j * B:u * g + (j + 1) * B]

    def expected(self, round_):
        """Mean over partitions of their gradients, as the code says."""
        self.history.append(flat_params(self.cdp.module).clone())
        total = None
        for j in range(self.cdp.n):
            t = round_ - ((round_ - j % self.P) % self.P)  # last computed
            if t < 0:
                continue  # pgc warm-up: not computed yet, not in the sum
            load_params(self.ref, self.history[t])
            g = flat_grad(self.ref, self.X, self.Y, self.indices(t, j))
            total = g if total is None else total + g
        return total / self.cdp.n


def got_grad(cdp):
    return torch.cat([p.grad.reshape(-1) for p in cdp.module.parameters()])


def same_on_all(x, gloo, what):
    size = dist.get_world_size(gloo)
    out = [torch.empty_like(x) for _ in range(size)]
    dist.all_gather(out, x, group=gloo)
    for r, o in enumerate(out):
        if not torch.equal(o, out[0]):
            raise AssertionError(f"{what} differs between rank 0 and rank "
                                 f"{r} (max |diff| "
                                 f"{(o - out[0]).abs().max().item():.3g})")
    return out


def train(cdp, X, Y, rounds, check=True, on_round=None, lr=0.1):
    sampler = cdp.sampler(len(X), B)
    ref = Reference(cdp, sampler, X, Y)
    opt = torch.optim.SGD(cdp.parameters(), lr=lr)
    done = 0
    while done < rounds:
        for step in sampler:
            want = ref.expected(step.round) if check else None
            loss = cdp.backward(step, lambda idx: F.cross_entropy(
                cdp(X[idx]), Y[idx]))
            if check:
                torch.testing.assert_close(got_grad(cdp), want, rtol=1e-4,
                                           atol=2e-6)
            assert loss is not None or cdp.lost_rounds > 0
            if on_round is not None:
                on_round(step, loss)
            opt.step()
            done += 1
            if done == rounds:
                break
    return sampler


def sc_exact(rank, size, gloo, code):
    # no stragglers: every round's gradient is the reference; parameters
    # and the decoded loss equal bit for bit on every rank
    X, Y = make_data(size)
    cdp = coded.CodedDataParallel(make_model(), code=code, s=1)
    losses = []
    train(cdp, X, Y, 8, on_round=lambda s, l: losses.append(l))
    same_on_all(flat_params(cdp.module), gloo, "parameters")
    same_on_all(torch.tensor(losses, dtype=torch.float64), gloo, "losses")
    assert cdp.lost_rounds == 0, cdp.stats()
    print(f"exact {code} ok: {cdp.stats()}", flush=True)
    cdp.close()


def sc_ignore(rank, size, gloo, s):
    # the no-code baseline: every round's gradient is the mean of the own
    # partitions of the workers the root used (the first n-s to arrive),
    # which the result names; s = 0 is the full-batch mean. With s = 1 the
    # last rank blocks in its round-0 gradient until the others have done
    # every round, so it is left out of all of them (then catches up).
    X, Y = make_data(size)
    s = int(s)
    store = dist.distributed_c10d._get_default_store()
    slow = size - 1
    blocked = [s > 0 and rank == slow]
    cdp = coded.CodedDataParallel(make_model(), code="ignore", s=s)
    sampler = cdp.sampler(len(X), B)
    ref = Reference(cdp, sampler, X, Y)
    opt = torch.optim.SGD(cdp.parameters(), lr=0.1)

    def loss_fn(idx):
        if blocked[0]:
            store.wait(["ignore_done"], datetime.timedelta(seconds=120))
            blocked[0] = False
        return F.cross_entropy(cdp(X[idx]), Y[idx])

    left_out = 0
    for step in sampler:
        before = flat_params(cdp.module).clone()
        assert list(step.partitions) == [cdp.worker], step
        cdp.backward(step, loss_fn)
        used = cdp.last_result()["used"]
        workers = [w for w in range(cdp.n) if used >> w & 1]
        assert len(workers) == cdp.n - s, (step.round, hex(used))
        load_params(ref.ref, before)
        want = sum(flat_grad(ref.ref, X, Y, ref.indices(step.round, w))
                   for w in workers) / len(workers)
        torch.testing.assert_close(got_grad(cdp), want, rtol=1e-4, atol=2e-6)
        left_out += not used >> slow & 1
        opt.step()
    if s > 0 and rank != slow and int(store.add("ignore_finished", 1)) == \
            size - 1:
        store.set("ignore_done", "1")
    same_on_all(flat_params(cdp.module), gloo, "parameters")
    assert cdp.lost_rounds == 0, cdp.stats()
    assert left_out == (len(sampler) if s > 0 else 0), left_out
    print(f"ignore s={s} ok: the last rank left out of {left_out} of "
          f"{len(sampler)} rounds", flush=True)
    dist.barrier(group=gloo)
    cdp.close()


def sc_master(rank, size, gloo, code):
    # the root decodes and computes nothing: n = size - 1 workers
    X, Y = make_data(size - 1)
    cdp = coded.CodedDataParallel(make_model(), code=code, s=1,
                                  master_is_worker=False)
    assert cdp.n == size - 1 and (cdp.worker is None) == (rank == 0)
    train(cdp, X, Y, 6)
    same_on_all(flat_params(cdp.module), gloo, "parameters")
    # the master computes nothing; a worker computes in each round it is
    # not too late for (a loaded box may leave one worker late for all: the
    # other decodes alone, s = 1), and some worker computes
    computed = [torch.zeros(1, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(computed, torch.tensor([cdp.computed]), group=gloo)
    if rank == 0:
        assert cdp.computed == 0 and cdp.skipped == 0, cdp.stats()
    else:
        assert cdp.computed > 0 or cdp.skipped == 6, cdp.stats()
    assert sum(int(c) for c in computed[1:]) > 0, computed
    print(f"master {code} ok", flush=True)
    cdp.close()


def sc_straggler(rank, size, gloo, code):
    # first the last rank blocks in its round-0 gradient until the others
    # have finished 6 rounds (so they cannot have waited for it: else this
    # hangs), then catches up by skipping; then it sleeps 0.3 s in every
    # step it computes in; then the papers' exponential model on every
    # worker: results exact every round, parameters equal
    X, Y = make_data(size)
    store = dist.distributed_c10d._get_default_store()
    slow = size - 1
    cdp = coded.CodedDataParallel(make_model(), code=code, s=1)
    blocked = [rank == slow]

    def loss_fn(idx):
        if blocked[0]:
            store.wait(["others_done"], datetime.timedelta(seconds=120))
            blocked[0] = False
        return F.cross_entropy(cdp(X[idx]), Y[idx])

    sampler = cdp.sampler(len(X), B)
    ref = Reference(cdp, sampler, X, Y)
    opt = torch.optim.SGD(cdp.parameters(), lr=0.1)
    steps = (step for _ in range(3) for step in sampler)  # epochs
    for step in steps:
        want = ref.expected(step.round)
        cdp.backward(step, loss_fn)
        torch.testing.assert_close(got_grad(cdp), want, rtol=1e-4, atol=2e-6)
        if rank == cdp.root:
            assert not cdp.last_result()["used"] >> slow & 1 or \
                step.round >= 6, cdp.last_result()
        opt.step()
        if step.round == 5 and rank != slow:
            store.add("finished", 1)
            if int(store.add("finished", 0)) == size - 1:
                store.set("others_done", "1")
        if step.round == 5:
            break
    if rank == slow:
        assert cdp.skipped == 5, cdp.stats()  # rounds 1..5 were decoded
    same_on_all(flat_params(cdp.module), gloo, "parameters")
    print(f"blocked rank: skipped {cdp.skipped}", flush=True)
    cdp.close()
    for strag in [(size - 1, 300), "exp:2"]:
        cdp = coded.CodedDataParallel(make_model(), code=code, s=1,
                                      straggler=strag)
        train(cdp, X, Y, 6)
        same_on_all(flat_params(cdp.module), gloo, "parameters")
        assert cdp.lost_rounds == 0, cdp.stats()
        st = cdp.stats()
        print(f"straggler {strag}: skipped {cdp.skipped} abstained "
              f"{cdp.abstained} delay {cdp.delay_s:.2f} s", flush=True)
        assert st["delay_s"] > 0 or rank != size - 1 or cdp.skipped == 6
        dist.barrier(group=gloo)
        cdp.close()
    print(f"straggler {code} ok", flush=True)


def train_on_after_shrink(cdp, X, Y, failed_round, epochs):
    # after CodedRoundError in failed_round: shrink, then train to the end
    # of `epochs` epochs from the failed step's global batch; gc: every
    # round's gradient is the mean over the new n partitions of its global
    # batch at the current weights (the reference)
    failed_at = cdp._at
    new = cdp.shrink()
    assert new.resume_at == failed_at, (new.resume_at, failed_at)
    ev = new.shrinks[-1]
    print(f"shrunk after round {failed_round}: dead {ev['dead']}, world "
          f"{ev['world']}, n {ev['n']}, s {ev['s']}, resume at "
          f"{new.resume_at}", flush=True)
    sampler = new.sampler(len(X), B)
    opt = torch.optim.SGD(new.parameters(), lr=0.1)
    ref = make_model()
    first = True
    while sampler.epoch < epochs:
        for step in sampler:
            if first:  # the failed step's samples come first
                assert step.epoch == failed_at[0] and torch.equal(
                    sampler.indices(step, 0),
                    sampler._perm(step.epoch)[failed_at[1]:failed_at[1] + B])
                first = False
            load_params(ref, flat_params(new.module))
            new.backward(step, lambda idx: F.cross_entropy(
                new(X[idx]), Y[idx]))
            if not new.pipelined:
                want = sum(flat_grad(ref, X, Y, sampler.indices(step, j))
                           for j in range(new.n)) / new.n
                torch.testing.assert_close(got_grad(new), want, rtol=1e-4,
                                           atol=2e-6)
            opt.step()
    return new


def sc_kill(rank, size, store, code, kill, then_shrink=False, stop=False):
    # the last `kill` ranks SIGKILL themselves after round 2; with kill <= s
    # the survivors finish 8 rounds with the reference gradient (gc) and
    # equal parameters (compared through the store: the gloo group has a
    # dead member); with kill > s every survivor gets CodedRoundError, and
    # with then_shrink they shrink and train on to the end of epoch 2.
    # stop: SIGSTOP instead (alive, connections open, never heard again)
    init(rank, size, store, timeout=30)
    X, Y = make_data(size)
    cdp = coded.CodedDataParallel(make_model(), code=code, s=1)
    st = dist.distributed_c10d._get_default_store()
    dying = rank >= size - kill

    def on_round(step, loss):
        if dying and step.round == 2:
            os.kill(os.getpid(), signal.SIGSTOP if stop else signal.SIGKILL)

    try:
        train(cdp, X, Y, 8, check=not cdp.pipelined, on_round=on_round)
    except coded.CodedRoundError as e:
        print("coded round error:", str(e).splitlines()[0], flush=True)
        if not then_shrink:
            os._exit(0 if kill > cdp.s else 5)
        cdp = train_on_after_shrink(cdp, X, Y, cdp.round, epochs=2)
    assert kill <= cdp.s or then_shrink, "more than s dead and no error"
    assert cdp.shrinks or not then_shrink, "no failure to shrink after"
    if not cdp.pipelined and not then_shrink:
        assert cdp.lost_rounds == 0
    st.set(f"params/{rank}", flat_params(cdp.module).numpy().tobytes())
    mine = st.get(f"params/{rank}")
    for r in range(size - kill):
        st.wait([f"params/{r}"], datetime.timedelta(seconds=30))
        assert st.get(f"params/{r}") == mine, f"parameters of {r} differ"
    print(f"kill {code} ok: lost rounds {cdp.lost_rounds}, skipped "
          f"{cdp.skipped}, abstained {cdp.abstained}", flush=True)
    # wait until every survivor has compared before the store's owner exits
    st.add("compared", 1)
    while int(st.add("compared", 0)) < size - kill:
        time.sleep(0.05)
    os._exit(0)


def expect_error(what, fn, *needles):
    try:
        fn()
    except ValueError as e:
        msg = str(e)
        for needle in needles:
            assert needle in msg, f"{what}: {msg!r} lacks {needle!r}"
        print(f"{what}: {msg}", flush=True)
        return
    raise AssertionError(f"{what}: no error")


def sc_bad_use(rank, size, gloo):
    # every bad use raises ValueError on every rank and the group stays
    # usable (each check is an all_gather before anything else)
    model = make_model()
    X, Y = make_data(size)
    C = coded.CodedDataParallel
    expect_error("s >= n", lambda: C(model, code="gc-cr", s=3), "s < n")
    expect_error("s disagrees", lambda: C(model, code="gc-cr",
                                          s=2 if rank == 1 else 1),
                 "disagree on s", "[1.0, 2.0, 1.0]")
    expect_error("root not a number on one rank", lambda: C(
        model, code="gc-cr", root="x" if rank == 1 else 0), "disagree on root")
    expect_error("bad code", lambda: C(model, code="gc-xx"), "unknown code")
    expect_error("n", lambda: C(model, code="gc-cr", n=4), "n = 4")
    expect_error("compress cr", lambda: C(model, code="pgc-cr",
                                          compress=coded.topk(10)),
                 "FR codes")
    expect_error("straggler", lambda: C(model, code="gc-cr",
                                        straggler="exp:-1"), "straggler")
    cdp = C(model, code="gc-cr", s=1)
    other = coded.CodedSampler(len(X), B, code="pgc-cr" if rank == 2 else
                               "gc-cr", s=1, n=size, worker=cdp.worker)
    step = next(iter(other))
    expect_error("sampler", lambda: cdp.backward(step, lambda i: None),
                 "sampler of rank 2 disagrees", "on code")
    cdp.close()
    cdp = C(model, code="gc-cr", s=1)
    other = coded.CodedSampler(len(X), B, coded=cdp, seed=rank)
    step = next(iter(other))
    expect_error("seed", lambda: cdp.backward(step, lambda i: None),
                 "disagree on seed")
    cdp.close()
    dist.barrier(group=gloo)  # still healthy
    print("bad use ok", flush=True)


def fr_groups(cdp):
    info = torch_gcx._C.CodeInfo("fr", False, cdp.n, cdp.s)
    groups = {}
    for w in range(cdp.n):
        groups.setdefault(tuple(info.assignment(w)[0]), []).append(w)
    return list(groups.values())


def sc_topk(rank, size, gloo, code):
    # compress=topk: members of an FR group hold equal residuals and send
    # equal messages, and the decoded sum is the sum of one compressed
    # message per group (catch_up=False: every member computes every round,
    # even one decoded without it, so this holds whatever the timing)
    X, Y = make_data(size)
    cdp = coded.CodedDataParallel(make_model(), code=code, s=1,
                                  compress=coded.topk(8), catch_up=False)
    groups = fr_groups(cdp)
    nf = sum(p.numel() for p in cdp.module.parameters())

    def on_round(step, loss):
        msgs = [torch.empty(nf + 1) for _ in range(size)]
        dist.all_gather(msgs, cdp.message().clone(), group=gloo)
        res = [torch.empty(nf) for _ in range(size)]
        dist.all_gather(res, cdp.residual(), group=gloo)
        total = torch.zeros(nf + 1)
        for g in groups:
            for w in g[1:]:
                assert torch.equal(res[w], res[g[0]]), \
                    f"round {step.round}: residuals of {g[0]} and {w} differ"
                assert torch.equal(msgs[w], msgs[g[0]]), \
                    f"round {step.round}: messages of {g[0]} and {w} differ"
            total += msgs[g[0]]
        k = (msgs[0][:nf] != 0).sum().item()
        assert 0 < k <= -(-nf // 8), f"{k} entries sent of {nf}"
        torch.testing.assert_close(got_grad(cdp), total[:nf] / cdp.n,
                                   rtol=1e-6, atol=1e-7)
        want = total[nf].item() / cdp.n
        assert abs(loss - want) <= 1e-6 * abs(want), (loss, want)

    train(cdp, X, Y, 6, check=False, on_round=on_round)
    same_on_all(flat_params(cdp.module), gloo, "parameters")
    print(f"topk {code} ok: sent {cdp._impl.sent_entries()} entries",
          flush=True)
    cdp.close()


def main():
    name, rank, size, store = sys.argv[1], int(sys.argv[2]), \
        int(sys.argv[3]), sys.argv[4]
    name, _, arg = name.partition(":")
    if name in ("kill", "stop"):
        code, kill, *then = arg.split("/")
        sc_kill(rank, size, store, code, int(kill), then == ["shrink"],
                stop=name == "stop")
        return
    gloo = init(rank, size, store)
    fn = {"exact": sc_exact, "master": sc_master, "straggler": sc_straggler,
          "bad_use": sc_bad_use, "topk": sc_topk, "ignore": sc_ignore}[name]
    # NAME:CODE1,CODE2: one after the other in this launch (cheaper than a
    # launch each: most of a launch is importing torch)
    for code in arg.split(",") if arg else [None]:
        fn(rank, size, gloo, *([code] if code else []))
        dist.barrier(group=gloo)
    dist.barrier(group=gloo)
    dist.destroy_process_group()
    print(f"rank {rank}: {name} ok", flush=True)


if __name__ == "__main__":
    main()
