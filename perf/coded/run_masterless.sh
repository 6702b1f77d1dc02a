#!/bin/bash
# perf/coded/run_masterless.sh - star vs master-less vs dense on the emulated
# cluster (needs root): 4 and 8 ranks at 1 Gbit/s, 16 at 200 Mbit/s, 1M floats,
# 5 ms per partition; no stragglers vs one fixed 200 ms straggler (rank 3,
# --baseline), then exp:1. BUILD=build-dir OUT=/tmp/prefix; ~10 min.
cd "$(dirname "$0")/../.."
E=perf/cluster/emulate.sh
P=${BUILD:-build}/perf/coded/gcx_coded_gather_perf
M=dense,gc-cr-ml,gc-fr-ml,gc-cr,gc-fr,dense,gc-cr-ml,gc-fr-ml
for cfg in "4 1gbit 12" "8 1gbit 8" "16 200mbit 5"; do
  set -- $cfg; n=$1; rate=$2; rounds=$3
  echo "== n=$n rate=$rate no straggler / fixed 200 ms on rank 3 (--baseline)"; date
  GCX_STRAGGLER_RANKS=3 GCX_STRAGGLER_DELAY_MS=200 timeout 900 $E -n $n --rate $rate --subnet 10.233.7 --port 29733 -q --timeout 880 -- $P --rounds $rounds --warmup 2 --compute-ms 5 --count 1000000 --baseline --modes $M --json ${OUT:-/tmp}/coded-fixed-$n.json 2>&1 | grep "^\[0\]"
  echo "== n=$n rate=$rate exp:1"; date
  timeout 900 $E -n $n --rate $rate --subnet 10.233.7 --port 29733 -q --timeout 880 -- $P --rounds $rounds --warmup 2 --compute-ms 5 --count 1000000 --straggler-exp 1 --modes $M --json ${OUT:-/tmp}/coded-exp-$n.json 2>&1 | grep "^\[0\]"
done
date
