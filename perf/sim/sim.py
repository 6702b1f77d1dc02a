#!/usr/bin/env python3
"""sim.py - step time of straggler-tolerant gradient aggregation: an
alpha-beta event simulation of the star (gcx_coded_gather), the master-less
coded allreduce (src/coll/coded/), DDP's ring allreduce and
ignore-stragglers, with the gradient coding papers' straggler models.

Network. n ranks on a full-bisection switch; rank i has one full-duplex link
of rate B (perf/cluster/emulate.sh: a veth per rank to one bridge, tc tbf on
both ends, so the uplink U_i and the downlink D_i are each limited on their
own). Every message of m bytes:
  - the sender's CPU serves one message at a time, o seconds each (o:
    per-message overhead: posting, TCP, copies), then its uplink, m/B each
    (CPU and wire pipelined), in the order the messages were posted (FIFO);
  - each link direction is a tc tbf: a token bucket of `burst` bytes (full
    when the round starts: the compute before it idles the links) and rate
    B; burst = 0 is a plain link (burst only matters on the emulator, and
    for messages near its size: 478 KB of payload at 1gbit, HZ=250);
  - the receiver's downlink serves one message at a time, tau_d = m/B, in the
    order they leave the uplinks (output-queued switch, cut-through):
        d_end = max(u_end, previous d_end + m/B)
  - it is there at d_end + alpha (alpha: latency, wake-up, receive path).
Decoding / reducing costs gamma seconds per byte (one multiply-add pass over
the bytes of every used message). CPU contention (n ranks on the 2-core
box): only as `cores`, processor sharing of the compute (all ranks computing
together: c x max(1, n/cores); star-chained: shared among the workers
computing at each moment). The communication CPU costs are shared out by
the CPU slow-down f = cpu_factor: cpu_scale if given, else (n + load) /
cpus (busy-polling ranks and `load` other runnable processes on `cpus`
CPUs), else 1: o, gamma and kappa are multiplied by f and alpha gets
wake (f - 1) (a loaded box's wake-up latency per message). The torch
points of the idle box fit with the 2 CPUs shared (cores = 2) and one
compute time per rank count, the gcx_coded_gather_perf points with one f
per rank count and box load (README).

Compute and stragglers. Every worker computes `parts` partitions of c
seconds each (DDP, ignore, pgc: 1; gc: s+1) and `step` seconds outside
them (optimizer, data, encode; not scaled by the stragglers) and is then
ready at
    T_w = step + parts * c + delay_w
  exp:M     delay_w = M * c * sum_{parts} Exp(1)   (torch_gcx.coded / the
            papers: after each partition gradient, sleep its compute time x
            M x an Exp(1) draw; DDP's comm hook sleeps the same draw)
  slow:R:MS rank R sleeps MS ms every step
  dead:K    K ranks (seeded, never rank 0) are dead: they send nothing
Rounds are independent (every rank starts a round at 0); the step time is
the time at which the last live rank holds the whole result. Except
star-chained: the star as torch_gcx.coded runs it, rounds in a row, a worker
starting round k+1 when round k's result reached it (skipping it when it was
decoded already), the root when it has decoded (its result sends go on under
the next round); its step time is the root's, decode to decode. Its result
sends go one after another (uplink "fifo") or share the root's link
("fair": they end together, the worker pulled last `lead` earlier); a
worker asleep in its injected delay takes its result when it wakes. CR
decodes from the first decodable prefix of the arrivals (cr_prefix: gcx's
matrix, not only any n-s).

Schemes (m = |g|/n unless said; s stragglers; FR groups of s+1; CR any n-s):
  ring        DDP: reduce-scatter + allgather over the live ranks, 2(n-1)
              steps of m = |g|/n; step k of rank i waits for step k-1 from
              i-1 (plus gamma*m to reduce in the reduce-scatter half).
  star        gcx_coded_gather, root 0: worker w's header is at the root at
              T_w + o + alpha; the root pulls (serially on D_0) only the
              messages that complete the first decodable set (FR: the first
              of each group, its own group covered by itself; CR, ignore:
              the first n-s), streaming multiply-add (FR, ignore) or one
              pass of n-s after the set (CR), then sends |g| to the n-1
              others, posted at once (serial on U_0).
  masterless  chunk c (m = |g|/n) is owned by rank c, or the next live of
              c+1..c+s. Phase 1: each worker posts at T_w the n-1 chunk c
              sends (to owner(c), in the order c = w+1, w+2, ...); owner
              decodes chunk c as soon as its arrivals (its own at T_owner)
              are decodable, FR streaming, CR one pass of n-s. Phase 2: the
              owner posts the decoded chunk to the n-1 others at once. Both
              phases share the FIFO uplinks and downlinks.
              owner role: 'free'  (a progress thread: torch_gcx's and
              gcx-train's keepers; a straggler's owner work goes on while it
              computes or sleeps) or 'blocked'
              (no progress while computing: the owner decodes and posts phase 2
              only after its own T_owner).
  masterless-impl  the master-less allreduce as src/coll/coded/
              implements it (owner role free): every arrival copied once
              on the receiving rank's CPU (kappa per byte, in arrival
              order), decode from the first decodable set that LANDED (all
              arrivals pulled until then), one pass |used| gamma m; the
              decoded chunk posted to the n-1 others at once, final on the
              owner's COMMIT (sent once the s later owners' ACKs came back:
              o + alpha after their copy landed; one o per COMMIT, posted
              in line order); every received decoded chunk copied out once
              (kappa m).
  masterless-resplit  the same, owner role free, but with dead ranks the
              vector is cut into one chunk per live rank (the dead known
              before the round) instead of the next live rank owning two.
  ignore      allreduce of the fastest n-s: the (n-s)-th ready time, alpha
              to agree on the set, then a ring over n-s ranks.

Closed formulas (no stragglers, no dead ranks, burst 0, every T_w = C =
parts*c; up(k, m) = max(k o + m/B, o + k m/B): when the k-th of k messages
of m bytes posted together leaves an uplink), which the event simulation
reproduces (test_sim.py):
  ring     T = C + 2(n-1)(o + m/B + alpha) + (n-1) gamma m,        m = |g|/n
  ignore   T = C + alpha + ring over n-s ranks (m = |g|/(n-s))
  star     k = FR: n/(s+1) - 1, CR/ignore: n-s-1 pulls;  D = gamma|g|
           (streaming, while gamma|g| <= |g|/B), (n-s) gamma|g| (CR)
           t_dec = C + o + alpha + k|g|/B + alpha + D   (C + D when k = 0)
           T = t_dec + up(n-1, |g|) + alpha
  masterless  m = |g|/n. Owner c gets the chunk of w = c-k (the k-th send
           of w) at C + up(k, m) + alpha and decodes after the K(c)-th:
           FR: the group after its own, at distance d(c) = (s+1) - (c mod
           (s+1)), is covered by its member c+d+s: K(c) = n - s - d(c);
           CR: K = n-s-1.  t_dec(c) = C + up(K(c), m) + alpha + D,
           D = gamma m (FR), (n-s) gamma m (CR); S_c = max(t_dec(c), C+(n-1)o)
           (phase 2 is posted after phase 1 on the CPU);
           T = max_c max(C + o + 2(n-1) m/B, C + (n-1)o + n m/B,
                         S_c + o + (n-1) m/B, S_c + (n-1) o + m/B) + alpha
           ~ C + 2(n-1) max(o, m/B) + alpha when decoding hides under phase 1.
           Valid while phase-2 messages do not queue at a downlink (the
           owners' start times differ by less than |o - m/B|); queueing only
           adds.
  Bytes per rank each way: ring and masterless 2(n-1)/n |g|; star: the root
  receives k|g| and sends (n-1)|g|. Messages per rank: ring, masterless
  2(n-1); star root n-1 sends.

CLI:
  sim.py --n 256 --bytes 100MB --rate 10gbit --compute 0.1 --straggler exp:1 --rounds 8
  (--schemes star,masterless,masterless-impl,masterless-blocked,masterless-resplit,ring,ignore,star-chained)
prints, per scheme, mean / median / p90 of the step time (and the closed
formula where it applies). Library: params(), simulate(p, scheme), closed(p,
scheme), step_table(p).
"""
import argparse
import dataclasses
import json
import math
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMES = ("star", "masterless", "masterless-impl", "masterless-blocked", "ring", "ignore")


