#!/usr/bin/env bash
# selftest.sh: functional check of emulate.sh, the emulated cluster.
#
# Idea: drive emulate.sh as a user would and look at what only a working tool produces:
# ranks see their own rank, address, TCP congestion control and a shaped eth0, and cannot
# route anywhere else; a 100 Mbit/s link carries 50..100 Mbit/s of ucx_perftest goodput in
# each direction, also when only one of its two shapers is left (so each shaper works on its
# own), while the same transfer without shapers is much faster (so the band can fail); and
# after a normal exit, a failing rank, SIGINT, a timeout with ranks that ignore SIGTERM,
# and a crashed launcher (then --cleanup), no namespace and no rank process of the run is
# left.
# Needs root and permission to create network namespaces; otherwise prints SKIP, exits 77.
# Bandwidth parts need ucx_perftest (Debian ucx-utils) and are skipped without it.
# Usage: perf/cluster/selftest.sh        (the --rank-body form is its own rank program)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
emulate=$here/emulate.sh
readonly RATE=100mbit LO_MBIT=50 HI_MBIT=100 FAST_MBIT=200
readonly PERFTEST=(-t tag_bw -s 4194304 -n 5 -w 2)   # 28 MiB: about 2.3 s at 100 Mbit/s

# ---- rank program for the one-shaper tests ---------------------------------------------
# rank_body KEEP: rank 1 sends to rank 0 with ucx_perftest, after removing the shapers not
# named in KEEP: "up" keeps rank 1's upload (eth0 in its namespace), "down" keeps rank 0's
# download (its port on the bridge), "none" keeps neither.
rank_body() {
    local keep=$1 tries=50 out
    export UCX_TLS=tcp
    if (( GCX_RANK == 0 )); then
        if [[ $keep != down ]]; then
            tc -n "$GCX_EMU_SWITCH_NETNS" qdisc del dev "$GCX_EMU_SWITCH_PORT" root
        fi
        exec ucx_perftest -p "$GCX_ROOT_PORT" "${PERFTEST[@]}" >/dev/null
    fi
    [[ $keep == up ]] || tc qdisc del dev eth0 root
    # The server may not listen yet: a refused connect fails at once, before any transfer.
    until out=$(ucx_perftest "$GCX_ROOT_ADDR" -p "$GCX_ROOT_PORT" "${PERFTEST[@]}" 2>&1); do
        (( tries-- > 0 )) || { echo "$out" >&2; exit 1; }
        sleep 0.2
    done
    awk '$1 == "Final:" { printf "MBIT %.1f\n", $7 * 1048576 * 8 / 1e6 }' <<<"$out"
}

if [[ ${1:-} == --rank-body ]]; then
    rank_body "$2"
    exit
fi

# ---- harness ---------------------------------------------------------------------------
failures=0
work=
started=()      # pids of the emulate.sh runs, whose namespaces are gcxemu-<pid>-*

skip() { echo "SKIP: $*"; exit 77; }
pass() { echo "ok - $*"; }
fail() { echo "FAIL - $*"; failures=$(( failures + 1 )); }

# leftovers PID: namespaces of that run still present (with the processes inside them),
# and its temporary folder.
leftovers() {
    local ns dir
    for ns in $(ip netns list | awk -v p="gcxemu-$1-" 'index($1, p) == 1 { print $1 }'); do
        echo "namespace $ns (pids: $(ip netns pids "$ns" | tr '\n' ' '))"
    done
    for dir in "${TMPDIR:-/tmp}/gcxemu-$1".*; do
        [[ ! -e $dir ]] || echo "folder $dir"
    done
}

# expect_clean PID WHAT: the run's namespaces and folder are gone, and so are its marked
# processes.
expect_clean() {
    local left
    left=$(leftovers "$1")
    [[ -z $left ]] || { fail "$2: left behind: $left"; return; }
    local f
    for f in /proc/[0-9]*/cmdline; do
        if [[ $(tr '\0' ' ' 2>/dev/null <"$f") == "sleep $marker " ]]; then
            fail "$2: a rank process (sleep $marker) is still alive"
            return
        fi
    done
    pass "$2: namespaces, rank processes and temporary folder gone"
}

on_exit() {
    local pid
    for pid in "${started[@]}"; do
        [[ -z $(leftovers "$pid") ]] || "$emulate" --cleanup -q || true
    done
    [[ -z $work ]] || rm -rf "$work"
}

