#!/usr/bin/env bash
# emulate.sh: run an N-rank gcx job on an emulated cluster inside one Linux host.
#
# Idea: every rank is a "node" with its own network namespace and one NIC (eth0, a veth);
# the other ends of the veths (p0, p1, ...) are ports of a Linux bridge that lives in a
# dedicated "switch" namespace, so nothing is added to the host's own network namespace.
# Each link is rate-limited both ways with tc tbf (this kernel has no netem): on the rank's
# eth0 (what the rank sends) and on the bridge port (what the rank receives). Addresses come
# from a private /24 that exists only inside these namespaces, and there is no default
# route, so the ranks cannot reach anything but each other. UCX is told to use TCP over eth0.
# Rank i runs as `ip netns exec <ns_i> env GCX_RANK=i ... PROGRAM ARGS`, with the same
# rendezvous variables a real launcher would give (see README.md). Everything is torn down
# on exit, on failure and on SIGINT/SIGTERM; --cleanup removes leftovers of crashed runs.

# shellcheck disable=SC2317  # functions called by trap, poll and after look unreachable
set -euo pipefail

readonly PROG=${0##*/}
readonly NS_PREFIX=gcxemu          # namespaces are gcxemu-<pid of this script>-{sw,r0,r1,...}
readonly KERNEL_HZ_FALLBACK=100    # used when /proc/config.gz does not say (the safe side)
readonly PERFTEST_PORT=13337       # ucx_perftest's own port, inside the rank namespaces

# ---- options ---------------------------------------------------------------------------
nranks=
rate=1gbit
burst=            # empty: derived from the rate, see default_burst
latency=20ms
cc=cubic          # TCP congestion control of every node; "host" keeps the host's default
cc_given=         # set by --cc: then an unavailable algorithm is an error, not a fallback
subnet=10.213.0   # rank i gets <subnet>.<i+1>/24
root_port=29500
keep_going=
tag_output=1
check=
timeout_s=
grace_s=5
quiet=
cleanup_mode=

usage() {
    cat <<EOF
Usage: $PROG -n N [options] [--] PROGRAM [ARGS...]
       $PROG -n N [options] --check [-- PROGRAM [ARGS...]]
       $PROG --cleanup

Runs N copies of PROGRAM, each in its own network namespace, joined by a bridge; every
link is limited to RATE in both directions with tc tbf; UCX uses TCP only. Needs root.

Options:
  -n, --ranks N       number of ranks (1..250)
  --rate RATE         link rate in tc units (1gbit, 200mbit, 10gbit; 125mbps is bytes/s),
                      or "none" for unlimited veths (default: $rate)
  --burst SIZE        tbf bucket size in tc units (default: max(rate/HZ, 64kb), see README)
  --latency TIME      tbf queue bound: longest a packet may wait in the shaper (default:
                      $latency); this is NOT a propagation delay (no netem here)
  --cc NAME           TCP congestion control of the emulated nodes (default: $cc, Linux's
                      default); "host" keeps the host's (see README: bbr's ProbeRTT stalls
                      long-lived ring flows)
  --subnet A.B.C      private /24 used inside the namespaces (default: $subnet)
  --port PORT         GCX_ROOT_PORT / MASTER_PORT for the rendezvous (default: $root_port)
  --check             measure every link with ucx_perftest (both directions) before PROGRAM;
                      without PROGRAM, only measure
  --keep-going        do not stop the other ranks when one fails
  --timeout SEC       stop all ranks after SEC seconds (exit status 124)
  --grace SEC         after SIGTERM, wait SEC seconds before SIGKILL (default: $grace_s)
  --no-prefix         do not prefix each output line with [rank]
  -q, --quiet         no [emulate] progress messages
  --cleanup           remove what crashed runs of this tool left (namespaces with their
                      processes, temporary folders), then exit
  -h, --help          this text

Each rank sees GCX_RANK, GCX_WORLD_SIZE, GCX_LOCAL_RANK=0, GCX_LOCAL_SIZE=1, GCX_ROOT_ADDR,
GCX_ROOT_PORT, MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
UCX_TLS=tcp,self, UCX_NET_DEVICES=eth0, and GCX_EMU_NETNS, GCX_EMU_SWITCH_NETNS,
GCX_EMU_SWITCH_PORT (to reshape its own link at run time with tc).
Exit status: 0 if all ranks succeeded, else the first failing rank's status; 2 usage or
setup error; 124 timeout; 128+n after signal n.
EOF
}

