#!/usr/bin/env bash
# run_coded_tta.sh - time to accuracy of coded data-parallel training in
# torch (torch_gcx.coded) against DDP under exponential stragglers, on the
# emulated cluster: the whole study in one command.
#
#   perf/torch/run_coded_tta.sh [BUILD_DIR]                                  (as root; default build)
#   RANKS=4 EPOCHS=1 SUBSET=6400 TEST_SUBSET=1000 perf/torch/run_coded_tta.sh build     smoke run
#   LOCAL=1 perf/torch/run_coded_tta.sh build                                local ranks instead (no root)
#
# Idea: one launch of perf/torch/coded_tta.py per run, one after the other,
# each on N emulated nodes (perf/cluster/emulate.sh, every link LINK = 1gbit
# both ways; gloo on eth0, gcx on UCX tcp,self) for N in RANKS (default
# "4 8"); all runs share the seed, data order, CNN, batch (16 per rank /
# per partition), lr and schedule. Three sets (SETS, default "tta steps kill"):
#   tta    every configuration of CONFIGS (default ddp-gloo ddp-gcx ignore gc-fr
#          gc-cr pgc-fr pgc-cr pgc-fr-topk) for EPOCHS epochs under STRAGGLER
#          (default exp:1: after each partition gradient a worker sleeps its
#          compute time x Exp(1)), evaluations every EVAL_EVERY steps, once per
#          seed of SEEDS (default: SEED): a round of every configuration per
#          seed, so the table's medians are over the same seeds and a slow
#          spell of the machine falls on one round, not on one configuration
#   steps  the per-step cost without stragglers: STEP_CONFIGS (default ddp-gloo
#          ddp-gcx ignore:0 ignore gc-fr gc-cr pgc-fr pgc-cr; NAME:S sets s,
#          ignore:0 is the coded path's uncoded gather; NAME@LR a base lr of its
#          own, in every set) for STEP_STEPS (200) steps each, evaluated once
#          at the end, a round of every configuration per seed of SEEDS
#   kill   KILL_CONFIGS (default pgc-fr gc-fr ddp-elastic) under STRAGGLER with
#          one rank SIGKILLed: the rank and the step are drawn from (KILL_SEED, N)
#          (rank in 1..N-1, step in [10%, 40%) of the dense first epoch, before the
#          runs reach 85%); pgc gets (s+1) x that step, the same global batch.
#          coded: the survivors go on (lost rounds, every later step done);
#          ddp-elastic: ElasticDDP shrinks and redoes the step (seconds lost).
#          The undisturbed reference is the tta set's run (ddp-elastic's:
#          ddp-gcx, the same computation without a kill, plus one short step
#          per epoch of the tail ddp-gcx drops).
# A fresh launch per run keeps every process group the default one and a
# failing run from taking the others down. A run that exits 77 (a code this
# torch_gcx lacks) is reported as skipped; a kill run is ok when it exits 0
# or with the victim's 137 and its JSON is there. Then `coded_tta.py --table`
# writes results.md and plot_coded_tta.py one accuracy-vs-time PNG per rank
# count.
#
# Environment: RANKS ("4 8"), SETS, CONFIGS, STEP_CONFIGS, KILL_CONFIGS, SEEDS,
# STRAGGLER (exp:1), S (1), EPOCHS (2), SUBSET (0 = all 60000), TEST_SUBSET
# (0 = all 10000), EVAL_EVERY (50 steps), TARGET (0.85), STEP_STEPS (200),
# KILL_SEED (SEED), KILL_TIMEOUT (60 s: the kill runs' group timeout =
# GCX_TIMEOUT), TIMEOUT (300 s: the other runs'), RUN_TIMEOUT (3600 s per
# launch, 0: none), TOPK_CF, BATCH, LR, SEED, KSIZE, LINK (1gbit), PYTHON
# (python3, with torch), LOCAL=1 (local ranks through launch_local.py), OUT
# (default BUILD_DIR/perf-torch-coded-tta-LINK, or -local).
# BUILD_DIR/plugin/torch goes first on PYTHONPATH for torch_gcx.
#
# Cost, from smoke runs on the 2-core box under a background test loop
# (load 8-12; rank 0's step under exp:1): 4 ranks ~57-74 ms a DDP step,
# ~60 ignore, ~90-110 gc, ~36-54 pgc (half a global batch); 8 emulated ranks
# ~145 ms DDP, ~155 gc-fr, ~95 pgc-fr. So 2 epochs of 60000 are ~2-3.5 min
# of training a run at 4 ranks and ~2.5-3 at 8, plus rank 0's evaluations
# (the full test set: ~4-6 s each under load, every 50 steps: ~37 per run,
# ~75 for pgc at 4 ranks, half that at 8) and ~15-25 s of start-up a launch.
# The tta set is ~50 min at 4 ranks and ~40 at 8, the steps set ~4 min a rank
# count, the kill set ~15; the whole study ~2-2.5 hours (TEST_SUBSET=2000
# cuts ~40 min; EPOCHS=1 about halves the tta and kill sets: the runs reach
# 85% in about half an epoch).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
build=$(cd "$build" && pwd)
python=${PYTHON:-python3}
link=${LINK:-1gbit}
local_=${LOCAL:-}
read -r -a rank_list <<< "${RANKS:-4 8}"
read -r -a sets <<< "${SETS:-tta steps kill}"
read -r -a configs <<< "${CONFIGS:-ddp-gloo ddp-gcx ignore gc-fr gc-cr pgc-fr pgc-cr pgc-fr-topk}"
read -r -a step_configs <<< "${STEP_CONFIGS:-ddp-gloo ddp-gcx ignore:0 ignore gc-fr gc-cr pgc-fr pgc-cr}"
read -r -a kill_configs <<< "${KILL_CONFIGS:-pgc-fr gc-fr ddp-elastic}"
straggler=${STRAGGLER:-exp:1}
s_default=${S:-1}
step_steps=${STEP_STEPS:-200}
seed=${SEED:-1}
read -r -a seeds <<< "${SEEDS:-$seed}"
kill_seed=${KILL_SEED:-$seed}
kill_timeout=${KILL_TIMEOUT:-60}
run_timeout=${RUN_TIMEOUT:-3600}
batch=${BATCH:-16}
subset=${SUBSET:-0}
if [[ -n $local_ ]]; then where=local; export LINK=; else where=$link; export LINK=$link; fi
out=${OUT:-$build/perf-torch-coded-tta-$where}
export PYTHONPATH=$build/plugin/torch${PYTHONPATH:+:$PYTHONPATH}
"$python" -c 'import torch, torch_gcx.coded' || {
  echo "run_coded_tta.sh: $python cannot import torch and torch_gcx.coded (PYTHONPATH=$PYTHONPATH)" >&2; exit 2; }