# ---- parameters -------------------------------------------------------------

def parse_rate(text):
    """'1gbit' / '200mbit' / '10g' / '1e9' -> bits per second."""
    t = str(text).strip().lower()
    mo = re.fullmatch(r"([0-9.e+]+)\s*(g|m|k)?(bit|bps|b)?(/s)?", t)
    if not mo:
        raise ValueError(f"not a link rate: {text!r}")
    mult = {"g": 1e9, "m": 1e6, "k": 1e3, None: 1.0}[mo.group(2)]
    return float(mo.group(1)) * mult


def parse_bytes(text):
    """'4M' (MiB) / '861480' / '100MB' (10^6) -> bytes."""
    t = str(text).strip()
    mo = re.fullmatch(r"([0-9.e+]+)\s*([KMG]i?B?|[kmg])?", t)
    if not mo:
        raise ValueError(f"not a size: {text!r}")
    suf = (mo.group(2) or "").upper()
    if suf.endswith("B") and not suf.endswith("IB") and len(suf) == 2:
        mult = {"KB": 1e3, "MB": 1e6, "GB": 1e9}[suf]
    else:
        mult = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30,
                "KI": 2**10, "MI": 2**20, "GI": 2**30,
                "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}[suf]
    return int(float(mo.group(1)) * mult)


def tbf_burst(rate, hz=250):
    """payload bytes of emulate.sh's default tbf bucket, max(rate/HZ, 64 KiB)
    (HZ = 250 on the box), of which 1448 of every 1514 bytes are payload."""
    return max(rate / 8.0 / hz, 65536.0) * 1448.0 / 1514.0


@dataclasses.dataclass
class Params:
    n: int = 8                 # ranks (all workers)
    gbytes: float = 4 * 2**20  # |g|: bytes of one (coded) gradient message
    rate: float = 1e9          # nominal link rate, bits/s
    eff: float = 0.956         # payload share of the rate (tbf counts frames)
    alpha: float = 100e-6      # s per message: latency, wake-up
    o: float = 20e-6           # s per message on the sender (CPU + posting)
    gamma: float = 0.25e-9     # s per byte decoded / reduced
    burst: float = 0.0         # token bucket of each link, payload bytes (tbf)
    uplink: str = "fifo"       # star-chained: the root's result sends, one
                               # after another in post order ("fifo") or all
                               # at once ("fair", see sim_star_chained)
    lead: float = 0.4          # "fair": how much earlier the favoured result
                               # ends, as a share of (last end - first end)
    cores: float = 0.0         # CPUs the ranks' compute shares (0: one each)
    kappa: float = 0.0         # s per byte of one memcpy pass (masterless-impl)
    cpus: float = 0.0          # CPUs the ranks' communication work shares (0: one each)
    load: float = 0.0          # other runnable processes on those CPUs (box load)
    cpu_scale: float = 0.0     # the CPU slow-down given directly (0: from cpus, load)
    wake: float = 0.0          # s per message: receiver wake-up on a loaded box, x (cpu_factor - 1)
    compute: float = 0.0       # c: s per partition gradient
    step: float = 0.0          # s per step outside the partitions (optimizer,
                               # data, encode): not scaled by the stragglers
    s: int = 1                 # stragglers tolerated
    code: str = "fr"           # fr | cr (star and masterless); 'ignore' star
    coded_parts: str = "pgc"   # pgc: coded workers compute 1 partition; gc: s+1
    straggler: str = "none"    # none | exp:M | slow:R:MS | dead:K
    seed: int = 1
    rounds: int = 16

    @property
    def B(self):
        """payload bytes per second of one link direction."""
        return self.rate / 8.0 * self.eff

    @property
    def cpu_factor(self):
        """slow-down of the per-message and per-byte CPU costs (o, gamma,
        kappa): n busy-polling ranks and `load` other runnable processes
        sharing `cpus` CPUs, each rank gets cpus / (n + load) of one;
        cpu_scale > 0 gives the factor directly (calibrate.py fits it per
        box load)."""
        if self.cpu_scale > 0:
            return max(1.0, self.cpu_scale)
        return max(1.0, (self.n + self.load) / self.cpus) if self.cpus > 0 else 1.0