die() { echo "$PROG: $*" >&2; exit 2; }
log() { [[ -n $quiet ]] || echo "[emulate] $*" >&2; }

# ---- helpers ---------------------------------------------------------------------------

# rate_bytes RATE: print a tc rate in bytes/s (integer); fail on anything tc would not take.
rate_bytes() {
    local r=${1,,} mult
    [[ $r =~ ^([0-9]+([.][0-9]+)?)([a-z]*)$ ]] || return 1
    case ${BASH_REMATCH[3]} in
        ''|bit) mult=0.125 ;;
        kbit) mult=125 ;;            kibit) mult=128 ;;
        mbit) mult=125000 ;;         mibit) mult=131072 ;;
        gbit) mult=125000000 ;;      gibit) mult=134217728 ;;
        tbit) mult=125000000000 ;;   tibit) mult=137438953472 ;;
        bps)  mult=1 ;;
        kbps) mult=1000 ;;           kibps) mult=1024 ;;
        mbps) mult=1000000 ;;        mibps) mult=1048576 ;;
        gbps) mult=1000000000 ;;     gibps) mult=1073741824 ;;
        tbps) mult=1000000000000 ;;  tibps) mult=1099511627776 ;;
        *) return 1 ;;
    esac
    awk -v n="${BASH_REMATCH[1]}" -v m="$mult" 'BEGIN { printf "%.0f\n", n * m }'
}

# kernel_hz: CONFIG_HZ of the running kernel, or a safe fallback.
kernel_hz() {
    local hz=
    if [[ -r /proc/config.gz ]] && command -v zcat >/dev/null; then
        hz=$(zcat /proc/config.gz 2>/dev/null | sed -n 's/^CONFIG_HZ=\([0-9]*\)$/\1/p') || hz=
    fi
    echo "${hz:-$KERNEL_HZ_FALLBACK}"
}

# default_burst BYTES_PER_S: the tbf bucket. tbf needs at least rate/HZ (what one timer tick
# must release); below 64 KiB a single TSO packet no longer fits and tbf has to segment it.
default_burst() {
    local b=$(( $1 / $(kernel_hz) ))
    (( b >= 65536 )) || b=65536
    echo "$b"
}

# poll TENTHS COMMAND...: run COMMAND every 0.1 s until it succeeds, at most TENTHS times.
poll() {
    local tenths=$1; shift
    until "$@"; do
        (( tenths-- > 0 )) || return 1
        sleep 0.1
    done
}

rank_ip() { echo "$subnet.$(( $1 + 1 ))"; }

# ns_pids NS...: pids of every process inside the given namespaces.
ns_pids() {
    local ns
    for ns in "$@"; do ip netns pids "$ns" 2>/dev/null || true; done
}

# signal_ns SIG NS...: send SIG to every process inside the given namespaces.
signal_ns() {
    local sig=$1 pid; shift
    for pid in $(ns_pids "$@"); do kill -s "$sig" "$pid" 2>/dev/null || true; done
}

# ns_empty NS...: no process is left in the namespaces.
ns_empty() { [[ -z $(ns_pids "$@") ]]; }

# stop_ns NS...: SIGTERM, then SIGKILL after the grace period.
stop_ns() {
    signal_ns TERM "$@"
    poll $(( grace_s * 10 )) ns_empty "$@" && return 0
    signal_ns KILL "$@"
    poll 50 ns_empty "$@" || true
}

