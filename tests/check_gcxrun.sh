#!/usr/bin/env bash
# check_gcxrun.sh GCXRUN - gcxrun's launching (its binding is
# check_gcxrun_bind.sh's). Checks, in order:
#  - environment: the ranks see GCX_RANK 0..N-1 once each, GCX_WORLD_SIZE=N,
#    GCX_LOCAL_RANK=GCX_RANK and GCX_LOCAL_SIZE=N (one host), one
#    GCX_ROOT_ADDR/GCX_ROOT_PORT; rank 0 alone gets GCX_BOOTSTRAP_FD, a socket
#    listening on that address and port (a stale one in gcxrun's environment
#    does not reach the other ranks); one GCX_JOB_TOKEN of 32 hex digits
#    for all ranks, another for the next job, the caller's when it set one;
#  - exit status: 0 when every rank succeeds, 3 when a rank exits 3, 138
#    (128+SIGUSR1) when a rank dies of SIGUSR1;
#  - stop-all: when a rank fails the others (sleeping 60 s) get SIGTERM, gcxrun
#    returns the failing rank's status well before 60 s, nobody is left;
#  - --keep-going: the other ranks run to their end, the status is still the
#    failing rank's;
#  - SIGTERM and SIGINT to gcxrun reach every rank; gcxrun exits non-zero and
#    leaves nobody;
#  - a rank that survives SIGTERM gets it, then SIGKILL no sooner than the grace
#    period (GCXRUN_KILL_GRACE_S, read from gcxrun.c, 5 if not found there;
#    skipped if over 10 s, which would not fit the 60 s test timeout);
#  - --timeout S: the ranks (sleeping 60 s) get SIGTERM, exit 124 no sooner
#    than S and well before 60 s, no rank left; with -t too when a rank's own
#    child outlives it holding the output pipe (a shell wrapper's sleep; that
#    child is the rank's business, gcxrun signals ranks only);
#  - -t: every stdout/stderr line is "[rank] " + one whole line of that rank,
#    in the rank's order, none cut by another rank's output (4 ranks x 200
#    lines of 100 chars), and an unterminated last line is still printed;
#  - bad usage (no -n, -n 0/-1/abc, -n without a value, no program) exits 2
#    with a message on stderr and runs nothing.
# Waits are polling loops with bounds far above what a loaded 2-core box
# needs; the time bounds are hang checks (15 s against 60 s sleeps), the
# lower bounds (grace, --timeout) cannot be missed by a slow machine.
set -euo pipefail
gcxrun=$1
fail() { echo "FAIL: $*" >&2; exit 1; }

src=$(dirname "$0")/../programs/gcxrun/gcxrun.c
grace=$(sed -n 's/^#define GCXRUN_KILL_GRACE_S \([0-9.]*\).*/\1/p' "$src" 2>/dev/null || true)
grace=${grace:-5}

tmp=$(mktemp -d)
gpid=
cleanup() {
    local f p
    set +e
    if [[ -n $gpid ]]; then
        kill -KILL "$gpid" 2>/dev/null
        wait "$gpid" 2>/dev/null
    fi
    # whatever a failed check left behind: ranks, their children
    for f in "$tmp"/*/pid.* "$tmp"/*/child.*; do
        p=$(cat "$f" 2>/dev/null)
        [[ -n $p ]] && kill -KILL "$p" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

# The rank program: rank.sh DIR MODE0 MODE, rank 0 runs MODE0, the others MODE.
# A rank announces itself by writing its PID to DIR/pid.RANK (atomically).
cat >"$tmp/rank.sh" <<'EOF'
#!/usr/bin/env bash
set -u
dir=$1 r=$GCX_RANK
if [[ $r -eq 0 ]]; then mode=$2; else mode=$3; fi
announce() { echo $$ >"$dir/pid.$r.tmp" && mv "$dir/pid.$r.tmp" "$dir/pid.$r"; }
# until FILE...: waits (30 s at most) until every FILE exists
until_there() {
    local i f ok
    for ((i = 0; i < 300; ++i)); do
        ok=1
        for f in "$@"; do [[ -e $f ]] || ok=0; done
        [[ $ok -eq 1 ]] && return 0
        sleep 0.1
    done
    return 1
}
case $mode in
env)    # the GCX_ environment, and what rank 0's bootstrap fd is
    {
        env | grep '^GCX_' | sort
        if [[ -n ${GCX_BOOTSTRAP_FD:-} ]]; then
            ino=$(readlink "/proc/$$/fd/$GCX_BOOTSTRAP_FD" | sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p')
            # local address and state of that socket: "0100007F:PORT 0A"
            echo "sock=$(awk -v i="${ino:-none}" '$10 == i {print $2, $4}' /proc/net/tcp)"
        fi
    } >"$dir/env.$$" ;;
fail)   # fails once every other rank is up
        others=()
        for ((i = 1; i < GCX_WORLD_SIZE; ++i)); do others+=("$dir/pid.$i"); done
        until_there "${others[@]}"
        touch "$dir/failed"
        exit 3 ;;
