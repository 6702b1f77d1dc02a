#!/usr/bin/env bash
# run.sh - communicator creation and destruction at scale on this host:
# gcx (gcxrun + gcx_startup_perf) against Open MPI (mpirun +
# mpi_startup_perf) at the same rank counts, alternating within each round.
#
# Usage: perf/startup/run.sh [BUILD_DIR] [COUNTS] [ROUNDS]
#   BUILD_DIR  default build; COUNTS default "256 512 1024"; ROUNDS default 3
# Environment:
#   OUT=DIR              where logs and summary.md go (default: a mktemp dir)
#   ROUNDS_BIG=N         rounds at counts >= BIG_FROM (default 1 at >= 1024)
#   BIG_FROM=P           (default 1024)
#   MPI_ROUNDS_BIG=N     Open MPI's rounds at counts >= MPI_BIG_FROM (default
#   MPI_BIG_FROM=P       1 at >= 512: one Open MPI launch of 512 takes minutes)
#   LAUNCH_TIMEOUT=S     hard limit per launch, `timeout` (default 900)
#   BUDGET_S=S           no launch starts that the estimate says ends past
#                        this many seconds after the script's start (2400)
#   GCX_STARTUP_UCX_TLS  UCX_TLS for the gcx ranks (default: unset, UCX's
#                        own choice: sysv/posix shared memory, cma, tcp,
#                        self); tcp,self is slower and hit a UCX 1.13
#                        assertion at 256 ranks (README.md)
#   MPI_MCA="..."        extra mpirun options (default none: Open MPI's
#                        defaults, here ob1 with vader, tcp and self)
#   PHASES=0             do not preload the phase shim (default 1)
#   MB_PER_RANK=M        footprint guess before any count is measured (24)
#   KINDS="gcx mpi"      the launchers to run (default both)
#   SUMMARY_ONLY=1       no launch: rebuild OUT's summary.md from OUT/lines
#                        (a failed launch's line from the records it left)
#
# Idea: each launch is timed from just before the launcher starts to its
# exit (launcher_s); every rank stamps its start and the end of creation +
# one barrier, and of destruction (startup_common.h), rank 0 prints the
# STARTUP line. A sampler reads MemAvailable every 0.25 s during the launch
# (mem_mb: the largest drop, the job's real footprint, shared pages once).
# Before each count the memory it needs is estimated from the largest
# per-rank drop at the counts measured (a line in P through the last two:
# each rank's endpoints grow with P), +20% +1 GB, and the count is skipped,
# with the reason, when MemAvailable does not hold it; a launch is skipped too when
# its time estimate (the same launcher's slowest launch at the previous
# count, scaled by (P/P0)^2) passes LAUNCH_TIMEOUT or would end past
# BUDGET_S. With the phase shim (phase_shim.c) every gcx launch
# also prints a PHASES line: the job's critical path, each point the
# latest rank to reach it, in seconds from the earliest process start:
#   last_start (launcher done) -> joined (every rank admitted by the TCP
#   star's root) -> ucx (every UCX worker up) -> addrs (the star's two
#   allgathers done) -> eps (every ucp_ep_create done) -> created (check
#   exchange + barrier).
# Cost: the launches themselves; the sampler is one awk every 0.25 s.
set -uo pipefail

build=${1:-build}
counts=${2:-"256 512 1024"}
rounds=${3:-3}
rounds_big=${ROUNDS_BIG:-1}
big_from=${BIG_FROM:-1024}
mpi_rounds_big=${MPI_ROUNDS_BIG:-1}
mpi_big_from=${MPI_BIG_FROM:-512}
launch_timeout=${LAUNCH_TIMEOUT:-900}
budget=${BUDGET_S:-2400}
phases=${PHASES:-1}
here=$(cd "$(dirname "$0")" && pwd)
gcxrun=$build/programs/gcxrun/gcxrun
gcxprog=$build/perf/startup/gcx_startup_perf
mpiprog=$build/perf/startup/mpi_startup_perf
shim=$(realpath "$build/perf/startup/libstartup_phase_shim.so" 2>/dev/null || true)
out=${OUT:-$(mktemp -d /tmp/gcx-startup.XXXXXX)}
mkdir -p "$out"
script_t0=$(date +%s)

for f in "$gcxrun" "$gcxprog"; do
    [[ -x $f ]] || { echo "run.sh: $f missing (ninja -C $build)" >&2; exit 2; }
