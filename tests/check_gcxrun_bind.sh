#!/usr/bin/env bash
# check_gcxrun_bind.sh GCXRUN - gcxrun's CPU binding (--bind auto|cpu|none):
# with as many ranks as usable CPUs every rank is pinned to its own CPU;
# with a multiple of that (auto) or any count (cpu) they share CPUs
# round-robin; auto with an uneven count, and --bind none, pin nobody; a
# bad mode is refused. Reads each rank's Cpus_allowed_list.
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

# --bind none, and auto with an uneven count: the launcher's own mask
for args in "$ncpu --bind none" "$((2 * ncpu + 1))"; do
    got=$(lists $args)
    while read -r l; do
        [[ $l == "$mine" ]] || fail "-n $args: rank list '$l' != the launcher's '$mine'"
    done <<<"$got"
done

# auto with twice as many ranks as CPUs, cpu with any count: round-robin,
# one CPU each, rank r on rank r-ncpu's CPU
for args in "$((2 * ncpu)) --bind auto" "$((2 * ncpu + 1)) --bind cpu"; do
    got=$(lists $args)
    n=$(wc -l <<<"$got")
    while read -r l; do
        [[ $l =~ ^[0-9]+$ ]] || fail "-n $args: rank list '$l' is not one CPU"
    done <<<"$got"
    [[ $(sort -u <<<"$got" | wc -l) -eq $ncpu ]] ||
        fail "-n $args: the ranks do not use all $ncpu CPUs: $got"
    for ((r = ncpu; r < n; r++)); do
        [[ $(sed -n "$((r + 1))p" <<<"$got") == $(sed -n "$((r - ncpu + 1))p" <<<"$got") ]] ||
            fail "-n $args: rank $r is not on rank $((r - ncpu))'s CPU: $got"
    done
done

# a bad mode is refused with status 2
set +e
"$gcxrun" --bind sideways -n 1 -- true 2>/dev/null
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "--bind sideways: exit $rc, expected 2"
echo "gcxrun binding ok ($ncpu CPUs, launcher mask $mine)"
