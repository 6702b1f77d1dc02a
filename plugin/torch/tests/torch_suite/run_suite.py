"""Run PyTorch's distributed test suite for gcx and gloo and compare them.

    python run_suite.py                      # the whole suite: gloo, gcx, gcx
                                             # under gloo's gates; ws 2 and 3
    python run_suite.py --subset ci          # the CI subset (ci_subset.txt)
    python run_suite.py --start spawn        # spawned ranks, as upstream

Each (backend, world size) is one process running dist_suite.py (the suite
reads BACKEND when imported). Writes OUT/results.json (every test's outcome
per configuration, the counts, the differences) and OUT/results.md (the
table and the differences, as plugin/torch/README.md shows them).

Configurations: "gloo"; "gcx" (the suite's own gates: gcx as the plugin CPU
backend it is); "gcx/gloo-gates" (GATES=gloo: the tests the suite keeps to
the name "gloo" are run on gcx too, so every test gloo runs is run on gcx).

A difference is a test that passed on gloo and did not pass on a gcx
configuration at the same world size. Each gets its reason: the suite's
skip message when the suite skips it for gcx by name, else REASONS below;
an open gcx bug is listed in KNOWN_BUGS (kind "known bug"); a difference
with none of these is a new gcx bug and makes the run fail (exit status
1), as does a configuration that crashes.

Cost: about 1-2 min per configuration for the whole suite on 2 loaded cores
with fork (285 tests, ~90 run on gloo), ~10x that with spawn.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# tests gloo passes that gcx cannot, and why (not a missing gcx feature)
REASONS = {
    "test_ddp_logging_data_cpu":
        "DDP's logger records ProcessGroup::getBackendName(), which is \"custom\" for "
        "every backend registered with Backend.register_backend (torch gives them "
        "BackendType::CUSTOM); the test expects dist.get_backend(), \"gcx\"",
}

# the same, for the gloo-gates configuration only: the suite's code for a test
# it keeps to other backends by name
REASONS_GLOO_GATES = {
    f"test_accumulate_gradients_no_sync{sfx}":
        "the suite builds the model only `if BACKEND == \"mpi\" or BACKEND == \"gloo\"` "
        "(UnboundLocalError for any other name); in its own gates it skips the test for gcx"
    for sfx in ("", "_allreduce_hook", "_allreduce_with_then_hook", "_grad_is_view")
}
REASONS_GLOO_GATES.update({
    name: "torch's Python dist.monitored_barrier() raises \"monitored_barrier is only "
          "implemented for GLOO backend\" for every other backend before calling it "
          "(the group's monitored_barrier, test_monitored_barrier_gloo_rank_0_timeout, is gcx's)"
    for name in ("test_monitored_barrier_gloo", "test_monitored_barrier_gloo_subgroup")
})

# open gcx bugs: tests gloo passes that gcx fails for a missing feature, not
# a reason; listed so that the table names them and CI (test_torch_suite.py)
# checks they still fail: one that passes must leave this list
KNOWN_BUGS = {
    # none open (recvAnysource's three tests left it when gcx got any-source
    # receives); an entry: "test_name": "open bug: what is missing"
}

CONFIGS = {
    "gloo": {"BACKEND": "gloo"},
    "gcx": {"BACKEND": "gcx"},
    "gcx/gloo-gates": {"BACKEND": "gcx", "GATES": "gloo"},
}


def read_subset(name):
    """The test names of subset `name` (NAME_subset.txt: one a line, # comments)."""
    path = os.path.join(HERE, f"{name}_subset.txt")
    with open(path) as f:
        return [ln.split("#")[0].strip() for ln in f if ln.split("#")[0].strip()]


def run_config(config, world_size, tests, start, out_json, log, timeout_s):
    """Run one configuration; returns its result document (with 'seconds')."""
    env = dict(os.environ, WORLD_SIZE=str(world_size), START=start,
               **CONFIGS[config])
    env.setdefault("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "120")
    # the runner works in a temporary folder: a relative PYTHONPATH (the
    # build's plugin) is made absolute
    env["PYTHONPATH"] = os.pathsep.join(
        os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)
    with tempfile.TemporaryDirectory(prefix="gcx-suite-") as tmp:
        # as PyTorch's run_test.py sets them up for its file:// variant (the
        # suite's tests re-initialising the default group use INIT_METHOD)
        env["TEMP_DIR"] = tmp
        env["INIT_METHOD"] = "file://" + os.path.join(tmp, "shared_init_file")
        for sub in ("barrier", "test_dir"):
            os.mkdir(os.path.join(tmp, sub))
        t0 = time.monotonic()
        cmd = [sys.executable, os.path.join(HERE, "dist_suite.py"), out_json, *tests]
        # its own process group: a run past its time is killed with every
        # rank it started
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                cwd=tmp, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        secs = round(time.monotonic() - t0, 1)
    doc = {"tests": {}}
    if os.path.exists(out_json):
        with open(out_json) as f:
            doc = json.load(f)
    doc.update(config=config, world_size=world_size, start=start, seconds=secs, rc=rc)
    doc["counts"] = {k: sum(t["outcome"] == k for t in doc["tests"].values())
                     for k in ("passed", "failed", "skipped")}
    missing = [t for t in tests if t not in doc["tests"]] if tests else []
    if rc != 0 or missing:
        doc["error"] = f"runner exit {rc}; tests without a result: {len(missing)}"
    return doc


def _short(detail):
    """The exception line of a traceback (and an assertEqual's "Expected" line)."""
    lines = [ln.strip() for ln in detail.splitlines() if ln.strip()
             and "To execute this test" not in ln and "dist_suite.py Test" not in ln
             and "PYTORCH_PRINT_REPRO_ON_FAILURE" not in ln]
    exc = [i for i, ln in enumerate(lines) if re.match(r"[\w.]*(Error|Exception)\b", ln)]
    if not exc:
        return " / ".join(lines[-1:])
    i = exc[-1]
    more = [ln for ln in lines[i + 1:i + 3] if ln.startswith("Expected")]
    return " / ".join([lines[i]] + more)[:300]


def differences(docs):
    """Tests that passed on gloo and not on a gcx configuration, with reasons."""
    by = {(d["config"], d["world_size"]): d for d in docs}
    diffs = []
    for (config, ws), doc in sorted(by.items()):
        gloo = by.get(("gloo", ws))
        if config == "gloo" or gloo is None:
            continue
        for name, g in sorted(gloo["tests"].items()):
            t = doc["tests"].get(name)
            if g["outcome"] != "passed" or t is None or t["outcome"] == "passed":
                continue
            reasons = dict(REASONS, **(REASONS_GLOO_GATES if config == "gcx/gloo-gates" else {}))
            if name in reasons:
                reason, kind = reasons[name], "reason"
            elif name in KNOWN_BUGS:
                reason, kind = KNOWN_BUGS[name], "known bug"
            elif t["outcome"] == "skipped":
                # the suite prints its sets of names in no fixed order
                detail = re.sub(r"\{([^}]*)\}", lambda m: "{" + ", ".join(
                    sorted(m.group(1).split(", "))) + "}", t.get("detail", ""))
                t = dict(t, detail=detail)
                reason, kind = "suite skips it for gcx: " + _short(t.get("detail", "")), "gate"
            else:
                reason, kind = "gcx bug: " + _short(t.get("detail", "")), "bug"
            diffs.append({"config": config, "world_size": ws, "test": name,
                          "outcome": t["outcome"], "kind": kind, "reason": reason})
    return diffs


def markdown(docs, diffs, command):
    out = ["| backend | world size | passed | failed | skipped | time (s) |",
           "|---|---|---|---|---|---|"]
    for d in docs:
        c = d["counts"]
        out.append(f"| {d['config']} | {d['world_size']} | {c['passed']} | {c['failed']} "
                   f"| {c['skipped']} | {d['seconds']:.0f} |")
    out += ["", f"Command: `{command}` (ranks started by {docs[0]['start']}; "
            f"torch {docs[0].get('torch', '?')}).", ""]
    titles = {"bug": "gcx bugs (new)", "known bug": "gcx bugs (open, KNOWN_BUGS)",
              "reason": "cannot pass on gcx (REASONS)",
              "gate": "skipped for gcx by the suite's own gates (run under gloo's gates)"}
    if not diffs:
        out.append("Every test gloo passes, gcx passes in every configuration.")
    for kind, title in titles.items():
        by_reason = {}
        for x in diffs:
            if x["kind"] == kind:
                runs = by_reason.setdefault(x["reason"], {}).setdefault(x["test"], [])
                runs.append(f"{x['config']} {x['world_size']}")
        if not by_reason:
            continue
        out += [f"Tests gloo passes and gcx does not: {title}", ""]
        for reason, tests in sorted(by_reason.items()):
            names = ", ".join(f"`{t}` ({'; '.join(r)})" for t, r in sorted(tests.items()))
            out.append(f"- {reason}: {names}")
        out.append("")
    return "\n".join(out) + "\n"


def main():
    # a SIGTERM (a killed CI job) unwinds, so that run_config's finally
    # kills the runner and its ranks too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--world-sizes", default="2,3")
    ap.add_argument("--subset", help="run NAME_subset.txt's tests (e.g. ci)")
    ap.add_argument("--tests", nargs="*", default=[], help="these tests only")
    ap.add_argument("--start", choices=("fork", "spawn"), default="fork")
    ap.add_argument("--out", default="out/torch-suite",
                    help="results folder (default out/torch-suite, git-ignored)")
    ap.add_argument("--timeout", type=int, default=3600,
                    help="seconds per configuration (a hang fails the run)")
    ap.add_argument("--report", action="store_true",
                    help="only rewrite OUT/results.md (and the differences) from "
                         "OUT/results.json")
    args = ap.parse_args()
    tests = read_subset(args.subset) if args.subset else args.tests
    os.makedirs(args.out, exist_ok=True)
    docs = []
    if args.report:
        with open(os.path.join(args.out, "results.json")) as f:
            docs = json.load(f)["configs"]
    for ws in (int(w) for w in args.world_sizes.split(",") if not args.report):
        for config in args.configs.split(","):
            tag = f"{config.replace('/', '-')}-ws{ws}"
            with open(os.path.join(args.out, tag + ".log"), "w") as log:
                doc = run_config(config, ws, tests, args.start,
                                 os.path.join(args.out, tag + ".json"), log, args.timeout)
            docs.append(doc)
            print(f"{config} ws={ws}: {doc['counts']} in {doc['seconds']} s"
                  + (f" ({doc['error']})" if "error" in doc else ""), flush=True)
    diffs = differences(docs)
    command = "python plugin/torch/tests/torch_suite/run_suite.py " + " ".join(
        a for a in sys.argv[1:] if a != "--report")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"configs": docs, "differences": diffs}, f, indent=1, sort_keys=True)
    md = markdown(docs, diffs, command.strip())
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    print(md)
    bad = [d for d in diffs if d["kind"] == "bug"] or [d for d in docs if "error" in d]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