def params(**kw):
    p = Params()
    for k, v in kw.items():
        if not hasattr(p, k):
            raise TypeError(f"unknown parameter {k}")
        setattr(p, k, v)
    return p


# ---- stragglers -------------------------------------------------------------

def parse_straggler(text):
    t = (text or "none").strip().lower()
    if t in ("none", "", "0"):
        return ("none",)
    if t.startswith("exp:"):
        return ("exp", float(t[4:]))
    if t.startswith("slow:"):
        _, r, ms = t.split(":")
        return ("slow", int(r), float(ms) / 1e3)
    if t.startswith("dead:"):
        return ("dead", int(t[5:]))
    raise ValueError(f"straggler: none | exp:M | slow:R:MS | dead:K, not {text!r}")


def dead_ranks(p):
    st = parse_straggler(p.straggler)
    if st[0] != "dead" or st[1] == 0:
        return np.zeros(p.n, bool)
    rng = np.random.default_rng([p.seed, 7919])
    k = st[1]
    if k > p.s:
        raise ValueError(f"dead:{k} with s = {p.s}: not decodable")
    dead = np.zeros(p.n, bool)
    dead[1 + rng.choice(p.n - 1, size=k, replace=False)] = True
    return dead


def ready_times(p, parts, rounds=None):
    """T[r, w]: when worker w's message of round r is ready (compute + delay).
    The same draws for every scheme (common random numbers): the Exp(1)
    draw of partition j of worker w in round r does not depend on the
    scheme; schemes with fewer partitions use the first ones."""
    R = rounds or p.rounds
    c = p.compute * contention(p, int((~dead_ranks(p)).sum()))
    return p.step + parts * c + delays(p, parts, R, c)


def contention(p, active):
    """compute slow-down when `active` ranks compute at once on p.cores CPUs
    (processor sharing; 1 when p.cores is 0)."""
    return max(1.0, active / p.cores) if p.cores > 0 else 1.0


def delays(p, parts, R, c):
    """the injected delay of every worker and round: exp:M: M x c x the sum
    of `parts` Exp(1) draws (c: the partition's compute time as the worker
    measured it, contention included); slow:R:MS: MS on rank R."""
    st = parse_straggler(p.straggler)
    D = np.zeros((R, p.n))
    if st[0] == "exp":
        rng = np.random.default_rng([p.seed, p.n, 104729])
        E = rng.exponential(1.0, size=(R, p.n, max(parts, p.s + 1)))
        D = st[1] * c * E[:, :, :parts].sum(axis=2)
    elif st[0] == "slow":
        D[:, st[1] % p.n] += st[2]
    return D


def ps_finish(start, work, cores):
    """processor sharing: jobs (start, work) on `cores` CPUs, each job at
    most one CPU; returns the finish times."""
    start = np.asarray(start, float)
    fin = start.copy()
    if cores <= 0:
        return fin + work
    rem = np.array(work, float)
    eps = 1e-9 * max(1e-12, float(np.max(rem)) if len(rem) else 1.0)
    todo = [i for i in np.argsort(start, kind="stable") if rem[i] > eps]
    active, t, k = [], -np.inf, 0
    while k < len(todo) or active:
        rate = min(1.0, cores / len(active)) if active else 0.0
        t_arr = start[todo[k]] if k < len(todo) else np.inf
        t_fin = t + min(rem[active]) / rate if active else np.inf
        if t_fin <= t_arr:           # the shortest active job(s) finish
            rem[active] -= min(rem[active])
            for i in active:
                if rem[i] <= eps:
                    fin[i] = t_fin
            active = [i for i in active if rem[i] > eps]
            t = t_fin
        else:
            if active:
                rem[active] -= (t_arr - t) * rate
            t = t_arr
            active.append(todo[k])
            k += 1
    return fin


# ---- building blocks --------------------------------------------------------

def _segcummax(v, segstart):
    """cumulative max restarting at each segment (segstart: bool, True at the
    first element of a segment; v sorted by segment)."""
    segid = np.cumsum(segstart) - 1
    if len(v) == 0:
        return v
    span = float(np.max(v) - np.min(v)) + 1.0
    return np.maximum.accumulate(v + segid * span) - segid * span


def _segcumsum(v, segstart):
    c = np.cumsum(v)
    starts = np.flatnonzero(segstart)
    lens = np.diff(np.r_[starts, len(v)])
    return c - np.repeat(c[starts] - v[starts], lens)


def _link_scan(seg, a, m, B, sigma=0.0, o=0.0, order=None, floor=None):
    """FIFO links, one per segment id: message k (bytes m_k) can start at a_k;
    served in (seg, a, order) order. A CPU stage serves one message at a
    time, o seconds each (o > 0: the sender's per-message overhead,
    pipelined with the wire); then a greedy token-bucket shaper of rate B
    and bucket sigma bytes (full at t = 0; sigma = 0: a plain rate-B link):
        cpu_k = max(a_k, cpu_{k-1}) + o
        end_k = max(cpu_k, (M_k - sigma)/B + max_{j<=k}(cpu_j - M_{j-1}/B))
    (M_k: the segment's bytes up to and including k; network calculus'
    output of a greedy shaper). end_k >= floor_k when given. Returns the end
    times in input order."""
    keys = (a,) if order is None else (order, a)
    idx = np.lexsort(keys + (seg,))
    sg = seg[idx]
    first = np.r_[True, sg[1:] != sg[:-1]] if len(sg) else np.zeros(0, bool)
    ak = a[idx]
    mk = np.broadcast_to(np.asarray(m, float), a.shape)[idx]
    if o > 0:
        # FIFO with constant service o: cpu_k = (k+1)o + cummax(a_j - j o)
        kk = _segcumsum(np.ones_like(ak), first) - 1
        cpu = (kk + 1) * o + _segcummax(ak - kk * o, first)
    else:
        cpu = ak
    M = _segcumsum(mk, first)
    X = _segcummax(cpu - (M - mk) / B, first)
    end = np.maximum(cpu, (M - sigma) / B + X)
    if floor is not None:
        end = np.maximum(end, floor[idx])
    out = np.empty_like(end)
    out[idx] = end
    return out


