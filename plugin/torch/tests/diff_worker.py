"""One rank of a randomized differential run of torch_gcx against gloo:
python diff_worker.py SCENARIO RANK SIZE STOREFILE (launch.py starts it;
diff_run.py and test_diff.py drive it).

Idea: the same seeded sequence of torch.distributed calls runs on a gcx
group and on a gloo group of the same ranks, and every result must be
gloo's bit for bit. The inputs are small integers (sums, products, means
of multiples of the group size, power-of-two PREMUL_SUM factors), so
every float result is exact whatever order a backend adds in, and any
difference is a defect, not rounding.

collectives: DIFF_SEEDS (comma-separated) plans of DIFF_OPS calls each,
drawn from random.Random(seed), the same on every rank: all_reduce (SUM,
AVG, MIN, MAX, PRODUCT, PREMUL_SUM, BAND, BOR, BXOR on the dtypes gcx
reduces), broadcast, all_gather, all_gather_into_tensor, reduce_scatter,
reduce_scatter_tensor, all_to_all_single (equal or drawn split sizes),
reduce, gather, scatter, barrier; float32, float64, int32, int64,
bfloat16, float16 (the data movers also uint8 and bool); 0, 1, odd and up
to 2^20 elements; on the default group or on sub-groups of 1..SIZE ranks
made by dist.new_group (gcx and gloo each). Some calls are made
mismatched on one rank of the group (another count, dtype, op or root):
gcx must raise on every member (GCX_ERR_MISMATCH, nothing written) and the
group's next call must be right; those run on gcx only (gloo may hang or
write out of bounds). all_to_all of lists must be refused on every rank.
Each rank's inputs come from (seed, call, rank). A failure prints "DIFF
FAIL seed S call I: ..." and the replay command.

coded_kill: CodedDataParallel (DIFF_SEED draws the code (gc-fr, gc-cr,
pgc-fr, pgc-cr), the victim, the round and the moment: before the
round's backward, inside it (a gradient hook of the first layer, the last
gradient autograd computes; a victim that computes nothing, catching up,
stays armed, and dies before the round two rounds later), or after it,
before the optimizer step); the victim SIGKILLs itself; with the root or more than s gone the survivors
get CodedRoundError and shrink; either way they train to the end of epoch
2 and must hold the same parameters bit for bit (compared through the
store).

Cost: collectives: ~1-3 s of calls per 100 on 4 ranks (most of a launch
is importing torch); coded_kill: a 16-unit MLP, ~20 rounds.
"""
import datetime
import os
import random
import signal
import sys
import time

import torch
import torch.distributed as dist

import torch_gcx  # noqa: F401  (registers "gcx")
from worker import init

R = dist.ReduceOp
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTS = [torch.int32, torch.int64]
REDUCE_DTYPES = FLOATS + INTS
MOVE_DTYPES = REDUCE_DTYPES + [torch.uint8, torch.bool]
KINDS = ["all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
         "reduce_scatter", "reduce_scatter_tensor", "all_to_all_single",
         "reduce", "gather", "scatter", "barrier"]
# weights of the kinds (all_reduce, the one DDP uses, the most)
WEIGHTS = [4, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1]


def replay_hint(seed, size, ops):
    return (f"replay: PYTHONPATH=build/plugin/torch build-venv/bin/python "
            f"plugin/torch/tests/diff_run.py --ranks {size} --ops {ops} "
            f"--seeds {seed}")


def draw_count(rng):
    k = rng.random()
    if k < 0.12:
        return 0
    if k < 0.25:
        return 1
    if k < 0.55:
        return rng.randrange(1, 64) * 2 + 1          # odd, small
    if k < 0.93:
        return rng.randrange(2, 6000)
    if k < 0.98:
        return rng.randrange(60000, 300000)
    return 1 << 20


def draw_op(rng, kind, dtype):
    """A ReduceOp for `kind` on `dtype` (None: not a reduction)."""
    if kind not in ("all_reduce", "reduce", "reduce_scatter",
                    "reduce_scatter_tensor"):
        return None
    ops = ["SUM", "MIN", "MAX", "PRODUCT"]
    if dtype.is_floating_point and kind != "reduce":
        ops += ["AVG", "PREMUL_SUM"]
    if not dtype.is_floating_point:
        ops += ["BAND", "BOR", "BXOR"]
    return rng.choice(ops)