# ---- cleanup ---------------------------------------------------------------------------

rank_nss=()       # the rank namespaces, by rank
created_ns=()     # namespaces this run made, in creation order
watchdogs=()      # pids of timer subshells (see after)
taggers=()        # pids of the output-tagging jobs
tmp_dir=          # fifos of the taggers, results of --check

delete_ns() {
    local i
    [[ $# -gt 0 ]] || return 0
    stop_ns "$@"
    for (( i = $# ; i >= 1 ; i-- )); do
        ip netns delete "${!i}" 2>/dev/null || log "could not delete namespace ${!i}"
    done
}

on_exit() {
    local rc=$? pid
    set +e
    trap - EXIT INT TERM USR1
    for pid in "${watchdogs[@]}"; do kill "$pid" 2>/dev/null; done
    if (( ${#created_ns[@]} )); then
        delete_ns "${created_ns[@]}"
        log "removed namespaces $ns_base-*"
    fi
    for pid in "${taggers[@]}"; do wait "$pid"; done
    [[ -z $tmp_dir ]] || rm -rf "$tmp_dir"
    exit "$rc"
}

# run_alive PID: is PID a live run of this tool (or of its selftest)?
run_alive() {
    [[ -r /proc/$1/cmdline ]] && tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" |
        grep -qE 'emulate\.sh|selftest\.sh'
}

# cleanup_stale: delete the gcxemu-<pid>-* namespaces and temporary folders whose <pid> is
# not a live run of this tool, with the processes left inside the namespaces.
cleanup_stale() {
    local name pid stale=() dir
    while read -r name _; do
        [[ $name =~ ^$NS_PREFIX-([0-9]+)- ]] || continue
        pid=${BASH_REMATCH[1]}
        if run_alive "$pid"; then
            log "keeping $name: its run (pid $pid) is alive"
        else
            stale+=("$name")
        fi
    done < <(ip netns list)
    if (( ${#stale[@]} )); then
        log "removing ${stale[*]}"
        delete_ns "${stale[@]}"
    fi
    for dir in "${TMPDIR:-/tmp}/$NS_PREFIX"-*; do
        [[ -d $dir && ${dir##*/} =~ ^$NS_PREFIX-([0-9]+)[.] ]] || continue
        run_alive "${BASH_REMATCH[1]}" && continue
        log "removing $dir"
        rm -rf "$dir"
        stale+=("$dir")
    done
    (( ${#stale[@]} )) || log "nothing to clean up"
}

# ---- setup -----------------------------------------------------------------------------

link_up() { ip -n "$1" link show eth0 | grep -q LOWER_UP; }

# shape NS DEV: tbf on DEV's egress inside NS.
shape() {
    [[ $rate == none ]] && return 0
    tc -n "$1" qdisc add dev "$2" root tbf rate "$rate" burst "$burst" latency "$latency" ||
        die "tc tbf rate $rate burst $burst latency $latency failed on $2 in $1"
}

add_ns() {
    if [[ -e /run/netns/$1 ]]; then
        die "network namespace $1 exists already: a crashed run? try: $PROG --cleanup"
    fi
    ip netns add "$1" || die "cannot create network namespace $1 (not permitted here?)"
    created_ns+=("$1")
    ip -n "$1" link set lo up
    # IPv6 would only add DAD/MLD chatter on the links; the job runs on IPv4.
    ip netns exec "$1" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6' 2>/dev/null || true
}

# allow_cc: make $cc selectable inside network namespaces. A namespace may only pick an
# algorithm from the host's net.ipv4.tcp_allowed_congestion_control; one that is available
# (or loadable) but not allowed is appended to that list, which changes no default.
allow_cc() {
    local sys=/proc/sys/net/ipv4 allowed
    [[ $cc == host ]] && return 0
    if ! grep -qw "$cc" "$sys/tcp_available_congestion_control"; then
        modprobe "tcp_$cc" 2>/dev/null || true
        if ! grep -qw "$cc" "$sys/tcp_available_congestion_control"; then
            [[ -n $cc_given ]] ||
                { echo "$PROG: $cc not available, the nodes keep the host's congestion control" >&2
                  cc=host; return 0; }
            die "--cc $cc: not available here ($(cat "$sys/tcp_available_congestion_control"))"
        fi
    fi
    allowed=$(cat "$sys/tcp_allowed_congestion_control")
    if ! grep -qw "$cc" <<<"$allowed"; then
        log "allowing $cc in namespaces: net.ipv4.tcp_allowed_congestion_control = $allowed $cc"
        echo "$allowed $cc" > "$sys/tcp_allowed_congestion_control" ||
            die "--cc $cc: cannot add it to net.ipv4.tcp_allowed_congestion_control"
    fi
}

# set_cc NS: the node's TCP congestion control (a per-namespace setting).
set_cc() {
    [[ $cc == host ]] && return 0
    ip netns exec "$1" sh -c "echo $cc > /proc/sys/net/ipv4/tcp_congestion_control" ||
        die "cannot set tcp_congestion_control=$cc in $1"
}

setup() {
    local i ns
    allow_cc
    add_ns "$sw_ns"
    ip -n "$sw_ns" link add br0 type bridge
    ip -n "$sw_ns" link set br0 up
    for (( i = 0 ; i < nranks ; i++ )); do
        ns=${rank_nss[i]}
        add_ns "$ns"
        set_cc "$ns"
        # The veth is born in the switch namespace and its peer goes straight into the rank's.
        ip -n "$sw_ns" link add "p$i" type veth peer name eth0 netns "$ns"
        ip -n "$sw_ns" link set "p$i" master br0 up
        ip -n "$ns" addr add "$(rank_ip "$i")/24" dev eth0
        ip -n "$ns" link set eth0 up
        shape "$ns" eth0          # rank -> switch: what rank i sends
        shape "$sw_ns" "p$i"      # switch -> rank: what rank i receives
    done
    # A veth has carrier once both ends are up; wait for it, so that no first connect waits.
    for ns in "${rank_nss[@]}"; do
        poll 50 link_up "$ns" || die "eth0 in $ns did not come up"
    done
    if [[ $rate == none ]]; then
        log "$nranks ranks on bridge br0 in $sw_ns, $subnet.1-$nranks/24, links not limited"
    else
        log "$nranks ranks on bridge br0 in $sw_ns, $subnet.1-$nranks/24," \
            "each link tbf rate $rate burst $burst latency $latency both ways, tcp $cc"
    fi
}

# ---- link check ------------------------------------------------------------------------

# perftest RANK [SERVER_IP]: ucx_perftest tag_bw in rank RANK's namespace over TCP on eth0;
# with SERVER_IP it is the client, which is the side that sends. About 2 s of traffic at
# the nominal rate: 5..50 messages of 4 MiB, 2 more to warm up; killed after 3x that + 30 s.
perftest() {
    local size=4194304 iters=50 secs=30
    if (( rate_Bps > 0 )); then
        iters=$(( rate_Bps * 2 / size ))
        (( iters >= 5 )) || iters=5
        (( iters <= 50 )) || iters=50
        secs=$(( secs + 3 * (iters + 2) * size / rate_Bps ))
    fi
    ip netns exec "${rank_nss[$1]}" env UCX_TLS=tcp UCX_NET_DEVICES=eth0 timeout "$secs" \
        ucx_perftest ${2:+"$2"} -p "$PERFTEST_PORT" -t tag_bw -s "$size" -n "$iters" -w 2
}

perftest_listens() {
    [[ -n $(ip netns exec "${rank_nss[$1]}" ss -Hltn "sport = :$PERFTEST_PORT") ]]
}

# measure SRC...: rank SRC sends to rank SRC+1 (mod N), for all given SRC at the same time.
measure() {
    local src dst pid pids=() failed=
    for src in "$@"; do
        dst=$(( (src + 1) % nranks ))
        perftest "$dst" >/dev/null 2>&1 &
        pids+=($!)
    done
    for src in "$@"; do
        dst=$(( (src + 1) % nranks ))
        poll 50 perftest_listens "$dst" || die "ucx_perftest server in rank $dst did not start"
    done
    for src in "$@"; do
        perftest "$src" "$(rank_ip $(( (src + 1) % nranks )))" >"$tmp_dir/check.$src" 2>&1 &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
    for src in "$@"; do
        # "Final: iters lat50 lat_avg lat_overall bw_avg bw_overall ...", in MiB/s.
        awk -v s="$src" -v d=$(( (src + 1) % nranks )) -v r="$rate" -v bps="$rate_Bps" '
            $1 == "Final:" { m = $7 }
            END {
                if (m == "") { printf "[emulate] check rank %d -> rank %d: FAILED\n", s, d; exit 1 }
                pct = bps > 0 ? sprintf(" = %.1f%% of %s", 100 * m * 1048576 / bps, r) : ""
                printf "[emulate] check rank %d -> rank %d: %.2f MiB/s (%.1f Mbit/s)%s\n",
                       s, d, m, m * 1048576 * 8 / 1e6, pct
            }' "$tmp_dir/check.$src" || { failed=1; cat "$tmp_dir/check.$src" >&2; }
    done
    [[ -z $failed ]] || die "ucx_perftest failed"
}

# check_links: rank i sends to rank i+1, first one link at a time, then all at once (the
# traffic of a ring allreduce). Every rank sends once and receives once, so every tbf is on
# the path of one measurement (with 2 ranks: 0 -> 1 and 1 -> 0).
check_links() {
    local i all=()
    command -v ucx_perftest >/dev/null || die "--check needs ucx_perftest (Debian package ucx-utils)"
    (( nranks >= 2 )) || die "--check needs at least 2 ranks"
    log "checking links with ucx_perftest tag_bw, 4 MiB messages, UCX_TLS=tcp; one at a time:"
    for (( i = 0 ; i < nranks ; i++ )); do
        measure "$i"
        all+=("$i")
    done
    log "all at once (every rank sends and receives):"
    measure "${all[@]}"
}

# ---- running the ranks -----------------------------------------------------------------

declare -A rank_of=()   # job pid -> rank
stop_reason=            # set once the ranks are being stopped
exit_rc=0

# rank_exec I PROGRAM ARGS...: the rank's process; it ends up as PROGRAM itself (setsid,
# ip and env all exec). setsid gives the rank its own session and process group, so a
# terminal's Ctrl-C reaches this script only, once, and on_signal forwards it; env resets
# SIGINT/SIGQUIT, which bash ignores in background commands of a script.
rank_exec() {
    local i=$1; shift
    exec setsid ip netns exec "${rank_nss[i]}" env --default-signal=INT,QUIT \
        GCX_RANK="$i" GCX_WORLD_SIZE="$nranks" GCX_LOCAL_RANK=0 GCX_LOCAL_SIZE=1 \
        GCX_ROOT_ADDR="$(rank_ip 0)" GCX_ROOT_PORT="$root_port" \
        MASTER_ADDR="$(rank_ip 0)" MASTER_PORT="$root_port" \
        RANK="$i" WORLD_SIZE="$nranks" LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
        UCX_TLS=tcp,self UCX_NET_DEVICES=eth0 \
        GCX_EMU_NETNS="${rank_nss[i]}" GCX_EMU_SWITCH_NETNS="$sw_ns" GCX_EMU_SWITCH_PORT="p$i" \
        "$@" </dev/null
}

# tagger I: copy stdin to stdout, each line prefixed with [I]. It ignores INT and TERM and
# ends when the rank's end of the pipe closes, so no output is lost.
tagger() {
    trap '' INT TERM
    exec sed -u "s/^/[$1] /"
}

start_rank() {
    local i=$1; shift
    if [[ -n $tag_output ]]; then
        # stdout and stderr stay apart, through a fifo each to a tagger, a job waited for
        # before exit. (Not process substitutions: bash loses track of them at times.)
        mkfifo "$tmp_dir/out.$i" "$tmp_dir/err.$i"
        tagger "$i" <"$tmp_dir/out.$i" &
        taggers+=($!)
        tagger "$i" <"$tmp_dir/err.$i" >&2 &
        taggers+=($!)
        rank_exec "$i" "$@" >"$tmp_dir/out.$i" 2>"$tmp_dir/err.$i" &
    else
        rank_exec "$i" "$@" &
    fi
    rank_of[$!]=$i
}

# after SECONDS COMMAND...: run COMMAND in the background after SECONDS (killed on exit).
after() {
    local secs=$1; shift
    # The subshell takes its sleep along when on_exit kills it; no output, so a killed
    # timer never holds a caller's pipe open.
    (
        trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
        sleep "$secs" & sleeper=$!
        wait "$sleeper"
        "$@"
    ) >/dev/null 2>&1 &
    watchdogs+=($!)
}

# stop_ranks WHY [SIG]: send SIG (default TERM) to every process in the rank namespaces,
# and SIGKILL to what is left after the grace period. Only the first call does anything.
stop_ranks() {
    [[ -z $stop_reason ]] || return 0
    stop_reason=$1
    log "$1: stopping the ranks (SIG${2:-TERM}, SIGKILL after ${grace_s} s)"
    signal_ns "${2:-TERM}" "${rank_nss[@]}"
    after "$grace_s" signal_ns KILL "${rank_nss[@]}"
}

# on_signal SIG: before the ranks start, just exit (on_exit cleans up); then forward SIG
# to the ranks; a second signal kills them at once.
on_signal() {
    local num
    num=$(kill -l "$1")
    (( exit_rc != 0 )) || exit_rc=$(( 128 + num ))
    if (( ${#rank_of[@]} == 0 )); then
        log "caught SIG$1"
        exit "$exit_rc"
    fi
    if [[ -n $stop_reason ]]; then
        log "caught SIG$1 while stopping: killing the ranks"
        signal_ns KILL "${rank_nss[@]}"
        return 0
    fi
    stop_ranks "caught SIG$1" "$1"
}

on_timeout() {
    (( exit_rc != 0 )) || exit_rc=124
    stop_ranks "timeout after ${timeout_s} s"
}

# rank_done PID STATUS: bookkeeping for a rank that ended.
rank_done() {
    local i=${rank_of[$1]}
    unset "rank_of[$1]"
    (( $2 != 0 )) || return 0
    log "rank $i exited with status $2"
    (( exit_rc != 0 )) || exit_rc=$2
    [[ -n $keep_going ]] || stop_ranks "rank $i failed"
}

# reap_gone: bookkeeping for every rank that has ended: bash reaps its children as they
# end, and a plain `wait PID` still has the status of one it reaped.
reap_gone() {
    local pid st
    for pid in "${!rank_of[@]}"; do
        kill -0 "$pid" 2>/dev/null && continue
        st=0
        wait "$pid" 2>/dev/null || st=$?
        rank_done "$pid" "$st"
    done
}

run_ranks() {
    local i
    for (( i = 0 ; i < nranks ; i++ )); do start_rank "$i" "$@"; done
    [[ -z $timeout_s ]] || after "$timeout_s" kill -USR1 $$
    # Poll (50 ms) rather than `wait -n PIDS`: bash 5.2's can block for good
    # when a listed rank already ended and bash reaped it meanwhile (ranks that
    # exit together: chaos runs 41 and 96 "hung" 115 s with every rank gone),
    # and a trapped signal that interrupts it can hand back the signal's status
    # as the rank's (a rank "exited with status 140" under a SIGUSR2 tick).
    while (( ${#rank_of[@]} )); do
        reap_gone
        if (( ${#rank_of[@]} )); then sleep 0.05; fi
    done
}

# ---- main ------------------------------------------------------------------------------

parse_args() {
    while (( $# )); do
        case $1 in
            -n|--ranks|--rate|--burst|--latency|--cc|--subnet|--port|--timeout|--grace)
                [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value" ;;
        esac
        case $1 in
            -n|--ranks) nranks=$2; shift ;;
            --rate) rate=$2; shift ;;
            --burst) burst=$2; shift ;;
            --latency) latency=$2; shift ;;
            --cc) cc=$2; cc_given=1; shift ;;
            --subnet) subnet=$2; shift ;;
            --port) root_port=$2; shift ;;
            --timeout) timeout_s=$2; shift ;;
            --grace) grace_s=$2; shift ;;
            --check) check=1 ;;
            --keep-going) keep_going=1 ;;
            --no-prefix) tag_output= ;;
            -q|--quiet) quiet=1 ;;
            --cleanup) cleanup_mode=1 ;;
            -h|--help) usage; exit 0 ;;
            --) shift; break ;;
            -*) die "unknown option $1 (see --help)" ;;
            *) break ;;
        esac
        shift
    done
    program=("$@")
}

validate() {
    if ! [[ $nranks =~ ^[0-9]+$ ]] || (( nranks < 1 || nranks > 250 )); then
        die "-n N: 1..250 ranks"
    fi
    if ! [[ $root_port =~ ^[0-9]+$ ]] || (( root_port < 1 || root_port > 65535 ||
                                             root_port == PERFTEST_PORT )); then
        die "--port: 1..65535, not $PERFTEST_PORT"
    fi
    [[ $grace_s =~ ^[0-9]+$ ]] || die "--grace: whole seconds"
    [[ $cc =~ ^[a-z0-9_]+$ ]] || die "--cc: a congestion control name such as cubic, not '$cc'"
    [[ -z $timeout_s || $timeout_s =~ ^[0-9]+$ ]] || die "--timeout: whole seconds"
    # Only RFC 1918 space: these addresses must never mean anything outside the namespaces.
    local o='(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])'
    [[ $subnet =~ ^(10\.$o\.$o|172\.(1[6-9]|2[0-9]|3[01])\.$o|192\.168\.$o)$ ]] ||
        die "--subnet must be a private /24 prefix such as 10.213.0"
    rate_Bps=0
    if [[ $rate != none ]]; then
        rate_Bps=$(rate_bytes "$rate") || rate_Bps=0
        (( rate_Bps > 0 )) || die "--rate: not a tc rate: $rate"
        [[ -n $burst ]] || burst=$(default_burst "$rate_Bps")
    fi
    (( ${#program[@]} )) || [[ -n $check ]] || die "no PROGRAM given (see --help)"
}

need_host() {
    (( EUID == 0 )) || die "needs root (network namespaces, veth, tc); run it with sudo"
    local t
    for t in ip tc; do
        command -v "$t" >/dev/null || die "'$t' not found: install the Debian package iproute2"
    done
}

main() {
    local i
    parse_args "$@"
    if [[ -n $cleanup_mode ]]; then
        need_host
        cleanup_stale
        exit 0
    fi
    validate
    need_host
    ns_base=$NS_PREFIX-$$
    sw_ns=$ns_base-sw
    for (( i = 0 ; i < nranks ; i++ )); do rank_nss+=("$ns_base-r$i"); done
    trap on_exit EXIT
    trap 'on_signal INT' INT
    trap 'on_signal TERM' TERM
    trap on_timeout USR1
    tmp_dir=$(mktemp -d -t "$ns_base.XXXXXX")
    setup
    [[ -z $check ]] || check_links
    if (( ${#program[@]} )); then
        run_ranks "${program[@]}"
    fi
    exit "$exit_rc"
}

main "$@"