# run_emulate OUTFILE ARGS...: start emulate.sh in the background, $job its pid; SIGINT at
# its default (a background command of a script starts with SIGINT ignored); killed if it
# hangs for 2 minutes.
run_emulate() {
    local out=$1; shift
    timeout -s KILL 120 env --default-signal=INT "$emulate" "$@" >"$out" 2>&1 &
    job=$!
}

# launcher_pid OUTFILE: the launcher's pid, which names its namespaces, from its setup
# line, into $run_pid.
launcher_pid() {
    run_pid=$(sed -n 's/.* in gcxemu-\([0-9]*\)-sw,.*/\1/p' "$1")
    [[ -n $run_pid ]] || return 1
    started+=("$run_pid")
}

# finish OUTFILE: wait for the run; $st its status, $run_pid its launcher's pid.
finish() {
    st=0
    wait "$job" 2>/dev/null || st=$?  # no "Killed" notice for the crash test
    launcher_pid "$1" || true
}

# wait_for FILE...: wait up to 20 s until the files exist.
wait_for() {
    local tries=200 f
    for f in "$@"; do
        until [[ -e $f ]]; do
            (( tries-- > 0 )) || return 1
            sleep 0.1
        done
    done
}

(( EUID == 0 )) || skip "needs root (network namespaces, veth, tc)"
for tool in ip tc; do
    command -v "$tool" >/dev/null || skip "'$tool' not found (Debian package iproute2)"
done
probe=gcxemu-$$-probe
ip netns add "$probe" 2>/dev/null || skip "creating a network namespace is not permitted here"
ip netns delete "$probe"

trap on_exit EXIT
work=$(mktemp -d)
marker=$(( RANDOM + 1000 )).$$    # `sleep <marker>` marks rank processes of this test
have_perftest=
command -v ucx_perftest >/dev/null && have_perftest=1

# ---- 1. environment, addresses, shapers, isolation -------------------------------------
# shellcheck disable=SC2016  # expanded by the ranks
body='set -e
echo "rank=$GCX_RANK size=$GCX_WORLD_SIZE root=$GCX_ROOT_ADDR:$GCX_ROOT_PORT" \
     "master=$MASTER_ADDR:$MASTER_PORT dev=$UCX_NET_DEVICES tls=$UCX_TLS" \
     "addr=$(ip -4 -o addr show dev eth0 | awk "{print \$4}")"
tc qdisc show dev eth0 | grep -q "tbf.*rate 100Mbit" && echo up-shaped
tc -n "$GCX_EMU_SWITCH_NETNS" qdisc show dev "$GCX_EMU_SWITCH_PORT" | grep -q "tbf.*rate 100Mbit" &&
    echo down-shaped
ip route get 192.0.2.1 >/dev/null 2>&1 || echo isolated
echo "cc=$(cat /proc/sys/net/ipv4/tcp_congestion_control)"'
run_emulate "$work/env" -n 3 --rate "$RATE" -- sh -c "$body"
finish "$work/env"
# emulate.sh gives the nodes cubic, or the host's default where cubic does not exist
sys_tcp=/proc/sys/net/ipv4
want_cc=cubic
grep -qw cubic "$sys_tcp/tcp_available_congestion_control" ||
    want_cc=$(cat "$sys_tcp/tcp_congestion_control")
ok=1
(( st == 0 )) || { ok=; fail "environment run exited with $st"; }
for i in 0 1 2; do
    want="[$i] rank=$i size=3 root=10.213.0.1:29500 master=10.213.0.1:29500 dev=eth0 tls=tcp,self addr=10.213.0.$(( i + 1 ))/24"
    grep -qxF "$want" "$work/env" || { ok=; fail "rank $i: expected line: $want"; }
    for what in up-shaped down-shaped isolated "cc=$want_cc"; do
        grep -qxF "[$i] $what" "$work/env" || { ok=; fail "rank $i: not $what"; }
    done
done
[[ -z $ok ]] || pass "3 ranks: env, addresses, tbf both ways, tcp $want_cc, no route outside the subnet"
[[ -n $ok ]] || cat "$work/env"
expect_clean "$run_pid" "normal exit"

# ---- 2. rates --------------------------------------------------------------------------
# in_band WHAT MBIT LO HI
in_band() {
    if [[ -n $2 ]] && awk -v m="$2" -v lo="$3" -v hi="$4" 'BEGIN { exit !(m >= lo && m <= hi) }'; then
        pass "$1: $2 Mbit/s in [$3, $4]"
    else
        fail "$1: '${2:-no result}' Mbit/s not in [$3, $4]"
        return 1
    fi
}

