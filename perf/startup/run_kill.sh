#!/usr/bin/env bash
# run_kill.sh - one rank SIGKILLed among N (256) on this host: how soon
# every survivor's collective fails, and how soon the survivors have a
# shrunken communicator again.
#
# Usage: perf/startup/run_kill.sh [BUILD_DIR] [N] [VICTIM]
#   N default 256, VICTIM default N/2 (a rank in the middle; not rank 0,
#   the bootstrap root, which is gone once creation is over anyway)
# Environment: GCX_TIMEOUT (default 5), GCX_PROGRESS_SLEEP (default y),
#   OUT=DIR (logs; default a mktemp dir), JOB_TIMEOUT (hard limit per job,
#   default 300 s), EXIT_JOBS (default 1: jobs of perf/failure/run_shrink.sh
#   as is, whose victim _exits, for comparison; 0 skips them).
#
# Idea: perf/failure's drivers are used unmodified. Their own victim leaves
# with _exit(0) at --kill-at (victim_loop.c); they have no SIGKILL mode.
# So --kill-at is set beyond reach and this script kills the victim from
# outside: once every rank logged its communicator (GCX_LOG_LEVEL=info:
# "communicator N: rank r of P"), it waits 2 s (allreduces running), writes
# the wall clock ($EPOCHREALTIME, no fork) to the drivers' --stamp file and
# sends SIGKILL to the rank whose environment says GCX_RANK=VICTIM. Then:
#   1. gcx_failure_perf: each survivor prints FAILURE rank R error_after S
#      destroyed_after S status ...; summarised as min/median/max and how
#      many are within GCX_TIMEOUT + 0.5 s (issue 15's target).
#   2. gcx_shrink_perf: rank 0 of the new communicator prints SHRINK size
#      N-1 known_after_ms A shrink_ms B call_ms_max C (perf/failure/README).
#   3. (EXIT_JOBS > 0) perf/failure/run_shrink.sh BUILD_DIR EXIT_JOBS N as
#      is: the same shrink with the drivers' own _exit victim.
# Cost: three jobs of N ranks (creation ~10-30 s each at 256 on 2 CPUs).
set -uo pipefail

build=${1:-build}
n=${2:-256}
victim=${3:-$((n / 2))}
here=$(cd "$(dirname "$0")" && pwd)
gcxrun=$build/programs/gcxrun/gcxrun
out=${OUT:-$(mktemp -d /tmp/gcx-kill.XXXXXX)}
job_timeout=${JOB_TIMEOUT:-300}
export GCX_TIMEOUT=${GCX_TIMEOUT:-5}
export GCX_PROGRESS_SLEEP=${GCX_PROGRESS_SLEEP:-y}
mkdir -p "$out"
echo "# $n ranks, victim rank $victim (SIGKILL from outside), GCX_TIMEOUT=$GCX_TIMEOUT GCX_PROGRESS_SLEEP=$GCX_PROGRESS_SLEEP UCX_TLS=${UCX_TLS:-(UCX default)}; out: $out"

# the pid of gcxrun's child with GCX_RANK=$2 (gcxrun is $1)
rank_pid() {
    local c
    for c in $(pgrep -P "$1"); do
        if tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "GCX_RANK=$2"; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

# one job: NAME DRIVER; the victim is SIGKILLed once all ranks are up
kill_job() {
    local name=$1 prog=$2 log=$out/$1.log stamp=$out/$1.stamp pid vpid t0 i up
    rm -f "$stamp"
    t0=$(date +%s)
    GCX_LOG_LEVEL=info timeout -k 10 "$job_timeout" "$gcxrun" -n "$n" --keep-going -- \
        "$prog" --stamp "$stamp" --count 1024 --kill-at 1000000000 >"$log" 2>&1 &
    pid=$!
    # timeout runs gcxrun as its child
    for ((i = 0; i < 50; ++i)); do
        gpid=$(pgrep -P "$pid" -x gcxrun) && break
        sleep 0.1
    done
    up=0
    while kill -0 "$pid" 2>/dev/null; do
        up=$(grep -c 'communicator [0-9]*: rank' "$log")
        ((up >= n)) && break
        sleep 0.5
    done
    if ((up < n)); then
        echo "# $name: only $up of $n ranks created their communicator; log tail:"
        tail -5 "$log"
        wait "$pid"
        return 1
    fi
    echo "# $name: all $n ranks up after $(($(date +%s) - t0)) s; killing rank $victim in 2 s"
    sleep 2
    vpid=$(rank_pid "$gpid" "$victim") || { echo "# $name: no process for rank $victim"; kill -TERM "$pid"; wait "$pid"; return 1; }
    echo "$EPOCHREALTIME" >"$stamp"
    kill -KILL "$vpid"
    wait "$pid"
    echo "# $name: job ended rc $? after $(($(date +%s) - t0)) s"
}

kill_job failure "$build/perf/failure/gcx_failure_perf"
awk -v t="$GCX_TIMEOUT" -v n="$n" '/^FAILURE rank/ {
        e[++k] = $5; if ($5 <= t + 0.5) ok++
        if ($7 > dmax) dmax = $7
        st = $0; sub(/.* status /, "", st); sts[st]++ }
    END {
        for (i = 1; i <= k; ++i) for (j = i + 1; j <= k; ++j) if (e[j] < e[i]) { x = e[i]; e[i] = e[j]; e[j] = x }
        printf "FAILURE-SUMMARY survivors %d of %d; error after kill s: min %.3f median %.3f max %.3f; within GCX_TIMEOUT+0.5 (%.1f s): %d; destroyed by %.3f s; status:",
            k, n - 1, e[1], e[int((k + 1) / 2)], e[k], t + 0.5, ok, dmax
        for (s in sts) printf " %s x%d", s, sts[s]
        printf "\n" }' "$out/failure.log"
echo "# error-time histogram (s, survivors): $(awk '/^FAILURE rank/ { b = sprintf("%.1f", $5); h[b]++ } END { for (b in h) printf "%s:%d ", b, h[b] }' "$out/failure.log" | tr ' ' '\n' | sort -n | tr '\n' ' ')"
grep -E 'UCX +ERROR|Assertion|\] error:' "$out/failure.log" | head -3 | sed 's/^/#   /'

kill_job shrink "$build/perf/failure/gcx_shrink_perf"
if ! grep '^SHRINK' "$out/shrink.log"; then
    # the driver prints only after an allgather of its times over the new
    # communicator: say whether the shrink itself went through
    echo "# shrink: no SHRINK line; $(grep -c 'info: shrink of communicator' "$out/shrink.log") of $((n - 1)) survivors logged their new communicator (gcx_comm_shrink returned), $(grep -c 'gcx_comm_shrink:' "$out/shrink.log") failed in it, $(grep -c 'allgather (collective #1) did not complete' "$out/shrink.log") timed out in the driver's allgather of its times over it (collective #1 of the new communicator)"
fi
grep -E 'UCX +ERROR|Assertion|\] error:' "$out/shrink.log" | head -3 | sed 's/^/#   /'

if ((${EXIT_JOBS:-1} > 0)); then
    echo "# perf/failure/run_shrink.sh $build ${EXIT_JOBS:-1} $n (victim _exits at its --kill-at):"
    timeout -k 10 "$job_timeout" "$here/../failure/run_shrink.sh" "$build" "${EXIT_JOBS:-1}" "$n"
fi
