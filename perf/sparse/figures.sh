#!/usr/bin/env bash
# figures.sh - the sparse allreduce figures of issue #4 in one go: every
# algorithm, auto and the dense allreduce on the emulated cluster (4 ranks,
# every link --rate, default 1gbit), N = 25M, densities 0.01%-10%, overlap 0,
# 0.5 and 1, and with global top-k re-sparsification at overlap 0 and 0.5.
# Each setting is one gcx_sparse_allreduce_perf run (its own emulated
# cluster), written to OUT/emu4_<rate>_<setting>.{txt,json}; then
# figures.py checks every figure against those JSON files and writes
# OUT/figures.md (which figure holds, with the numbers). The bound uses the
# link rate each run measured (the driver's timed allgathers).
#
# Cost: ~20 minutes on the 2-core box at 1 Gbit/s. Needs root.
set -euo pipefail

build=build out=perf/sparse/results rate=1gbit iters=3 reps=5
# auto corrects its model from what it measured (GCX_SPARSE_FEEDBACK): every
# row, every algorithm alike, gets 10 untimed calls first, so what is timed
# is auto as a training loop sees it after its first steps (its first ~9
# calls on a communicator calibrate and measure each contender twice; then
# 2 calls per contender every 64 calls of a size: src/coll/sparse_allreduce)
warm=10
# every call starts from idle links (10 ms: the 1 Gbit/s links' tbf buckets,
# 4 ms of traffic, are full again), so no row gains or loses by the row
# before it (see the driver's --gap-ms): the way a training step's exchange
# follows its compute
gap_ms=10
while [[ $# -gt 0 ]]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    -h | --help)
        echo "usage: $0 [--build DIR] [--out DIR] [--rate 1gbit] [--iters 3] [--reps 5]"
        exit 0 ;;
    *) echo "$0: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ $(id -u) -eq 0 ]] || { echo "$0: the emulated cluster needs root" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root_dir=$(cd "$here/../.." && pwd)
perf=$build/perf/sparse/gcx_sparse_allreduce_perf
[[ -x $perf ]] || { echo "$0: $perf not built" >&2; exit 1; }
mkdir -p "$out"
rm -f "$out"/emu4_"$rate"_*.json "$out"/emu4_"$rate"_*.txt \
    "$out"/emu4_"$rate"_*.failed.log

# setting NAME DRIVER-ARGS...: one run; NAME.txt keeps rank 0's lines. A
# failed run (a call over GCX_TIMEOUT, 60 s here: no call of these takes
# 2 s) keeps every rank's lines in NAME.failed.log and stops the script.
setting() {
    local name=emu4_${rate}_$1 all rc=0
    shift
    echo "== $name: gcx_sparse_allreduce_perf $*"
    all=$(mktemp)
    GCX_TIMEOUT=${GCX_TIMEOUT:-60} "$root_dir/perf/cluster/emulate.sh" -n 4 \
        --rate "$rate" -q -- "$perf" -N 25M -n "$iters" -w "$warm" \
        --gap-ms "$gap_ms" --json "$out/$name.json" "$@" >"$all" 2>&1 || rc=$?
    grep -v '^\[[123]\]' "$all" | tee "$out/$name.txt"
    if ((rc != 0)); then
        mv "$all" "$out/$name.failed.log"
        echo "$0: $name failed (exit $rc); every rank's output: $out/$name.failed.log" >&2
        exit 1
    fi
    rm -f "$all"
}

# settings of milliseconds move by ~10% between runs, and the 1% ones, of
# 3 timed calls, by as much: the small densities run 5x the iterations, and
# every setting up to 1% runs --reps times (each time on a new
# communicator; the dense allreduce, 1 s a call, only the first time);
# figures.py takes each algorithm's median over the repetitions
repeat() { # NAME ARGS...: repetitions 2..reps, sparse algorithms only
    local name=$1 r
    shift
    for ((r = 2; r <= reps; r++)); do
        setting "${name}_r$r" "$@" -n $((iters * 5)) \
            -a allgather,recursive_doubling,split,balanced_split,auto
    done
}
small() { # NAME ARGS...
    local name=$1
    shift
    setting "$name" "$@" -n $((iters * 5))
    repeat "$name" "$@"
}
for ov in 0 0.5 1; do
    tag=o${ov/./}
    small "${tag}_small" -d 0.0001,0.001 -o "$ov"
    setting "$tag" -d 0.01,0.1 -o "$ov"
    repeat "${tag}_1pct" -d 0.01 -o "$ov"
done
small topk0_small -d 0.001 -o 0 --topk
setting topk0 -d 0.01 -o 0 --topk
repeat topk0_1pct -d 0.01 -o 0 --topk
small topk_small -d 0.001 -o 0.5 --topk
setting topk -d 0.01 -o 0.5 --topk
repeat topk_1pct -d 0.01 -o 0.5 --topk
python3 "$here/figures.py" --rate "$rate" "$out"/emu4_"$rate"_*.json \
    >"$out/figures.md"
cat "$out/figures.md"
