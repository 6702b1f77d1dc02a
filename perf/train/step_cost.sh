#!/usr/bin/env bash
# step_cost.sh - per-step cost of gcx-train's sync modes without stragglers,
# in the compute-bound regime: is a pipelined gradient coding step as cheap
# as an uncoded one, and does a classic gradient coding step cost (s+1)x
# the compute?
#
# Runs each mode for --steps steps on 4 local ranks (gcxrun), the same
# model, batch and data, no --straggler, and prints per mode the median over
# the steps after the first --skip of step, compute and exchange time (ms;
# compute = the gradients a rank computed, its exchange the rest: gcx-train's
# compute_s/sync_s columns) and the step time over dense's. Default: the
# small CNN at 64 samples per partition, where the forward/backward pass
# dominates the step (the gradient is 0.86 MB; an MLP step at batch 16 is
# bound by the root's traffic instead). Modes run --reps times in turn, so
# the machine's load drifts over all of them alike.
#
# Cost: ~1 minute per mode and rep on the 2-core box (CNN, 40 steps).
set -euo pipefail

usage() {
    cat <<EOF
usage: $0 [options] [-- extra gcx-train options]
  --build DIR     meson build directory (default build)
  --out DIR       output directory (default build/step-cost)
  --modes LIST    comma-separated sync modes (default dense,pgc-fr,pgc-cr,gc-fr,gc-cr,ignore)
  --model M       mlp or cnn (default cnn)
  --batch B       samples per rank and step = per partition (default 64)
  --steps N       steps per run (default 40)
  --skip K        first steps left out of the medians (default 10)
  --reps R        runs per mode (default 1)
EOF
}

build=build out=build/step-cost modes=dense,pgc-fr,pgc-cr,gc-fr,gc-cr,ignore
model=cnn batch=64 steps=40 skip=10 reps=1 extra=()
while [[ $# -gt 0 ]]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --skip) skip=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) usage; exit 0 ;;
    *) echo "$0: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
if ! [[ $steps =~ ^[0-9]+$ && $skip =~ ^[0-9]+$ && $steps -gt $skip ]]; then
    echo "$0: --steps $steps must be a number above --skip $skip" >&2
    exit 2
fi
train=$build/programs/train/gcx-train
gcxrun=$build/programs/gcxrun/gcxrun
for f in "$train" "$gcxrun"; do
    [[ -x $f ]] || { echo "$0: $f not built (meson compile -C $build)" >&2; exit 1; }
done
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1 # 4 ranks share the cores: one BLAS thread each
IFS=, read -r -a mode_list <<<"$modes"

for ((rep = 1; rep <= reps; rep++)); do
    for mode in "${mode_list[@]}"; do
        name=$mode-$rep
        "$gcxrun" -n 4 -- "$train" --model "$model" --batch "$batch" \
            --epochs 1 --max-steps "$steps" --check-every 0 --target-acc 0 \
            --progress none --sync "$mode" --csv "$out/$name.csv" \
            --json "$out/$name.json" "${extra[@]}" >"$out/$name.log" 2>&1 ||
            { echo "$0: $mode failed, see $out/$name.log" >&2; exit 1; }
    done
done

# median of column COLUMN-NAME of the rows after the first $skip, in ms
median() { # CSV COLUMN-NAME
    awk -F, -v col="$2" -v skip="$skip" '
        NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
        NR > skip + 1 { print 1e3 * $c }' "$1" | sort -g |
        awk '{ v[NR] = $1 } END {
            print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo "# $model, batch $batch per rank, 4 local ranks, no stragglers; median" \
     "over steps $((skip + 1))..$steps of each run, ms"
printf "%-8s %4s %9s %10s %9s %9s\n" mode rep step compute exchange vs_dense
for ((rep = 1; rep <= reps; rep++)); do
    base=
    for mode in "${mode_list[@]}"; do
        csv=$out/$mode-$rep.csv
        s=$(median "$csv" step_s)
        [[ $mode == dense ]] && base=$s
        ratio=-
        [[ -n $base ]] && ratio=$(awk -v a="$s" -v b="$base" 'BEGIN { printf "%.2f", a / b }')
        printf "%-8s %4d %9.1f %10.1f %9.1f %9s\n" "$mode" "$rep" "$s" \
            "$(median "$csv" compute_s)" "$(median "$csv" sync_s)" "$ratio"
    done
done