def make_op(name, factor):
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(factor)
    return getattr(R, name)


def values(gen, n, dtype, opname, gsize):
    """This rank's input: small integers, exact in every dtype."""
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=gen).bool()
    if dtype == torch.uint8:
        return torch.randint(0, 256, (n,), generator=gen).to(dtype)
    if opname in ("BAND", "BOR", "BXOR"):
        hi = 1 << 30
        return torch.randint(-hi, hi, (n,), generator=gen, dtype=torch.int64
                             ).to(dtype)
    if opname == "PRODUCT":
        v = torch.tensor([-2, -1, 1, 2])
        return v[torch.randint(0, 4, (n,), generator=gen)].to(dtype)
    if opname == "AVG":
        # multiples of the group size: the mean is an integer
        return (torch.randint(-8, 9, (n,), generator=gen) * gsize).to(dtype)
    if dtype.is_floating_point:
        return torch.randint(-8, 9, (n,), generator=gen).to(dtype)
    return torch.randint(-1000, 1000, (n,), generator=gen).to(dtype)


class Mismatch(Exception):
    pass


def call(kind, group, spec, rank, mine):
    """Runs one call on `group` with this rank's view of it; returns the
    tensors to compare (cloned)."""
    members, n, dtype, opname, root, factor = (
        spec["members"], spec["n"], spec["dtype"], spec["op"], spec["root"],
        spec["factor"])
    gsize = len(members)
    me = members.index(rank)
    if kind == "all_reduce":
        t = mine(n, dtype).clone()
        dist.all_reduce(t, op=make_op(opname, factor), group=group)
        return [t]
    if kind == "broadcast":
        t = mine(n, dtype).clone() if rank == root else \
            torch.zeros(n, dtype=dtype)
        dist.broadcast(t, src=root, group=group)
        return [t]
    if kind == "all_gather":
        out = [torch.zeros(n, dtype=dtype) for _ in members]
        dist.all_gather(out, mine(n, dtype).clone(), group=group)
        return out
    if kind == "all_gather_into_tensor":
        out = torch.zeros(n * gsize, dtype=dtype)
        dist.all_gather_into_tensor(out, mine(n, dtype).clone(), group=group)
        return [out]
    if kind == "reduce_scatter":
        ins = [mine(n, dtype, j).clone() for j in range(gsize)]
        out = torch.zeros(n, dtype=dtype)
        dist.reduce_scatter(out, ins, op=make_op(opname, factor), group=group)
        return [out]
    if kind == "reduce_scatter_tensor":
        inp = mine(n * gsize, dtype).clone()
        out = torch.zeros(n, dtype=dtype)
        dist.reduce_scatter_tensor(out, inp, op=make_op(opname, factor),
                                   group=group)
        return [out]
    if kind == "all_to_all_single":
        splits = spec["splits"]  # splits[i][j]: members[i] sends to j
        if splits is None:
            inp = mine(n * gsize, dtype).clone()
            out = torch.zeros(n * gsize, dtype=dtype)
            dist.all_to_all_single(out, inp, group=group)
        else:
            ins = list(splits[me])
            outs = [splits[i][me] for i in range(gsize)]
            inp = mine(sum(ins), dtype).clone()
            out = torch.zeros(sum(outs), dtype=dtype)
            dist.all_to_all_single(out, inp, output_split_sizes=outs,
                                   input_split_sizes=ins, group=group)
        return [out]
    if kind == "reduce":
        t = mine(n, dtype).clone()
        dist.reduce(t, dst=root, op=make_op(opname, factor), group=group)
        return [t] if rank == root else []
    if kind == "gather":
        out = [torch.zeros(n, dtype=dtype) for _ in members] \
            if rank == root else None
        dist.gather(mine(n, dtype).clone(), out, dst=root, group=group)
        return out if rank == root else []
    if kind == "scatter":
        ins = [mine(n, dtype, j).clone() for j in range(gsize)] \
            if rank == root else None
        out = torch.zeros(n, dtype=dtype)
        dist.scatter(out, ins, src=root, group=group)
        return [out]
    if kind == "barrier":
        dist.barrier(group=group)
        return []
    raise ValueError(kind)


