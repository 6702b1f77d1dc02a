"""PyTorch's own distributed test suite (its CI subset, ci_subset.txt) on gcx
against gloo: every test of the subset passes on gloo, and on gcx at the same
world size, both under the suite's own gates (gcx as the third-party CPU
backend it is) and under gloo's (the tests the suite keeps to the name
"gloo" run on gcx too). A difference passes only with a reason in
run_suite.REASONS (something outside gcx's reach) or as an open bug in
run_suite.KNOWN_BUGS, which must still fail (a fixed one leaves the list);
any other missing gcx feature fails. The whole suite: run_suite.py (README.md).

Cost: five runs of the ~36 tests (gloo and gcx/gloo-gates at world sizes 2
and 3, gcx at 2), each test starting its ranks by fork: about 2-3 min on 2
loaded cores. Each run has a time limit; each test's ranks the suite's own
(DISTRIBUTED_TESTS_DEFAULT_TIMEOUT, 120 s here), so a hang fails."""
import pytest

import run_suite

TESTS = run_suite.read_subset("ci")
RUNS = [("gloo", 2), ("gcx", 2), ("gcx/gloo-gates", 2), ("gloo", 3), ("gcx/gloo-gates", 3)]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite")
    docs = []
    for config, ws in RUNS:
        tag = f"{config.replace('/', '-')}-ws{ws}"
        with open(out / f"{tag}.log", "w") as log:
            docs.append(run_suite.run_config(config, ws, TESTS, "fork",
                                             str(out / f"{tag}.json"), log, 600))
    return docs


@pytest.mark.parametrize("config,ws", RUNS)
def test_every_test_ran(results, config, ws):
    doc = next(d for d in results if (d["config"], d["world_size"]) == (config, ws))
    assert "error" not in doc, doc.get("error")
    assert sorted(doc["tests"]) == sorted(TESTS)


@pytest.mark.parametrize("ws", [2, 3])
def test_gloo_passes_the_subset(results, ws):
    # the subset is chosen from the tests gloo passes: a test that does not
    # is a wrong choice (or a broken torch), not a gcx result
    doc = next(d for d in results if (d["config"], d["world_size"]) == ("gloo", ws))
    bad = {n: t for n, t in doc["tests"].items() if t["outcome"] != "passed"}
    assert not bad, bad


@pytest.mark.parametrize("config,ws", [r for r in RUNS if r[0] != "gloo"])
def test_gcx_passes_what_gloo_passes(results, config, ws):
    diffs = [d for d in run_suite.differences(results)
             if (d["config"], d["world_size"]) == (config, ws)]
    # under the suite's own gates a test it keeps to gloo by name skips
    # (kind "gate"); that test runs, and must pass, under gloo's gates
    unexplained = [d for d in diffs if d["kind"] == "bug"]
    assert not unexplained, "\n".join(f"{d['test']}: {d['reason']}" for d in unexplained)
    if config == "gcx/gloo-gates":
        assert not [d for d in diffs if d["kind"] == "gate"]
    # KNOWN_BUGS names what is open, no more: a test in it that passes on
    # gcx has been fixed and must leave the list (and the README's)
    doc = next(d for d in results if (d["config"], d["world_size"]) == (config, ws))
    fixed = [n for n in run_suite.KNOWN_BUGS if doc["tests"].get(n, {}).get("outcome") == "passed"]
    assert not fixed, fixed

