#!/bin/bash
# pgc through the master-less allreduce vs the star vs the dense ring, emulated cluster
cd /work/main
E=perf/cluster/emulate.sh
P=build/perf/coded/gcx_coded_gather_perf
M=dense,pgc-fr-ml,pgc-cr-ml,pgc-fr,pgc-cr,dense,pgc-fr-ml,pgc-cr-ml
for cfg in "4 1gbit 12" "8 1gbit 8" "16 100mbit 3"; do
  set -- $cfg; n=$1; rate=$2; rounds=$3
  echo "== n=$n rate=$rate no straggler / fixed 200 ms on rank 3 (--baseline) $(date +%T)"
  GCX_STRAGGLER_RANKS=3 GCX_STRAGGLER_DELAY_MS=200 timeout 900 $E -n $n --rate $rate --subnet 10.233.7 --port 29733 -q --timeout 880 -- $P --rounds $rounds --warmup 2 --compute-ms 5 --count 1000000 --baseline --modes $M --json ${OUT:-/tmp/pgc}/pgc-fixed-$n.json 2>&1 | grep "^\[0\]"
  echo "== n=$n rate=$rate exp:1 $(date +%T)"
  timeout 900 $E -n $n --rate $rate --subnet 10.233.7 --port 29733 -q --timeout 880 -- $P --rounds $rounds --warmup 2 --compute-ms 5 --count 1000000 --straggler-exp 1 --modes $M --json ${OUT:-/tmp/pgc}/pgc-exp-$n.json 2>&1 | grep "^\[0\]"
done
date
