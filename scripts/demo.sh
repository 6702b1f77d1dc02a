#!/usr/bin/env bash
# demo.sh - the main job: build gcx if needed, then run it on 4 local ranks.
#
# Until the training loop lands, the main job is the dense allreduce
# benchmark on 4 ranks (1 MB .. 64 MB, float32 sum), with the Open MPI
# MPI_Allreduce reference in the same run for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [[ ! -f build/build.ninja ]]; then
  meson setup build --buildtype=release
fi
meson compile -C build
echo "== gcx allreduce, 4 ranks (gcxrun) =="
build/src/tools/gcxrun -n 4 -- build/perf/coll/gcx_allreduce_perf -b 1M -e 64M -f 4 -n 10 -w 2
if [[ -x build/perf/coll/mpi_allreduce_perf ]]; then
  echo "== Open MPI MPI_Allreduce, 4 ranks (reference) =="
  mpirun --allow-run-as-root --oversubscribe -np 4 \
    build/perf/coll/mpi_allreduce_perf -b 1M -e 64M -f 4 -n 10 -w 2
fi