done
if [[ ! -x $mpiprog ]]; then # meson found no MPI: build it with mpicc
    mpiprog=$out/mpi_startup_perf
    mpicc -O2 -D_GNU_SOURCE -o "$mpiprog" "$here/mpi_startup_perf.c" \
        "$here/startup_common.c" || { echo "run.sh: mpicc failed" >&2; exit 2; }
fi
[[ $phases == 1 && -n $shim && -f $shim ]] || phases=0

# Limits. Each gcx rank holds one pidfd per local peer (liveness) and UCX
# its sockets; mpirun holds pipes and a PMIx socket per rank: raise the
# descriptor limit where we may.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, MemAvailable $(awk '/MemAvailable/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), ulimit -n $(ulimit -n), pid_max $(cat /proc/sys/kernel/pid_max), shmmni $(cat /proc/sys/kernel/shmmni), /dev/shm $(df -h /dev/shm | awk 'NR==2 {print $4}') free"
echo "# gcx: GCX_PROGRESS_SLEEP=y UCX_TLS=${GCX_STARTUP_UCX_TLS:-(UCX default)}; mpi: mpirun --oversubscribe ${MPI_MCA:-(Open MPI defaults)}; phase shim: $([[ $phases == 1 ]] && echo on || echo off)"
echo "# out: $out"

mem_avail_kb() { awk '/MemAvailable/ {print $2}' /proc/meminfo; }

# one launch: KIND P ROUND; appends its line to $out/lines
launch() {
    local kind=$1 p=$2 round=$3 dir t0 t1 pid rc line sampler base
    dir=$out/run-$kind-$p-$round
    rm -rf "$dir" && mkdir -p "$dir"
    base=$(mem_avail_kb)
    (while :; do echo "$(mem_avail_kb) $(cut -f1 /proc/sys/fs/file-nr)"; sleep 0.25; done) >"$dir/mem" &
    sampler=$!
    t0=$(date +%s.%N)
    if [[ $kind == gcx ]]; then
        local vars=(GCX_PROGRESS_SLEEP=y GCX_TIMEOUT="$launch_timeout" STARTUP_T0="$t0")
        [[ -n ${GCX_STARTUP_UCX_TLS:-} ]] && vars+=(UCX_TLS="$GCX_STARTUP_UCX_TLS")
        [[ $phases == 1 ]] && vars+=(LD_PRELOAD="$shim" STARTUP_SHIM_DIR="$dir")
        env "${vars[@]}" timeout -k 15 "$launch_timeout" "$gcxrun" -n "$p" -- \
            "$gcxprog" --dir "$dir" --wait 300 >"$dir/log" 2>&1 &
    else
        # shellcheck disable=SC2086
        env STARTUP_T0="$t0" timeout -k 15 "$launch_timeout" \
            mpirun --allow-run-as-root --oversubscribe -np "$p" ${MPI_MCA:-} \
            -x STARTUP_T0 "$mpiprog" --dir "$dir" --wait 300 >"$dir/log" 2>&1 &
    fi
    pid=$!
    wait "$pid"
    rc=$?
    t1=$(date +%s.%N)
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    # timeout made its own process group: anything of the job still there
    kill -KILL -- "-$pid" 2>/dev/null
    line=$(grep -m1 '^STARTUP ' "$dir/log")
    if [[ -z $line ]]; then
        echo "# $kind $p round $round: no STARTUP line (rc $rc); last lines:"
        grep -v '^\s*$' "$dir/log" | tail -5 | sed 's/^/#   /'
        # the records the ranks wrote before the job ended: any record means
        # every rank was through the barrier, so their creation figures are
        # a lower bound
        line=$(partial_line "$kind" "$p" "$dir")
    fi
    line="$line launcher_s $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}') mem_mb $(sort -n "$dir/mem" | head -1 | awk -v b="$base" '{printf "%.0f", (b - $1) / 1024}') files_max $(sort -n -k2 "$dir/mem" | tail -1 | awk '{print $2}') rc $rc round $round"
    echo "$line"
    echo "$line" >>"$out/lines"
    if [[ $kind == gcx && $phases == 1 ]]; then
        phases_line "$dir" "$p" "$round" | tee -a "$out/phases"
    fi
    # UCX/vader errors worth a look (counted, first one shown)
    local errs
    errs=$(grep -cE 'UCX +ERROR|Assertion|gcx.*error|ORTE|PMIX ERROR' "$dir/log")
    if [[ $errs -gt 0 ]]; then
        echo "#   $kind $p round $round: $errs error lines, first: $(grep -m1 -E 'UCX +ERROR|Assertion|gcx.*error|ORTE|PMIX ERROR' "$dir/log" | cut -c1-160)"
    fi
}

