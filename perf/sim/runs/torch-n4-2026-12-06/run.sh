#!/bin/bash
# The 4-rank torch points of perf/sim/measured.json measured again in one
# session on an idle box (the recorded ones: the coded study of 2026-12-03,
# whose 4-rank exp:1 runs implied 13.9 ms of compute a step against 8.9
# measured on 2026-12-06). Every configuration of those points, with and
# without exp:1 stragglers, in ROUNDS rounds; within a round the
# configurations run one after another (a slow spell falls on one round).
#   none: --no-straggler, 200 steps, the median step (the study's steps set)
#   exp1: --straggler exp:1, 300 steps, the mean step (the study's tta runs
#         report train time / steps; evaluations are outside that clock)
# Usage (root, from the repository root, build dirs made):
#   OUT=/tmp/torch-n4 [FIRST=1] [ROUNDS=2] perf/sim/runs/torch-n4-2026-12-06/run.sh
cd "$(dirname "$0")/../../../.."
out=${OUT:-/tmp/torch-n4}; mkdir -p "$out"
export PYTHONPATH=$PWD/build/plugin/torch
py=$PWD/build-venv/bin/python
run() {  # NAME ARGS...
  local name=$1; shift
  echo "== $name $(date +%T)"
  perf/cluster/emulate.sh -n 4 --rate 1gbit -q --no-prefix --timeout 600 -- \
    $py perf/torch/coded_tta.py --name "$name" --out "$out" "$@" 2>&1 | grep -E "ms/step|Error|error" | tail -2
}
for r in $(seq ${FIRST:-1} ${ROUNDS:-2}); do
  for spec in ddp-gcx ignore:0 ignore gc-fr gc-cr pgc-fr pgc-cr; do
    c=${spec%%:*}; s=1; [[ $spec == *:* ]] && s=${spec#*:}
    run "$c-s$s-none-r$r" --config "$c" --s "$s" --no-straggler --max-steps 200 --eval-every 0 --seed "$r"
  done
  for spec in ddp-gcx ignore gc-fr gc-cr pgc-fr pgc-cr@0.025; do
    c=${spec%%@*}; lr=(); [[ $spec == *@* ]] && lr=(--lr "${spec#*@}")
    run "$c-exp1-r$r" --config "$c" --straggler exp:1 --max-steps 300 --eval-every 0 --seed "$r" "${lr[@]}"
  done
done
date
