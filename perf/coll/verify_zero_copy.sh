#!/usr/bin/env bash
# verify_zero_copy.sh - is data above the rendezvous threshold copied?
#
#   perf/coll/verify_zero_copy.sh [BUILD_DIR]
#
# Runs 2-rank allreduces of 64 MB (ring) and broadcasts of 64 MB (chain)
# with the copy_audit.so shim preloaded, one iteration each after one warm-up,
# and prints per rank the large memcpy bytes and the cma bytes. The rank's
# payload crosses by cma straight between user buffers; what memcpy shows
# is only what gcx copies on purpose (none for these collectives).
set -euo pipefail
build=${1:-build}
shim=$build/perf/coll/libcopy_audit.so
echo "== allreduce 64 MB, 2 ranks, ring (payload per rank: 64 MB moved: 32 MB reduce-scatter + 32 MB allgather)"
LD_PRELOAD=$shim GCX_ALLREDUCE_ALGO=ring "$build/programs/gcxrun/gcxrun" -n 2 -t -- \
  "$build/perf/coll/gcx_allreduce_perf" -b 64M -e 64M -n 1 -w 1 -c 0 2>&1 | grep -E "copy-audit|float"
