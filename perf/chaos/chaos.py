#!/usr/bin/python3
"""chaos.py: gcx-train under random faults on the emulated cluster (perf/cluster/emulate.sh).

Idea: from one seed, draw a schedule of short training runs (4 ranks, one per emulated node,
1 Gbit/s links), each with one fault injected from outside while it trains (2 to 6 s after
rank 0 printed its header, i.e. once the communicator is up): SIGKILL of ranks,
a SIGSTOP/SIGCONT stall shorter or longer than GCX_TIMEOUT, or a link rate change with
`tc qdisc change` inside a rank's namespace and on its switch port. Every run has a hard
wall-clock limit (emulate.sh --timeout, and a kill of the whole run group past it); a run
that reaches it is a HANG and the driver goes on. Each run is compared with what the sync
mode promises:
  - dense and compressed (topk, gravac) sync: a dead rank, or one stopped for longer than
    GCX_TIMEOUT, makes every other rank exit non-zero with gcx's error naming the cause;
  - coded sync (gc-*/pgc-*, root 0, s stragglers) goes on while at most s workers (not
    the root) are gone and finishes with its weight checks passed and a sane accuracy;
  - short stalls and link changes only slow a run down;
  - with --algo masterless (GCX_CODED_ALGO for the ranks: the coded rounds through the
    master-less coded allreduce, no root, every rank owns a chunk): up to s dead ranks
    are tolerated, but not rank 0, gcx-train's coordinator (its checks, evaluation and
    reductions over the live ranks go through it); a rank stopped or slowed past
    GCX_TIMEOUT owns a chunk every round needs, so every rank finishes or every rank
    fails cleanly naming GCX_TIMEOUT (src/coll/coded/README.md: a stopped
    owner is not covered).
Output: OUT/results.csv and OUT/results.md (one row per run), raw logs in OUT/logs/.

Cost: each run is one gcx-train job of ~10-40 s (4 ranks, MLP 784-128-10, batch 16, a
fraction of an epoch) on 2 shared cores, run at nice 10; 50 runs take about 25 minutes.
Needs root (emulate.sh), python3 from Debian, no other package.
"""

import argparse
import csv
import datetime
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
EMULATE = os.path.join(REPO, "perf", "cluster", "emulate.sh")

RANKS = 4
ROOT = 0                      # coded modes decode at rank 0 (gcx-train's default root)
LINK_RATE = "1gbit"
LINK_BURST = "500000"         # emulate.sh's default burst at 1gbit on this kernel (HZ=250)

# mode -> (--sync argument, tolerated stragglers s, --max-steps)
MODES = {
    "dense": ("dense", 0, 900),
    "topk": ("topk:cf=100", 0, 900),
    "gravac": ("gravac", 0, 700),
    "gc-fr": ("gc-fr:s=1", 1, 700),
    "gc-cr": ("gc-cr:s=1", 1, 700),
    "gc-cr-s2": ("gc-cr:s=2", 2, 500),
    "pgc-fr": ("pgc-fr:s=1", 1, 900),
    "pgc-cr": ("pgc-cr:s=1", 1, 900),
}
FAULTS = [("kill", 40), ("stall", 25), ("stall-long", 12), ("link", 23)]

# a rank's last words must say what went wrong (gcx's or gcx-train's error line)
CAUSE_RE = re.compile(r"error: .*(peer|connection|timed out|timeout|gone|undecodable|"
                      r"not decodable|another rank failed)", re.I)
TIMEOUT_RE = re.compile(r"error: .*(timed out|GCX_TIMEOUT)", re.I)
EXIT_RE = re.compile(r"^\[emulate\] rank (\d+) exited with status (\d+)")
ACC_RE = re.compile(r"final test accuracy ([0-9.]+)")
STEP_RE = re.compile(r"^\[0\] epoch \d+ step \d+/\d+ \(global (\d+)\)")
UCX_LEAK_RE = re.compile(r"was not returned to mpool|unexpected tag-receive descriptor")