# a STARTUP line from whatever r<rank> records a failed launch left
partial_line() {
    local kind=$1 p=$2 dir=$3
    awk -v kind="$kind" -v p="$p" '
        { n++; if (first == "" || $1 < first) first = $1; if ($1 > ls) ls = $1
          if ($3 - $1 > c) c = $3 - $1; if ($3 > lc) lc = $3
          if ($5 - $4 > d) d = $5 - $4; if ($6 > rss) rss = $6 }
        END { if (n == 0) printf "STARTUP %s ranks %d create_s - create_from_first_s - destroy_s - rss_kb - records 0 failed", kind, p
              else printf "STARTUP %s ranks %d create_s %.4f create_from_first_s %.4f destroy_s %.4f rss_kb %d start_spread_s %.4f records %d partial lower-bound", kind, p, c, lc - first, d, rss, ls - first, n }' \
        "$dir"/r* 2>/dev/null || echo "STARTUP $kind ranks $p create_s - create_from_first_s - destroy_s - rss_kb - records 0 failed"
}

# the critical path of one gcx launch from its r<rank> and p<rank> files
# (phase_shim.c's line); with the shim's schedstat fields, also where rank
# 0 (the star's root) spent the star's phases: on a CPU, runnable but
# waiting for one, or asleep (waiting for other ranks), and the same for
# the median other rank
phases_line() {
    local dir=$1 p=$2 round=$3
    awk -v p="$p" -v round="$round" '
        function med(a, n,   i, j, t) {
            for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n == 0 ? 0 : a[int((n + 1) / 2)] }
        FNR == 1 { split(FILENAME, a, "/"); f = a[length(a)]
                   kind = substr(f, 1, 1); r = substr(f, 2) + 0 }
        kind == "r" { start[r] = $1; created[r] = $3 }
        kind == "p" { ib[r] = $1; we[r] = $3; e1[r] = $4; e2[r] = $5; ein[r] = $7; np++
                      if (NF >= 23) { sched = 1
                          jc[r] = $13 - $11; jq[r] = $14 - $12     # load -> init: the join
                          ac[r] = $17 - $15; aq[r] = $18 - $16     # worker -> ep_first: allgathers
                          addr = $23 } }
        END {
            first = -1
            for (r in start) if (first < 0 || start[r] < first) first = start[r]
            for (r in start) {
                if (start[r] - first > ls) ls = start[r] - first
                if (created[r] - first > cr) cr = created[r] - first
            }
            for (r in ib) {
                if (ib[r] - first > jo) jo = ib[r] - first
                if (we[r] - first > uc) uc = we[r] - first
                if (e1[r] - first > ad) ad = e1[r] - first
                if (e2[r] - first > ep) ep = e2[r] - first
                if (ein[r] > epin) epin = ein[r]
            }
            printf "PHASES gcx ranks %d round %d last_start %.3f joined %.3f ucx %.3f addrs %.3f eps %.3f created %.3f | star_join %.3f ucx_init %.3f star_allgathers %.3f endpoints %.3f check_barrier %.3f | root_allgathers %.3f max_in_ep_create %.3f shim_records %d",
                p, round, ls, jo, uc, ad, ep, cr, jo - ls, uc - jo, ad - uc, ep - ad, cr - ep,
                e1[0] - we[0], epin, np
            if (sched) {
                n = 0
                for (r in ac) if (r != 0) { n++; oc[n] = ac[r]; oq[n] = aq[r]; ow[n] = e1[r] - we[r] }
                printf " | root_allg_wall %.3f cpu %.3f runq %.3f sleep %.3f | others_allg_med wall %.3f cpu %.3f runq %.3f | root_join_wall %.3f cpu %.3f runq %.3f | addr_bytes %d",
                    e1[0] - we[0], ac[0], aq[0], e1[0] - we[0] - ac[0] - aq[0],
                    med(ow, n), med(oc, n), med(oq, n),
                    ib[0] - start[0], jc[0], jq[0], addr
            }
            printf "\n"
        }' "$dir"/r* "$dir"/p* 2>/dev/null
}

