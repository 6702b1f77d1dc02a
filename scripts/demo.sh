#!/usr/bin/env bash
# demo.sh - the main job: build gcx if needed, then train on 4 local ranks.
#
# Trains the MLP (784-1024-1024-10) on Fashion-MNIST with gcx-train on 4
# ranks (gcxrun), printing progress and a summary; the JSON summary and the
# per-step CSV trace land in build/demo/. Today the ranks synchronise with
# dense allreduce; the GraVAC mode takes over as the default once it lands.
#   EPOCHS=N scripts/demo.sh      (default 3; ~88-89% test accuracy)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [[ ! -f build/build.ninja ]]; then
  meson setup build --buildtype=release
fi
meson compile -C build
mkdir -p build/demo
export OPENBLAS_NUM_THREADS=1   # one BLAS thread per rank: 4 ranks share the cores
build/src/tools/gcxrun -n 4 -- build/src/train/gcx-train \
  --model mlp --epochs "${EPOCHS:-3}" --batch 16 --sync dense \
  --json build/demo/summary.json --csv build/demo/trace.csv
echo "summary: build/demo/summary.json, trace: build/demo/trace.csv"
