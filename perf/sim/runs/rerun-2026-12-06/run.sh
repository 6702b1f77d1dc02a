#!/bin/bash
# Two measured sets of perf/sim/measured.json run again with more rounds and
# their baselines paired in the same run:
#  - 16 ranks, 200 Mbit/s, exp:1 (run_masterless.sh's coded-exp-16 line, 5
#    rounds, its no-straggler rows from another run): --baseline adds the
#    no-straggler round of every mode next to it, 8 rounds;
#  - 8 ranks, 1 Gbit/s, pgc through the master-less allreduce with rank 3
#    200 ms late and under exp:1 (pgc.sh's n=8 lines, 8 rounds): 24 rounds.
# JSON: OUT/n16/coded-exp-16.json, OUT/pgc8/coded-{fixed,exp}-8.json, the
# names perf/sim/import_coded.py reads (this folder keeps the 2026-12-06 run:
#   import_coded.py perf/sim/runs/rerun-2026-12-06/n16 --date 2026-12-06 \
#       --source perf/sim/runs/rerun-2026-12-06/run.sh
#   import_coded.py perf/sim/runs/rerun-2026-12-06/pgc8 --date 2026-12-06 \
#       --source perf/sim/runs/rerun-2026-12-06/run.sh --modes pgc-fr-ml,pgc-cr-ml).
# Usage (root, repository root): OUT=/tmp/rerun perf/sim/runs/rerun-2026-12-06/run.sh
cd "$(dirname "$0")/../../../.."
E=perf/cluster/emulate.sh
P=${BUILD:-build}/perf/coded/gcx_coded_gather_perf
out=${OUT:-/tmp/rerun}; mkdir -p "$out/n16" "$out/pgc8"
M=dense,gc-cr-ml,gc-fr-ml,gc-cr,gc-fr,dense,gc-cr-ml,gc-fr-ml
echo "== n=16 rate=200mbit exp:1 with --baseline $(date +%T)"
timeout 900 $E -n 16 --rate 200mbit --subnet 10.233.7 --port 29733 -q --timeout 880 -- $P --rounds 8 --warmup 2 --compute-ms 5 --count 1000000 --straggler-exp 1 --baseline --modes $M --json $out/n16/coded-exp-16.json 2>&1 | grep "^\[0\]"
M=dense,pgc-fr-ml,pgc-cr-ml,dense,pgc-fr-ml,pgc-cr-ml
echo "== n=8 rate=1gbit pgc, rank 3 200 ms late (--baseline) $(date +%T)"
GCX_STRAGGLER_RANKS=3 GCX_STRAGGLER_DELAY_MS=200 timeout 900 $E -n 8 --rate 1gbit --subnet 10.233.7 --port 29733 -q --timeout 880 -- $P --rounds 24 --warmup 2 --compute-ms 5 --count 1000000 --baseline --modes $M --json $out/pgc8/coded-fixed-8.json 2>&1 | grep "^\[0\]"
echo "== n=8 rate=1gbit pgc exp:1 $(date +%T)"
timeout 900 $E -n 8 --rate 1gbit --subnet 10.233.7 --port 29733 -q --timeout 880 -- $P --rounds 24 --warmup 2 --compute-ms 5 --count 1000000 --straggler-exp 1 --modes $M --json $out/pgc8/coded-exp-8.json 2>&1 | grep "^\[0\]"
date
