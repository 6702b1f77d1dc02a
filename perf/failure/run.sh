#!/usr/bin/env bash
# run.sh: a killed rank, measured from the survivors' side; one table from one command.
#
# Idea: perf/failure/gcx_failure_perf runs allreduces until its victim leaves and writes
# the moment it left (wall clock) to a stamp file; each survivor prints the seconds from
# the kill to its error and to the end of gcx_comm_destroy. This script adds the moment
# the whole job was gone (every survivor exited) and counts UCX's leak lines ("was not
# returned to mpool", "... was not matched") in the job's output. Scenarios:
#   local      4 ranks on this host (gcxrun, shared memory), GCX_TIMEOUT=5: the dead
#              peer is found by the timeout; the target is error <= T+0.5, exit <= T+1
#   cluster    4 ranks on the emulated cluster (network namespaces = hosts, needs root),
#              default settings (GCX_TIMEOUT=300): the target is exit within 1 s of the kill
#   linkdown   as cluster, but the victim takes its link down before it exits (a host
#              that vanishes without closing its sockets), GCX_TIMEOUT=10; once with the
#              default GCX_UCX_ERR_MODE and once with none (informative)
# Usage: perf/failure/run.sh [BUILD_DIR] [ROUNDS]   (as root for the cluster scenarios)
# Cost: about 3 s per local round and 2 s per cluster round; linkdown up to 2 x 12 s.
set -uo pipefail

build=${1:-build}
rounds=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
prog=$build/perf/failure/gcx_failure_perf
gcxrun=$build/programs/gcxrun/gcxrun
emulate=$here/../cluster/emulate.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }

# one job: NAME LAUNCH... ; prints one table row
run_one() {
    local name=$1 how=$2
    shift 2
    local stamp=$work/stamp log=$work/log end kill
    rm -f "$stamp"
    "$@" "$prog" --stamp "$stamp" --how "$how" >"$log" 2>&1
    local rc=$?
    end=$(now)
    kill=$(cat "$stamp" 2>/dev/null || echo 0)
    awk -v name="$name" -v rc="$rc" -v end="$end" -v kill="$kill" \
        -v leaks="$(grep -cE 'was not returned to mpool|was not matched' "$log")" '
        /FAILURE rank/ {
            n++; msg = $0; sub(/.* status /, "", msg); st[msg] = 1
            if ($5 > err) err = $5
            if ($7 > des) des = $7
            if (min_err == "" || $5 < min_err) min_err = $5
        }
        END {
            s = ""; for (k in st) s = s (s == "" ? "" : "; ") k
            printf "| %s | %d | %s | %.2f-%.2f | %.2f | %.2f | %d | %s |\n", name, n, s,
                   min_err, err, des, (kill > 0 ? end - kill : -1), leaks, rc
        }' "$log"
}

echo "| scenario | survivors | status | error after kill (s, min-max) | destroyed (s, max) | job gone (s) | UCX leak lines | rc |"
echo "|---|---|---|---|---|---|---|---|"
for ((r = 0; r < rounds; ++r)); do
    run_one "local, GCX_TIMEOUT=5" exit env GCX_TIMEOUT=5 "$gcxrun" -n 4 --keep-going --
done
if [[ $(id -u) == 0 ]] && command -v ip >/dev/null; then
    for ((r = 0; r < rounds; ++r)); do
        run_one "cluster, defaults" exit env -u GCX_UCX_ERR_MODE -u GCX_TIMEOUT \
            "$emulate" -n 4 --rate none --keep-going --timeout 60 -q --no-prefix --
    done
    for mode in auto none; do
        run_one "cluster linkdown, ERR_MODE=$mode, GCX_TIMEOUT=10" linkdown \
            env GCX_UCX_ERR_MODE=$mode GCX_TIMEOUT=10 \
            "$emulate" -n 4 --rate none --keep-going --timeout 60 -q --no-prefix --
    done
else
    echo "(cluster scenarios skipped: need root and iproute2)" >&2
fi
