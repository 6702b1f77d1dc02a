#!/usr/bin/env bash
# before_after.sh - the earlier issues' headline figures for two builds of
# gcx (e.g. main before and after a refactoring), alternating in one run.
#
#   perf/before_after.sh BEFORE_BUILD AFTER_BUILD [OUT]     (as root)
#
# Each round runs every item with BEFORE, then with AFTER (ROUNDS, default
# 2), so a drift of the shared machine hits both alike; the summary gives
# per item the median over rounds of each build and after/before:
#   allreduce  gcx_allreduce_perf, 4 local ranks, 1-64 MB, busbw, and
#              Open MPI's (mpi_allreduce_perf of AFTER) in the same round:
#              the gcx/MPI ratio per build
#   topk       gcx_compress_perf -k topk, N = 25M, CF 100 and 1000 (CPU
#              time of the compressor; torch.topk is not rebuilt, so the
#              ratio to it moves with this time alone)
#   coded      gcx_coded_gather_perf, 4 local ranks, rank 3 straggling
#              50 ms per round: round time of uncoded, gc-cr, pgc-cr and
#              the uncoded/gc-cr straggler ratio
#   sparse     gcx_sparse_allreduce_perf on the emulated cluster (4 ranks,
#              1 Gbit/s), N = 25M, density 0.1% and 1%, overlap 0.5: auto
#              and the dense allreduce
#   train      gcx-train --sync gravac, 4 local ranks, 1 epoch: training
#              time and final test accuracy
# Both builds' programs run under AFTER's gcxrun (the environment protocol
# of gcxrun did not change). Raw output in OUT (default
# build/before-after), summary on stdout and in OUT/summary.md.
# Cost: ~4 minutes a round on the 2-core box.
set -euo pipefail
before=$(cd "$1" && pwd); after=$(cd "$2" && pwd)
out=${3:-$after/before-after}
rounds=${ROUNDS:-2}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"; out=$(cd "$out" && pwd)
gcxrun=$after/programs/gcxrun/gcxrun
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# find NAME in a build (the tree moved programs around)
prog() {
  local b=$1 name=$2 p
  for p in "$b/programs/train/$name" "$b/src/train/$name" "$b/perf/coll/$name" \
           "$b/perf/compress/$name" "$b/perf/coded/$name" "$b/perf/sparse/$name"; do
    [[ -x $p ]] && { echo "$p"; return; }
  done
  echo "before_after.sh: no $name in $b" >&2; exit 2
}

for r in $(seq 1 "$rounds"); do
  for side in before after; do
    b=${!side}
    echo "== round $r: $side ($b)" >&2
    "$gcxrun" -n 4 -- "$(prog "$b" gcx_allreduce_perf)" -b 1M -e 64M -n 10 -w 3 \
      --json "$out/allreduce-$side-r$r.json" > /dev/null
    mpirun --oversubscribe -np 4 "$(prog "$after" mpi_allreduce_perf)" -b 1M -e 64M -n 10 -w 3 \
      --json "$out/mpi-$side-r$r.json" > /dev/null
    "$(prog "$b" gcx_compress_perf)" -n 25M -c 100,1000 -k topk -r 5 \
      --json "$out/topk-$side-r$r.json" > /dev/null
    GCX_STRAGGLER_RANKS=3 GCX_STRAGGLER_DELAY_MS=50 \
      "$gcxrun" -n 4 -- "$(prog "$b" gcx_coded_gather_perf)" --rounds 20 --warmup 3 \
      --s 1 --modes uncoded,gc-cr,pgc-cr --json "$out/coded-$side-r$r.json" > /dev/null
    "$here/cluster/emulate.sh" -n 4 --rate 1gbit -q -- "$(prog "$b" gcx_sparse_allreduce_perf)" \
      -N 25000000 -d 0.001,0.01 -o 0.5 --gap-ms 10 --json "$out/sparse-$side-r$r.json" > /dev/null
    "$gcxrun" -n 4 -- "$(prog "$b" gcx-train)" --sync gravac --epochs 1 \
      --json "$out/train-$side-r$r.json" > "$out/train-$side-r$r.log" 2>&1
  done
done
python3 "$here/before_after.py" "$out" "$rounds" | tee "$out/summary.md"