finish) # runs on past the failure, then marks its end
        announce
        until_there "$dir/failed"
        sleep 1
        touch "$dir/done.$r" ;;
trap)   # records a forwarded signal, then ends
        trap 'echo TERM >"$dir/got.$r"; kill $sp; exit 0' TERM
        trap 'echo INT >"$dir/got.$r"; kill $sp; exit 0' INT
        sleep 60 &
        sp=$!
        echo $sp >"$dir/child.$r"
        announce
        wait $sp ;;
stubborn) # survives SIGTERM
        trap 'echo TERM >"$dir/got.$r"' TERM
        announce
        while :; do sleep 0.2; done ;;
wrapper) # a shell whose child outlives it, holding its stdout
        sleep 60 &
        echo $! >"$dir/child.$r"
        announce
        wait ;;
lines)  awk -v r="$r" 'BEGIN {
            for (i = 0; i < 200; ++i) {
                s = sprintf("rank %d line %03d ", r, i)
                while (length(s) < 100) s = s "x"
                print s
            }
            printf "rank %d end", r
        }'
        echo "rank $r stderr" >&2 ;;
esac
EOF
chmod +x "$tmp/rank.sh"

now() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }  # ms
# secs MS: "12.345"
secs() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

# launch NAME GCXRUN-ARGS...: starts gcxrun in the background in $tmp/NAME
# (stdout in out, stderr in err), sets dir, gpid and t0
launch() {
    dir=$tmp/$1
    shift
    mkdir "$dir"
    t0=$(now)
    "$gcxrun" "$@" >"$dir/out" 2>"$dir/err" &
    gpid=$!
}
# finish WHAT LIMIT_S: waits for gcxrun (LIMIT_S at most, else fails),
# sets rc and ms (its run time)
finish() {
    local i
    for ((i = 0; i < $2 * 10; ++i)); do
        kill -0 "$gpid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$gpid" 2>/dev/null && fail "$1: gcxrun still running after $2 s"
    rc=0
    wait "$gpid" || rc=$?
    gpid=
    ms=$(($(now) - t0))
}
# wait_pids WHAT N: waits (30 s at most) until ranks 0..N-1 announced themselves
wait_pids() {
    local i r ok
    for ((i = 0; i < 300; ++i)); do
        ok=1
        for ((r = 0; r < $2; ++r)); do [[ -e $dir/pid.$r ]] || ok=0; done
        [[ $ok -eq 1 ]] && return 0
        sleep 0.1
    done
    fail "$1: not all $2 ranks started within 30 s"
}
# none_alive WHAT: no rank that announced itself in $dir is still running
none_alive() {
    local f
    for f in "$dir"/pid.*; do
        [[ -f $f ]] || continue
        ! kill -0 "$(<"$f")" 2>/dev/null ||
            fail "$1: rank ${f##*.} (pid $(<"$f")) still running after gcxrun returned"
    done
}
expect_rc() { [[ $rc -eq $2 ]] || fail "$1: gcxrun exited $rc, expected $2; its stderr: $(<"$dir/err")"; }
# within WHAT S: gcxrun took less than S seconds
within() { [[ $ms -lt $(($2 * 1000)) ]] || fail "$1: gcxrun took $(secs $ms) s, expected < $2 s"; }

