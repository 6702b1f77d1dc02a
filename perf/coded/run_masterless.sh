#!/bin/bash
# perf/coded/run_masterless.sh - star vs master-less vs dense on the emulated
# cluster (needs root): 4 and 8 ranks at 1 Gbit/s, 16 at 200 and at 100 Mbit/s
# (the 2 cores of the emulating box compute 2 partitions of 16 ranks in the
# gaps of a 200 Mbit/s round; 100 Mbit/s gives them the time), 1M floats,
# 5 ms per partition; no stragglers vs one fixed 200 ms straggler (rank 3,
# --baseline), then exp:1. JSON: coded-{fixed,exp}-N[-RATE].json (RATE only
# for the second 16-rank setting). BUILD=build-dir OUT=/tmp/prefix; ~15 min.
cd "$(dirname "$0")/../.."
E=perf/cluster/emulate.sh
P=${BUILD:-build}/perf/coded/gcx_coded_gather_perf
M=dense,gc-cr-ml,gc-fr-ml,gc-cr,gc-fr,dense,gc-cr-ml,gc-fr-ml
for cfg in "4 1gbit 12" "8 1gbit 8" "16 200mbit 5" "16 100mbit 3 -100mbit"; do
  set -- $cfg; n=$1; rate=$2; rounds=$3; tag=$4
  echo "== n=$n rate=$rate no straggler / fixed 200 ms on rank 3 (--baseline)"; date
  GCX_STRAGGLER_RANKS=3 GCX_STRAGGLER_DELAY_MS=200 timeout 900 $E -n $n --rate $rate --subnet 10.233.7 --port 29733 -q --timeout 880 -- $P --rounds $rounds --warmup 2 --compute-ms 5 --count 1000000 --baseline --modes $M --json ${OUT:-/tmp}/coded-fixed-$n$tag.json 2>&1 | grep "^\[0\]"
  echo "== n=$n rate=$rate exp:1"; date
  timeout 900 $E -n $n --rate $rate --subnet 10.233.7 --port 29733 -q --timeout 880 -- $P --rounds $rounds --warmup 2 --compute-ms 5 --count 1000000 --straggler-exp 1 --modes $M --json ${OUT:-/tmp}/coded-exp-$n$tag.json 2>&1 | grep "^\[0\]"
done
date
