#!/usr/bin/env bash
# compare_allreduce.sh - gcx vs Open MPI allreduce, side by side in one run.
#
#   perf/coll/compare_allreduce.sh [BUILD_DIR] [RANKS...]     (default: build 2 4)
#
# For each rank count it runs gcx_allreduce_perf (under gcxrun) and
# mpi_allreduce_perf (under mpirun) alternately, ROUNDS times (default 3), on
# BEGIN .. END (default 1M .. 64M) float32 sum, then prints per size the
# best-of-rounds median busbw of each and their ratio, and, because
# neighbouring runs on a shared box drift together, the paired view: the
# median over rounds of round r's gcx/mpi ratio and in how many rounds gcx
# was ahead. JSON rows land in $OUT (default build/perf-allreduce).
set -euo pipefail
build=${1:-build}; shift || true
ranks=("$@"); [[ ${#ranks[@]} -gt 0 ]] || ranks=(2 4)
rounds=${ROUNDS:-3}
out=${OUT:-$build/perf-allreduce}
mkdir -p "$out"
args=(-b "${BEGIN:-1M}" -e "${END:-64M}" -f 2 -n ${ITERS:-20} -w 3)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for p in "${ranks[@]}"; do
  for r in $(seq 1 "$rounds"); do
    "$build/programs/gcxrun/gcxrun" ${GCXRUN_OPTS:-} -n "$p" -- "$build/perf/coll/gcx_allreduce_perf" \
      "${args[@]}" --json "$out/gcx-p$p-r$r.json" >/dev/null
    mpirun --oversubscribe -np "$p" "$build/perf/coll/mpi_allreduce_perf" \
      "${args[@]}" --json "$out/mpi-p$p-r$r.json" >/dev/null
  done
done
python3 - "$out" "$rounds" "${ranks[@]}" <<'PY'
import json, statistics, sys
out, rounds, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("%5s %12s %12s %12s %7s %7s %13s %9s" % ("ranks", "size", "gcx busbw",
      "mpi busbw", "ratio", "#wrong", "paired median", "gcx ahead"))
worst = None
for p in ranks:
    best, per_round = {}, {}
    for lib in ("gcx", "mpi"):
        for r in range(1, rounds + 1):
            for row in json.load(open(f"{out}/{lib}-p{p}-r{r}.json"))["rows"]:
                per_round[(lib, row["size"], r)] = row["busbw_gbps"]
                key = (lib, row["size"])
                best[key] = max(best.get(key, 0), row["busbw_gbps"])
                best[(lib, row["size"], "wrong")] = best.get((lib, row["size"], "wrong"), 0) + row["wrong"]
    for size in sorted({k[1] for k in best if k[0] == "gcx" and len(k) == 2}):
        g, m = best[("gcx", size)], best[("mpi", size)]
        ratio = g / m if m else float("inf")
        worst = ratio if worst is None else min(worst, ratio)
        paired = [per_round[("gcx", size, r)] / per_round[("mpi", size, r)]
                  for r in range(1, rounds + 1) if per_round[("mpi", size, r)]]
        n = len(paired)
        med = statistics.median(paired) if n else float("nan")
        ahead = sum(1 for x in paired if x >= 1.0)
        print("%5s %12d %12.3f %12.3f %7.2f %7d %13.2f %6d/%-2d" % (p, size, g, m, ratio,
              best[("gcx", size, "wrong")] + best[("mpi", size, "wrong")], med, ahead, n))
print("lowest gcx/mpi busbw ratio: %.2f" % worst)
PY
