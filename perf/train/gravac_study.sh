#!/usr/bin/env bash
# gravac_study.sh - GraVAC's parameters against static compression, per
# model, on the emulated cluster: one command, one table per model, plots.
#
# For each model (--models, default "mlp cnn"), 4 ranks on the emulated
# cluster (perf/cluster/emulate.sh, every link --rate, default 1gbit), the
# same data order, schedule and batch; only --sync differs:
#   dense, static top-k at CF 10, 100 and 1000, and GraVAC (top-k,
#   --theta-min 10, --theta-max 1000, window --window) for every epsilon of
#   --eps (default 0.04 0.1 0.3 0.7) under both policies (exponential,
#   geometric x2).
# The table (perf/train/tta_table.py) gives time to --target (default 85%)
# in training time, speed-up over dense, final accuracy and its distance to
# dense, bytes and how many times fewer than dense. The runs of a model go
# one after the other, in the order above: on a shared machine compare the
# rows of one invocation, not across invocations. Under the table the
# script names the GraVAC settings that reach the target sooner than every
# static CF whose final accuracy is within 0.5 points of dense.
#
# Output in OUT (default build/gravac-study): MODEL-NAME.json/.csv per run,
# run.log (with GraVAC's window-by-window explanations), results.md, and
# plots-MODEL/ (perf/train/plot.sh; needs gnuplot-nox).
# Cost on the 2-core box at 1 Gbit/s: about 12 runs x 2-4 minutes per model
# (MLP, 2 epochs); the CNN's steps are compute-bound and slower. Needs root.
set -euo pipefail

usage() {
    cat <<EOF2
usage: $0 [options]
  --build DIR        meson build directory (default build)
  --out DIR          output directory (default build/gravac-study)
  --models "M..."    models (default "mlp cnn")
  --eps "E..."       GraVAC epsilons (default "0.04 0.1 0.3 0.7")
  --epochs E         epochs per run (default 2)
  --eval-every N     steps between test evaluations (default 50)
  --target A         target test accuracy (default 0.85)
  --rate R           emulated link rate (default 1gbit)
  --window W         GraVAC window in steps (default 100)
  --theta-min T      GraVAC's theta_min, its lowest CF (default 10)
  --theta-max T      GraVAC's theta_max (default 1000)
  --max-steps N      cut every run after N steps (smoke tests)
EOF2
}

build=build out=build/gravac-study models="mlp cnn" eps_list="0.04 0.1 0.3 0.7"
epochs=2 eval_every=50 target=0.85 rate=1gbit window=100 max_steps=0
theta_min=10 theta_max=1000
while [[ $# -gt 0 ]]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --eps) eps_list=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --eval-every) eval_every=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --theta-min) theta_min=$2; shift 2 ;;
    --theta-max) theta_max=$2; shift 2 ;;
    --max-steps) max_steps=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "$0: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
if [[ $(id -u) -ne 0 ]]; then
    echo "$0: the emulated cluster needs root (network namespaces, tc)" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root_dir=$(cd "$here/../.." && pwd)
train=$build/programs/train/gcx-train
[[ -x $train ]] || { echo "$0: $train not built (meson compile -C $build)" >&2; exit 1; }
mkdir -p "$out"
log=$out/run.log
: >"$log"

common=(--target-acc "$target" --progress none --check-every 200 --batch 16
        --epochs "$epochs" --eval-every "$eval_every")
[[ $max_steps -gt 0 ]] && common+=(--max-steps "$max_steps")

# run NAME MODEL GCX-TRAIN-ARGS...
run() {
    local name=$1 model=$2
    shift 2
    local args=(--model "$model" "${common[@]}" --json "$out/$name.json"
                --csv "$out/$name.csv" "$@")
    echo "== $name: gcx-train ${args[*]}" | tee -a "$log"
    "$root_dir/perf/cluster/emulate.sh" -n 4 --rate "$rate" -q -- \
        env OPENBLAS_NUM_THREADS=1 "$train" "${args[@]}" >>"$log" 2>&1 ||
        { echo "$0: run $name failed, see $log" >&2; exit 1; }
    grep -h "final test accuracy" "$log" | tail -1
}

table_args=()
for model in $models; do
    runs=()
    run "$model-dense" "$model" --sync dense && runs+=("$model-dense")
    for cf in 10 100 1000; do
        run "$model-topk-$cf" "$model" --sync "topk:cf=$cf"
        runs+=("$model-topk-$cf")
    done
    for policy in exponential geometric; do
        for eps in $eps_list; do
            name=$model-gravac-${policy:0:3}-eps$eps
            run "$name" "$model" --sync \
                "gravac:policy=$policy,window=$window,eps=$eps,theta_min=$theta_min,theta_max=$theta_max"
            runs+=("$name")
        done
    done
    table_args+=(--title "$model: 4 ranks, emulated cluster, $rate links, $epochs epochs, GraVAC theta $theta_min..$theta_max, window $window")
    for r in "${runs[@]}"; do table_args+=(--run "$out/$r"); done
    if command -v gnuplot >/dev/null 2>&1; then
        csvs=()
        for r in "${runs[@]}"; do csvs+=("$out/$r.csv"); done
        "$here/plot.sh" "$out/plots-$model" "${csvs[@]}" >/dev/null
    fi
done
python3 "$here/tta_table.py" --out "$out/results.md" "${table_args[@]}"
echo >>"$out/results.md"
python3 "$here/gravac_study_verdict.py" --target "$target" "$out" $models \
    >>"$out/results.md"
cat "$out/results.md"
command -v gnuplot >/dev/null 2>&1 ||
    echo "no plots: gnuplot not found (apt-get install gnuplot-nox)"