class _Shaper:
    """one token-bucket link per column, messages fed in time order (the
    incremental form of _link_scan; state: bytes so far, running max)."""

    def __init__(self, shape, B, sigma):
        self.B, self.sigma = B, sigma
        self.M = np.zeros(shape)
        self.X = np.full(shape, -np.inf)

    def send(self, a, m, floor=None):
        self.X = np.maximum(self.X, a - self.M / self.B)
        self.M = self.M + m
        end = np.maximum(a, (self.M - self.sigma) / self.B + self.X)
        return end if floor is None else np.maximum(end, floor)


def _stream_decode(arr, g, start=None):
    """one CPU serving sorted arrivals arr (..., k) at g seconds each, not
    before `start`: the time the last one is folded in."""
    a = np.sort(arr, axis=-1)
    if start is not None:
        a = np.maximum(a, start[..., None])
    k = a.shape[-1]
    j = np.arange(k)
    return (k * g) + np.max(a - j * g, axis=-1)


def fr_groups(n, s):
    if n % (s + 1):
        raise ValueError(f"FR needs (s+1) | n: n = {n}, s = {s}")
    return np.arange(n) // (s + 1)


# ---- schemes ----------------------------------------------------------------

def sim_ring(p, T, live, m=None):
    """ring allreduce over the live ranks (in rank order); T[R, n]."""
    ranks = np.flatnonzero(live)
    P = len(ranks)
    Tl = T[:, ranks]
    if P == 1:
        return Tl[:, 0].copy()
    m = p.gbytes / P if m is None else m
    tau_d, g = m / p.B, p.gamma * m
    ready = Tl.copy()                 # when rank i may send its next step
    cpu = np.full_like(Tl, -np.inf)   # its CPU free
    up = _Shaper(Tl.shape, p.B, p.burst)
    down = _Shaper(Tl.shape, p.B, p.burst)   # rank i's downlink (from i-1)
    arr = None
    for k in range(2 * (P - 1)):
        cpu = np.maximum(ready, cpu) + p.o
        uend = up.send(cpu, m)
        uin = np.roll(uend, 1, axis=1)            # what rank i receives from i-1
        dend = down.send(uin - tau_d, m, floor=uin)
        arr = dend + p.alpha
        # reduce-scatter steps 0..P-2: reduce what came before forwarding;
        # the last reduce-scatter arrival is reduced too (the allgather
        # sends the reduced chunk)
        ready = arr + (g if k < P - 1 else 0.0)
    return arr.max(axis=1)


def sim_ignore(p, T, live):
    Tl = np.sort(T[:, live], axis=1)
    keep = min(p.n - p.s, Tl.shape[1])
    t0 = Tl[:, keep - 1] + p.alpha
    sub = np.zeros(keep, bool) | True
    T2 = np.repeat(t0[:, None], keep, axis=1)
    q = dataclasses.replace(p, n=keep)
    return sim_ring(q, T2, sub)


def _needed_star(p, h, own_t):
    """h[R, n]: header time at the root of each worker (root: its own ready
    time, inf for dead). Returns a bool mask [R, n] of the used messages."""
    R, n = h.shape
    if p.code == "fr":
        grp = fr_groups(n, p.s)
        used = np.zeros((R, n), bool)
        for G in np.unique(grp):
            mem = np.flatnonzero(grp == G)
            first = mem[np.argmin(h[:, mem], axis=1)]
            used[np.arange(R), first] = True
        return used
    # headers at the same time (workers whose results came together)
    # come in no particular order: ties broken by a draw, seeded by the
    # times themselves so that a simulation stays deterministic
    fin = np.isfinite(h)
    key = int(np.abs(np.where(fin, h, 0)).sum() * 1e9) % (2**32)
    tie = np.random.default_rng([p.seed, 31, key]).random(h.shape)
    order = np.lexsort((tie, h), axis=1)
    k = cr_prefix(order, n, p.s)
    used = np.arange(n)[None, :] < k[:, None]
    out = np.zeros((R, n), bool)
    np.put_along_axis(out, order, used, axis=1)
    return out


def cr_set(A, s):
    """A[R, n]: arrival times (inf: never); when the CR decoder has its
    first decodable set, and its size (cr_prefix)."""
    order = np.argsort(A, axis=1, kind="stable")
    k = cr_prefix(order, A.shape[1], s)
    last = np.take_along_axis(order, (k - 1)[:, None], axis=1)
    return np.take_along_axis(A, last, axis=1)[:, 0], k


def cr_prefix(order, n, s):
    """order[R, n]: workers by arrival; how many of the first arrivals the
    CR decoder takes (the first decodable prefix). Any n-s decode (the
    code's guarantee); for s = 1 and n even, gcx's CR matrix (src/coding/
    cr.c: n + s odd, the cos row of frequency n/2) has rows e_i + e_{i+1},
    so all the even or all the odd workers decode too (the star's root at
    4 ranks decodes from its own and worker 2's). Other n, s: n-s."""
    R = order.shape[0]
    k = np.full(R, n - s)
    if s == 1 and n % 2 == 0 and n >= 4:
        pos = np.empty_like(order)
        np.put_along_axis(pos, order, np.arange(n)[None, :].repeat(R, 0), axis=1)
        k = np.minimum(k, pos[:, 0::2].max(axis=1) + 1)
        k = np.minimum(k, pos[:, 1::2].max(axis=1) + 1)
    return k


