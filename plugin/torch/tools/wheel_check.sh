#!/usr/bin/env bash
# wheel_check.sh - the install a user does, checked end to end (a stage of
# scripts/test.sh; runs alone too, from anywhere):
#   1. a fresh venv (Debian's python3) gets torch==2.13.0 and the tests'
#      packages (pytest, numpy, ...), nothing else;
#   2. that venv builds the wheel: pip wheel --no-build-isolation (libgcx as
#      the plugin's meson subproject, bundled; tools/wheel_backend.py);
#   3. the wheel is installed into it and the plugin's tests run from a copy
#      of plugin/torch/tests outside the source tree, no PYTHONPATH, so
#      `import torch_gcx` is the installed wheel: test_install.py (the
#      package's own libgcx, the plain-pip refusal) and, of
#      test_torch_gcx.py, all_reduce on 1-4 ranks, DDP against gloo and a
#      dead peer (that the installed extension works). scripts/test.sh has already run the whole suite on
#      the build tree, which compiles the same sources; WHEEL_CHECK_TESTS=all
#      runs every test file against the wheel instead (the documented way to
#      run everything: scripts/test.sh with GCX_TEST_WHEEL_ALL=1).
# Prints each step's time, then pytest's summary line (scripts/test.sh
# counts it); exits non-zero on any failure.
# Cost (beside scripts/test.sh's pytest, niced, on the 2-core box): venv +
# torch 44 s (torch installs from a local file here), the wheel 175 s wall
# (a full build: libgcx and the extension, two unity files), the install
# tests ~100 s (all: ~15 min).
# The venv, wheel and test copy go to a new temporary directory, removed
# when every step passed and kept (its path printed) otherwise.
set -euo pipefail
cd "$(dirname "$0")/../../.."
repo=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/gcx-wheel-check.XXXXXX")
venv=$work/venv
unset PYTHONPATH
trap 'echo "wheel check: failed; kept $work" >&2' ERR

step() { # step NAME CMD...: run, print its wall time
  local t0=$SECONDS rc=0
  "${@:2}" || rc=$?
  echo "wheel check: $1: $((SECONDS - t0)) s (rc $rc)"
  return "$rc"
}
step venv /usr/bin/python3 -m venv "$venv"
# what the tests need: the packages scripts/test.sh puts in build-venv/
# (keep the two lists the same; lightning is for tests/test_ecosystem.py)
pkgs=(torch==2.13.0 pytest numpy expecttest pytorch-lightning==2.6.6)
step "pip install ${pkgs[*]}" "$venv/bin/pip" install -q "${pkgs[@]}"
step "pip wheel --no-build-isolation plugin/torch" \
  "$venv/bin/pip" wheel -q --no-build-isolation --no-deps -w "$work/wheels" \
  "$repo/plugin/torch"
whl=$(ls "$work"/wheels/torch_gcx-*.whl)
echo "wheel check: $(basename "$whl"): $(du -k "$whl" | cut -f1) KiB"
step "pip install the wheel" "$venv/bin/pip" install -q "$whl"

cp -r "$repo/plugin/torch/tests" "$work/tests"
cd "$work"
where=$("$venv/bin/python" -c 'import torch_gcx; print(torch_gcx.__file__)')
echo "wheel check: torch_gcx from $where"
case $where in
  "$venv"/*) ;;
  *) echo "wheel check: torch_gcx is not the venv's installed one;" \
       "kept $work" >&2; exit 1 ;;
esac
case ${WHEEL_CHECK_TESTS:-install} in
  all) tests=(tests) ;;
  install) tests=(tests/test_install.py tests/test_torch_gcx.py -k
                 "test_install or test_allreduce or test_ddp_parity or test_peer_death") ;;
  *) echo "wheel check: WHEEL_CHECK_TESTS='${WHEEL_CHECK_TESTS}' is not one of" \
       "install, all" >&2; exit 2 ;;
esac
step "pytest (outside the tree)" env TORCH_GCX_SOURCE="$repo/plugin/torch" \
  timeout 2400 "$venv/bin/python" -m pytest -q -p no:cacheprovider "${tests[@]}"
trap - ERR
cd "$repo"
rm -rf "$work"
