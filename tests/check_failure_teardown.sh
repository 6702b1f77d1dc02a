#!/usr/bin/env bash
# check_failure_teardown.sh: after a rank is killed, the survivors end promptly and their
# log shows gcx's messages, not UCX's leak report.
#
# Idea: run a job in which one rank dies, with GCX_TIMEOUT=300, under a meson timeout far
# below it: a survivor that waited for the timeout (in a collective or in
# gcx_comm_destroy) fails the test by its timeout; one that left UCX requests behind prints
# "was not returned to mpool" or "... was not matched" at exit, which fails it here.
#   local  GCXRUN MR_CODED    4 ranks on this host, a coded gather's worker dies
#                             (shared memory, UCX error mode none: found by the gather)
#   remote EMULATE MR_FAILURE 3 ranks on the emulated cluster (perf/cluster/emulate.sh,
#                             network namespaces = other hosts), a rank dies mid-allreduce
#                             with the default GCX_UCX_ERR_MODE: reported by UCX at once.
#                             Needs root (exit 77 = skipped without it).
#   clean  GCXRUN MR_ALLREDUCE 6 ranks on this host over TCP, nobody dies: a job that ends
#                             well logs no warning or error. Ranks leave at different
#                             moments, so a rank still tearing down (or about to) sees its
#                             peers' connections close: that is the normal end, not news.
# Cost: about 2 s each.
set -uo pipefail

mode=${1:?usage: $0 local|remote|clean LAUNCHER PROGRAM}
launcher=${2:?launcher}
program=${3:?program}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

case $mode in
local)
    GCX_TIMEOUT=300 "$launcher" -n 4 -t --keep-going -- "$program" \
        --gtest_filter=CodedFailure.OneRankDies >"$log" 2>&1
    rc=$?
    ;;
remote)
    if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null; then
        echo "needs root and iproute2 (network namespaces): skipped"
        exit 77
    fi
    env -u GCX_UCX_ERR_MODE "$launcher" -n 3 --rate none --keep-going --timeout 60 -q -- \
        env GCX_TIMEOUT=300 "$program" --gtest_filter=Failure.RankExitsMidCollective \
        >"$log" 2>&1
    rc=$?
    ;;
clean)
    UCX_TLS=tcp,self "$launcher" -n 6 -t -- "$program" \
        --gtest_filter='AllreduceBits.*' >"$log" 2>&1
    rc=$?
    cat "$log"
    if grep -qE ' (warn|error): ' "$log"; then
        echo "FAIL: a job that ended well logged warnings or errors (above)"
        exit 1
    fi
    [[ $rc == 0 ]] || { echo "FAIL: the job exited with status $rc"; exit 1; }
    echo "PASS: no warning or error in a clean job's log"
    exit 0
    ;;
*)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac
cat "$log"
if grep -qE 'was not returned to mpool|was not matched' "$log"; then
    echo "FAIL: UCX reported requests or messages left behind (above)"
    exit 1
fi
if [[ $rc != 0 ]]; then
    echo "FAIL: the job exited with status $rc"
    exit 1
fi
echo "PASS: survivors failed and ended without UCX leak reports"