# per-rank footprints seen ("P:MB" each), slowest launch and its count
mem_points=""
declare -A slowest_s slowest_p
if [[ ${SUMMARY_ONLY:-0} == 1 ]]; then
    counts="" # rebuild: a failed launch's line from the records it left
    while read -r line; do
        set -- $line
        if [[ $line == *"create_s - "* && -d $out/run-$2-$4-${line##* round } ]]; then
            line="$(partial_line "$2" "$4" "$out/run-$2-$4-${line##* round }") ${line#*failed }"
        fi
        echo "$line"
    done <"$out/lines" >"$out/lines.new" && mv "$out/lines.new" "$out/lines"
else
    : >"$out/lines"
    : >"$out/phases"
fi
for p in $counts; do
    nr=$rounds
    ((p >= big_from)) && nr=$rounds_big
    # memory: the job's footprint per rank (MemAvailable drop / P) as a
    # line through the last two counts measured (it grows with P: per-peer
    # endpoints), the last one alone, or MB_PER_RANK before any
    need_mb=$(awk -v pts="$mem_points" -v p="$p" -v m0="${MB_PER_RANK:-24}" 'BEGIN {
        n = split(pts, a, " "); m = m0
        if (n >= 2) { split(a[n - 1], x, ":"); split(a[n], y, ":"); m = y[2]
            if (y[1] != x[1] && y[2] > x[2]) m = y[2] + (y[2] - x[2]) / (y[1] - x[1]) * (p - y[1]) }
        else if (n == 1) { split(a[1], y, ":"); m = y[2] }
        printf "%.0f", m * p * 1.2 + 1024 }')
    avail_mb=$(($(mem_avail_kb) / 1024))
    if ((need_mb > avail_mb)); then
        echo "# skip $p ranks: needs ~${need_mb} MB (per-rank footprint measured at [${mem_points:-none}] (P:MB), extrapolated, +20% +1 GB), MemAvailable ${avail_mb} MB"
        continue
    fi
    echo "# $p ranks: estimated ${need_mb} MB of ${avail_mb} MB available; $nr rounds; gcx needs ~$((2 * p * p / 1000))k open files (a pidfd and a sysv attachment per peer) of fs.file-max $(cut -f3 /proc/sys/fs/file-nr) (root is not held to it)"
    for ((round = 1; round <= nr; ++round)); do
        if ((round % 2)); then order="gcx mpi"; else order="mpi gcx"; fi
        for kind in $order; do
            [[ " ${KINDS:-gcx mpi} " == *" $kind "* ]] || continue
            if [[ $kind == mpi ]] && ((p >= mpi_big_from && round > mpi_rounds_big)); then
                continue
            fi
            est=$(awk -v s="${slowest_s[$kind]:-0}" -v p0="${slowest_p[$kind]:-0}" -v p="$p" 'BEGIN {
                printf "%.0f", (p0 > 0 ? s * (p / p0) ^ 2 : 0) }')
            elapsed=$(($(date +%s) - script_t0))
            if ((est > launch_timeout)); then
                echo "# skip $kind $p round $round: estimated ${est} s (${slowest_s[$kind]} s at ${slowest_p[$kind]} ranks, x (P/P0)^2) > LAUNCH_TIMEOUT ${launch_timeout} s"
                continue
            fi
            if ((elapsed + est > budget)); then
                echo "# skip $kind $p round $round: ${elapsed} s spent, this launch estimated ${est} s, BUDGET_S ${budget} s"
                continue
            fi
            launch "$kind" "$p" "$round"
        done
    done
    # what this count taught: footprint per rank, slowest launch per kind
    mb=$(awk -v p="$p" '$4 == p { for (i = 1; i < NF; ++i)
            if ($i == "mem_mb" && $(i + 1) / p > mb) mb = $(i + 1) / p }
        END { printf "%.1f\n", mb }' "$out/lines")
    if awk -v a="$mb" 'BEGIN { exit !(a > 0) }'; then
        mem_points="$mem_points $p:$mb"
    fi
    for kind in gcx mpi; do
        s=$(awk -v p="$p" -v k="$kind" '$2 == k && $4 == p { for (i = 1; i < NF; ++i)
                if ($i == "launcher_s" && $(i + 1) > s) s = $(i + 1) }
            END { printf "%.0f\n", s }' "$out/lines")
        if ((s > 0)); then
            slowest_s[$kind]=$s slowest_p[$kind]=$p
        fi
    done
done

# summary: medians and ranges per count and launcher, paired ratios
{
    echo "| ranks | launcher | runs | create_s med (range) | create_from_first_s med | destroy_s med (range) | peak RSS/rank MB | job MB/rank | launcher wall s med (range) |"
    echo "|---|---|---|---|---|---|---|---|---|"
    awk '
        function med(s,   a, n, i, j, t) { n = split(s, a, " ")
            for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        function lo(s,   a, n, i, m) { n = split(s, a, " "); m = a[1]; for (i = 2; i <= n; ++i) if (a[i] + 0 < m + 0) m = a[i]; return m }
        function hi(s,   a, n, i, m) { n = split(s, a, " "); m = a[1]; for (i = 2; i <= n; ++i) if (a[i] + 0 > m + 0) m = a[i]; return m }
        {
            split("", v); for (i = 1; i < NF; ++i) v[$i] = $(i + 1)
            k = v["ranks"] " " $2
            if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
            if (v["create_s"] == "-") { failed[k]++; next }
            if ($0 ~ / partial /) partial[k] = partial[k] " " v["records"] "/" v["ranks"]
            n[k]++
            c[k] = c[k] " " v["create_s"]; cf[k] = cf[k] " " v["create_from_first_s"]
            d[k] = d[k] " " v["destroy_s"]; rss[k] = rss[k] " " v["rss_kb"] / 1024
            mem[k] = mem[k] " " v["mem_mb"] / v["ranks"]; l[k] = l[k] " " v["launcher_s"]
        }
        END {
            for (i = 1; i <= nk; ++i) { k = keys[i]; split(k, kk, " ")
                if (n[k] == 0) { printf "| %s | %s | 0 (%d failed) | | | | | | |\n", kk[1], kk[2], failed[k]; continue }
                printf "| %s | %s | %d%s | %.2f (%.2f-%.2f) | %.2f | %.2f (%.2f-%.2f) | %.1f | %.1f | %.2f (%.2f-%.2f) |\n",
                    kk[1], kk[2], n[k], (failed[k] ? " (+" failed[k] " failed)" : "") (partial[k] != "" ? " (job failed at exit; records" partial[k] ": lower bounds)" : ""),
                    med(c[k]), lo(c[k]), hi(c[k]), med(cf[k]), med(d[k]), lo(d[k]), hi(d[k]),
                    med(rss[k]), med(mem[k]), med(l[k]), lo(l[k]), hi(l[k]) }
        }' "$out/lines"
    echo
    echo "Paired gcx/MPI ratios (same round), create_s and launcher wall:"
    awk '{ split("", v); for (i = 1; i < NF; ++i) v[$i] = $(i + 1)
           k = v["ranks"] " " v["round"]; c[k, $2] = v["create_s"]; l[k, $2] = v["launcher_s"]; ks[k] = 1 }
         END { for (k in ks) if (c[k, "gcx"] + 0 > 0 && c[k, "mpi"] + 0 > 0)
                 printf "  ranks/round %s: create %.2f, launcher %.2f\n", k, c[k, "gcx"] / c[k, "mpi"], l[k, "gcx"] / l[k, "mpi"] }' "$out/lines" | sort -n -k2
    if [[ -s $out/phases ]]; then
        echo
        echo "gcx critical path (median over rounds, s): each phase ends when the last rank is through it"
        awk '{ for (i = 1; i < NF; ++i) v[$i] = $(i + 1); p = v["ranks"]
               if (!(p in seen)) { seen[p] = 1; ps[++np] = p }
               for (f in v) if (f ~ /^(star_join|ucx_init|star_allgathers|endpoints|check_barrier|last_start|created|root_allgathers)$/) a[p, f] = a[p, f] " " v[f] }
             function med(s,   x, n, i, j, t) { n = split(s, x, " ")
                 for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (x[j] + 0 < x[i] + 0) { t = x[i]; x[i] = x[j]; x[j] = t }
                 return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2 }
             END { print "| ranks | launcher spawn (last start) | star join | UCX init | star allgathers | endpoints | check + barrier | total (created) | root in allgathers |"
                   print "|---|---|---|---|---|---|---|---|---|"
                   for (i = 1; i <= np; ++i) { p = ps[i]
                     printf "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", p, med(a[p, "last_start"]), med(a[p, "star_join"]),
                       med(a[p, "ucx_init"]), med(a[p, "star_allgathers"]), med(a[p, "endpoints"]), med(a[p, "check_barrier"]),
                       med(a[p, "created"]), med(a[p, "root_allgathers"]) } }' "$out/phases"
    fi
} | tee "$out/summary.md"
echo "# total $(($(date +%s) - script_t0)) s; logs under $out"
