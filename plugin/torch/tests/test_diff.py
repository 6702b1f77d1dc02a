"""Randomized differential runs of torch_gcx, a bounded number for CI
(diff_worker.py says what a run does; diff_run.py runs many:
`diff_run.py --what all --seeds 1-50 --hog`).

- Seeded plans of torch.distributed calls (every collective, the reduce
  ops gcx supports, six dtypes, sizes 0 to 2^20, sub-groups, mismatched
  calls on one rank) on gcx against gloo over the same ranks: equal bit for
  bit; each mismatch raises on every member and the next call is right.
- CodedDataParallel with a rank SIGKILLed at a seeded round, inside
  backward() (a gradient hook), with a busy loop beside the ranks: the
  survivors go on (shrinking when the root died) with equal parameters.
ElasticDDP with deaths inside backward() is test_elastic.py's
test_death_inside_backward_with_buckets_in_flight (diff_run.py --what
elastic runs more seeds).

A failure names the seed and prints the replay command.

Cost: 4 launches of 3-4 ranks, ~1.2 minutes on the loaded 2-core box."""
import pytest

from launch import cpu_hog, launch


def logs(results):
    return "\n".join(f"--- rank {r} (rc {rc}) ---\n{o[-3000:]}"
                     for r, (rc, o) in enumerate(results))


@pytest.mark.parametrize("size,seeds", [(4, "1,2"), (3, "3,4")])
def test_collectives_equal_gloo(size, seeds):
    results = launch("collectives", size, timeout=400,
                     script="diff_worker.py",
                     env={"DIFF_SEEDS": seeds, "DIFF_OPS": "200"})
    for r, (rc, out) in enumerate(results):
        assert rc == 0, logs(results)
        for seed in seeds.split(","):
            assert f"rank {r}: seed {seed} ok" in out, logs(results)
    # the plans did compare and did inject mismatches
    text = "".join(o for _, o in results)
    assert " 0 calls equal" not in text and " 0 mismatches" not in text, \
        logs(results)


# seed 2: gc-fr, the root (rank 0) dies inside round 1's backward (more
# than the code tolerates: every survivor shrinks); seed 17: pgc-cr, rank 2
# dies inside round 3's backward (s = 1 covers it: no shrink)
@pytest.mark.parametrize("seed,victim,shrinks", [(2, 0, 1), (17, 2, 0)])
def test_coded_rank_killed_inside_backward(seed, victim, shrinks):
    with cpu_hog():
        results = launch("coded_kill", 4, timeout=300,
                         script="diff_worker.py",
                         env={"DIFF_SEED": str(seed)})
    assert results[victim][0] == -9, logs(results)
    plan = results[0][1]  # rank 0 prints the plan first, victim or not
    assert f"victim {victim} " in plan and "moment inside" in plan, \
        logs(results)
    for r, (rc, out) in enumerate(results):
        if r == victim:
            continue
        assert rc == 0, logs(results)
        assert "coded_kill" in out and f"shrinks {shrinks}," in out, \
            logs(results)