def sim_star(p, T, live, blocked=False):
    R, n = T.shape
    G = p.gbytes
    h = T + p.o + p.alpha
    h[:, 0] = T[:, 0]                      # the root's own: in place
    h[:, ~live] = np.inf
    used = _needed_star(p, h, T[:, 0])
    if np.isinf(np.where(used, h, 0)).any():
        raise ValueError("star: not decodable (dead ranks)")
    # pulls: the used messages other than the root's, serial on D_0 in h order
    pulled = used.copy()
    pulled[:, 0] = False
    hp = np.where(pulled, h, np.inf)
    hs = np.sort(hp, axis=1)
    npull = pulled.sum(axis=1)
    tau = G / p.B
    arr = np.full_like(hs, np.inf)
    down = _Shaper((R,), p.B, p.burst)
    for j in range(hs.shape[1]):
        ok = j < npull
        if not ok.any():
            break
        hj = np.where(ok, hs[:, j], 0.0)
        end = down.send(hj, np.where(ok, G, 0.0), floor=hj + 0.0)
        arr[:, j] = np.where(ok, end + p.alpha, np.inf)
    own = T[:, 0]
    g = p.gamma * G
    # the used arrivals: the pulled ones and the root's own (if used)
    a = np.concatenate([np.where(used[:, 0], own, np.inf)[:, None], arr], axis=1)
    a = np.sort(a, axis=1)
    cnt = np.isfinite(a).sum(axis=1)
    if blocked:
        a = np.maximum(a, own[:, None])
    j = np.arange(a.shape[1])
    if p.code == "cr":      # one pass over the set once it is known
        last = np.max(np.where(j[None, :] < cnt[:, None], a, -np.inf), axis=1)
        t_dec = last + cnt * g
    else:                   # fr, ignore: streaming, as they land
        t_dec = cnt * g + np.max(np.where(j[None, :] < cnt[:, None],
                                          a - j * g, -np.inf), axis=1)
    K = int(live.sum()) - 1
    return _egress(p, t_dec, K, G) + p.alpha


def _egress(p, t0, K, m):
    """K messages of m bytes posted at t0 on one uplink (CPU o each, shaper
    B, sigma): when the last leaves. The running max is at an end of the
    linear CPU schedule, so this is closed."""
    if K <= 0:
        return t0
    cpu_last = t0 + K * p.o
    X = np.maximum(t0 + p.o, cpu_last - (K - 1) * m / p.B)
    return np.maximum(cpu_last, (K * m - p.burst) / p.B + X)


def sim_star_chained(p, parts, live, warmup=4):
    """the star as torch_gcx.coded runs it, rounds chained: a worker starts
    round k+1 when round k's result has reached it (a worker that gets there
    after round k+1 was decoded computes nothing: catch-up); the root starts
    round k+1 once it has decoded round k and computed its own part (it does
    not wait for its result sends, which go on under the next round's
    compute). The links' token buckets and FIFO queues carry over from round
    to round; the compute of a round shares p.cores CPUs among the workers
    computing it (processor sharing). Returns the root's step times (decode
    to decode), the first `warmup` rounds left out."""
    n, R = p.n, p.rounds + warmup
    G = p.gbytes
    st = parse_straggler(p.straggler)
    E = delays(dataclasses.replace(p, compute=1.0), parts, R, 1.0)
    start = np.zeros(n)
    down = _Shaper((), p.B, p.burst)     # the root's downlink
    up = _Shaper((), p.B, p.burst)       # the root's uplink
    cpu_free = -np.inf
    fav = -1                             # the worker pulled last
    prev, steps = 0.0, []
    for k in range(R):
        comp = live.copy()
        for _ in range(3):               # who computes: not the caught-up
            fin = start.copy()
            idx = np.flatnonzero(comp)
            work = parts * p.compute + p.step
            fin[idx] = ps_finish(start[idx], np.full(len(idx), work), p.cores)
            dur = (fin - start) * (p.compute / work) if work > 0 else fin - start
            delay = E[k] * dur if st[0] == "exp" else E[k]
            T = fin + np.where(comp, delay, 0.0)
            h = T + p.o + p.alpha
            h[0] = T[0]
            h[~comp] = np.inf
            used = _needed_star(p, h[None, :], T[None, :1])[0]
            pulled = np.flatnonzero(used & (np.arange(n) > 0))
            d2 = _Shaper((), p.B, p.burst)
            d2.M, d2.X = down.M, down.X
            arr = []
            for w in pulled[np.argsort(h[pulled])]:
                arr.append(float(d2.send(h[w], G, floor=h[w])) + p.alpha)
            g = p.gamma * G
            a = sorted(arr + ([T[0]] if used[0] else []))
            if p.code == "cr":
                t_dec = a[-1] + len(a) * g
            else:
                t_dec = -np.inf
                for x in a:
                    t_dec = max(t_dec, x) + g
            new = live & ~(start >= t_dec)
            new[0] = True
            if np.array_equal(new, comp):
                break
            comp = new
        down = d2
        res = np.full(n, t_dec)
        ws = [w for w in range(1, n) if live[w]]
        post = []
        for w in ws:
            cpu_free = max(cpu_free, t_dec) + p.o
            post.append(cpu_free)
        # a worker still in its injected delay (asleep: no progress call)
        # takes its result only once awake (late, alone on the link). The
        # others': "fifo", one after another in post order; "fair", all
        # at once (equal sizes: all end when the last would), except the
        # worker whose message the root pulled last, whose result goes
        # first (its connection is the one in use: what a per-worker trace
        # of gcx_coded_gather_perf at 4 emulated ranks shows, perf/sim/
        # README.md)
        awake = [w for w in ws if not (comp[w] and T[w] > t_dec)]
        if p.uplink == "fair" and fav in awake:
            awake.remove(fav)
            awake.insert(0, fav)
        fifo = [float(up.send(post[j], G)) for j in range(len(awake))]
        for i, w in enumerate(awake):
            end = fifo[i]
            if p.uplink == "fair":   # the favoured one: `lead` of the way
                end = fifo[-1] - (p.lead * (fifo[-1] - fifo[0]) if w == fav else 0)
            res[w] = end + p.alpha
        for w in ws:
            if w not in awake:
                res[w] = T[w] + G / p.B + p.alpha
        if len(pulled):
            fav = int(pulled[np.argsort(h[pulled])][-1])
        nxt = np.where(comp, np.maximum(res, T), res)
        nxt[0] = max(t_dec, T[0])
        start = nxt
        if k >= warmup:
            steps.append(nxt[0] - prev)
        prev = nxt[0]
    return np.array(steps)