if [[ -z $have_perftest ]]; then
    echo "SKIP rate tests: ucx_perftest not found (Debian package ucx-utils)"
else
    run_emulate "$work/check" -n 2 --rate "$RATE" --check
    finish "$work/check"
    (( st == 0 )) || fail "--check exited with $st"
    # The first two lines are the links one at a time: rank 0 -> 1, then 1 -> 0.
    mapfile -t rates < <(sed -n 's/^\[emulate\] check rank .*(\([0-9.]*\) Mbit\/s).*/\1/p' "$work/check")
    in_band "--check rank 0 -> rank 1 at $RATE" "${rates[0]:-}" "$LO_MBIT" "$HI_MBIT" || cat "$work/check"
    in_band "--check rank 1 -> rank 0 at $RATE" "${rates[1]:-}" "$LO_MBIT" "$HI_MBIT" || cat "$work/check"
    expect_clean "$run_pid" "--check"

    for keep in up down none; do
        run_emulate "$work/one-$keep" -n 2 --rate "$RATE" -- "$BASH" "$here/selftest.sh" --rank-body "$keep"
        finish "$work/one-$keep"
        (( st == 0 )) || fail "one-shaper run ($keep) exited with $st"
        mbit=$(sed -n 's/^\[1\] MBIT //p' "$work/one-$keep")
        case $keep in
            up)   in_band "rank 1 upload shaper alone" "$mbit" "$LO_MBIT" "$HI_MBIT" ;;
            down) in_band "rank 0 download shaper alone" "$mbit" "$LO_MBIT" "$HI_MBIT" ;;
            none) in_band "no shaper (the band can fail)" "$mbit" "$FAST_MBIT" 1000000 ;;
        esac || cat "$work/one-$keep"
        expect_clean "$run_pid" "one-shaper run ($keep)"
    done
fi

# ---- 3. teardown on failure, signal, timeout, crash ------------------------------------
# A failing rank stops the others; the status is the failing rank's.
run_emulate "$work/fail" -n 3 -- sh -c "[ \$GCX_RANK = 1 ] && exit 7; exec sleep $marker"
finish "$work/fail"
if (( st == 7 )); then pass "failing rank: exit status 7"; else fail "failing rank: exit status $st, not 7"; cat "$work/fail"; fi
expect_clean "$run_pid" "failing rank"

# SIGINT reaches the ranks once; status 130.
run_emulate "$work/int" -n 2 -- sh -c "touch $work/up.\$GCX_RANK; exec sleep $marker"
if wait_for "$work/up.0" "$work/up.1" && launcher_pid "$work/int"; then
    kill -INT "$run_pid"
    finish "$work/int"
    if (( st == 130 )); then pass "SIGINT: exit status 130"; else fail "SIGINT: exit status $st, not 130"; cat "$work/int"; fi
else
    fail "SIGINT: ranks did not start"; finish "$work/int"; cat "$work/int"
fi
expect_clean "$run_pid" "SIGINT"

# --timeout, with ranks that ignore SIGTERM: SIGKILL after the grace period; status 124.
start=$SECONDS
run_emulate "$work/timeout" -n 2 --timeout 2 --grace 1 -- sh -c "trap '' TERM; sleep $marker"
finish "$work/timeout"
if (( st == 124 && SECONDS - start < 30 )); then
    pass "timeout, SIGTERM ignored: exit status 124 after $(( SECONDS - start )) s"
else
    fail "timeout: exit status $st after $(( SECONDS - start )) s"; cat "$work/timeout"
fi
expect_clean "$run_pid" "timeout"

# A launcher killed outright leaves its namespaces and ranks; --cleanup removes them.
rm -f "$work"/up.*
run_emulate "$work/crash" -n 2 -- sh -c "touch $work/up.\$GCX_RANK; exec sleep $marker"
if wait_for "$work/up.0" "$work/up.1" && launcher_pid "$work/crash"; then
    kill -KILL "$run_pid"
    finish "$work/crash"
    if [[ -n $(leftovers "$run_pid") ]]; then
        "$emulate" --cleanup -q || fail "--cleanup exited with $?"
        expect_clean "$run_pid" "crashed launcher, then --cleanup"
    else
        fail "crashed launcher left nothing behind: the crash was not simulated"
    fi
else
    fail "crash: ranks did not start"; finish "$work/crash"; cat "$work/crash"
fi

if (( failures )); then
    echo "FAIL: $failures check(s) failed"
    exit 1
fi
echo "PASS"
