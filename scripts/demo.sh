#!/usr/bin/env bash
# demo.sh - the main job: build gcx if needed, then train on 4 local ranks.
#
# Trains the MLP (784-1024-1024-10) on Fashion-MNIST with gcx-train on 4
# ranks (gcxrun) with GraVAC: error-feedback top-k whose compression factor
# the controller adapts from the gradient information that survives
# (GCX_GRAVAC_* tune it), exchanged by gcx's sparse allreduce. Progress
# (CF, gain, bytes sent) and a summary are printed; the JSON summary and the
# per-step CSV trace land in build/demo/.
#   EPOCHS=N SYNC=dense|topk:cf=100|gravac:... scripts/demo.sh   (default 3, gravac)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [[ ! -f build/build.ninja ]]; then
  meson setup build --buildtype=release
fi
meson compile -C build
mkdir -p build/demo
export OPENBLAS_NUM_THREADS=1   # one BLAS thread per rank: 4 ranks share the cores
build/programs/gcxrun/gcxrun -n 4 -- build/programs/train/gcx-train \
  --model mlp --epochs "${EPOCHS:-3}" --batch 16 --sync "${SYNC:-gravac}" \
  --json build/demo/summary.json --csv build/demo/trace.csv
echo "summary: build/demo/summary.json, trace: build/demo/trace.csv"