def draw_schedule(seed, runs, timeout_s, modes=None, algo="star"):
    """The whole schedule from the seed: a list of run descriptions (modes: the
    sync modes to draw from, default all; algo: the coded algorithm, star or
    masterless)."""
    rng = random.Random(seed)
    kinds = [k for k, _ in FAULTS]
    weights = [w for _, w in FAULTS]
    modes = list(modes or MODES)
    sched = []
    for i in range(runs):
        mode = modes[i % len(modes)] if i < len(modes) else rng.choice(modes)
        kind = rng.choices(kinds, weights)[0]
        s = MODES[mode][1]
        # the fault comes at a drawn step of rank 0 (15-60% of the run), so it lands
        # inside training however fast the box is (a time after the start did not:
        # on an idle box whole runs ended before it)
        steps = MODES[mode][2]
        run = {"run": i, "mode": mode, "algo": algo, "fault": kind,
               "at_step": int(round(rng.uniform(0.15, 0.6) * steps, -1)),
               "ranks": [], "dur_s": 0.0, "rate": ""}
        if kind == "kill":
            if s > 0 and rng.random() < 0.75:
                # coded: kill 1..s workers, never the root (a dead root is a dense failure)
                k = rng.randint(1, s)
                run["ranks"] = sorted(rng.sample(range(1, RANKS), k))
            else:
                run["ranks"] = [rng.randrange(RANKS)]
        elif kind == "stall":
            run["ranks"] = [rng.randrange(RANKS)]
            run["dur_s"] = round(rng.uniform(0.5, 0.6 * timeout_s), 1)
        elif kind == "stall-long":
            run["ranks"] = [rng.randrange(RANKS)]
            run["dur_s"] = round(timeout_s + rng.uniform(2.0, 4.0), 1)
        else:
            run["ranks"] = [rng.randrange(RANKS)]
            run["rate"] = rng.choice(["5mbit", "20mbit", "100mbit"])
            run["dur_s"] = round(rng.uniform(2.0, 6.0), 1)
        sched.append(run)
    return sched


def expectation(run):
    """'ok': every rank not killed exits 0; 'fail': every rank not killed exits non-zero,
    naming the cause; 'ok-but-stalled' / 'ok-but-slowed': as 'ok', but the stalled rank
    (the rank behind the slowed link) may fail cleanly; 'ok-or-timeout': as 'ok', or every
    rank fails cleanly and a rank names GCX_TIMEOUT."""
    s = MODES[run["mode"]][1]
    kind, ranks = run["fault"], run["ranks"]
    if kind == "stall":
        return "ok"
    if s > 0 and run.get("algo") == "masterless":
        # no root in the rounds: up to s dead ranks; but gcx-train's own
        # reductions over the live ranks, checks and evaluation go through rank 0
        # (train_comm_live_open), so its death ends the run (cleanly). A stopped
        # or slowed rank owns a chunk every round needs: every rank waits for
        # it, up to GCX_TIMEOUT
        if kind == "kill":
            return "ok" if len(ranks) <= s and ROOT not in ranks else "fail"
        return "ok-or-timeout"
    if kind == "link":
        # a slowed link is a slow rank: a coded worker behind it may fall so
        # far behind that the root counts it gone (GCX_CODED_MAX_LAG, or a
        # weight check it did not answer within GCX_TIMEOUT); anywhere else
        # every rank waits for it, and a wait that outlasts GCX_TIMEOUT
        # fails the run, which then must say so on every rank
        return "ok-but-slowed" if s > 0 and ROOT not in ranks else "ok-or-timeout"
    if s == 0:
        return "fail"
    if ROOT in ranks:
        return "fail"
    if kind == "kill":
        return "ok" if len(ranks) <= s else "fail"
    return "ok-but-stalled"       # stall-long of a coded worker


