#!/bin/bash
# A/B of the coded slots change (3121c34: blocks only where needed) against the tree before it
# (old: git worktree add /tmp/gcx-old 3121c34~1 && meson setup /tmp/gcx-old/build-old --buildtype=release
#  && ninja -C /tmp/gcx-old/build-old perf/coded/gcx_coded_gather_perf); 8 emulated ranks at 1 Gbit/s, two runs
# alternating; needs root, ~4 min. Output of 2026-12-06 03:18 UTC: out.txt
cd "$(dirname "$0")/../../../.."
for i in 1 2; do
  for v in old new; do
    P=$([ $v = old ] && echo /tmp/gcx-old/build-old/perf/coded/gcx_coded_gather_perf || echo build/perf/coded/gcx_coded_gather_perf)
    echo "== $v run $i"
    timeout 300 perf/cluster/emulate.sh -n 8 --rate 1gbit --subnet 10.233.7 --port 29733 -q --timeout 280 -- $P --rounds 20 --warmup 3 --compute-ms 5 --count 1000000 --modes dense,gc-fr-ml,gc-cr-ml,pgc-fr-ml 2>&1 | grep '^\[0\] *\(dense\|gc\|pgc\)'
  done
done
