#!/usr/bin/env bash
# time_to_accuracy.sh - time-to-accuracy of gcx-train's sync modes, side by
# side in one go, with a table and plots.
#
# Three sets of runs, each the same MLP, data order and schedule; only --sync
# (and the straggler) differ:
#   compress  4 ranks on the emulated cluster (perf/cluster/emulate.sh, every
#             link --rate, default 1gbit): dense, static top-k at CF 10, 100
#             and 1000, and GraVAC (top-k, theta_min 10) twice: with the
#             paper's epsilon 0.7 (window --window), and tuned to this
#             model's gains (epsilon 0.04, theta_max 160, half the window;
#             see README.md).
#   coded     4 ranks, rank --straggler-rank sleeping --straggler-ms in every
#             step it computes (a slow worker), s = 1, root rank 0: dense,
#             gc-fr, pgc-fr, gc-cr, pgc-cr. Local ranks (gcxrun) by default,
#             the emulated cluster with --coded-on cluster. Batch 64 per
#             rank and 2 epochs by default: at batch 16 the step is bound by
#             the root's link, not by compute, and computing one partition
#             (pgc) instead of two (gc) saves nothing visible.
#   pgc       4 local ranks, every rank delayed Exp(mean M x its compute)
#             after each partition gradient (--pgc-straggler M): dense,
#             ignore, gc-fr, gc-cr, pgc-fr, pgc-cr, s = 1, root rank 0
#             also a worker.
#   pgc-master  the same straggler model, MLP, batch and data, with the
#             papers' master that is not a worker: the coded rows (ignore,
#             gc-*, pgc-*, s = 1, master=1) run 5 local ranks, master
#             rank 0 + 4 workers; uncoded twice: dense (allreduce over 4
#             ranks, no master) and uncoded-master (gc-fr:s=0,master=1 on
#             5 ranks: the master waits for all 4 workers, the papers'
#             uncoded baseline, and the same 5 processes on the cores as
#             the coded rows). Every row has n = 4 workers computing
#             64-sample shards (global batch 256) and the same delays:
#             the draws are keyed by (seed, step, worker, partition).
# Every run evaluates on the test set every --eval-every steps; evaluation
# time is not counted (gcx-train's training clock), so the time to the
# target is training time only. Runs alternate with nothing else of ours
# on the machine; the machine's other load is what it is, so compare rows
# of one invocation, not across invocations.
#
# Output in OUT (default build/tta): NAME.json/NAME.csv per run, run.log,
# results.md (the table: time to target, speed-up over dense, final
# accuracy and its distance to dense, bytes sent and how many times fewer
# than dense, steps, mean step time), and plots-compress/, plots-coded/
# (perf/train/plot.sh; needs gnuplot-nox, skipped with a note otherwise).
#
# Cost on the 2-core box: the compress set ~15 minutes (2 epochs, 1 Gbit/s),
# the coded set locally ~6 minutes, the pgc set ~8 minutes (M = 2), the
# pgc-master set ~10 minutes (M = 4). Needs root for the emulated cluster
# (not for --set coded, pgc or pgc-master).
set -euo pipefail

usage() {
    cat <<EOF
usage: $0 [options]
  --build DIR          meson build directory (default build)
  --out DIR            output directory (default build/tta)
  --set compress|coded|pgc|pgc-master|all   which runs (default all)
  --epochs E           epochs of the compress set (default 2)
  --eval-every N       its steps between test evaluations (default 50)
  --target A           target test accuracy (default 0.85)
  --rate R             emulated link rate (default 1gbit)
  --window W           GraVAC window in steps (default 100)
  --straggler-rank R   the slow rank of the coded set (default 1; not 0, the root)
  --straggler-ms MS    its delay per step (default 200)
  --coded-on local|cluster   where the coded set runs (default local)
  --coded-batch B      batch per rank of the coded set (default 64)
  --coded-epochs E     epochs of the coded set (default 2)
  --coded-eval-every N evaluation interval of the coded set (default 25)
  --pgc-straggler M    pgc and pgc-master sets: mean delay, x the compute
                       time (default 2; the pgc-master figure uses 4)
  --pgc-batch B        its batch per rank (default 64)
  --pgc-epochs E       its epochs (default 2)
  --pgc-eval-every N   its evaluation interval (default 25)
  --pgc-hidden W,W     its MLP widths (default 256,256: a run of minutes)
                       (--pgc-* batch, epochs, eval, hidden: both sets)
  --max-steps N        cut every run after N steps (smoke tests)
EOF
}