# --- environment
n=3
launch env -n $n -- "$tmp/rank.sh" "$tmp/env" env env
finish environment 30
expect_rc environment 0
files=("$dir"/env.*)
[[ ${#files[@]} -eq $n && -f ${files[0]} ]] || fail "environment: ${#files[@]} ranks reported, expected $n"
get() { sed -n "s/^$2=//p" "$1"; }
ranks=
for f in "${files[@]}"; do
    r=$(get "$f" GCX_RANK)
    ranks+="$r "
    [[ $(get "$f" GCX_WORLD_SIZE) == "$n" ]] || fail "environment: rank $r: GCX_WORLD_SIZE='$(get "$f" GCX_WORLD_SIZE)', expected $n"
    [[ $(get "$f" GCX_LOCAL_RANK) == "$r" ]] || fail "environment: rank $r: GCX_LOCAL_RANK='$(get "$f" GCX_LOCAL_RANK)', expected $r (one host)"
    [[ $(get "$f" GCX_LOCAL_SIZE) == "$n" ]] || fail "environment: rank $r: GCX_LOCAL_SIZE='$(get "$f" GCX_LOCAL_SIZE)', expected $n"
    addr=$(get "$f" GCX_ROOT_ADDR) port=$(get "$f" GCX_ROOT_PORT)
    [[ $addr =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "environment: rank $r: GCX_ROOT_ADDR='$addr' is not an IPv4 address"
    [[ $port =~ ^[0-9]+$ && $port -ge 1 && $port -le 65535 ]] || fail "environment: rank $r: GCX_ROOT_PORT='$port' is not a port"
    [[ $r -eq 0 ]] || continue
    root=$addr:$port
    [[ $(get "$f" GCX_BOOTSTRAP_FD) =~ ^[0-9]+$ ]] || fail "environment: rank 0: GCX_BOOTSTRAP_FD='$(get "$f" GCX_BOOTSTRAP_FD)', expected an fd"
    # the bootstrap fd listens (state 0A) on 127.0.0.1 (0100007F):GCX_ROOT_PORT
    want=$(printf '0100007F:%04X 0A' "$port")
    [[ $(get "$f" sock) == "$want" && $addr == 127.0.0.1 ]] ||
        fail "environment: rank 0's GCX_BOOTSTRAP_FD is not a socket listening on $addr:$port (/proc/net/tcp: '$(get "$f" sock)', expected '$want')"
done
[[ $(tr ' ' '\n' <<<"$ranks" | grep . | sort -n | tr '\n' ' ') == "0 1 2 " ]] ||
    fail "environment: GCX_RANK values '$ranks', expected 0 1 2 once each"
for f in "${files[@]}"; do
    r=$(get "$f" GCX_RANK)
    [[ $(get "$f" GCX_ROOT_ADDR):$(get "$f" GCX_ROOT_PORT) == "$root" ]] ||
        fail "environment: rank $r's root $(get "$f" GCX_ROOT_ADDR):$(get "$f" GCX_ROOT_PORT) != rank 0's $root"
    [[ $r -eq 0 || -z $(get "$f" GCX_BOOTSTRAP_FD) ]] ||
        fail "environment: rank $r has GCX_BOOTSTRAP_FD='$(get "$f" GCX_BOOTSTRAP_FD)' (rank 0's alone)"
done
# the job token: one per job, random, the caller's if set
token=$(get "${files[0]}" GCX_JOB_TOKEN)
[[ $token =~ ^[0-9a-f]{32}$ ]] || fail "environment: GCX_JOB_TOKEN='$token', expected 32 hex digits"
for f in "${files[@]}"; do
    [[ $(get "$f" GCX_JOB_TOKEN) == "$token" ]] ||
        fail "environment: rank $(get "$f" GCX_RANK)'s GCX_JOB_TOKEN differs from another rank's"
done
# shellcheck disable=SC2016 # expanded by the rank
next=$("$gcxrun" -n 1 -- bash -c 'echo $GCX_JOB_TOKEN')
[[ $next =~ ^[0-9a-f]{32}$ && $next != "$token" ]] ||
    fail "environment: the next job's GCX_JOB_TOKEN '$next' is not a new one (was '$token')"
# a stale GCX_BOOTSTRAP_FD in gcxrun's own environment reaches nobody but rank 0, replaced;
# a GCX_JOB_TOKEN there is every rank's
dir=$tmp/env-stale
mkdir "$dir"
GCX_BOOTSTRAP_FD=99 GCX_JOB_TOKEN=callers-token "$gcxrun" -n 2 -- "$tmp/rank.sh" "$dir" env env 2>"$dir/err" ||
    fail "environment (stale GCX_BOOTSTRAP_FD): gcxrun failed: $(<"$dir/err")"
for f in "$dir"/env.*; do
    r=$(get "$f" GCX_RANK) fd=$(get "$f" GCX_BOOTSTRAP_FD)
    if [[ $r -eq 0 ]]; then
        [[ -n $(get "$f" sock) ]] || fail "environment: with GCX_BOOTSTRAP_FD=99 set, rank 0's GCX_BOOTSTRAP_FD='$fd' is not the rendezvous socket"
    else
        [[ -z $fd ]] || fail "environment: with GCX_BOOTSTRAP_FD=99 set, rank $r inherits GCX_BOOTSTRAP_FD='$fd'"
    fi
    [[ $(get "$f" GCX_JOB_TOKEN) == callers-token ]] ||
        fail "environment: rank $r's GCX_JOB_TOKEN='$(get "$f" GCX_JOB_TOKEN)', expected the caller's 'callers-token'"
done

# --- exit status
launch rc0 -n 3 -- true
finish "all ranks succeed" 30
expect_rc "all ranks succeed" 0
# shellcheck disable=SC2016 # expanded by the rank
launch rc3 -n 3 -- bash -c '[[ $GCX_RANK -eq 1 ]] && exit 3; exit 0'
finish "rank 1 exits 3" 30
expect_rc "rank 1 exits 3" 3
# shellcheck disable=SC2016 # expanded by the rank
launch rcsig -n 3 -- bash -c '[[ $GCX_RANK -eq 1 ]] && kill -USR1 $$; exit 0'
finish "rank 1 killed by SIGUSR1" 30
expect_rc "rank 1 killed by SIGUSR1" $((128 + $(kill -l USR1)))

# --- stop-all: rank 0 fails once ranks 1, 2 are asleep (60 s)
launch stop -n 3 -- "$tmp/rank.sh" "$tmp/stop" fail trap
finish "stop-all (rank 0 fails, ranks 1-2 sleep 60 s)" 15
expect_rc "stop-all" 3
for r in 1 2; do
    [[ -f $dir/pid.$r ]] || fail "stop-all: rank $r never started"
    [[ $(cat "$dir/got.$r" 2>/dev/null) == TERM ]] || fail "stop-all: rank $r did not get SIGTERM"
done
none_alive "stop-all"

# --- --keep-going: ranks 1, 2 run on 1 s past rank 0's failure
launch keep -n 3 --keep-going -- "$tmp/rank.sh" "$tmp/keep" fail finish
finish "--keep-going" 30
expect_rc "--keep-going" 3
for r in 1 2; do
    [[ -f $dir/done.$r ]] || fail "--keep-going: rank $r was stopped before its end (no done.$r)"
done

# --- SIGTERM / SIGINT to gcxrun reach the ranks
for sig in TERM INT; do
    what="SIG$sig to gcxrun"
    launch "sig$sig" -n 3 -- "$tmp/rank.sh" "$tmp/sig$sig" trap trap
    wait_pids "$what" 3
    kill -"$sig" "$gpid"
    finish "$what" 15
    [[ $rc -ne 0 ]] || fail "$what: gcxrun exited 0"
    for r in 0 1 2; do
        [[ -f $dir/got.$r ]] || fail "$what: rank $r did not receive it"
        [[ $(<"$dir/got.$r") == "$sig" ]] || fail "$what: rank $r received SIG$(<"$dir/got.$r") instead"
    done
    none_alive "$what"
done

# --- a rank that survives SIGTERM is SIGKILLed after the grace period
if awk -v g="$grace" 'BEGIN { exit !(g <= 10) }'; then
    what="rank 1 survives SIGTERM (grace $grace s)"
    launch stubborn -n 2 -- "$tmp/rank.sh" "$tmp/stubborn" fail stubborn
    finish "$what" $((${grace%.*} + 15))
    expect_rc "$what" 3
    [[ -f $dir/got.1 ]] || fail "$what: rank 1 never got SIGTERM"
    none_alive "$what"
    awk -v ms="$ms" -v g="$grace" 'BEGIN { exit !(ms >= g * 1000) }' ||
        fail "$what: gcxrun returned after $(secs $ms) s, before the $grace s grace period"
else
    echo "skipped: the SIGKILL grace period ($grace s) does not fit this test's time"
fi

# --- --timeout
what="--timeout 3 (ranks sleep 60 s)"
launch timeout -n 2 --timeout 3 -- "$tmp/rank.sh" "$tmp/timeout" trap trap
finish "$what" 15
expect_rc "$what" 124
[[ $ms -ge 3000 ]] || fail "$what: gcxrun returned after $(secs $ms) s, before the timeout"
for r in 0 1; do
    # one that had not started yet when the time was up is not asked about
    [[ ! -f $dir/pid.$r || $(cat "$dir/got.$r" 2>/dev/null) == TERM ]] || fail "$what: rank $r did not get SIGTERM"
done
none_alive "$what"
# -t: the ranks' pipes stay open while a rank's child lives; gcxrun must
# still return once the ranks are gone
what="-t --timeout 1 (each rank a shell whose sleep 60 outlives it)"
launch timeout-t -t -n 2 --timeout 1 -- "$tmp/rank.sh" "$tmp/timeout-t" wrapper wrapper
finish "$what" 15
expect_rc "$what" 124
none_alive "$what"
for f in "$dir"/child.*; do kill "$(<"$f")" 2>/dev/null || true; done

# --- -t: whole lines, each prefixed with its rank
n=4
launch tag -t -n $n -- "$tmp/rank.sh" "$tmp/tag" lines lines
finish "-t" 30
expect_rc "-t" 0
bad=$(awk -v n=$n '
    bad { next }
    !match($0, /^\[[0-9]+\] /) { print "stdout line " NR " has no [rank] prefix: " substr($0, 1, 80); bad = 1; next }
    {
        r = substr($0, 2, RLENGTH - 3) + 0
        body = substr($0, RLENGTH + 1)
        if (body == "rank " r " end") { ended[r] = 1; next }
        want = sprintf("rank %d line %03d ", r, got[r])
        while (length(want) < 100) want = want "x"
        if (ended[r] || body != want) {
            print "stdout line " NR ": expected [" r "] " want ", got: " $0
            bad = 1; next
        }
        ++got[r]
    }
    END {
        if (bad) exit
        for (r = 0; r < n; ++r)
            if (got[r] != 200 || !ended[r])
                print "rank " r ": " got[r] + 0 " of 200 lines" (ended[r] ? "" : ", and not its unterminated last line")
    }' "$dir/out")
[[ -z $bad ]] || fail "-t: $bad"
want=$(for ((r = 0; r < n; ++r)); do echo "[$r] rank $r stderr"; done)
[[ $(sort -n -t']' -k1.2 "$dir/err") == "$want" ]] ||
    fail "-t: stderr is not one '[r] rank r stderr' line per rank: $(head -c 600 "$dir/err")"

# --- bad usage: status 2, a message on stderr, nothing run
dir=$tmp/usage
mkdir "$dir"
for args in "-- touch $dir/ran" "-n 0 -- touch $dir/ran" "-n -1 -- touch $dir/ran" \
    "-n abc -- touch $dir/ran" "-n" "-n 2" "-n 2 --" "-t -n 2 --keep-going"; do
    rc=0
    # shellcheck disable=SC2086 # args split on purpose
    "$gcxrun" $args >"$dir/out" 2>"$dir/err" || rc=$?
    [[ $rc -eq 2 ]] || fail "usage 'gcxrun $args': exit $rc, expected 2"
    [[ -s $dir/err ]] || fail "usage 'gcxrun $args': no message on stderr"
    [[ ! -e $dir/ran ]] || fail "usage 'gcxrun $args': the program ran"
done
echo "gcxrun launching ok (environment, exit status, stop-all, --keep-going, SIGTERM/SIGINT, grace ${grace} s, --timeout, -t, usage)"