def owners(p, live):
    n = p.n
    own = np.empty(n, int)
    for c in range(n):
        for k in range(p.s + 1):
            if live[(c + k) % n]:
                own[c] = (c + k) % n
                break
        else:
            raise ValueError(f"chunk {c}: ranks {c}..{c + p.s} all dead")
    return own


def sim_masterless(p, T, live, blocked=False, iters=8, resplit=False):
    """T[R, n] ready times; returns the step time per round. resplit: with
    dead ranks the vector is cut into one chunk per live rank (known dead
    before the round) instead of the next live rank taking the dead rank's
    chunk over."""
    n = p.n
    own = np.flatnonzero(live) if resplit else owners(p, live)
    nc = len(own)
    m = p.gbytes / nc
    tau_d = m / p.B
    gm = p.gamma * m
    L = np.flatnonzero(live)
    grp = fr_groups(n, p.s) if p.code == "fr" else None
    # phase-1 messages: live w, chunk c with own[c] != w
    W, C = np.meshgrid(L, np.arange(nc), indexing="ij")
    W, C = W.ravel(), C.ravel()
    keep = own[C] != W
    W1, C1 = W[keep], C[keep]
    D1 = own[C1]
    ord1 = (own[C1] - W1) % n            # shifted order on the uplink
    # phase-2 messages: owner of c to every live r != owner
    C2, Rr = np.meshgrid(np.arange(nc), L, indexing="ij")
    C2, Rr = C2.ravel(), Rr.ravel()
    k2 = own[C2] != Rr
    C2, Rr = C2[k2], Rr[k2]
    S2 = own[C2]
    ord2 = (Rr - S2) % n + n             # after phase 1 on a tie
    src = np.r_[W1, S2]
    dst = np.r_[D1, Rr]
    order = np.r_[ord1, ord2]
    n1 = len(W1)
    out = np.empty(T.shape[0])
    for r in range(T.shape[0]):
        Tr = T[r]
        t_dec = None                     # first pass: phase 1 alone
        for _ in range(iters):
            if t_dec is None:
                uend = _link_scan(W1, Tr[W1], m, p.B, p.burst, p.o, ord1)
                arr = _link_scan(D1, uend - tau_d, m, p.B, p.burst, floor=uend) + p.alpha
            else:
                post = np.r_[Tr[W1], t_dec[C2]]
                uend = _link_scan(src, post, m, p.B, p.burst, p.o, order)
                arr = _link_scan(dst, uend - tau_d, m, p.B, p.burst, floor=uend) + p.alpha
            # contributions per chunk: A[c, w] (inf: none)
            A = np.full((nc, n), np.inf)
            A[C1, W1] = arr[:n1]
            oc = own                      # the owner's own contribution
            A[np.arange(nc), oc] = Tr[oc]
            start = Tr[oc] if blocked else None
            if p.code == "fr":
                ngr = n // (p.s + 1)
                Ag = A.reshape(nc, ngr, p.s + 1).min(axis=2)  # first of each group
                new = _stream_decode(Ag, gm, start)
            else:
                last, k = cr_set(A, p.s)
                if blocked:
                    last = np.maximum(last, start)
                new = last + k * gm
            done = t_dec is not None and np.allclose(new, t_dec, rtol=0, atol=1e-12)
            t_dec = new
            if done:
                break
        # chunk c at rank r: own chunk at t_dec, else phase-2 arrival
        if len(arr) == n1:               # converged on the first pass: post phase 2
            post = np.r_[Tr[W1], t_dec[C2]]
            uend = _link_scan(src, post, m, p.B, p.burst, p.o, order)
            arr = _link_scan(dst, uend - tau_d, m, p.B, p.burst, floor=uend) + p.alpha
        out[r] = max(t_dec.max(), arr[n1:].max() if len(arr) > n1 else -np.inf)
    return out


def _landed(a, km):
    """one CPU copying arrivals a (..., k), in arrival order, km seconds
    each: when each is landed (same order as a)."""
    idx = np.argsort(a, axis=-1, kind="stable")
    srt = np.take_along_axis(a, idx, axis=-1)
    j = np.arange(a.shape[-1])
    fin = np.isfinite(srt)
    lv = np.maximum.accumulate(np.where(fin, srt - j * km, -np.inf), axis=-1) + (j + 1) * km
    lv = np.where(fin, lv, np.inf)
    out = np.empty_like(lv)
    np.put_along_axis(out, idx, lv, axis=-1)
    return out


def _landed_seg(seg, a, km):
    """per segment (receiving rank) one CPU copying its arrivals a in
    arrival order, km seconds each: when each is landed."""
    idx = np.lexsort((a, seg))
    sg, v = seg[idx], a[idx]
    start = np.r_[True, sg[1:] != sg[:-1]]
    st = np.flatnonzero(start)
    pos = np.arange(len(v)) - np.repeat(st, np.diff(np.r_[st, len(v)]))
    lv = _segcummax(v - pos * km, start) + (pos + 1) * km
    out = np.empty_like(lv)
    out[idx] = lv
    return out


