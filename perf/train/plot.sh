#!/bin/sh
# plot.sh - turn gcx-train CSV traces (--csv) into PNG plots with gnuplot.
#
# Usage: perf/train/plot.sh OUTDIR TRACE.csv [TRACE.csv ...]
#
# Writes into OUTDIR:
#   accuracy_vs_time.png  test accuracy (each evaluation) against training time,
#                         one line per run: compares time-to-accuracy of runs
#   loss_vs_step.png      training loss (global batch) against step
#   cf_gain_vs_step.png   compression factor (log scale) and gain against
#                         step, one pair of lines per run
#   step_time.png         step time split into compute and sync, per run
# Each run is labelled by its file name without ".csv". Needs gnuplot
# (Debian gnuplot-nox); columns are those of TRAIN_CSV_HEADER in
# programs/train/report.h, found by name so a new column does not break this.
set -eu

if [ $# -lt 2 ]; then
    echo "usage: $0 OUTDIR TRACE.csv [TRACE.csv ...]" >&2
    exit 2
fi
command -v gnuplot >/dev/null 2>&1 || {
    echo "$0: gnuplot not found (apt-get install gnuplot-nox)" >&2
    exit 1
}
out=$1
shift
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Per run: a whitespace table of the columns we plot (every step) and one
# of the epoch ends (rows that carry a test accuracy).
i=0
acc_plot="" loss_plot="" cf_plot="" gain_plot="" time_plot=""
for csv in "$@"; do
    [ -r "$csv" ] || { echo "$0: cannot read $csv" >&2; exit 1; }
    name=$(basename "$csv" .csv)
    i=$((i + 1))
    awk -F, -v steps="$tmp/s$i" -v epochs="$tmp/e$i" '
        NR == 1 {
            for (c = 1; c <= NF; c++) col[$c] = c
            need = "step time_s loss test_acc cf gain step_s compute_s sync_s"
            n = split(need, k, " ")
            for (j = 1; j <= n; j++)
                if (!(k[j] in col)) {
                    print FILENAME ": no column " k[j] > "/dev/stderr"
                    exit 1
                }
            next
        }
        {
            print $col["step"], $col["time_s"], $col["loss"], $col["cf"],
                  $col["gain"], $col["step_s"] * 1e3,
                  $col["compute_s"] * 1e3, $col["sync_s"] * 1e3 > steps
            if ($col["test_acc"] != "")
                print $col["time_s"], $col["test_acc"], $col["step"] > epochs
        }' "$csv"
    [ -s "$tmp/e$i" ] || echo "0 0 0" > "$tmp/e$i"
    sep=${acc_plot:+, }
    acc_plot="$acc_plot$sep'$tmp/e$i' using 1:2 with linespoints title '$name'"
    loss_plot="$loss_plot$sep'$tmp/s$i' using 1:3 with lines title '$name'"
    cf_plot="$cf_plot$sep'$tmp/s$i' using 1:4 with lines title '$name CF'"
    gain_plot="$gain_plot$sep'$tmp/s$i' using 1:5 axes x1y2 with lines dashtype 2 title '$name gain'"
    time_plot="$time_plot$sep'$tmp/s$i' using 1:7 with lines title '$name compute', '$tmp/s$i' using 1:8 with lines title '$name sync'"
done

gnuplot <<GP
set terminal pngcairo size 1000,600 noenhanced
set grid
set key bottom right

set output '$out/accuracy_vs_time.png'
set title 'Test accuracy vs training time (evaluations excluded)'
set xlabel 'training time (s)'
set ylabel 'test accuracy'
plot $acc_plot

set output '$out/loss_vs_step.png'
set key top right
set title 'Training loss (global batch) vs step'
set xlabel 'step'
set ylabel 'loss'
set logscale y
plot $loss_plot
unset logscale y

set output '$out/cf_gain_vs_step.png'
set title 'Compression factor and gain vs step'
set xlabel 'step'
set ylabel 'compression factor (log)'
set logscale y
set yrange [0.9:*]
set y2label 'gain'
set y2range [0:1.05]
set y2tics
set key bottom right
plot $cf_plot, $gain_plot
unset logscale y
set autoscale y
unset y2tics
unset y2label

set output '$out/step_time.png'
set title 'Step time split'
set xlabel 'step'
set ylabel 'ms'
set key top right
plot $time_plot
GP
echo "wrote $out/accuracy_vs_time.png $out/loss_vs_step.png $out/cf_gain_vs_step.png $out/step_time.png"
