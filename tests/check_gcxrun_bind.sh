#!/usr/bin/env bash
# check_gcxrun_bind.sh GCXRUN - gcxrun's CPU binding (--bind auto|cpu|none):
# with as many ranks as usable CPUs every rank is pinned to its own CPU;
# with more ranks they share CPUs round-robin (auto, and cpu, its other
# name); --bind none pins nobody; a bad mode is refused. Reads each rank's
# Cpus_allowed_list.
set -euo pipefail
gcxrun=$1
mine=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
ncpu=$(nproc)
fail() { echo "FAIL: $*" >&2; exit 1; }

# lists N ARGS...: every rank's Cpus_allowed_list, sorted by rank
lists() {
    local n=$1
    shift
    "$gcxrun" -t -n "$n" "$@" -- awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status |
        sort -t']' -k1.2n | sed 's/^\[[0-9]*\] //'
}

# ranks that fit: one CPU each, all different
got=$(lists "$ncpu")
[[ $(wc -l <<<"$got") -eq $ncpu ]] || fail "expected $ncpu lines, got: $got"
while read -r l; do
    [[ $l =~ ^[0-9]+$ ]] || fail "auto, $ncpu ranks: rank list '$l' is not one CPU"
done <<<"$got"
[[ $(sort -u <<<"$got" | wc -l) -eq $ncpu ]] || fail "auto: ranks share a CPU: $got"

# --bind none: the launcher's own mask
got=$(lists "$ncpu" --bind none)
while read -r l; do
    [[ $l == "$mine" ]] || fail "--bind none: rank list '$l' != the launcher's '$mine'"
done <<<"$got"

# more ranks than CPUs (auto, cpu): round-robin over the CPUs, one each
for mode in auto cpu; do
    got=$(lists $((2 * ncpu + 1)) --bind $mode)
    while read -r l; do
        [[ $l =~ ^[0-9]+$ ]] || fail "--bind $mode, $((2 * ncpu + 1)) ranks: rank list '$l' is not one CPU"
    done <<<"$got"
    [[ $(sort -u <<<"$got" | wc -l) -eq $ncpu ]] ||
        fail "--bind $mode: $((2 * ncpu + 1)) ranks do not use all $ncpu CPUs: $got"
    for r in $(seq "$ncpu" $((2 * ncpu))); do
        [[ $(sed -n "$((r + 1))p" <<<"$got") == $(sed -n "$((r - ncpu + 1))p" <<<"$got") ]] ||
            fail "--bind $mode: rank $r is not on rank $((r - ncpu))'s CPU: $got"
    done
done

# a bad mode is refused with status 2
set +e
"$gcxrun" --bind sideways -n 1 -- true 2>/dev/null
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "--bind sideways: exit $rc, expected 2"
echo "gcxrun binding ok ($ncpu CPUs, launcher mask $mine)"