def sim_masterless_impl(p, T, live, iters=12):
    """the master-less coded allreduce as src/coll/coded/
    implements it (owner role free: a rank's delay only postpones its own
    chunk sends). Differences from `masterless` (the idealised variant):
      - every arrival (phase-1 chunk messages and phase-2 decoded chunks)
        is copied once on the receiver's CPU, kappa*m each, in arrival
        order; the owner decodes from the first decodable set that has
        LANDED (copied), so it pulls every arrival until then;
      - decoding: one pass over the used set after it is known, |used|
        gamma m (FR: n/(s+1) messages, CR: n-s);
      - commit: the decoded chunk is posted to the n-1 others at once
        (the later owners of the line first); each later owner answers ACK
        once it landed (o + alpha back); on the last ACK the owner sends
        COMMIT to every rank, one o each in line order, and a rank's chunk
        is final when it landed and its COMMIT came (+ alpha);
      - the owner's own decoded chunk is copied out once (kappa*m).
    ACK and COMMIT are header-only: they cost o + alpha, not link time.
    (Until 2026-12-05 the implementation sent the chunk to the later owners
    first and to the others only after their ACKs; this model followed.)"""
    n = p.n
    own = owners(p, live)
    nc = n
    m = p.gbytes / nc
    tau_d = m / p.B
    gm, km = p.gamma * m, p.kappa * m
    L = np.flatnonzero(live)
    W, C = np.meshgrid(L, np.arange(nc), indexing="ij")
    W, C = W.ravel(), C.ravel()
    keep = own[C] != W
    W1, C1 = W[keep], C[keep]
    D1 = own[C1]
    ord1 = (own[C1] - W1) % n
    # later owners: live ranks of the line c+1..c+s after the acting owner
    later = np.zeros((nc, n), bool)
    for c in range(nc):
        for k in range(p.s + 1):
            r = (c + k) % n
            if live[r] and r != own[c] and (r - c) % n > (own[c] - c) % n:
                later[c, r] = True
    C2, Rr = np.meshgrid(np.arange(nc), L, indexing="ij")
    C2, Rr = C2.ravel(), Rr.ravel()
    k2 = own[C2] != Rr
    C2, Rr = C2[k2], Rr[k2]
    S2 = own[C2]
    bk = later[C2, Rr]
    ord2 = (Rr - S2) % n + n
    src = np.r_[W1, S2]
    dst = np.r_[D1, Rr]
    order = np.r_[ord1, ord2]
    n1 = len(W1)
    nused = n // (p.s + 1) if p.code == "fr" else n - p.s
    out = np.empty(T.shape[0])
    for r in range(T.shape[0]):
        Tr = T[r]
        t_dec = None
        for _ in range(iters):
            # phase 2 posts at the decode times of the last pass (none in
            # the first): both phases share the links
            post = Tr[W1] if t_dec is None else np.r_[Tr[W1], t_dec[C2]]
            s_, d_, o_ = (W1, D1, ord1) if t_dec is None else (src, dst, order)
            uend = _link_scan(s_, post, m, p.B, p.burst, p.o, o_)
            arr = _link_scan(d_, uend - tau_d, m, p.B, p.burst, floor=uend) + p.alpha
            # each rank's CPU copies its arrivals in arrival order
            land = _landed_seg(d_, arr, km)
            A = np.full((nc, n), np.inf)
            A[C1, W1] = land[:n1]
            A[np.arange(nc), own] = Tr[own]          # the owner's own chunk
            if p.code == "fr":
                ngr = n // (p.s + 1)
                t_set = A.reshape(nc, ngr, p.s + 1).min(axis=2).max(axis=1)
                k = nused
            else:
                t_set, k = cr_set(A, p.s)
            new = t_set + k * gm
            done = (t_dec is not None and len(arr) > n1 and
                    np.allclose(new, t_dec, rtol=0, atol=1e-12))
            t_dec = new
            if done:
                break
        if len(arr) == n1:  # iters == 1: phase 2 once at the decode times
            uend = _link_scan(src, np.r_[Tr[W1], t_dec[C2]], m, p.B, p.burst, p.o, order)
            arr = _link_scan(dst, uend - tau_d, m, p.B, p.burst, floor=uend) + p.alpha
            land = _landed_seg(dst, arr, km)
        arr2 = land[n1:]
        ack = np.full(nc, -np.inf)
        np.maximum.at(ack, C2[bk], arr2[bk] + p.o + p.alpha)
        t_commit = np.maximum(ack, t_dec)
        final = np.maximum(arr2, t_commit[C2] + ((Rr - S2) % n) * p.o + p.alpha)
        out[r] = max((t_dec + km).max(), final.max() if len(final) else -np.inf)
    return out


def simulate(p, scheme):
    """step time per round (array of p.rounds) of one scheme."""
    f = p.cpu_factor
    if f != 1.0 or p.wake:
        p = dataclasses.replace(p, o=p.o * f, gamma=p.gamma * f, kappa=p.kappa * f,
                                alpha=p.alpha + p.wake * (f - 1.0), wake=0.0,
                                cpus=0.0, load=0.0, cpu_scale=0.0)
    live = ~dead_ranks(p)
    if scheme == "ring":
        return sim_ring(p, ready_times(p, 1), live)
    if scheme == "ignore":
        return sim_ignore(p, ready_times(p, 1), live)
    parts = 1 if p.coded_parts == "pgc" else p.s + 1
    T = ready_times(p, parts)
    if scheme == "star":
        return sim_star(p, T, live)
    if scheme == "star-chained":
        return sim_star_chained(p, parts, live)
    if scheme == "star-blocked":
        return sim_star(p, T, live, blocked=True)
    if scheme == "masterless":
        return sim_masterless(p, T, live)
    if scheme == "masterless-blocked":
        return sim_masterless(p, T, live, blocked=True)
    if scheme == "masterless-resplit":
        return sim_masterless(p, T, live, resplit=True)
    if scheme == "masterless-impl":
        return sim_masterless_impl(p, T, live)
    raise ValueError(f"unknown scheme {scheme}")


