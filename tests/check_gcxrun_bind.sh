#!/usr/bin/env bash
# check_gcxrun_bind.sh GCXRUN - gcxrun's CPU binding (--bind auto|cpu|none):
# with as many ranks as usable CPUs every rank is pinned to its own CPU;
# with more ranks (auto) or --bind none nobody is pinned; --bind cpu pins
# round-robin; a bad mode is refused. Reads each rank's Cpus_allowed_list.
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

# more ranks than CPUs, or --bind none: the launcher's own mask
for args in "-n $((ncpu + 1))" "-n $ncpu --bind none"; do
    got=$(lists ${args#-n })
    while read -r l; do
        [[ $l == "$mine" ]] || fail "$args: rank list '$l' != the launcher's '$mine'"
    done <<<"$got"
done

# --bind cpu with more ranks: round-robin over the CPUs, one each
got=$(lists $((ncpu + 1)) --bind cpu)
while read -r l; do
    [[ $l =~ ^[0-9]+$ ]] || fail "--bind cpu: rank list '$l' is not one CPU"
done <<<"$got"
[[ $(sed -n 1p <<<"$got") == $(sed -n "$((ncpu + 1))p" <<<"$got") ]] ||
    fail "--bind cpu: rank $ncpu is not on rank 0's CPU: $got"

# a bad mode is refused with status 2
set +e
"$gcxrun" --bind sideways -n 1 -- true 2>/dev/null
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "--bind sideways: exit $rc, expected 2"
echo "gcxrun binding ok ($ncpu CPUs, launcher mask $mine)"