def plan_call(rng, groups, size):
    """Every rank draws the same call (and its mismatch, if any)."""
    gi = rng.randrange(len(groups))
    members = groups[gi][0]
    kind = rng.choices(KINDS, WEIGHTS)[0]
    reduces = kind in ("all_reduce", "reduce", "reduce_scatter",
                       "reduce_scatter_tensor")
    dtype = rng.choice(REDUCE_DTYPES if reduces else MOVE_DTYPES)
    n = draw_count(rng)
    if kind in ("all_gather", "all_gather_into_tensor", "reduce_scatter",
                "reduce_scatter_tensor", "all_to_all_single", "gather",
                "scatter") and n > 300000:
        n = rng.randrange(60000, 300000)  # per rank: the whole is P times
    spec = {"group": gi, "members": members, "kind": kind, "dtype": dtype,
            "n": n, "op": draw_op(rng, kind, dtype),
            "root": rng.choice(members), "factor": rng.choice(
                [0.25, 0.5, 1.0, 2.0, 4.0]), "splits": None,
            "mismatch": None}
    if kind == "all_to_all_single" and rng.random() < 0.6:
        spec["splits"] = [[rng.randrange(0, 40) for _ in members]
                          for _ in members]
    # a mismatched call on one member: another count, dtype, op or root
    if rng.random() < 0.08 and len(members) > 1 and kind in (
            "all_reduce", "broadcast", "reduce", "all_gather_into_tensor",
            "reduce_scatter_tensor", "gather", "scatter"):
        how = ["count"]
        if reduces:
            how += ["dtype", "op"]
        if kind in ("broadcast", "reduce", "gather", "scatter"):
            how += ["root"]
        spec["mismatch"] = (rng.choice(members), rng.choice(how))
    return spec


def mismatched(spec, rng2):
    """The bad member's view of a mismatched call."""
    bad = dict(spec)
    how = spec["mismatch"][1]
    if how == "count":
        bad["n"] = spec["n"] + rng2.choice([1, 2, 7])
    elif how == "dtype":
        others = [d for d in REDUCE_DTYPES if d != spec["dtype"] and
                  (d.is_floating_point or spec["op"] not in ("AVG",
                                                             "PREMUL_SUM"))
                  and (not d.is_floating_point or spec["op"] not in
                       ("BAND", "BOR", "BXOR"))]
        bad["dtype"] = rng2.choice(others)
    elif how == "op":
        bad["op"] = "MAX" if spec["op"] != "MAX" else "MIN"
    elif how == "root":
        bad["root"] = rng2.choice([m for m in spec["members"]
                                   if m != spec["root"]])
    return bad


def describe(i, spec):
    return (f"call {i}: {spec['kind']} on ranks {spec['members']} "
            f"{str(spec['dtype']).replace('torch.', '')} n={spec['n']} "
            f"op={spec['op']} root={spec['root']} factor={spec['factor']}"
            + (f" splits={spec['splits']}" if spec["splits"] else "")
            + (f" mismatch={spec['mismatch']}" if spec["mismatch"] else ""))


