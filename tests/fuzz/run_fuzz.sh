#!/usr/bin/env bash
# run_fuzz.sh TARGET SEEDS SECONDS [LIBFUZZER-ARGS...] - runs a libFuzzer
# target for SECONDS from the seed corpus SEEDS (read only: what the run
# finds goes to a temporary directory, removed afterwards), and passes its
# exit status on: non-zero on a crash, a leak or a sanitizer report. Prints
# the number of executions. A crashing input is kept in the build directory
# (crash-*, see libFuzzer's -artifact_prefix) for a rerun:
#   TARGET crash-...
set -euo pipefail
target=$1 seeds=$2 seconds=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log=$work/log
rc=0
"$target" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=2048 \
  -artifact_prefix="$(dirname "$target")/" "$@" "$work" "$seeds" >"$log" 2>&1 || rc=$?
tail -n 40 "$log"
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
echo "$(basename "$target"): ${runs:-?} executions in ${seconds} s, exit status $rc"
exit $rc
