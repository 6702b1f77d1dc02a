#!/usr/bin/python3
"""random_runs.py - randomized differential runs of gcx_soak (issue 31, item 2).

Idea: run N short sequences of gcx_soak, each one gcxrun job with its own
processes, a random world size P in [--min-p, --max-p] and a random seed,
with injected mismatches and bad arguments (--inject), seeded sleeps
(--delays), the coded gather and create_group (--more) and, in a share of
the sequences (--kill-frac), ranks killed at seeded steps (--kills, under
gcxrun --keep-going); optionally beside --hog busy-looping processes (a
loaded box: ranks wait for a CPU). Every choice comes from --seed, so a
run is repeatable; each failing sequence prints the one command that
replays it. The soak itself checks every result (tests/soak/README.md);
this script classifies each job by its exit status (0 ok, 1 wrong result,
2 or 3 unexpected error, 4 or gcxrun's 124 hang, a signal or a sanitizer
report: crash, counted with the unexpected errors; sanitizers are told to
exit with 86 so that their reports do not read as wrong results) and adds
up the soak's "# random:" lines.

Cost: a sequence is one gcxrun job: ~0.2-0.5 s of start-up (UCX contexts,
the rendezvous) plus its steps; 100 sequences of 60 steps take ~1-2 min on
2 CPUs with a hog beside them. Standard library only (/usr/bin/python3).

Exit status: 0 when no sequence failed, 1 otherwise, 2 for bad usage.
"""
import argparse
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time

RANDOM_LINE = re.compile(
    r"# random: ranks (\d+), live (\d+), seed (\d+), steps (\d+), "
    r"collectives (\d+), injected (\d+), invalid_calls (\d+), kills (\d+), "
    r"delays (\d+), follow_ups (\d+), wrong (\d+)")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build",
                    help="build directory with programs/gcxrun and tests/soak "
                         "(default: build)")
    ap.add_argument("--gcxrun", help="gcxrun (default: BUILD/programs/gcxrun/gcxrun)")
    ap.add_argument("--soak", help="gcx_soak (default: BUILD/tests/soak/gcx_soak)")
    ap.add_argument("-n", "--sequences", type=int, default=20)
    ap.add_argument("--seed", type=int, default=None,
                    help="master seed (default: random, printed)")
    ap.add_argument("--ops-min", type=int, default=30)
    ap.add_argument("--ops-max", type=int, default=90)
    ap.add_argument("--min-p", type=int, default=2)
    ap.add_argument("--max-p", type=int, default=6)
    ap.add_argument("--max-bytes", default="64K")
    ap.add_argument("--only", default=None,
                    help="every step of this kind (gcx_soak --only: e.g. "
                         "coded_gather, sparse_allreduce; the draws stay as they were)")
    ap.add_argument("--inject", type=int, default=15,
                    help="percent of collectives injected (default 15)")
    ap.add_argument("--delays", type=int, default=10,
                    help="percent of collectives with seeded sleeps (default 10)")
    ap.add_argument("--no-more", action="store_true",
                    help="leave the coded gather and create_group out")
    ap.add_argument("--kill-frac", type=float, default=0.3,
                    help="share of sequences with kills (default 0.3)")
    ap.add_argument("--max-kills", type=int, default=2)
    ap.add_argument("--hog", type=int, default=0,
                    help="busy-looping processes beside the jobs (default 0)")
    ap.add_argument("--gcx-timeout", default="20",
                    help="GCX_TIMEOUT of the jobs: a call that takes longer "
                         "is a hang (default 20 s)")
    ap.add_argument("--job-timeout", type=float, default=300,
                    help="gcxrun --timeout per job (default 300 s)")
    ap.add_argument("--tcp-frac", type=float, default=0.0,
                    help="share of sequences over UCX_TLS=tcp,self (default 0)")
    ap.add_argument("--logs", default=None,
                    help="folder for the logs of failed sequences")
    ap.add_argument("--quiet", action="store_true",
                    help="one line per failure only, no progress")
    a = ap.parse_args()
    if a.min_p < 1 or a.max_p < a.min_p or a.ops_min < 1 or a.ops_max < a.ops_min:
        ap.error("need 1 <= min-p <= max-p and 1 <= ops-min <= ops-max")
    a.gcxrun = a.gcxrun or os.path.join(a.build, "programs", "gcxrun", "gcxrun")
    a.soak = a.soak or os.path.join(a.build, "tests", "soak", "gcx_soak")
    for p in (a.gcxrun, a.soak):
        if not os.access(p, os.X_OK):
            ap.error("not an executable: %s" % p)
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1 << 31)
    return a


def start_hogs(n):
    hogs = []
    for _ in range(n):
        hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                     stdin=subprocess.DEVNULL))
    return hogs


def stop_hogs(hogs):
    for h in hogs:
        if h.poll() is None:
            h.kill()
    for h in hogs:
        h.wait()


def plan(a, i):
    """The sequence's world size, seed, steps, kills and transport."""
    r = random.Random((a.seed << 20) ^ i)
    p = r.randint(a.min_p, a.max_p)
    seed = r.randrange(1, 1 << 31)
    ops = r.randint(a.ops_min, a.ops_max)
    kills = 0
    if p >= 2 and r.random() < a.kill_frac:
        kills = r.randint(1, max(1, min(a.max_kills, p - 1)))
    tcp = r.random() < a.tcp_frac
    return p, seed, ops, kills, tcp


