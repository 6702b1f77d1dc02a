#!/bin/bash
# perf/coded/run_late_rank.sh - issue 44's table: 6 local ranks, master-less
# gradient coding (gc-fr-ml, gc-cr-ml, s = 1), rank 3 computing every round
# 200 ms longer (a sleep, no gcx call; none when its round was decoded
# without it, as a coded worker skips stale work), the others'
# round time (rank 0) with / without it (--baseline, same launch), with no
# progress help at all and with gcx's progress thread, alternating; 100k and
# 1M floats; a training loop (2 partitions of COMPUTE ms each per round, a
# busy loop) and no compute. BUILD=build-dir ROUNDS=R OUT=dir; ~10 min.
cd "$(dirname "$0")/../.."
P=${BUILD:-build}/perf/coded/gcx_coded_gather_perf
R=${BUILD:-build}/programs/gcxrun/gcxrun
OUT=${OUT:-/tmp}
for count in 100000 1000000; do
  for compute in ${COMPUTE:-20} 0; do
    for rep in 1 2; do
      for thread in n y; do
        echo "== count=$count compute_ms=$compute thread=$thread rep=$rep"
        GCX_PROGRESS_THREAD=$thread timeout 600 $R -n 6 -- $P --count $count \
          --compute-ms $compute --late 3:200 --baseline --rounds ${ROUNDS:-10} \
          --warmup 2 --modes gc-fr-ml,gc-cr-ml \
          --json $OUT/late-$count-$compute-$thread-$rep.json 2>&1 |
          grep -v "^#" | grep -E "ml|mode"
      done
    done
  done
done
