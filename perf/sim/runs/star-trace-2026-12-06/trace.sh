#!/bin/bash
# The star's rounds, per rank (issue 33, perf/sim: why the chained star model
# with a shared uplink): gcx_coded_gather_perf --trace at 4 emulated ranks,
# 1 Gbit/s, gc-cr and gc-fr, then per round, relative to the root's return
# (decoded, result sends posted): when each worker's call returned (its
# result had come) and when it entered the next round. Needs root; ~1 min.
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/star-trace}
mkdir -p "$OUT"
timeout 300 perf/cluster/emulate.sh -n 4 --rate 1gbit --subnet 10.233.7 --port 29733 -q --timeout 280 -- \
  ${BUILD:-build}/perf/coded/gcx_coded_gather_perf --rounds 12 --warmup 2 --compute-ms 5 --count 1000000 \
  --modes gc-cr,gc-fr --trace > "$OUT/trace.txt" 2>&1
grep '^\[0\] *gc-\|mode' "$OUT/trace.txt"
/usr/bin/python3 - "$OUT/trace.txt" <<'PY'
import collections, re, sys
d = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    m = re.search(r"trace (\S+) (\d+) (\d+) ([\d.]+) ([\d.]+)", line)
    if m:
        d[(m[1], int(m[2]))][int(m[3])] = (float(m[4]), float(m[5]))
print("mode   round  period   root-next-in   w: result / next-in (ms after the root's return)")
for mode in ("gc-cr", "gc-fr"):
    for r in range(3, 11):
        a, b = d[(mode, r)], d[(mode, r + 1)]
        t0 = a[0][1]
        ws = "  ".join(f"w{k} {1e3 * (a[k][1] - t0):6.1f} / {1e3 * (b[k][0] - t0):6.1f}" for k in sorted(a) if k)
        print(f"{mode}  {r:5d}  {1e3 * (b[0][1] - t0):6.1f}  {1e3 * (b[0][0] - t0):6.1f}   {ws}")
PY