def run_plan(seed, rank, size, ops):
    rng = random.Random(seed)
    # sub-groups (every rank creates every group, members or not), gcx and
    # gloo over the same ranks; the world pair first
    groups = [(list(range(size)), None,
               dist.new_group(backend="gloo"))]
    for _ in range(rng.randrange(1, 4)):
        k = rng.randrange(1, size + 1)
        members = sorted(rng.sample(range(size), k))
        groups.append((members, dist.new_group(members, backend="gcx"),
                       dist.new_group(members, backend="gloo")))
    stats = {"calls": 0, "mismatches": 0, "skipped": 0}
    for i in range(ops):
        spec = plan_call(rng, groups, size)
        members, gcx_g, gloo_g = groups[spec["group"]]
        if rank not in members:
            stats["skipped"] += 1
            continue
        base = (seed * 1000003 + i) * 64

        def mine(n, dtype, part=0, _spec=spec, _base=base):
            gen = torch.Generator().manual_seed(_base + 8 * rank + part)
            return values(gen, n, dtype, _spec["op"], len(_spec["members"]))

        what = describe(i, spec)
        if spec["mismatch"] is not None:
            bad_rank = spec["mismatch"][0]
            view = mismatched(spec, random.Random(seed * 7 + i)) \
                if rank == bad_rank else spec
            try:
                call(spec["kind"], gcx_g, view, rank, mine)
            except Exception as e:  # noqa: BLE001
                if "MISMATCH" not in str(e):
                    raise AssertionError(f"DIFF FAIL seed {seed} {what}: "
                                         f"raised, but not a mismatch: {e}")
                stats["mismatches"] += 1
            else:
                raise AssertionError(f"DIFF FAIL seed {seed} {what}: the "
                                     f"mismatched call did not raise on "
                                     f"rank {rank}")
            continue
        got = call(spec["kind"], gcx_g, spec, rank, mine)
        if spec["op"] == "PREMUL_SUM":
            # gloo has no PREMUL_SUM: its SUM of the scaled inputs (a power
            # of two: exact)
            def scaled(n, dtype, part=0, _mine=mine, _f=spec["factor"]):
                return _mine(n, dtype, part) * _f
            want = call(spec["kind"], gloo_g, dict(spec, op="SUM"), rank,
                        scaled)
        else:
            want = call(spec["kind"], gloo_g, spec, rank, mine)
        for j, (a, b) in enumerate(zip(got, want)):
            if a.dtype != b.dtype or a.shape != b.shape or \
                    not torch.equal(a, b):
                bad = (a.double() - b.double()).abs() if a.shape == b.shape \
                    and a.numel() and a.dtype != torch.bool else None
                if bad is not None:
                    k = int(bad.argmax())
                    at = (f"largest at {k}: gcx {a.view(-1)[k].item()} "
                          f"gloo {b.view(-1)[k].item()}")
                else:
                    at = f"gcx {a.dtype} {tuple(a.shape)}, gloo {b.dtype} " \
                         f"{tuple(b.shape)}"
                raise AssertionError(
                    f"DIFF FAIL seed {seed} {what}: output {j} differs from "
                    f"gloo on rank {rank} ({at})")
        stats["calls"] += 1
    # every group once more, all members at once: nothing left behind
    for members, gcx_g, _ in groups:
        if rank in members:
            dist.barrier(group=gcx_g)
    # all_to_all of lists: refused on every rank, the group still right
    try:
        dist.all_to_all([torch.zeros(2) for _ in range(size)],
                        [torch.ones(2) for _ in range(size)])
    except Exception as e:  # noqa: BLE001
        if "does not support" not in str(e) and "not supported" not in str(e):
            raise AssertionError(f"DIFF FAIL seed {seed}: all_to_all of "
                                 f"lists: unexpected error {e}")
    else:
        raise AssertionError(f"DIFF FAIL seed {seed}: all_to_all of lists "
                             f"did not raise")
    t = torch.full((3,), float(rank))
    dist.all_reduce(t)
    if not torch.equal(t, torch.full((3,), float(sum(range(size))))):
        raise AssertionError(f"DIFF FAIL seed {seed}: all_reduce after the "
                             f"plan gave {t}")
    for _, gcx_g, gloo_g in groups[1:]:
        for g in (gcx_g, gloo_g):
            if g is not None and g != dist.GroupMember.NON_GROUP_MEMBER:
                dist.destroy_process_group(g)
    return stats


def sc_collectives(rank, size):
    init(rank, size, sys.argv[4], timeout=120, gloo=False)
    ops = int(os.environ.get("DIFF_OPS", "150"))
    for s in os.environ.get("DIFF_SEEDS", "1").split(","):
        seed = int(s)
        t0 = time.time()
        try:
            stats = run_plan(seed, rank, size, ops)
        except AssertionError as e:
            print(str(e), flush=True)
            print(replay_hint(seed, size, ops), flush=True)
            raise
        print(f"rank {rank}: seed {seed} ok: {stats['calls']} calls equal "
              f"to gloo, {stats['mismatches']} mismatches raised, "
              f"{stats['skipped']} not a member ({time.time() - t0:.1f} s)",
              flush=True)
    dist.destroy_process_group()