def check_every(spec):
    """A weight check waits for every live rank: a coded worker stopped for longer than
    GCX_TIMEOUT across one fails the run by design, so those runs check at the end only."""
    if spec["fault"] == "stall-long" and MODES[spec["mode"]][1] > 0 and \
            spec.get("algo") != "masterless":
        return 0
    return 50


class Run:
    def __init__(self, spec, args, logdir):
        self.spec = spec
        self.args = args
        self.log_path = os.path.join(logdir, "run%03d.log" % spec["run"])
        self.json_path = os.path.join(logdir, "run%03d.json" % spec["run"])
        self.lines = []           # (seconds since start, line)
        self.proc = None
        self.t0 = 0.0
        self.fault_t = None       # seconds since start at which the fault began
        self.step = 0             # rank 0's last logged global step
        self.at_step = threading.Event()
        self.fault_note = ""
        self.lock = threading.Lock()

    def now(self):
        return time.monotonic() - self.t0

    def ns(self, rank):
        return "gcxemu-%d-r%d" % (self.proc.pid, rank)

    def sw_ns(self):
        return "gcxemu-%d-sw" % self.proc.pid

    def rank_pids(self, rank):
        r = subprocess.run(["ip", "netns", "pids", self.ns(rank)], capture_output=True, text=True)
        return [int(p) for p in r.stdout.split()]

    def note(self, text):
        with self.lock:
            self.lines.append((self.now(), "[chaos] " + text))

    def signal_rank(self, rank, sig):
        pids = self.rank_pids(rank)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return pids

    def tc_rate(self, rank, rate, burst):
        cmds = [["tc", "-n", self.ns(rank), "qdisc", "change", "dev", "eth0", "root", "tbf",
                 "rate", rate, "burst", burst, "latency", "20ms"],
                ["tc", "-n", self.sw_ns(), "qdisc", "change", "dev", "p%d" % rank, "root", "tbf",
                 "rate", rate, "burst", burst, "latency", "20ms"]]
        ok = True
        for c in cmds:
            ok &= subprocess.run(c, capture_output=True).returncode == 0
        return ok

    def inject(self, stop):
        """The fault thread: wait for the fault step, then do it (unless the run ended)."""
        spec = self.spec
        while not self.at_step.wait(0.02):
            if stop.is_set():
                return
        self.fault_t = self.now()
        kind = spec["fault"]
        if kind == "kill":
            for r in spec["ranks"]:
                pids = self.signal_rank(r, signal.SIGKILL)
                self.note("SIGKILL rank %d (pids %s)" % (r, pids))
                if not pids:
                    self.fault_note = "rank %d already gone at the kill" % r
        elif kind in ("stall", "stall-long"):
            r = spec["ranks"][0]
            pids = self.signal_rank(r, signal.SIGSTOP)
            self.note("SIGSTOP rank %d (pids %s) for %.1f s" % (r, pids, spec["dur_s"]))
            if not pids:
                self.fault_note = "rank %d already gone at the stall" % r
            stop.wait(spec["dur_s"])
            self.signal_rank(r, signal.SIGCONT)
            self.note("SIGCONT rank %d" % r)
        else:
            r = spec["ranks"][0]
            ok = self.tc_rate(r, spec["rate"], "64kb")
            self.note("link of rank %d -> %s (%s)" % (r, spec["rate"], "ok" if ok else "tc failed"))
            if not ok:
                self.fault_note = "tc change failed"
            if stop.wait(spec["dur_s"]):
                return
            ok = self.tc_rate(r, LINK_RATE, LINK_BURST)
            self.note("link of rank %d -> %s (%s)" % (r, LINK_RATE, "ok" if ok else "tc failed"))

    def reader(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self.lock:
                self.lines.append((self.now(), line))
            m = STEP_RE.match(line)
            if m:
                self.step = int(m.group(1))
                if self.step >= self.spec["at_step"]:
                    self.at_step.set()

    def execute(self):
        a, spec = self.args, self.spec
        sync, _, steps = MODES[spec["mode"]]
        env = dict(os.environ, GCX_TIMEOUT=str(a.gcx_timeout), OPENBLAS_NUM_THREADS="1",
                   GCX_CODED_ALGO=spec.get("algo", "star"))
        cmd = [EMULATE, "-n", str(RANKS), "--rate", LINK_RATE, "--keep-going", "--timeout",
               str(a.limit), "--grace", "3", "--",
               a.train, "--hidden", "128", "--batch", "16", "--epochs", "1",
               "--max-steps", str(steps), "--sync", sync, "--lr", "0.05", "--warmup", "0.1",
               "--check-every", str(check_every(spec)), "--target-acc", "0", "--progress", "plain",
               "--log-every", "10", "--json", self.json_path]
        if os.path.exists(self.json_path):   # a rerun into the same folder
            os.remove(self.json_path)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        rd = threading.Thread(target=self.reader, daemon=True)
        rd.start()
        stop = threading.Event()
        inj = threading.Thread(target=self.inject, args=(stop,), daemon=True)
        inj.start()
        hard = False
        try:
            self.rc = self.proc.wait(timeout=a.limit + 30)
        except subprocess.TimeoutExpired:
            # emulate.sh itself did not end: kill its whole group and clean up
            hard = True
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.rc = self.proc.wait()
            subprocess.run([EMULATE, "--cleanup"], capture_output=True)
        self.wall = self.now()
        stop.set()
        inj.join(timeout=5)
        rd.join(timeout=5)
        self.hard_killed = hard
        with open(self.log_path, "w") as f:
            f.write("# %s\n" % " ".join(cmd))
            f.write("# spec %s\n" % json.dumps(spec))
            for t, line in self.lines:
                f.write("%8.3f %s\n" % (t, line))

    def classify(self):
        spec, a = self.spec, self.args
        exp = expectation(spec)
        killed = set(spec["ranks"]) if spec["fault"] == "kill" else set()
        stalled = set(spec["ranks"]) if spec["fault"].startswith("stall") or \
            exp == "ok-but-slowed" else set()
        status = {r: 0 for r in range(RANKS)}
        exit_t = {}
        causes = {r: False for r in range(RANKS)}
        timeouts = {r: False for r in range(RANKS)}
        weights_differ = False
        acc = None
        leaks = 0
        for t, line in self.lines:
            m = EXIT_RE.match(line)
            if m:
                status[int(m.group(1))] = int(m.group(2))
                exit_t[int(m.group(1))] = t
                continue
            m = re.match(r"^\[(\d+)\] (.*)$", line)
            if not m:
                continue
            r, text = int(m.group(1)), m.group(2)
            if CAUSE_RE.search(text):
                causes[r] = True
            if TIMEOUT_RE.search(text):
                timeouts[r] = True
            if "WEIGHTS DIFFER" in text:
                weights_differ = True
            if UCX_LEAK_RE.search(text):
                leaks += 1
            m = ACC_RE.search(text)
            if m and r == 0:
                acc = float(m.group(1))
        checks = None
        try:
            with open(self.json_path) as f:
                js = json.load(f)
            checks = js.get("weight_checks")
            if acc is None:
                acc = js.get("final_test_acc")
        except (OSError, ValueError):
            pass
        others = [r for r in range(RANKS) if r not in killed]
        survivors = [r for r in others if r not in stalled]
        fault_t = self.fault_t if self.fault_t is not None else self.wall
        lat = [exit_t[r] - fault_t for r in survivors if r in exit_t]
        res = {"exit": " ".join(str(status[r]) for r in range(RANKS)),
               "acc": "" if acc is None else "%.3f" % acc,
               "checks": "" if checks is None else str(checks),
               "fail_after_s": "%.1f" % max(lat) if lat and exp == "fail" else "",
               "wall_s": "%.1f" % self.wall, "ucx_leak_lines": str(leaks),
               "expect": exp, "note": self.fault_note}
        hang = self.hard_killed or self.rc == 124 or any(
            "[emulate] timeout after" in l for _, l in self.lines)
        bad_kill = [r for r in killed if status[r] not in (137, 0)]
        ok_ranks = [r for r in others if status[r] == 0]

        def good_result():
            # a run that exits 0 must have passed gcx-train's weight checks with a sane accuracy
            return (not weights_differ and acc is not None and acc >= a.min_acc
                    and checks is not None and checks >= 1)

        if hang:
            cls, why = "hang", "wall-clock limit %d s reached" % a.limit
        elif self.fault_t is None:
            cls, why = "no-fault", "ended at step %d, before the fault step" % self.step
        elif weights_differ and ok_ranks:
            cls, why = "wrong", "WEIGHTS DIFFER but ranks %s exited 0" % ok_ranks
        elif ok_ranks and ROOT in ok_ranks and not good_result():
            cls, why = "wrong", "exit 0 without passed checks / sane accuracy"
        elif exp == "fail" and spec["fault"] == "stall-long" and ROOT in spec["ranks"] and \
                MODES[spec["mode"]][1] > 0 and len(ok_ranks) == len(others) and good_result():
            # the coded root stopped while the workers waited for it in a
            # reduction over the live ranks (a weight check), where they wait
            # 2 GCX_TIMEOUT + 2 s for it (programs/train/README.md, Dead ranks)
            cls, why = "continued-ok", "the root's stop fell in a reduction over the live ranks"
        elif exp == "fail":
            if ok_ranks:
                cls, why = "wrong" if spec["fault"] == "kill" and not self.fault_note else \
                    "unexpected-error", "ranks %s exited 0 after the fault" % ok_ranks
            elif not all(causes[r] for r in others):
                cls, why = "unexpected-error", "no error naming the cause on ranks %s" % \
                    [r for r in others if not causes[r]]
            elif lat and max(lat) > 2 * a.gcx_timeout + 2:
                cls, why = "unexpected-error", "slow failure: %.1f s after the fault" % max(lat)
            else:
                cls, why = "expected-fail-clean", ""
        elif exp == "ok-or-timeout" and all(status[r] != 0 for r in others):
            if not all(causes[r] for r in others):
                cls, why = "unexpected-error", "no error naming the cause on ranks %s" % \
                    [r for r in others if not causes[r]]
            elif not any(timeouts[r] for r in others):
                cls, why = "unexpected-error", "failed after a %s, no rank timed out" % (
                    "slowed link" if spec["fault"] == "link" else "stop")
            else:
                cls, why = "timeout-clean", "a wait outlasted GCX_TIMEOUT behind the %s rank" % (
                    "slowed" if spec["fault"] == "link" else "stopped")
        else:
            need = survivors if exp in ("ok-but-stalled", "ok-but-slowed") else others
            bad = [r for r in need if status[r] != 0]
            stalled_bad = [r for r in stalled if exp in ("ok-but-stalled", "ok-but-slowed")
                           and status[r] != 0 and not causes[r]]
            if bad:
                cls, why = "unexpected-error", "ranks %s exited %s" % (
                    bad, [status[r] for r in bad])
            elif stalled_bad:
                cls, why = "unexpected-error", "stalled rank failed without naming the cause"
            elif not good_result():
                cls, why = "wrong", "exit 0 without passed checks / sane accuracy"
            else:
                cls, why = "continued-ok", ""
        if bad_kill:
            why = (why + "; " if why else "") + "killed rank status %s" % bad_kill
        res["class"] = cls
        res["why"] = why
        return res


COLUMNS = ["run", "mode", "algo", "fault", "ranks", "at_step", "dur_s", "rate", "expect", "class",
           "exit", "fail_after_s", "acc", "checks", "wall_s", "ucx_leak_lines", "why", "note"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default=os.path.join(HERE, "out"),
                   help="folder for results.csv, results.md and logs/ (default perf/chaos/out)")
    p.add_argument("--train", default=os.path.join(REPO, "build", "programs", "train", "gcx-train"))
    p.add_argument("--gcx-timeout", type=int, default=5, help="GCX_TIMEOUT of the ranks (s)")
    p.add_argument("--limit", type=int, default=120, help="hard wall-clock limit per run (s)")
    p.add_argument("--min-acc", type=float, default=0.6, help="a sane final test accuracy")
    p.add_argument("--only", default="", help="comma-separated run numbers to (re)run")
    p.add_argument("--list", action="store_true", help="print the schedule and exit")
    p.add_argument("--modes", default="", help="comma-separated sync modes to draw from "
                   "(default: all of %s)" % ",".join(MODES))
    p.add_argument("--algo", default="star", choices=["star", "masterless"],
                   help="coded rounds: the star (root 0) or the master-less allreduce "
                        "(GCX_CODED_ALGO of the ranks)")
    a = p.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    if any(m not in MODES for m in modes):
        print("chaos.py: --modes: unknown mode in %r (known: %s)" % (a.modes, ",".join(MODES)),
              file=sys.stderr)
        return 2

    sched = draw_schedule(a.seed, a.runs, a.gcx_timeout, modes, a.algo)
    if a.only:
        keep = {int(x) for x in a.only.split(",")}
        sched = [s for s in sched if s["run"] in keep]
    if a.list:
        for s in sched:
            print(json.dumps(s), "expect", expectation(s))
        return 0
    if os.geteuid() != 0:
        print("chaos.py: needs root (emulate.sh makes network namespaces)", file=sys.stderr)
        return 2
    if not os.access(a.train, os.X_OK):
        print("chaos.py: no gcx-train at %s (build it: meson compile -C build)" % a.train,
              file=sys.stderr)
        return 2
    os.nice(10)
    logdir = os.path.join(a.out, "logs")
    os.makedirs(logdir, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    rows = []
    for spec in sched:
        run = Run(spec, a, logdir)
        run.execute()
        res = run.classify()
        row = dict(spec, **res)
        row["ranks"] = " ".join(map(str, spec["ranks"]))
        rows.append(row)
        print("run %3d %-8s %-10s ranks %-5s -> %-19s exit [%s] acc %s %.0fs %s" % (
            spec["run"], spec["mode"], spec["fault"], row["ranks"], res["class"], res["exit"],
            res["acc"] or "-", run.wall, res["why"]), flush=True)
    write_results(a, rows, started)
    bad = sum(r["class"] in ("hang", "wrong") for r in rows)
    return 1 if bad else 0


def write_results(a, rows, started):
    with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    counts = {}
    for r in rows:
        counts[r["class"]] = counts.get(r["class"], 0) + 1
    cmd = "sudo perf/chaos/chaos.py --runs %d --seed %d --gcx-timeout %d --limit %d" % (
        a.runs, a.seed, a.gcx_timeout, a.limit)
    if a.modes:
        cmd += " --modes " + a.modes
    if a.algo != "star":
        cmd += " --algo " + a.algo
    if a.only:
        cmd += " --only " + a.only
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write("# gcx-train chaos runs\n\n")
        f.write("`%s`, started %s, 4 ranks on emulated 1 Gbit/s links, GCX_TIMEOUT=%d s.\n\n" % (
            cmd, started.strftime("%Y-%m-%d %H:%M UTC"), a.gcx_timeout))
        f.write("Totals: %s.\n\n" % ", ".join("%s %d" % kv for kv in sorted(counts.items())))
        cols = [c for c in COLUMNS if c != "note"]
        f.write("| " + " | ".join(cols) + " |\n")
        f.write("|" + "---|" * len(cols) + "\n")
        for r in rows:
            f.write("| " + " | ".join(str(r.get(c, "")).replace("|", "/") for c in cols) + " |\n")


if __name__ == "__main__":
    sys.exit(main())