build=build out=build/tta set=all epochs=2 eval_every=50 target=0.85
rate=1gbit window=100 srank=1 sms=200 coded_on=local max_steps=0
coded_batch=64 coded_epochs=2 coded_eval_every=25
pgc_m=2 pgc_batch=64 pgc_epochs=2 pgc_eval_every=25 pgc_hidden=256,256
while [[ $# -gt 0 ]]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --set) set=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --eval-every) eval_every=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --straggler-rank) srank=$2; shift 2 ;;
    --straggler-ms) sms=$2; shift 2 ;;
    --coded-on) coded_on=$2; shift 2 ;;
    --coded-batch) coded_batch=$2; shift 2 ;;
    --coded-epochs) coded_epochs=$2; shift 2 ;;
    --coded-eval-every) coded_eval_every=$2; shift 2 ;;
    --pgc-straggler) pgc_m=$2; shift 2 ;;
    --pgc-batch) pgc_batch=$2; shift 2 ;;
    --pgc-epochs) pgc_epochs=$2; shift 2 ;;
    --pgc-eval-every) pgc_eval_every=$2; shift 2 ;;
    --pgc-hidden) pgc_hidden=$2; shift 2 ;;
    --max-steps) max_steps=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "$0: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
case $set in compress | coded | pgc | pgc-master | all) ;; *)
    echo "$0: --set $set: expected compress, coded, pgc, pgc-master or all" >&2
    exit 2 ;;
esac
case $coded_on in local | cluster) ;; *)
    echo "$0: --coded-on $coded_on: expected local or cluster" >&2; exit 2 ;;
esac
if [[ $srank == 0 ]]; then
    echo "$0: --straggler-rank 0 is the decoding root; pick another rank" >&2
    exit 2
fi

here=$(cd "$(dirname "$0")" && pwd)
root_dir=$(cd "$here/../.." && pwd)
train=$build/programs/train/gcx-train
gcxrun=$build/programs/gcxrun/gcxrun
for f in "$train" "$gcxrun"; do
    [[ -x $f ]] || { echo "$0: $f not built (meson compile -C $build)" >&2; exit 1; }
done
need_cluster=0
[[ $set == compress || $set == all ]] && need_cluster=1
[[ ($set == coded || $set == all) && $coded_on == cluster ]] && need_cluster=1
if [[ $need_cluster == 1 && $(id -u) -ne 0 ]]; then
    echo "$0: the emulated cluster needs root (network namespaces, tc)" >&2
    exit 2
fi
mkdir -p "$out"
log=$out/run.log
: >"$log"
export OPENBLAS_NUM_THREADS=1 # 4 ranks share the cores: one BLAS thread each

common=(--model mlp --target-acc "$target" --progress none --check-every 200)
compress_args=(--batch 16 --epochs "$epochs" --eval-every "$eval_every")
[[ $max_steps -gt 0 ]] && common+=(--max-steps "$max_steps")

# run NAME WHERE(local|cluster) GCX-TRAIN-ARGS...: 4 ranks
run() { run_n 4 "$@"; }

# run_n RANKS NAME WHERE GCX-TRAIN-ARGS...
run_n() {
    local nranks=$1 name=$2 where=$3
    shift 3
    local args=("${common[@]}" --json "$out/$name.json" --csv "$out/$name.csv" "$@")
    echo "== $name ($where): gcx-train ${args[*]}" | tee -a "$log"
    if [[ $where == cluster ]]; then
        "$root_dir/perf/cluster/emulate.sh" -n "$nranks" --rate "$rate" -q -- \
            env OPENBLAS_NUM_THREADS=1 "$train" "${args[@]}" >>"$log" 2>&1
    else
        "$gcxrun" -n "$nranks" -- "$train" "${args[@]}" >>"$log" 2>&1
    fi || { echo "$0: run $name failed, see $log" >&2; exit 1; }
    grep -h "final test accuracy" "$log" | tail -1
}

