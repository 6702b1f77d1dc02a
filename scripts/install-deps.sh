#!/usr/bin/env bash
# install-deps.sh - make sure the Debian 12 packages gcx needs are there.
#
#   scripts/install-deps.sh [--perf]
#
# As root, missing packages are installed with apt-get (one 'apt-get update'
# first). Otherwise it prints the exact command to run and fails. --perf adds
# what the comparison benchmarks and plots use (Open MPI is always in, since
# the allreduce comparison driver is built with it). clang and its runtime
# libraries (libFuzzer, the sanitizers: libclang-rt-14-dev, only recommended
# by clang) build the fuzz targets of tests/fuzz.
set -euo pipefail

packages=(
  build-essential meson ninja-build pkg-config
  libucx-dev ucx-utils libibverbs-dev rdma-core librdmacm-dev
  libgtest-dev libopenmpi-dev openmpi-bin
  libopenblas-dev liblapacke-dev zlib1g-dev dataset-fashion-mnist
  iproute2 python3 python3-venv python3-dev
  clang libclang-rt-14-dev
)
if [[ "${1:-}" == "--perf" ]]; then
  packages+=(python3-torch python3-numpy gnuplot-nox)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "gcx needs these Debian packages: ${missing[*]}" >&2
  echo "install them as root with:" >&2
  echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
