#!/bin/bash
# A/B: master-less allreduce with received chunks read in place (y) vs copied (n)
cd /work/main
E=perf/cluster/emulate.sh
P=build/perf/coded/gcx_coded_gather_perf
M=dense,gc-cr-ml,gc-fr-ml,dense,gc-cr-ml,gc-fr-ml
for cfg in "4 1gbit 12" "8 1gbit 8" "16 200mbit 5" "16 100mbit 3"; do
  set -- $cfg; n=$1; rate=$2; rounds=$3
  for rep in 1 2; do
    for ip in y n; do
      echo "== n=$n rate=$rate rep=$rep GCX_CODED_IN_PLACE=$ip $(date +%T)"
      GCX_CODED_IN_PLACE=$ip timeout 600 $E -n $n --rate $rate --subnet 10.233.7 --port 29733 -q --timeout 580 -- $P --rounds $rounds --warmup 2 --compute-ms 5 --count 1000000 --modes $M --json ${OUT:-/tmp/ab}/ab-$n-$rate-$rep-$ip.json 2>&1 | grep "^\[0\]"
    done
  done
done
date