def command(a, p, seed, ops, kills, tcp):
    env = {"GCX_TIMEOUT": a.gcx_timeout}
    if tcp:
        env["UCX_TLS"] = "tcp,self"
    cmd = [a.gcxrun, "-n", str(p), "-t"]
    if kills:
        cmd.append("--keep-going")
    cmd += ["--timeout", str(a.job_timeout), "--", a.soak, "--ops", str(ops),
            "--seed", str(seed), "--max-bytes", a.max_bytes,
            "--inject", str(a.inject), "--delays", str(a.delays)]
    if not a.no_more:
        cmd.append("--more")
    if kills:
        cmd += ["--kills", str(kills)]
    if a.only:
        cmd += ["--only", a.only]
    return env, cmd


SANITIZER_EXIT = 86


def sanitizer_env(env):
    """ASan, LSan and UBSan reports exit with SANITIZER_EXIT (their default,
    1, is the soak's wrong result); the options already set are kept."""
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
        old = env.get(var, "")
        env[var] = (old + ":" if old else "") + "exitcode=%d" % SANITIZER_EXIT


WRONG_LINE = re.compile(r"\[soak rank \d+\] WRONG ")


def classify(rc, out):
    if rc == SANITIZER_EXIT:
        return "crash"
    if rc == 0:
        return "ok" if RANDOM_LINE.search(out) else "unexpected"
    # gcxrun exits with the first failing rank's status: a wrong result on
    # any rank makes the sequence wrong, whatever another rank exited with
    if rc == 1 or WRONG_LINE.search(out):
        return "wrong"
    if rc in (4, 124):
        return "hang"
    if rc in (2, 3):
        return "unexpected"
    return "crash"


def main():
    a = parse_args()
    tot = dict(sequences=0, collectives=0, injected=0, invalid_calls=0,
               kills=0, delays=0, steps=0, ok=0, wrong=0, hang=0,
               unexpected=0, crash=0)
    failures = []
    print("# random_runs: master seed %d, %d sequences, P %d-%d, %d-%d steps, "
          "inject %d%%, delays %d%%, kill share %.2f, hogs %d, GCX_TIMEOUT %s"
          % (a.seed, a.sequences, a.min_p, a.max_p, a.ops_min, a.ops_max,
             a.inject, a.delays, a.kill_frac, a.hog, a.gcx_timeout), flush=True)
    hogs = start_hogs(a.hog)
    t0 = time.monotonic()
    try:
        for i in range(a.sequences):
            p, seed, ops, kills, tcp = plan(a, i)
            env, cmd = command(a, p, seed, ops, kills, tcp)
            full_env = dict(os.environ)
            full_env.update(env)
            sanitizer_env(full_env)
            proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
            try:
                raw, _ = proc.communicate()
            except KeyboardInterrupt:
                proc.terminate()  # gcxrun passes it on to its ranks
                try:
                    proc.communicate(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.communicate()
                raise
            out = raw.decode("utf-8", "replace")
            what = classify(proc.returncode, out)
            tot["sequences"] += 1
            tot[what] += 1
            m = RANDOM_LINE.search(out)
            if m:
                tot["collectives"] += int(m.group(5))
                tot["injected"] += int(m.group(6))
                tot["invalid_calls"] += int(m.group(7))
                tot["kills"] += int(m.group(8))
                tot["delays"] += int(m.group(9))
                tot["steps"] += int(m.group(4))
            else:
                # a failed job prints no summary: count its kills as planned
                tot["kills"] += len(re.findall(r"\] # kill \d+:", out))
            replay = " ".join("%s=%s" % kv for kv in env.items()) + " " + \
                " ".join(shlex.quote(c) for c in cmd)
            if what != "ok":
                lines = [l for l in out.splitlines()
                         if re.search(r"WRONG|HANG|UNEXPECTED|REPLAY|gcxrun:|"
                                      r"could not be cancelled|vanishing|# kill",
                                      l)]
                failures.append((i, what, proc.returncode, replay))
                print("FAIL %s (exit %d) sequence %d: P %d, seed %d, %d steps, "
                      "%d kills%s; replay:\n  %s" % (
                          what, proc.returncode, i, p, seed, ops, kills,
                          ", tcp" if tcp else "", replay), flush=True)
                for l in lines[:12]:
                    print("    " + l)
                if a.logs:
                    os.makedirs(a.logs, exist_ok=True)
                    path = os.path.join(a.logs, "seq%d-seed%d.log" % (i, seed))
                    with open(path, "w") as f:
                        f.write(replay + "\n" + out)
                    print("    log: %s" % path, flush=True)
            elif not a.quiet and (i + 1) % 50 == 0:
                print("# %d sequences, %d collectives, %.0f s" % (
                    i + 1, tot["collectives"], time.monotonic() - t0), flush=True)
    except KeyboardInterrupt:
        print("# interrupted", flush=True)
    finally:
        stop_hogs(hogs)
    el = time.monotonic() - t0
    print("# sequences %d, collectives %d, injected errors %d (local bad-argument "
          "calls %d), kills %d, delays %d, wrong results %d, hangs %d, "
          "unexpected errors %d (crashes %d), %.0f s, master seed %d" % (
              tot["sequences"], tot["collectives"], tot["injected"],
              tot["invalid_calls"], tot["kills"], tot["delays"], tot["wrong"],
              tot["hang"], tot["unexpected"] + tot["crash"], tot["crash"], el,
              a.seed), flush=True)
    for i, what, rc, replay in failures:
        print("# failed: sequence %d %s (exit %d): %s" % (i, what, rc, replay))
    return 1 if failures else 0


if __name__ == "__main__":
    def on_term(*_):
        raise KeyboardInterrupt()  # the counts so far, the hogs stopped
    signal.signal(signal.SIGTERM, on_term)
    sys.exit(main())
