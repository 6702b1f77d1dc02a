#!/usr/bin/env bash
# Behaviour check: above the rendezvous threshold gcx and UCX make no staging
# copy of user data. A 2-rank 16 MB ring allreduce runs with the copy_audit
# shim preloaded; every rank must show 0 bytes of memcpy/memmove calls of
# >= 4 KiB, and at least its payload moved by cma (straight between the
# ranks' buffers).
set -euo pipefail
gcxrun=$1 perf=$2 shim=$3
out=$(LD_PRELOAD=$shim GCX_ALLREDUCE_ALGO=ring "$gcxrun" -n 2 -t -- \
      "$perf" -b 16M -e 16M -n 1 -w 0 -c 1 2>&1)
echo "$out"
ranks=$(echo "$out" | grep -c '^\[[01]\] copy-audit' || true)
[[ $ranks -eq 2 ]] || { echo "expected audit lines from 2 ranks, got $ranks"; exit 1; }
bad=$(echo "$out" | grep '^\[[01]\] copy-audit' | awk '{
  for (i = 1; i <= NF; ++i) { if ($i == "bytes;") copy = $(i-1); if ($i == "bytes") cma = $(i-1) }
  if (copy != 0 || cma < 2 * 16777216) print }')
if [[ -n "$bad" ]]; then
  echo "staging copies or missing single-copy transfers: $bad"
  exit 1
fi
echo "zero copy: 1 passed, 0 failed"
