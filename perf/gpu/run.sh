#!/usr/bin/env bash
# run.sh - the GPU check of issue 32 in one command (see README.md here).
#
#   perf/gpu/run.sh [OUT]              on a machine with an NVIDIA GPU
#   perf/gpu/run.sh --dry-run [OUT]    anywhere: CPU tensors, tiny sizes
#
# Steps, each under what is left of a 350 s budget (a step that runs out is
# killed, reported as timed out, and the next one still runs):
#   1. UCX, LAPACKE, OpenBLAS: if pkg-config finds no ucx, Debian's packages
#      from $GCX_GPU_DEPS (default gpu-deps/ in the checkout, made here by
#      `shared/tools/gpu-deps.sh fetch gpu-deps`) are unpacked under /tmp
#      (never into /) by that script's `env`.
#   2. Build gcx (no tests) and torch_gcx against the torch that $PYTHON
#      (default python3) imports, in $BUILD (default build-gpu; with
#      --dry-run an existing BUILD is reused as it is, e.g. BUILD=build).
#   3. The plugin's CUDA tests (pytest -k cuda over test_gpu_compress.py and
#      test_cuda_collectives.py where present): on a machine without a GPU
#      they are skipped, and counted as skipped.
#   4. bench_select.py: torch.topk against the sampled threshold on the
#      device (1M, 4M, 25M floats; CF 100, 1000).
#   5. bench_gpu.py ops on 2, 4 and 8 processes sharing the GPU (1-256 MB,
#      factor 4; gcx-dev, gloo-dev, gcx-host paired and rotating; 2 rounds
#      of 3 iterations after 1 warm-up), 8 last (after 6).
#   6. bench_gpu.py ddp on $DDP_RANKS (default 4) processes: ResNet-50 and
#      ResNet-101, batch 32, 8 timed steps after 2.
# Everything lands in OUT (default $BUILD/perf-gpu): tests.txt, select.json,
# ops-p<P>.json, ddp-p<P>.json, log.txt, and results.md (every table) and
# results.json (every row) at the end, which are also printed.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
dry=0
if [[ ${1:-} == --dry-run ]]; then dry=1; shift; fi
python=${PYTHON:-python3}
build=${BUILD:-build-gpu}
out=${1:-$build/perf-gpu}
budget=${BUDGET_S:-350}
((dry)) && budget=${BUDGET_S:-1200}  # a loaded CPU box: no time goal
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/log.txt
: >"$log"
status=()

say() { echo "# $*" | tee -a "$log"; }
left() { echo $((budget - SECONDS)); }
# step NAME LIMIT CMD...: run CMD (output to the log) under min(LIMIT, left)
step() {
  local name=$1 limit=$2 t rc; shift 2
  t=$(left); ((t < limit)) && limit=$t
  if ((limit < 5)); then
    say "$name: skipped, the ${budget} s budget is spent"
    status+=("$name: skipped (budget)"); return 0
  fi
  say "$name (limit ${limit} s, ${SECONDS} s so far)"
  timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1; rc=$?
  if ((rc == 124 || rc == 137)); then
    status+=("$name: timed out after ${limit} s")
  elif ((rc != 0)); then
    status+=("$name: failed (rc $rc, see log.txt)")
  else
    status+=("$name: ok")
  fi
  say "$name: ${status[-1]#*: } (${SECONDS} s)"
}

if ((dry)); then
  say "dry run: CPU tensors, tiny sizes (checks the scripts, measures nothing)"
else
  "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || {
    echo "run.sh: $python's torch sees no CUDA device; --dry-run checks the scripts without one" >&2
    exit 2; }
fi

# 1. dependencies
if ! pkg-config --exists ucx 2>/dev/null; then
  deps=${GCX_GPU_DEPS:-$root/gpu-deps}
  if [[ -f $deps/gpu-deps.sh ]]; then
    # shellcheck disable=SC1091
    source "$deps/gpu-deps.sh" env "$deps"
  else
    echo "run.sh: no UCX (pkg-config ucx) and no $deps/gpu-deps.sh: on a machine that" \
      "reaches Debian's packages run shared/tools/gpu-deps.sh fetch gpu-deps first" >&2
    exit 2
  fi
fi
say "UCX $(pkg-config --modversion ucx), torch $("$python" -c 'import torch; print(torch.__version__)')," \
  "$("$python" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")')"

# 2. build
jobs=$(nproc)
if [[ ! -f $build/build.ninja ]]; then
  step build-setup 120 meson setup "$build" --buildtype=release -Dtests=false \
    -Dtorch_python="$(command -v "$python")"
