#!/usr/bin/env bash
# run_ops.sh - torch.distributed collectives, backend gcx against gloo, with
# perf/torch/bench_ops.py, on local ranks or on the emulated cluster.
#
#   perf/torch/run_ops.sh [BUILD_DIR] [RANKS...]              local ranks (default: build 4)
#   LINK=1gbit perf/torch/run_ops.sh [BUILD_DIR] [RANKS...]   emulated nodes (as root)
#
# Idea: one launch per rank count; inside it bench_ops.py runs ROUNDS rounds
# (default 3), gcx and gloo alternating, over OPS (default all_reduce,
# all_gather, reduce_scatter, broadcast) and BEGIN..END (default 1M..64M,
# factor 2), ITERS timed iterations (default 10) after WARMUP (2). Local:
# perf/torch/launch_local.py starts the ranks on loopback (torchrun-style
# env://; gloo on lo, gcx on whatever UCX picks: shared memory unless UCX_TLS
# says otherwise). LINK=RATE: perf/cluster/emulate.sh, one network namespace
# per rank, tbf links of RATE both ways (gloo on eth0, gcx on UCX tcp,self
# over eth0), followed by 3 s of perf/cluster/tcp_ring.py to record the links'
# TCP goodput (busbw of all_reduce is bounded by it).
#
# The markdown summary goes to stdout; ops.csv (every round), summary.csv,
# summary.md and log.txt (the per-round lines) land in
# $OUT/p<RANKS> (default OUT: BUILD_DIR/perf-torch-ops[-LINK]).
# PYTHON (default python3) must have torch; BUILD_DIR/plugin/torch is put
# first on PYTHONPATH for torch_gcx.
#
# Cost: 4 ranks on 1 Gbit/s links, defaults: ~2-3 min a round, ~8-10 min in
# all; local ranks: about a minute a round on this 2-core box.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}; shift || true
build=$(cd "$build" && pwd)
ranks=("$@"); [[ ${#ranks[@]} -gt 0 ]] || ranks=(4)
link=${LINK:-}
python=${PYTHON:-python3}
out=${OUT:-$build/perf-torch-ops${link:+-$link}}
export PYTHONPATH=$build/plugin/torch${PYTHONPATH:+:$PYTHONPATH}
export ROUNDS=${ROUNDS:-3} ITERS=${ITERS:-10} WARMUP=${WARMUP:-2} BEGIN=${BEGIN:-1M} END=${END:-64M}
[[ -z ${OPS:-} ]] || export OPS
[[ -z ${BACKENDS:-} ]] || export BACKENDS
"$python" -c 'import torch, torch_gcx' || {
  echo "run_ops.sh: $python cannot import torch and torch_gcx (PYTHONPATH=$PYTHONPATH)" >&2; exit 2; }
if [[ -n $link && $EUID -ne 0 ]]; then
  echo "run_ops.sh: LINK=$link needs root (perf/cluster/emulate.sh)" >&2; exit 2
fi

# run_ranks P PROGRAM ARGS...: P ranks locally or on emulated nodes
run_ranks() {
  local p=$1; shift
  if [[ -n $link ]]; then
    "$here/../cluster/emulate.sh" -n "$p" --rate "$link" -q --no-prefix -- "$@"
  else
    "$python" "$here/launch_local.py" -n "$p" -q --no-prefix -- "$@"
  fi
}

for p in "${ranks[@]}"; do
  dir=$out/p$p
  mkdir -p "$dir"
  echo "== $p ranks${link:+, emulated $link links}: $dir" >&2
  # per-round lines (stderr of rank 0, warnings of all ranks) go to log.txt too
  run_ranks "$p" "$python" "$here/bench_ops.py" --out "$dir" ${link:+--link "$link"} \
    2> >(tee "$dir/log.txt" >&2)
  if [[ -n $link ]]; then
    run_ranks "$p" "$python" "$here/../cluster/tcp_ring.py" 3 > "$dir/goodput.txt"
    "$python" - "$dir/goodput.txt" <<'PY'
import re, statistics, sys
rates = [float(x) for x in re.findall(r"received from rank \d+: ([0-9.]+) Mbit/s", open(sys.argv[1]).read())]
if rates:
    print(f"\nlinks' TCP goodput (tcp_ring.py, all ranks at once): median {statistics.median(rates):.1f} "
          f"Mbit/s = {statistics.median(rates) / 8e3:.4f} GB/s (min {min(rates):.1f}, max {max(rates):.1f})")
PY
  fi
done
