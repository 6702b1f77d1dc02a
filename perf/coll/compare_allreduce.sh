#!/usr/bin/env bash
# compare_allreduce.sh - gcx allreduce against Open MPI's or gloo's, side by
# side in one run.
#
#   perf/coll/compare_allreduce.sh [BUILD_DIR] [RANKS...]     (default: build 2 4)
#   AGAINST=gloo LINK=1gbit perf/coll/compare_allreduce.sh build 4 8   (as root)
#
# For each rank count it runs gcx_allreduce_perf and the other library's
# driver alternately, ROUNDS times (default 3), on BEGIN .. END (default
# 1M .. 64M) float32 sum, then prints per size the best-of-rounds median
# busbw of each and their ratio, and, because neighbouring runs on a shared
# box drift together, the paired view: the median over rounds of round r's
# gcx/other ratio and in how many rounds gcx was ahead.
#
#   AGAINST=mpi   (default) mpi_allreduce_perf under mpirun, gcx under gcxrun,
#                 on this host's shared memory.
#   AGAINST=gloo  perf/coll/gloo_allreduce_perf.py (torch.distributed, gloo
#                 backend) with $PYTHON (default python3; needs torch).
#   LINK=RATE     both under perf/cluster/emulate.sh, one emulated node per
#                 rank on links of RATE (e.g. 1gbit; needs root, not with
#                 mpi); each round also measures the links' TCP goodput with
#                 perf/cluster/tcp_ring.py, and gcx's busbw is printed as a
#                 share of it (a ring allreduce's busbw is bounded by it).
#   EMULATE_OPTS  more emulate.sh options with LINK, e.g. "--cc bbr" (the
#                 nodes' TCP congestion control; emulate.sh's default is cubic).
#   ALSO_ENV      a second gcx variant run in each round with these variables,
#                 e.g. "GCX_RING_EAGER=off": printed as the "alt" columns (its
#                 best busbw, and the paired medians alt/other and gcx/alt).
#
# JSON rows land in $OUT (default build/perf-allreduce[-LINK]).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}; shift || true
build=$(cd "$build" && pwd)
ranks=("$@"); [[ ${#ranks[@]} -gt 0 ]] || ranks=(2 4)
rounds=${ROUNDS:-3}
against=${AGAINST:-mpi}
link=${LINK:-}
python=${PYTHON:-python3}
out=${OUT:-$build/perf-allreduce${link:+-$link}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
args=(-b "${BEGIN:-1M}" -e "${END:-64M}" -f 2 -n "${ITERS:-20}" -w 3)
case $against in
  mpi|gloo) ;;
  *) echo "compare_allreduce.sh: AGAINST must be mpi or gloo, not '$against'" >&2; exit 2 ;;
esac
if [[ -n $link && $against == mpi ]]; then
  echo "compare_allreduce.sh: LINK needs AGAINST=gloo (mpirun cannot launch into emulated nodes)" >&2
  exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# run_ranks P PROGRAM ARGS...: P ranks of PROGRAM, locally or on emulated nodes
run_ranks() {
  local p=$1; shift
  if [[ -n $link ]]; then
    # shellcheck disable=SC2086  # EMULATE_OPTS is a list of options
    "$here/../cluster/emulate.sh" -n "$p" --rate "$link" ${EMULATE_OPTS:-} -q -- "$@"
  elif [[ $1 == mpi ]]; then
    shift; mpirun --oversubscribe -np "$p" "$@"
  else
    "$build/programs/gcxrun/gcxrun" ${GCXRUN_OPTS:-} -n "$p" -- "$@"
  fi
}

for p in "${ranks[@]}"; do
  for r in $(seq 1 "$rounds"); do
    run_ranks "$p" "$build/perf/coll/gcx_allreduce_perf" "${args[@]}" \
      --json "$out/gcx-p$p-r$r.json" >/dev/null 2>>"$out/stderr.log"
    if [[ -n ${ALSO_ENV:-} ]]; then
      # shellcheck disable=SC2086  # ALSO_ENV is a list of VAR=value words
      run_ranks "$p" env $ALSO_ENV "$build/perf/coll/gcx_allreduce_perf" "${args[@]}" \
        --json "$out/alt-p$p-r$r.json" >/dev/null 2>>"$out/stderr.log"
    fi
    if [[ $against == mpi ]]; then
      run_ranks "$p" mpi "$build/perf/coll/mpi_allreduce_perf" "${args[@]}" \
        --json "$out/mpi-p$p-r$r.json" >/dev/null
    else
      run_ranks "$p" "$python" "$here/gloo_allreduce_perf.py" "${args[@]}" \
        --json "$out/gloo-p$p-r$r.json" >/dev/null 2>>"$out/stderr.log"
    fi
    if [[ -n $link ]]; then
      run_ranks "$p" "$python" "$here/../cluster/tcp_ring.py" 3 > "$out/goodput-p$p-r$r.txt"
    fi
  done
done
"$python" - "$out" "$rounds" "$against" "$link" "${ALSO_ENV:-}" "${ranks[@]}" <<'PY'
import json, os, re, statistics, sys
out, rounds, other, link, also, ranks = (sys.argv[1], int(sys.argv[2]), sys.argv[3],
                                         sys.argv[4], sys.argv[5], sys.argv[6:])
rounds_ = range(1, rounds + 1)
libs = ("gcx", other) + (("alt",) if also else ())
if also:
    print("alt = gcx with " + also)
print("%5s %12s %12s %12s %7s %7s %13s %9s%s%s" % ("ranks", "size", "gcx busbw",
      other + " busbw", "ratio", "#wrong", "paired median", "gcx ahead",
      " %9s %9s" % ("goodput", "gcx/good") if link else "",
      " %9s %9s %9s" % ("alt busbw", "alt/" + other, "gcx/alt") if also else ""))
worst = None
for p in ranks:
    best, per_round, wrong = {}, {}, {}
    for lib in libs:
        for r in rounds_:
            for row in json.load(open(f"{out}/{lib}-p{p}-r{r}.json"))["rows"]:
                per_round[(lib, row["size"], r)] = row["busbw_gbps"]
                best[(lib, row["size"])] = max(best.get((lib, row["size"]), 0), row["busbw_gbps"])
                wrong[row["size"]] = wrong.get(row["size"], 0) + max(row["wrong"], 0)
    goodput = {}  # round -> median over ranks of the received rate, GB/s
    if link:
        for r in rounds_:
            text = open(f"{out}/goodput-p{p}-r{r}.txt").read()
            rates = [float(x) for x in re.findall(r"received from rank \d+: ([0-9.]+) Mbit/s", text)]
            goodput[r] = statistics.median(rates) / 8e3
    for size in sorted({k[1] for k in best if k[0] == "gcx"}):
        g, m = best[("gcx", size)], best[(other, size)]
        ratio = g / m if m else float("inf")
        worst = ratio if worst is None else min(worst, ratio)
        paired = [per_round[("gcx", size, r)] / per_round[(other, size, r)]
                  for r in rounds_ if per_round[(other, size, r)]]
        med = statistics.median(paired) if paired else float("nan")
        ahead = sum(1 for x in paired if x >= 1.0)
        extra = ""
        if link:
            good = statistics.median(goodput.values())
            share = statistics.median(per_round[("gcx", size, r)] / goodput[r] for r in rounds_)
            extra = " %9.3f %9.2f" % (good, share)
        if also:
            def paired_median(a, b):
                return statistics.median(per_round[(a, size, r)] / per_round[(b, size, r)]
                                         for r in rounds_)
            extra += " %9.3f %9.2f %9.2f" % (best[("alt", size)], paired_median("alt", other),
                                             paired_median("gcx", "alt"))
        print("%5s %12d %12.3f %12.3f %7.2f %7d %13.2f %6d/%-2d%s" % (p, size, g, m, ratio,
              wrong[size], med, ahead, len(paired), extra))
print("lowest gcx/%s busbw ratio: %.2f" % (other, worst))
PY