if [[ -z $local_ && $EUID -ne 0 ]]; then
  echo "run_coded_tta.sh: the emulated cluster needs root (perf/cluster/emulate.sh); LOCAL=1 for local ranks" >&2
  exit 2
fi
for set_ in "${sets[@]}"; do
  case $set_ in tta|steps|kill) ;; *)
    echo "run_coded_tta.sh: unknown set '$set_' in SETS (tta, steps, kill)" >&2; exit 2 ;;
  esac
done
for n in "${rank_list[@]}"; do
  [[ $n =~ ^[0-9]+$ && $n -ge 2 ]] || { echo "run_coded_tta.sh: RANKS: '$n' is not a number >= 2" >&2; exit 2; }
done
[[ $straggler == exp:* ]] || { echo "run_coded_tta.sh: STRAGGLER must be exp:M, got '$straggler'" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/log.txt
: > "$log"
tag=${straggler/:/}
tag=${tag//./p}

# run_ranks N KEEP_GOING PROGRAM...: N ranks, local or emulated
run_ranks() {
  local n=$1 keep=$2
  shift 2
  local extra=()
  [[ -z $keep ]] || extra+=(--keep-going)
  if [[ -n $local_ ]]; then
    [[ $run_timeout == 0 ]] || extra+=(--timeout "$run_timeout")
    "$python" "$here/launch_local.py" -n "$n" -q --no-prefix "${extra[@]}" -- "$@"
  else
    [[ $run_timeout == 0 ]] || extra+=(--timeout "$run_timeout")
    "$here/../cluster/emulate.sh" -n "$n" --rate "$link" -q --no-prefix "${extra[@]}" -- "$@"
  fi
}

# spec_parts SPEC: "CONFIG S LR" of CONFIG[:S][@LR] (LR empty: the default)
spec_parts() {
  local spec=$1 lr= s=$s_default
  [[ $spec != *@* ]] || { lr=${spec#*@}; spec=${spec%%@*}; }
  [[ $spec != *:* ]] || s=${spec#*:}
  echo "${spec%%:*} $s $lr"
}

# name_of SPEC N SUFFIX: a run's name, CONFIG[-sS][-lrLR]-rN-SUFFIX (coded_tta.py's
# default for the first two parts)
name_of() {
  local c s lr name
  read -r c s lr <<< "$(spec_parts "$1")"
  name=$c
  [[ $c == ddp-* || $s == 1 ]] || name+="-s$s"
  [[ -z $lr ]] || name+="-lr$lr"
  echo "$name-r$2-$3"
}

status=()
# one SET N SPEC KILL_RANK KILL_STEP ARGS...: one launch and its bookkeeping
one() {
  local set_=$1 n=$2 spec=$3 krank=$4 kstep=$5
  shift 5
  local c s lr name rc lr_args=()
  read -r c s lr <<< "$(spec_parts "$spec")"
  [[ -z $lr ]] || lr_args=(--lr "$lr")
  case $set_ in
    tta) name=$(name_of "$spec" "$n" "$tag")
         [[ ${#seeds[@]} == 1 ]] || name+="-seed$SEED_NOW" ;;
    steps) name=$(name_of "$spec" "$n" "none-steps$step_steps")
           [[ ${#seeds[@]} == 1 ]] || name+="-seed$SEED_NOW" ;;
    kill) name=$(name_of "$spec" "$n" "$tag-kill") ;;
  esac
  rm -f "$out/$name.csv" "$out/$name.json" "$out/$name.steps.csv"
  echo "== $set_ $name: $n ranks, $([[ -n $local_ ]] && echo local || echo "emulated $link links")$([[ $set_ == kill ]] && echo ", rank $krank killed at step $kstep") ($(date +%T))" | tee -a "$log"
  set +e
  run_ranks "$n" "$([[ $set_ == kill ]] && echo 1)" "$python" "$here/coded_tta.py" --config "$c" \
    --s "$s" --name "$name" --out "$out" "${lr_args[@]}" "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  set -e
  if [[ $set_ == kill && ( $rc == 0 || $rc == 137 ) && -f $out/$name.json ]]; then
    status+=("$name: ok (rank $krank killed at step $kstep)")
  else
    case $rc in
      0) status+=("$name: ok") ;;
      77) status+=("$name: skipped (this torch_gcx.coded lacks the code)") ;;
      *) status+=("$name: FAILED (status $rc, see $log)") ;;
    esac
  fi
}

for n in "${rank_list[@]}"; do
  for set_ in "${sets[@]}"; do
    case $set_ in
      tta)
        for SEED_NOW in "${seeds[@]}"; do
          for c in "${configs[@]}"; do
            one tta "$n" "$c" "" "" --straggler "$straggler" --seed "$SEED_NOW"
          done
        done ;;
      steps)
        for SEED_NOW in "${seeds[@]}"; do
          for c in "${step_configs[@]}"; do
            one steps "$n" "$c" "" "" --no-straggler --max-steps "$step_steps" \
              --eval-every 0 --seed "$SEED_NOW"
          done
        done ;;
      kill)
        # the victim and the dense step, drawn from (KILL_SEED, N)
        read -r krank kstep <<< "$("$python" -c "
import random, sys
n, batch, subset = $n, $batch, $subset or 60000
r = random.Random(f'coded-tta-kill:$kill_seed:{n}')
spe = subset // (batch * n)
print(r.randrange(1, n), max(1, int(spe * r.uniform(0.1, 0.4))))")"
        for c in "${kill_configs[@]}"; do
          read -r cname s _ <<< "$(spec_parts "$c")"
          step=$kstep
          [[ $cname != pgc-* ]] || step=$(( kstep * (s + 1) ))
          one kill "$n" "$c" "$krank" "$step" --straggler "$straggler" --kill-rank "$krank" \
            --kill-step "$step" --timeout "$kill_timeout"
        done ;;
    esac
  done
done
echo | tee -a "$log"
printf '%s\n' "${status[@]}" | tee -a "$log"
echo
"$python" "$here/coded_tta.py" --table "$out" || true
"$python" "$here/plot_coded_tta.py" "$out" --target "${TARGET:-0.85}" || true
echo "results: $out/results.md, $out/accuracy_vs_time_rN.png; per run: $out/NAME.csv, NAME.json; log: $log"