# ---- closed formulas (no stragglers) ----------------------------------------

def closed(p, scheme):
    """the closed formula of `scheme` without stragglers or dead ranks."""
    n, s, G, B = p.n, p.s, p.gbytes, p.B
    if scheme in ("ring", "ignore"):
        P = n if scheme == "ring" else n - s
        m = G / P
        C = p.compute + p.step
        extra = p.alpha if scheme == "ignore" else 0.0
        if P == 1:
            return C + extra
        return C + extra + 2 * (P - 1) * (p.o + m / B + p.alpha) + (P - 1) * p.gamma * m
    parts = 1 if p.coded_parts == "pgc" else s + 1
    C = parts * p.compute + p.step
    up = lambda k, m: max(k * p.o + m / B, p.o + k * m / B)  # noqa: E731
    if scheme.startswith("star"):
        k = n // (s + 1) - 1 if p.code == "fr" else n - s - 1
        h = C + p.o + p.alpha
        D = (n - s) * p.gamma * G if p.code == "cr" else p.gamma * G
        t_dec = C + D if k == 0 else h + k * G / B + p.alpha + D
        return t_dec + up(n - 1, G) + p.alpha
    if scheme.startswith("masterless"):
        m = G / n
        out = -np.inf
        for c in range(n):
            if p.code == "fr":
                K = n - s - ((s + 1) - (c % (s + 1)))
                D = p.gamma * m
            else:
                K = n - s - 1
                D = (n - s) * p.gamma * m
            t_dec = C + up(K, m) + p.alpha + D
            S = max(t_dec, C + (n - 1) * p.o)
            U = max(C + p.o + (2 * n - 2) * m / B, C + (n - 1) * p.o + n * m / B,
                    S + p.o + (n - 1) * m / B, S + (n - 1) * p.o + m / B)
            out = max(out, U)
        return out + p.alpha
    raise ValueError(scheme)


# ---- tables -----------------------------------------------------------------

def summarize(x):
    x = np.asarray(x, float)
    return {"mean": float(np.mean(x)), "median": float(np.median(x)),
            "p90": float(np.percentile(x, 90))}


def step_table(p, schemes=SCHEMES):
    out = {}
    for sc in schemes:
        try:
            out[sc] = summarize(simulate(p, sc))
        except ValueError as e:
            out[sc] = {"error": str(e)}
    return out


def load_fit(path=None):
    """alpha, o, gamma, eff from calibrate.py's fit (perf/sim/params.json)."""
    path = path or os.path.join(HERE, "params.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        d = json.load(f)
    return {k: d[k] for k in ("alpha", "o", "gamma", "eff", "kappa") if k in d}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--bytes", default="4M", help="|g| (4M = 4 MiB, 100MB = 10^8)")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--eff", type=float, help="payload share of the rate")
    ap.add_argument("--alpha", type=float, help="s per message (latency)")
    ap.add_argument("--o", type=float, help="s per message on the sender")
    ap.add_argument("--gamma", type=float, help="s per byte decoded/reduced")
    ap.add_argument("--kappa", type=float, help="s per byte of one copy pass (masterless-impl)")
    ap.add_argument("--cpu-scale", type=float, default=0.0,
                    help="CPU slow-down of o, gamma, kappa (a loaded box; 0: none)")
    ap.add_argument("--wake", type=float, default=0.0, help="s per message x (cpu-scale - 1)")
    ap.add_argument("--params", default=None,
                    help="fit to start from (default perf/sim/params.json if present)")
    ap.add_argument("--compute", type=float, default=0.0, help="c, s per partition")
    ap.add_argument("--step", type=float, default=0.0,
                    help="s per step outside the partitions (not scaled by stragglers)")
    ap.add_argument("--s", type=int, default=1)
    ap.add_argument("--code", default="fr", choices=["fr", "cr", "ignore"])
    ap.add_argument("--parts", default="pgc", choices=["pgc", "gc"])
    ap.add_argument("--straggler", default="none")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--schemes", default=",".join(SCHEMES))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    kw = load_fit(a.params)
    for k in ("eff", "alpha", "o", "gamma", "kappa"):
        if getattr(a, k) is not None:
            kw[k] = getattr(a, k)
    kw["cpu_scale"], kw["wake"] = a.cpu_scale, a.wake
    p = params(n=a.n, gbytes=parse_bytes(a.bytes), rate=parse_rate(a.rate),
               compute=a.compute, step=a.step, s=a.s, code=a.code, coded_parts=a.parts,
               straggler=a.straggler, seed=a.seed, rounds=a.rounds, **kw)
    schemes = a.schemes.split(",")
    tab = step_table(p, schemes)
    if a.json:
        print(json.dumps({"params": dataclasses.asdict(p), "steps": tab}, indent=1))
        return 0
    print(f"# n={p.n} |g|={p.gbytes} B rate={p.rate:g} bit/s (B={p.B:.4g} B/s) "
          f"alpha={p.alpha:g} o={p.o:g} gamma={p.gamma:g} c={p.compute:g} s={p.s} "
          f"code={p.code} parts={p.coded_parts} straggler={p.straggler} rounds={p.rounds}")
    print(f"{'scheme':20s} {'mean ms':>10s} {'median ms':>10s} {'p90 ms':>10s} {'closed ms':>10s}")
    for sc in schemes:
        r = tab[sc]
        if "error" in r:
            print(f"{sc:20s} {r['error']}")
            continue
        cl = ""
        if (parse_straggler(p.straggler)[0] == "none" and p.cpu_factor == 1.0
                and sc != "masterless-impl"):   # closed formulas: no CPU slow-down
            cl = f"{1e3 * closed(p, sc):10.3f}"
        print(f"{sc:20s} {1e3 * r['mean']:10.3f} {1e3 * r['median']:10.3f} "
              f"{1e3 * r['p90']:10.3f} {cl:>10s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