fi
step build $((dry ? 900 : 180)) ninja -C "$build" -j"$jobs"
export PYTHONPATH=$(cd "$build" && pwd)/plugin/torch${PYTHONPATH:+:$PYTHONPATH}

# 3. the plugin's CUDA tests
tests=(plugin/torch/tests/test_gpu_compress.py)
[[ -f plugin/torch/tests/test_cuda_collectives.py ]] && tests+=(plugin/torch/tests/test_cuda_collectives.py)
step cuda-tests 100 bash -c "'$python' -m pytest -q -p no:cacheprovider -rs -k cuda ${tests[*]} \
  2>&1 | tee '$out/tests.txt'; exit \${PIPESTATUS[0]}"

# 4.-6. benchmarks
launch=(perf/torch/launch_local.py -q)
if ((dry)); then
  step select 60 "$python" perf/gpu/bench_select.py --sizes 64K,256K --reps 3 \
    --json "$out/select.json"
  step ops-p2 60 "$python" "${launch[@]}" -n 2 -- "$python" perf/gpu/bench_gpu.py ops \
    --dry-run --out "$out"
  step ddp-p2 150 "$python" "${launch[@]}" -n 2 -- "$python" perf/gpu/bench_gpu.py ddp \
    --dry-run --out "$out"
else
  step select 30 "$python" perf/gpu/bench_select.py --device cuda --sizes 1M,4M,25M \
    --reps 10 --json "$out/select.json"
  # 8 processes last: the DDP figures matter more than the widest sharing
  for p in 2 4 ddp 8; do
    if [[ $p == ddp ]]; then
      p=${DDP_RANKS:-4}
      step "ddp-p$p" 110 "$python" "${launch[@]}" -n "$p" -- "$python" perf/gpu/bench_gpu.py \
        ddp --steps 8 --out "$out"
      continue
    fi
    step "ops-p$p" $((20 + 10 * p)) "$python" "${launch[@]}" -n "$p" -- \
      "$python" perf/gpu/bench_gpu.py ops --out "$out"
  done
fi

# results.md / results.json
"$python" - "$out" "$dry" "${status[@]}" <<'EOF'
import glob, json, os, sys
out, dry, status = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
res = {"dry_run": dry, "steps": status, "tests": None}
md = [f"# perf/gpu results{' (DRY RUN: CPU tensors, tiny sizes; no GPU figure)' if dry else ''}", ""]
md += ["## Steps", ""] + [f"- {s}" for s in status] + [""]
t = os.path.join(out, "tests.txt")
if os.path.exists(t):
    last = [l for l in open(t).read().splitlines() if l.strip()][-1:]
    res["tests"] = last[0] if last else None
    md += ["## CUDA tests", "", f"    {res['tests']}", ""]
s = os.path.join(out, "select.json")
if os.path.exists(s):
    sel = json.load(open(s))
    res["select"] = sel["rows"]
    md += ["## Top-k selection on the device (bench_select.py)", "",
           "| device | N | CF | select | time (ms) | sent | recall |", "|---|---|---|---|---|---|---|"]
    md += [f"| {r['device']} | {r['n']} | {r['cf']:g} | {r['select']} | {r['time_ms']} | {r['sent']} | {r['recall']} |"
           for r in sel["rows"]] + [""]
for path in sorted(glob.glob(os.path.join(out, "ops-p*.json")), key=lambda p: int(p.split("-p")[-1][:-5])):
    o = json.load(open(path))
    res.setdefault("ops", []).append(o)
    for key, tab in o["tables"].items():
        md += [f"## Collectives, {o['ranks']} processes, {key} (dev = {o['device']})", ""] + tab["markdown"] + [""]
    md += [f"- {b}: unsupported: {e}" for b, e in o["unsupported"].items()]
for path in sorted(glob.glob(os.path.join(out, "ddp-p*.json"))):
    d = json.load(open(path))
    res.setdefault("ddp", []).append(d)
    md += [f"## DDP step, {d['ranks']} processes (dev = {d['device']})", ""] + d["markdown"] + [""]
    md += [f"- {k}: unsupported: {e}" for k, e in d["unsupported"].items()]
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=1)
open(os.path.join(out, "results.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
EOF
say "done in ${SECONDS} s: $out/results.md, $out/results.json, $out/log.txt"
for s in "${status[@]}"; do [[ $s == *": ok" ]] || exit 1; done
