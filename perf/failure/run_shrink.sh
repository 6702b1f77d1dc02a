#!/usr/bin/env bash
# The shrink figure of issue 26: JOBS jobs of N ranks on this host, one rank
# killed in each (gcx_shrink_perf.c); prints every job's line and the medians.
# Usage: [HOW=exit|kill] run_shrink.sh [BUILD_DIR] [JOBS] [N]
# (HOW=kill: the victim raises SIGKILL instead of _exit)
set -euo pipefail
build=${1:-build} jobs=${2:-20} n=${3:-8}
here=$(cd "$(dirname "$0")" && pwd)
gcxrun=$build/programs/gcxrun/gcxrun
perf=$build/perf/failure/gcx_shrink_perf
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
lines=()
for ((j = 0; j < jobs; ++j)); do
  line=$(GCX_TIMEOUT=${GCX_TIMEOUT:-30} "$gcxrun" -n "$n" --keep-going -- \
           "$perf" --stamp "$stamp" --kill-at $((20 + j % 7)) --how "${HOW:-exit}" |
           grep '^SHRINK' || true)
  echo "$line"
  [[ -n $line ]] && lines+=("$line")
done
printf '%s\n' "${lines[@]}" | awk -v jobs="$jobs" '
  { known[NR] = $5; shrink[NR] = $7; call[NR] = $9 }
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j)
      if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    printf "jobs %d of %d gave a line; median ms: death->first error %.2f, first error->last new communicator %.2f, longest shrink call %.2f\n",
      NR, jobs, median(known, NR), median(shrink, NR), median(call, NR)
  }'