def sc_coded_kill(rank, size):
    from torch_gcx import coded
    import torch.nn.functional as F
    from coded_worker import B, flat_params, make_data, make_model

    seed = int(os.environ.get("DIFF_SEED", "1"))
    rng = random.Random(seed)
    code = rng.choice(["gc-fr", "gc-cr", "pgc-fr", "pgc-cr"])
    victim = rng.randrange(size)
    kill_round = rng.randrange(1, 6)
    moment = rng.choice(["before", "inside", "after"])
    if rank == 0:
        print(f"PLAN seed {seed} code {code} victim {victim} round "
              f"{kill_round} moment {moment}", flush=True)
    dist.init_process_group("gcx", init_method="file://" + sys.argv[4],
                            rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=30))
    st = dist.distributed_c10d._get_default_store()
    X, Y = make_data(size)
    cdp = coded.CodedDataParallel(make_model(), code=code, s=1)
    armed = {"on": False}

    def die(where):
        print(f"dying {where} round {rounds}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    if rank == victim:
        # the first layer's weight gets its gradient last in backward()
        first = next(cdp.module.parameters())
        first.register_hook(
            lambda g: die("inside backward() of") if armed["on"] else g)
    epochs, rounds, shrinks = 2, 0, 0
    sampler = cdp.sampler(len(X), B)
    opt = torch.optim.SGD(cdp.parameters(), lr=0.1)
    while sampler.epoch < epochs:
        try:
            for step in sampler:
                mine_now = rank == victim and rounds == kill_round
                if mine_now and moment == "before":
                    die("before")
                # armed until it dies: a worker that catches up computes
                # nothing (a slow one may skip round after round); two
                # rounds on, it dies before the round instead (gc codes
                # have 8 rounds, the kill round is at most 5)
                if rank == victim and moment == "inside" and \
                        rounds >= kill_round + 2:
                    die("(inside never came) before")
                armed["on"] = armed["on"] or (mine_now and
                                              moment == "inside")
                cdp.backward(step, lambda idx: F.cross_entropy(
                    cdp(X[idx]), Y[idx]))
                if mine_now and moment == "after":
                    die("after backward() of")
                opt.step()
                rounds += 1
        except coded.CodedRoundError as e:
            print("coded round error:", str(e).splitlines()[0], flush=True)
            # a survivor that missed the last decoded round (the root died
            # sending it) takes the others' state: opt keeps none (SGD), but
            # this is how a stateful one would follow
            cdp = cdp.shrink(optimizer=opt)
            shrinks += 1
            ev = cdp.shrinks[-1]
            print(f"shrunk: dead {ev['dead']}, world {ev['world']}, n "
                  f"{ev['n']}, s {ev['s']}, adopted from "
                  f"{ev['adopted_from']}", flush=True)
            sampler = cdp.sampler(len(X), B)
            opt = torch.optim.SGD(cdp.parameters(), lr=0.1)
    mine = flat_params(cdp.module).numpy().tobytes()
    st.set(f"params/{rank}", mine)
    survivors = [r for r in range(size) if r != victim]
    for r in survivors:
        st.wait([f"params/{r}"], datetime.timedelta(seconds=60))
        if st.get(f"params/{r}") != mine:
            raise AssertionError(f"DIFF FAIL seed {seed}: parameters of rank "
                                 f"{r} differ from rank {rank}'s ({code}, "
                                 f"victim {victim}, round {kill_round}, "
                                 f"{moment})")
    print(f"rank {rank}: coded_kill {code} ok: rounds {rounds}, shrinks "
          f"{shrinks}, lost rounds {cdp.lost_rounds}", flush=True)
    # every survivor compared before the store's owner (a FileStore: none)
    st.add("compared", 1)
    while int(st.add("compared", 0)) < len(survivors):
        time.sleep(0.05)
    cdp.close()
    os._exit(0)


SCENARIOS = {"collectives": sc_collectives, "coded_kill": sc_coded_kill}


def main():
    scenario, rank, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    SCENARIOS[scenario](rank, size)
    print(f"rank {rank}: {scenario} ok", flush=True)


if __name__ == "__main__":
    main()