compress_runs=() coded_runs=() pgc_runs=() master_runs=()
if [[ $set == compress || $set == all ]]; then
    run dense cluster --sync dense "${compress_args[@]}"
    run topk-10 cluster --sync topk:cf=10 "${compress_args[@]}"
    run topk-100 cluster --sync topk:cf=100 "${compress_args[@]}"
    run topk-1000 cluster --sync topk:cf=1000 "${compress_args[@]}"
    run gravac cluster --sync "gravac:window=$window" "${compress_args[@]}"
    run gravac-tuned cluster \
        --sync "gravac:window=$((window / 2)),theta_max=160,eps=0.04" \
        "${compress_args[@]}"
    compress_runs=(dense topk-10 topk-100 topk-1000 gravac gravac-tuned)
fi
if [[ $set == coded || $set == all ]]; then
    for mode in dense gc-fr pgc-fr gc-cr pgc-cr; do
        run "straggler-$mode" "$coded_on" --sync "$mode" \
            --straggler "$srank:$sms" --batch "$coded_batch" \
            --epochs "$coded_epochs" --eval-every "$coded_eval_every"
        coded_runs+=("straggler-$mode")
    done
fi
pgc_args=(--straggler "exp:$pgc_m" --batch "$pgc_batch"
    --epochs "$pgc_epochs" --eval-every "$pgc_eval_every" --hidden "$pgc_hidden")
if [[ $set == pgc || $set == all ]]; then
    for mode in dense ignore gc-fr gc-cr pgc-fr pgc-cr; do
        run "exp-$mode" local --sync "$mode" "${pgc_args[@]}"
        pgc_runs+=("exp-$mode")
    done
fi
if [[ $set == pgc-master || $set == all ]]; then
    run_n 4 mexp-dense local --sync dense "${pgc_args[@]}"
    master_runs+=(mexp-dense)
    for mode in uncoded ignore gc-fr gc-cr pgc-fr pgc-cr; do
        spec=$mode:s=1,master=1
        [[ $mode == uncoded ]] && spec=gc-fr:s=0,master=1
        run_n 5 "mexp-$mode" local --sync "$spec" "${pgc_args[@]}"
        master_runs+=("mexp-$mode")
    done
fi

table_args=()
add_set() { # TITLE RUN...
    [[ $# -gt 1 ]] || return 0
    table_args+=(--title "$1")
    shift
    local r
    for r in "$@"; do table_args+=(--run "$out/$r"); done
}
add_set "compress set: 4 ranks, emulated cluster, $rate links" "${compress_runs[@]}"
add_set "coded set: 4 ranks ($coded_on), batch $coded_batch per rank, $coded_epochs epochs, rank $srank delayed $sms ms per step" "${coded_runs[@]}"
add_set "pgc set: 4 local ranks, MLP hidden $pgc_hidden, batch $pgc_batch per rank, $pgc_epochs epochs, every rank delayed Exp(mean $pgc_m x its compute time) per gradient" "${pgc_runs[@]}"
add_set "pgc-master set: MLP hidden $pgc_hidden, batch $pgc_batch per worker, 4 workers, $pgc_epochs epochs, every worker delayed Exp(mean $pgc_m x its compute time) per gradient; dense: 4 local ranks; the others: 5 local ranks, master rank 0 (not a worker) + 4 workers" "${master_runs[@]}"
python3 "$here/tta_table.py" --out "$out/results.md" "${table_args[@]}"
cat "$out/results.md"

# plots SUBDIR RUN...
plots() {
    [[ $# -gt 1 ]] || return 0
    local dir=$out/$1 csvs=() r
    shift
    for r in "$@"; do csvs+=("$out/$r.csv"); done
    "$here/plot.sh" "$dir" "${csvs[@]}"
}
if command -v gnuplot >/dev/null 2>&1; then
    plots plots-compress "${compress_runs[@]}"
    plots plots-coded "${coded_runs[@]}"
    plots plots-pgc "${pgc_runs[@]}"
    plots plots-pgc-master "${master_runs[@]}"
else
    echo "no plots: gnuplot not found (apt-get install gnuplot-nox)"
fi
