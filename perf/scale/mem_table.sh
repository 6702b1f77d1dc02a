#!/usr/bin/env bash
# mem_table.sh - per-process memory of every collective kind at growing rank
# counts on this host: the peak RSS of each rank (/usr/bin/time), its median
# and maximum over the ranks, and the growth per added peer against the
# smallest count, one line per (kind, count) and a markdown table at the end.
#
# Usage: perf/scale/mem_table.sh [BUILD_DIR] [COUNTS] [KINDS]
#   BUILD_DIR  default build
#   COUNTS     default "16 64 256 512"
#   KINDS      default: every kind below
#     startup        the world communicator alone (create, barrier, destroy)
#     dense          gcx_allreduce, 1 MB (gcx_allreduce_perf -b 1M -e 1M)
#     sparse-ALGO    gcx_sparse_allreduce with ALGO (auto, allgather, split,
#                    ...), N = 1M floats, d = 1% (gcx_sparse_allreduce_perf
#                    with --rate-gbps 1: no link-rate probe, whose buffers
#                    grow with P)
#     star-fr, ml-fr, star-cr, ml-cr
#                    the coded object, star or master-less, FR or CR code,
#                    s = 1, 16384 floats, 5 rounds (gcx_coded_gather_perf);
#                    CR only up to GCX_CODE_MAX_SOLVED_WORKERS = 64 workers
#     comm           split, dup, create_group, create via OOB, each then
#                    destroyed, 20 times (gcx_comm_perf -n 20)
#     shrink         the last rank dies at an allreduce, the others shrink
#                    (gcx_shrink_perf; the survivors' peaks)
# Environment:
#   UCX_TLS        passed on (unset: UCX's choice, shared memory between
#                  local ranks; tcp,self: what peers on other hosts cost)
#   LAUNCH_TIMEOUT hard limit per launch in seconds (default 1200)
#   OUT            directory for the per-rank records and lines (mktemp)
#
# Every launch runs with GCX_PROGRESS_SLEEP=y (waiting ranks sleep on the
# transport's events: the ranks far outnumber the 2 cores) and checks its own
# results (each driver's #wrong / check column); a launch that fails is
# reported, with its exit status, instead of a figure. The per-peer growth is
# (median(P) - median(P0)) / (P - P0). On shared memory a rank's RSS also
# counts the pages it touched in its peers' receive FIFOs (UCX's mm
# transports map every peer's), so a kind that talks to every peer shows
# more there than the same kind over tcp,self; run both to tell them apart.
# Cost: the launches; nothing stays behind but OUT.
set -uo pipefail

build=${1:-build}
counts=${2:-"16 64 256 512"}
kinds=${3:-"startup dense sparse-auto sparse-allgather sparse-split star-fr ml-fr star-cr ml-cr comm shrink"}
timeout_s=${LAUNCH_TIMEOUT:-1200}
out=${OUT:-$(mktemp -d /tmp/gcx-mem.XXXXXX)}
gcxrun=$build/programs/gcxrun/gcxrun
mkdir -p "$out"

# the command of a kind (after gcxrun's --), or nothing: not at this count
kind_cmd() {
    local kind=$1 p=$2
    case $kind in
    startup) echo "$build/perf/startup/gcx_startup_perf --dir $out/records-$p" ;;
    dense) echo "$build/perf/coll/gcx_allreduce_perf -b 1M -e 1M -n 3 -w 1" ;;
    sparse-*) echo "$build/perf/sparse/gcx_sparse_allreduce_perf -N 1M -d 0.01 -n 2 -w 1 -a ${kind#sparse-} --rate-gbps 1" ;;
    star-fr | ml-fr | star-cr | ml-cr)
        local code=${kind#*-} mode
        [[ $code == cr && $p -gt 64 ]] && return
        mode=gc-$code
        [[ $kind == ml-* ]] && mode=gc-$code-ml
        echo "$build/perf/coded/gcx_coded_gather_perf --modes $mode --count 16384 --rounds 5 --warmup 1 --s 1 --compute-ms 0" ;;
    comm) echo "$build/perf/coll/gcx_comm_perf -n 20" ;;
    shrink) echo "$build/perf/failure/gcx_shrink_perf --stamp $out/stamp-$p --kill-at 5" ;;
    *) echo "unknown kind $kind" >&2; exit 2 ;;
    esac
}

printf '%-16s %6s %4s %10s %10s %8s\n' kind ranks rc median_MB max_MB wall_s | tee "$out/lines"
for kind in $kinds; do
    for p in $counts; do
        cmd=$(kind_cmd "$kind" "$p")
        [[ -z $cmd ]] && continue
        dir=$out/$kind-$p
        rm -rf "$dir" && mkdir -p "$dir" "$out/records-$p"
        keep=
        [[ $kind == shrink ]] && keep=--keep-going
        t0=$(date +%s)
        # shellcheck disable=SC2086 # cmd is split on purpose
        GCX_PROGRESS_SLEEP=y GCX_TIMEOUT=${GCX_TIMEOUT:-600} timeout "$timeout_s" \
            "$gcxrun" -n "$p" $keep -- sh -c \
            'exec /usr/bin/time -f "%M" -o "$0/r$GCX_RANK" "$@"' "$dir" $cmd \
            > "$dir/log" 2>&1
        rc=$?
        wall=$(( $(date +%s) - t0 ))
        # a wrong result fails the launch like a crash: every driver prints
        # its check; look for a nonzero #wrong / wrong column
        if grep -Eiq '(^|[^a-z])(wrong|mismatch)[^0-9]*[1-9]' "$dir/log"; then
            rc=${rc/#0/99}
        fi
        cat "$dir"/r* 2>/dev/null | grep -E '^[0-9]+$' | sort -n |
            awk -v kind="$kind" -v p="$p" -v rc="$rc" -v wall="$wall" '
                { a[NR] = $1 }
                END {
                    if (NR == 0) { printf "%-16s %6d %4s %10s %10s %8d\n", kind, p, rc, "-", "-", wall; exit }
                    printf "%-16s %6d %4s %10.1f %10.1f %8d\n", kind, p, rc,
                           a[int((NR + 1) / 2)] / 1024, a[NR] / 1024, wall
                }' | tee -a "$out/lines"
    done
done

# the table: median (max) per count, growth per added peer from the first
awk -v counts="$counts" '
    NR == 1 { next }
    { key = $1; med[key, $2] = $4; mx[key, $2] = $5; rcs[key, $2] = $3
      if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
    END {
        nc = split(counts, c, " ")
        printf "\n| kind |"
        for (i = 1; i <= nc; ++i) printf " %d ranks |", c[i]
        printf " per added peer |\n|---|"
        for (i = 1; i <= nc; ++i) printf "---|"
        printf "---|\n"
        for (k = 1; k <= n; ++k) {
            key = order[k]; first = ""; last = ""
            printf "| %s |", key
            for (i = 1; i <= nc; ++i) {
                if ((key, c[i]) in med && med[key, c[i]] != "-" && rcs[key, c[i]] == 0) {
                    printf " %s MB (max %s) |", med[key, c[i]], mx[key, c[i]]
                    if (first == "") first = c[i]; last = c[i]
                } else if ((key, c[i]) in med) {
                    printf " failed (rc %s) |", rcs[key, c[i]]
                } else {
                    printf " - |"
                }
            }
            if (first != "" && last != first)
                printf " %.1f KB |\n", (med[key, last] - med[key, first]) * 1024 / (last - first)
            else
                printf " - |\n"
        }
    }' "$out/lines" | tee "$out/table.md"
echo "# records in $out"
