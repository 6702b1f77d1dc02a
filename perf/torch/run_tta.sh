#!/usr/bin/env bash
# run_tta.sh - time-to-accuracy of torch DDP on Fashion-MNIST, gloo and gcx
# with and without gradient compression, on the emulated cluster.
#
#   perf/torch/run_tta.sh [BUILD_DIR]                        (as root; default build)
#   EPOCHS=1 SUBSET=6400 perf/torch/run_tta.sh build         smoke run
#   LOCAL=1 perf/torch/run_tta.sh build                      local ranks instead (no root)
#
# Idea: one launch of perf/torch/ddp_tta.py per configuration, one after the
# other, each on RANKS (default 4) emulated nodes (perf/cluster/emulate.sh,
# every link LINK = 1gbit both ways; gloo on eth0, gcx on UCX tcp,self): CONFIGS
# (default gloo-dense gloo-powersgd gcx-dense gcx-topk gcx-gravac), all with the
# same seed, data order, batch (16 per rank), lr and schedule. A fresh launch
# per configuration keeps every run's process group the default one (the
# hooks' process_group=None) and a failing configuration from taking the
# others down. A configuration that exits 77 (gcx hooks while
# torch_gcx.hooks is missing) is reported as skipped. Then
# `ddp_tta.py --table` writes results.md and plot_tta.py the plots.
#
# Environment: EPOCHS (2), SUBSET (0 = all 60000), TEST_SUBSET, EVAL_EVERY
# (50 steps), TARGET (0.85), PSGD_RANK (2), TOPK_CF (100), BATCH, LR, SEED,
# BUCKET_CAP_MB, RANKS (4), LINK (1gbit), CONFIGS, PYTHON (python3, with torch),
# OUT (default BUILD_DIR/perf-torch-tta-LINK, or -local). BUILD_DIR/plugin/torch
# goes first on PYTHONPATH for torch_gcx.
#
# Cost (4 ranks, 1 Gbit/s, 2 epochs of 937 steps; step times of a smoke run
# on the 2-core box: gloo dense ~134 ms, gcx dense ~160, PowerSGD ~115,
# top-k ~100, GraVAC ~170): 3.5-5.5 min a configuration with ~10 s of
# evaluation per epoch, ~22-25 min for the five; EPOCHS=5: about an hour.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
build=$(cd "$build" && pwd)
python=${PYTHON:-python3}
link=${LINK:-1gbit}
nranks=${RANKS:-4}
local_=${LOCAL:-}
read -r -a configs <<< "${CONFIGS:-gloo-dense gloo-powersgd gcx-dense gcx-topk gcx-gravac}"
if [[ -n $local_ ]]; then where=local; export LINK=; else where=$link; export LINK=$link; fi
out=${OUT:-$build/perf-torch-tta-$where}
export PYTHONPATH=$build/plugin/torch${PYTHONPATH:+:$PYTHONPATH}
"$python" -c 'import torch, torch_gcx' || {
  echo "run_tta.sh: $python cannot import torch and torch_gcx (PYTHONPATH=$PYTHONPATH)" >&2; exit 2; }
if [[ -z $local_ && $EUID -ne 0 ]]; then
  echo "run_tta.sh: the emulated cluster needs root (perf/cluster/emulate.sh); LOCAL=1 for local ranks" >&2
  exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/log.txt
: > "$log"

run_ranks() {
  if [[ -n $local_ ]]; then
    "$python" "$here/launch_local.py" -n "$nranks" -q --no-prefix -- "$@"
  else
    "$here/../cluster/emulate.sh" -n "$nranks" --rate "$link" -q --no-prefix -- "$@"
  fi
}

status=()
for c in "${configs[@]}"; do
  rm -f "$out/$c.csv" "$out/$c.json" "$out/$c.trace.csv"
  echo "== $c: $nranks ranks, $([[ -n $local_ ]] && echo local || echo "emulated $link links") ($(date +%T))" | tee -a "$log"
  set +e
  run_ranks "$python" "$here/ddp_tta.py" --config "$c" --out "$out" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  set -e
  case $rc in
    0) status+=("$c: ok") ;;
    77) status+=("$c: skipped (torch_gcx.hooks missing)") ;;
    *) status+=("$c: FAILED (status $rc, see $log)") ;;
  esac
done
echo | tee -a "$log"
printf '%s\n' "${status[@]}" | tee -a "$log"
echo
"$python" "$here/ddp_tta.py" --table "$out" || true
"$python" "$here/plot_tta.py" "$out" --target "${TARGET:-0.85}" --bytes || true
echo "results: $out/results.md, $out/accuracy_vs_time.png; per run: $out/NAME.csv, NAME.json"
