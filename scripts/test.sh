#!/usr/bin/env bash
# test.sh - build gcx and run every test, as CI does.
#
#   scripts/test.sh            release build + all suites, then an
#                              ASan+UBSan build + all suites again
#   GCX_TEST_NO_ASAN=1 ...     skip the sanitizer pass (local iteration)
#
# Suites: unit (no network), multirank (gcxrun jobs with P = 1..5), failure
# (dead and sleeping ranks, joins), cluster (network-namespace self-test;
# skipped without root). Each multi-rank case runs in its own processes
# under a meson timeout, so a hang fails instead of stalling.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

passed=0 failed=0 skipped=0
run_suites() {
  local dir=$1 log rc=0; shift
  log=$(mktemp)
  meson test -C "$dir" --print-errorlogs --num-processes 1 "$@" | tee "$log" || rc=$?
  passed=$((passed + $(awk '/^Ok:/ {print $2}' "$log")))
  failed=$((failed + $(awk '/^Fail:/ {print $2}' "$log") + $(awk '/^Timeout:/ {print $2}' "$log")))
  skipped=$((skipped + $(awk '/^Skipped:/ {print $2}' "$log")))
  rm -f "$log"
  if [[ $rc -ne 0 ]]; then
    echo "tests: $passed passed, $failed failed, $skipped skipped"
    exit "$rc"
  fi
}

if [[ ! -f build/build.ninja ]]; then
  meson setup build --buildtype=release
else
  meson setup --reconfigure build >/dev/null
fi
meson compile -C build
run_suites build

if [[ "${GCX_TEST_NO_ASAN:-0}" != "1" ]]; then
  if [[ ! -f build-asan/build.ninja ]]; then
    meson setup build-asan --buildtype=debug -Db_sanitize=address,undefined \
      -Db_lundef=false
  else
    meson setup --reconfigure build-asan >/dev/null
  fi
  meson compile -C build-asan
  # the cluster self-test runs no gcx code, and the copy audit preloads a
  # shim that ASan refuses: once (above) is enough for both
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_suites build-asan --no-suite cluster --no-suite audit
fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
