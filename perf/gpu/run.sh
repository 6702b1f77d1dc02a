#!/usr/bin/env bash
# run.sh - the GPU check of issue 32 in one command (see README.md here).
#
#   perf/gpu/run.sh [OUT]              on a machine with an NVIDIA GPU
#   perf/gpu/run.sh --dry-run [OUT]    anywhere: every step of the GPU run, on
#                                      DEVICE (simdev where torch_simdev is
#                                      built, else cpu), tiny sizes, 2 ranks
#
# Idea: one command that builds, tests and measures what issue 32 asks of
# torch_gcx on a GPU, and always leaves its tables: each step runs under a
# time limit (`timeout` on the step's own process, launch_local.py for the
# ranked ones: on the limit it stops every rank's process group), a step that
# fails or runs out is reported as such and the next one still runs, and
# results.md / results.json are written at the end in every case.
#
# Steps (the dry run has the same ones, smaller):
#   deps   UCX, LAPACKE, OpenBLAS: if pkg-config finds no ucx, Debian's
#          packages from $GCX_GPU_DEPS (default gpu-deps/ in the checkout, made
#          by `shared/tools/gpu-deps.sh fetch gpu-deps`) are unpacked under
#          /tmp (never into /) by that script's `env`.
#   build  gcx (no tests) and torch_gcx against the torch that $PYTHON (default
#          python3) imports, in $BUILD (default build-gpu). The dry run reuses
#          a BUILD that has torch_gcx built (plugin/torch/torch_gcx/_C*.so) as
#          it is: no meson, no ninja (BUILD=build may be shared).
#   cuda-tests  pytest -k "cuda and not simdev" over the plugin's test_gpu_compress.py and
#          test_cuda_collectives.py (where present); without a GPU they are
#          skipped, and counted as skipped.
#   select bench_select.py: torch.topk against the sampled threshold on the
#          device (GPU: 1M, 4M, 25M floats; dry: 64K, 256K; CF 100, 1000).
#   ops-p2, ops-p4, ops-p8  bench_gpu.py ops on P processes sharing the device
#          (GPU: 1-256 MB, dry: 64-256 KB, factor 4; gcx-dev, gloo-dev,
#          gcx-host paired and rotating; 2 rounds of 3 iterations after 1
#          warm-up); the dry run stops at 4 processes (2 cores).
#   ddp-pP bench_gpu.py ddp on DDP_RANKS processes (GPU: 4, dry: 2): compute,
#          gloo, gcx-ddp, gcx-dense, gcx-topk, gcx-gravac (GPU: ResNet-50 and
#          -101, batch 32, 10 timed steps after 2; dry: ResNet-50, batch 2, 2
#          after 2). On the GPU it runs before ops-p8: its figures matter more.
#
# Time limits, a stated rule: limit(step) = max(FLOOR, ceil(T_DRY x SCALE)),
# where T_DRY is the step's time in the dry run on the project's 2-core CPU
# box (7 Dec 2026, the largest of four runs: two on the cpu device with the
# box loaded by other builds, two on the simulated device, simdev),
# SCALE = 4 (LIMIT_SCALE) and FLOOR = 60 s (LIMIT_FLOOR):
#   step        T_DRY  limit   what the GPU step does more than the dry one
#   cuda-tests    4 s   60 s   the 18 tests run instead of being skipped
#   select        4 s   60 s   1M-25M floats instead of 64K-256K
#   ops-p2        5 s   60 s   1-256 MB (1024x the bytes, 5 sizes, not 2)
#   ops-p4       18 s   72 s   idem (simdev; cpu: 10 s)
#   ops-p8       44 s  176 s   idem (not in the dry run: T4 + 2 (T4 - T2))
#   ddp          30 s  120 s   ResNet-50 and -101, batch 32, 10 steps (dry:
#                              ResNet-50, batch 2, 2 steps), 4 ranks, not 2
# SCALE 4 = 2 (the same step's time varies up to 2x on the loaded box) x 2
# (the GPU step's extra bytes and steps, on a 16-core box that starts Python
# and torch ~3x faster than this one). FLOOR: what the dry run does not do
# at all and a GPU step pays: a CUDA context per process, and the CUDA
# tests' workers (the 11 CPU tests of the same two files took 84 s here,
# 7.6 s each: 18 tests ~46 s on a 3x faster box). The build is not in the
# dry run (it reuses the build): BUILD_S = 150 s on 16 cores. The budget
# (BUDGET_S) is the sum of the limits of the steps that run: 698 s for the
# GPU run, 372 s for a dry run that reuses its build; a step gets min(its
# limit, what is left), so ops-p8, last, gets what remains (BUDGET_S=540
# leaves room under a 600 s limit on the whole command). LIMIT_<step>
# (e.g. LIMIT_ops_p2=90, '-' as '_') sets one step's limit; STEPS=select,
# ops-p2,... runs only those (plus deps and build; "none": no step; the
# others are reported "not run").
#
# Everything lands in OUT (default $BUILD/perf-gpu; the files below are
# removed first, so nothing of an earlier run is reported): tests.txt,
# select.json, ops-p<P>.json, ddp-p<P>.json, log.txt, and results.md (every
# table, also printed) and results.json (every row). Exit status 0 only when
# every step was ok. Cost: at most the budget (GPU 698 s; the dry run took
# ~1 min), one GPU (or the 2 CPUs) throughout.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
dry=0
if [[ ${1:-} == --dry-run ]]; then dry=1; shift; fi
python=${PYTHON:-python3}
build=${BUILD:-build-gpu}
out=${1:-$build/perf-gpu}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/{tests.txt,select.json,results.md,results.json,log.txt} \
  "$out"/ops-p*.json "$out"/ddp-p*.json "$out"/*.tmp*
log=$out/log.txt
: >"$log"
status=()

# ---- limits: max(FLOOR, ceil(T_DRY x SCALE)), T_DRY in s (the header's table)
declare -A T_DRY=([cuda-tests]=4 [select]=4 [ops-p2]=5 [ops-p4]=18 [ddp]=30)
T_DRY[ops-p8]=$((T_DRY[ops-p4] + 2 * (T_DRY[ops-p4] - T_DRY[ops-p2])))
scale=${LIMIT_SCALE:-4}
floor=${LIMIT_FLOOR:-60}
limit_of() {  # limit_of STEP [T_DRY key]: the rule, or LIMIT_<step>
  local v=LIMIT_${1//-/_}
  if [[ -n ${!v:-} ]]; then echo "${!v}"; return; fi
  awk -v t="${T_DRY[${2:-$1}]}" -v s="$scale" -v f="$floor" \
    'BEGIN { x = t * s; x = (x == int(x)) ? x : int(x) + 1; print (x > f) ? x : f }'
}
wanted() {  # STEPS: a comma list of step names (ddp: any ddp-pP); empty: all
  [[ -z ${STEPS:-} ]] && return 0
  [[ ,$STEPS, == *,$1,* || ( $1 == ddp-p* && ,$STEPS, == *,ddp,* ) ]]
}

if ((dry)); then
  ranks=(2 4); ddp_ranks=${DDP_RANKS:-2}
else
  ranks=(2 4 8); ddp_ranks=${DDP_RANKS:-4}
fi
plan=(cuda-tests select)
for p in "${ranks[@]}"; do
  ((p == 8)) && plan+=("ddp-p$ddp_ranks")
  plan+=("ops-p$p")
done
[[ " ${plan[*]} " == *" ddp-p"* ]] || plan+=("ddp-p$ddp_ranks")
build_s=${BUILD_S:-150}
reuse=0  # the dry run reuses a built torch_gcx as it is
if ((dry)) && compgen -G "$build/plugin/torch/torch_gcx/_C*.so" >/dev/null; then reuse=1; fi
budget=$((reuse ? 0 : build_s))
for s in "${plan[@]}"; do
  key=$s; [[ $s == ddp-p* ]] && key=ddp
  wanted "$s" && budget=$((budget + $(limit_of "$s" "$key")))
done
budget=${BUDGET_S:-$budget}

say() { echo "# $*" | tee -a "$log"; }
left() { echo $((budget - SECONDS)); }
# step NAME LIMIT CMD...: run CMD (output to the log) under min(LIMIT, left);
# `timeout` signals CMD's process (for the ranked steps: launch_local.py, which
# stops its ranks within its 3 s grace), and SIGKILLs it 10 s later
step() {
  local name=$1 limit=$2 t rc; shift 2
  t=$(left); ((t < limit)) && limit=$t
  if ((limit < 2)); then
    say "$name: skipped, the ${budget} s budget is spent"
    status+=("$name: skipped (budget spent)"); return 0
  fi
  say "$name (limit ${limit} s, ${SECONDS} s so far)"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1; rc=$?
  if ((rc == 124 || rc == 137)); then
    status+=("$name: timed out after ${limit} s")
  elif ((rc != 0)); then
    status+=("$name: failed (rc $rc, see log.txt)")
  else
    status+=("$name: ok")
  fi
  say "$name: ${status[-1]#*: } ($((SECONDS - t0)) s; ${SECONDS} s so far)"
}
skip() { status+=("$1: skipped ($2)"); say "$1: skipped ($2)"; }

if ((!dry)); then
  "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || {
    echo "run.sh: $python's torch sees no CUDA device; --dry-run checks the scripts without one" >&2
    exit 2; }
fi

# deps
ok=1
if ! pkg-config --exists ucx 2>/dev/null; then
  deps=${GCX_GPU_DEPS:-$root/gpu-deps}
  if [[ -f $deps/gpu-deps.sh ]]; then
    # shellcheck disable=SC1091
    source "$deps/gpu-deps.sh" env "$deps"
  elif ((!reuse)); then
    say "deps: no UCX (pkg-config ucx) and no $deps/gpu-deps.sh: on a machine that" \
      "reaches Debian's packages run shared/tools/gpu-deps.sh fetch gpu-deps first"
    status+=("deps: failed (no UCX, no $deps/gpu-deps.sh)"); ok=0
  fi
fi

# build
if ((!ok)); then
  skip build "no dependencies"
elif ((reuse)); then
  status+=("build: ok (reused $build as it is, not rebuilt)")
  say "build: reused $build as it is (dry run; torch_gcx is built there)"
else
  jobs=$(nproc)
  if [[ ! -f $build/build.ninja ]]; then
    step build-setup 120 meson setup "$build" --buildtype=release -Dtests=false \
      -Dtorch_python="$(command -v "$python")"
  fi
  step build "$build_s" ninja -C "$build" -j"$jobs"
  [[ ${status[-1]} == "build: ok" ]] || ok=0
fi
# torch_gcx, and torch_simdev (the tests' simulated device, built beside it)
plugin=$(cd "$build" 2>/dev/null && pwd)/plugin/torch
export PYTHONPATH=$plugin:$plugin/simdev${PYTHONPATH:+:$PYTHONPATH}

if ((dry)); then
  if [[ -z ${DEVICE:-} ]]; then
    DEVICE=cpu
    "$python" -c 'import torch_simdev' 2>/dev/null && DEVICE=simdev
  fi
  device=$DEVICE
  say "dry run on device $device: tiny sizes (checks the steps, measures no GPU)"
else
  device=${DEVICE:-cuda}
fi
say "UCX $(pkg-config --modversion ucx 2>/dev/null || echo '(not found by pkg-config)')," \
  "torch $("$python" -c 'import torch; print(torch.__version__)')," \
  "$("$python" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")')," \
  "limits: T_DRY x $scale, at least $floor s; budget ${budget} s"

launch=(perf/torch/launch_local.py -q)
dryarg=(); ((dry)) && dryarg=(--dry-run)
for s in "${plan[@]}"; do
  if ! wanted "$s"; then status+=("$s: not run (not in STEPS)"); continue; fi
  if ((!ok)); then skip "$s" "no build"; continue; fi
  key=$s; [[ $s == ddp-p* ]] && key=ddp
  lim=$(limit_of "$s" "$key")
  case $s in
    cuda-tests)
      tests=(plugin/torch/tests/test_gpu_compress.py)
      [[ -f plugin/torch/tests/test_cuda_collectives.py ]] && tests+=(plugin/torch/tests/test_cuda_collectives.py)
      step cuda-tests "$lim" bash -c "'$python' -m pytest -q -p no:cacheprovider -rs -k 'cuda and not simdev' ${tests[*]} \
        2>&1 | tee '$out/tests.txt'; exit \${PIPESTATUS[0]}" ;;
    select)
      if ((dry)); then sel=(--sizes 64K,256K --reps 3); else sel=(--sizes 1M,4M,25M --reps 10); fi
      step select "$lim" "$python" perf/gpu/bench_select.py --device "$device" "${sel[@]}" \
        --json "$out/select.json" ;;
    ops-p*)
      step "$s" "$lim" "$python" "${launch[@]}" -n "${s#ops-p}" -- "$python" perf/gpu/bench_gpu.py \
        ops "${dryarg[@]}" --device "$device" --out "$out" ;;
    ddp-p*)
      step "$s" "$lim" "$python" "${launch[@]}" -n "${s#ddp-p}" -- "$python" perf/gpu/bench_gpu.py \
        ddp "${dryarg[@]}" --device "$device" --out "$out" ;;
  esac
done

# results.md / results.json: from whatever the steps left, in every case
"$python" perf/gpu/bench_gpu.py report "$out" "${dryarg[@]}" --device "$device" \
  -- "${status[@]}" || {
  echo "run.sh: the report failed; the step lines:" >&2; printf '%s\n' "${status[@]}" >&2; }
say "done in ${SECONDS} s: $out/results.md, $out/results.json, $out/log.txt"
for s in "${status[@]}"; do [[ $s == *": ok"* || $s == *": not run (not in STEPS)" ]] || exit 1; done
