#!/bin/sh
# ranks.sh GCXRUN GCX_TRAIN - gcx-train end to end over real ranks:
#  1. 1 rank x batch 48 and 3 ranks x batch 16 (same global batch, a
#     non-power-of-two world) both finish with every weight check passed and
#     land on nearly the same accuracy (same data order, same averaged
#     gradient up to float summation order); so do dense's other bucket
#     settings (one per layer; overlap=0: one allreduce after the pass);
#  2. a rank that changes one weight by one ulp makes every rank stop with
#     "WEIGHTS DIFFER" and a failing exit status;
#  3. every compressed sync mode (topk, dgc, redsync, randomk, gravac with a
#     short window so the controller rescales) keeps the weights of 3 ranks
#     identical through every check, and its summary reports a CF above 1;
#  4. every coded sync mode (gc-fr, gc-cr, pgc-fr, pgc-cr, and ignore, the
#     uncoded drop-the-stragglers baseline; s = 1; gc-cr and pgc-fr also
#     master-less, GCX_CODED_ALGO=masterless) on 4 ranks with rank 1
#     sleeping 300 ms per step keeps the weights identical, and the slow
#     rank skipped steps that were decoded without it: it did not hold the
#     others back; with --straggler exp:2 (every rank delayed at random)
#     pgc-fr and dense keep them identical too;
#  5. an epoch is one pass over the data, each sample computed at one step
#     only: with GCX_TRAIN_TRACE_SAMPLES every rank lists the parts of the
#     epoch's permutation it computed; over the ranks they must tile the
#     dense run's epoch exactly, for dense and for the pipelined modes
#     (pgc-fr and pgc-cr with s = 1 on 4 ranks, pgc-fr with s = 2 on 3),
#     whose epoch has P = s+1 times dense's steps, P per global batch;
#     and pgc-fr with a master (master=1, 3 ranks: 2 workers) against
#     dense on 2 ranks: the global batch is the workers' only;
#  6. a coded run (gc-cr, s = 1, 4 ranks over TCP) whose worker 3
#     kills itself (GCX_TRAIN_KILL) goes on to the end on the other three:
#     weight checks, evaluation and byte sums over the live ranks;
#  6b. the same when the worker dies inside a weight check (before it
#     sent its value, or after), or stalls there past GCX_TIMEOUT: the
#     root counts it gone and goes on, the others do not time out;
#  7. a master that is not a worker (master=1; a 32-wide MLP, cheap):
#     pgc-fr and ignore on 3 ranks (master + 2 workers) under
#     --straggler exp:2 keep the weights identical, the master computes
#     no gradient (its sample trace is empty, its summary says 0) while
#     the workers do, and the JSON says 2 workers; and case 6 with a
#     master (gc-cr, 4 ranks: rank 3 is worker 2) finishes too (the root's
#     mask of dead workers is turned into ranks).
# Skips (77) when Fashion-MNIST is not installed.
. "$(dirname "$0")/setup.sh"

common="--epochs 1 --max-steps 40 --check-every 10 --progress none --lr 0.02"
"$gcxrun" -n 1 -- "$train" $common --batch 48 --json "$tmp/r1.json" \
    > "$tmp/r1.log" 2>&1 || { echo "FAIL: 1 rank"; cat "$tmp/r1.log"; fail=1; }
"$gcxrun" -n 3 -- "$train" $common --batch 16 --json "$tmp/r3.json" \
    > "$tmp/r3.log" 2>&1 || { echo "FAIL: 3 ranks"; cat "$tmp/r3.log"; fail=1; }
[ $fail -eq 0 ] || exit 1

field() { sed -n "s/^ *\"$2\": \([^,]*\),*$/\1/p" "$1" | head -1; }
for n in 1 3; do
    w=$(field "$tmp/r$n.json" world_size)
    s=$(field "$tmp/r$n.json" steps)
    c=$(field "$tmp/r$n.json" weight_checks)
    echo "ranks $n: world_size $w steps $s weight_checks $c" \
         "acc $(field "$tmp/r$n.json" final_test_acc)"
    [ "$w" = "$n" ] && [ "$s" = 40 ] && [ "$c" = 5 ] ||
        { echo "FAIL: unexpected summary for $n ranks"; fail=1; }
done
a1=$(field "$tmp/r1.json" final_test_acc)
a3=$(field "$tmp/r3.json" final_test_acc)
awk -v a="$a1" -v b="$a3" 'BEGIN { d = a - b; if (d < 0) d = -d;
    exit !(a > 0.6 && d <= 0.01) }' ||
    { echo "FAIL: accuracies $a1 (1 rank) and $a3 (3 ranks) differ"; fail=1; }
# dense's buckets: the run above posts them during the backward pass (1 MB
# each); one per layer (small ones too), and one allreduce after the pass
# (overlap=0), each against the 1-rank run as well
for mode in dense:bucket_kb=0 dense:overlap=0; do
    name=$(echo "$mode" | tr ':=' '--')
    "$gcxrun" -n 3 -- "$train" $common --batch 16 --sync "$mode" \
        --json "$tmp/$name.json" > "$tmp/$name.log" 2>&1 ||
        { echo "FAIL: sync $mode"; cat "$tmp/$name.log"; fail=1; continue; }
    c=$(field "$tmp/$name.json" weight_checks)
    a=$(field "$tmp/$name.json" final_test_acc)
    echo "sync $mode on 3 ranks: weight_checks $c acc $a (1 rank: $a1)"
    [ "$c" = 5 ] || { echo "FAIL: sync $mode: $c weight checks"; fail=1; }
    awk -v a="$a1" -v b="$a" 'BEGIN { d = a - b; if (d < 0) d = -d;
        exit !(d <= 0.01) }' ||
        { echo "FAIL: sync $mode: accuracy $a, 1 rank $a1"; fail=1; }
done

GCX_TRAIN_PERTURB=1:5 "$gcxrun" -n 2 -- "$train" $common --batch 24 \
    > "$tmp/p.log" 2>&1
rc=$?
if [ $rc -eq 0 ] || ! grep -q "WEIGHTS DIFFER" "$tmp/p.log"; then
    echo "FAIL: perturbed weights were not detected (exit $rc)"
    cat "$tmp/p.log"
    fail=1
else
    echo "perturbed rank detected: $(grep -m1 "WEIGHTS DIFFER" "$tmp/p.log")"
fi
for mode in topk:cf=50 dgc:cf=50 redsync:cf=50 randomk:cf=20 \
            gravac:window=10,eps=0.5; do
    name=${mode%%:*}
    "$gcxrun" -n 3 -- "$train" $common --batch 16 --sync "$mode" \
        --json "$tmp/$name.json" --csv "$tmp/$name.csv" > "$tmp/$name.log" 2>&1 ||
        { echo "FAIL: sync $mode"; cat "$tmp/$name.log"; fail=1; continue; }
    c=$(field "$tmp/$name.json" weight_checks)
    sent=$(field "$tmp/$name.json" bytes_sent)
    dense=$(field "$tmp/$name.json" dense_bytes)
    echo "sync $mode: weight_checks $c bytes_sent $sent dense_bytes $dense"
    [ "$c" = 5 ] || { echo "FAIL: sync $mode: $c weight checks"; fail=1; }
    awk -v s="$sent" -v d="$dense" 'BEGIN { exit !(s > 0 && s < d) }' ||
        { echo "FAIL: sync $mode sent no fewer bytes than dense"; fail=1; }
    # GraVAC explains each window on rank 0: what it sent, the gains
    # against epsilon, and the thetas of the next window
    if [ "$name" = gravac ]; then
        why=$(grep -c "^gcx-train\[0\]: GraVAC steps .*: sent CF .*epsilon 0.5.*next window: theta_min" \
              "$tmp/$name.log")
        echo "sync gravac: $why window explanations (4 windows of 10 steps)"
        [ "$why" = 4 ] && ! grep -q "^gcx-train\[[12]\]: GraVAC steps" \
            "$tmp/$name.log" ||
            { echo "FAIL: sync gravac: expected 4 explanations, rank 0 only"
              cat "$tmp/$name.log"; fail=1; }
    fi
done
for run in gc-fr gc-cr pgc-fr pgc-cr ignore gc-cr@masterless \
           pgc-fr@masterless; do
    mode=${run%@*}; algo=star name=$mode
    [ "$run" = "$mode" ] || { algo=${run#*@}; name=$mode-$algo; }
    GCX_CODED_ALGO=$algo "$gcxrun" -n 4 -- "$train" $common --batch 12 \
        --sync "$mode" --straggler 1:300 --json "$tmp/$name.json" \
        > "$tmp/$name.log" 2>&1 ||
        { echo "FAIL: sync $name"; cat "$tmp/$name.log"; fail=1; continue; }
    c=$(field "$tmp/$name.json" weight_checks)
    acc=$(field "$tmp/$name.json" final_test_acc)
    skipped=$(sed -n "s/^gcx-train\[1\]: .*$mode: \([0-9]*\) of [0-9]* steps were decoded without this rank's.*/\1/p" \
        "$tmp/$name.log")
    echo "sync $name: weight_checks $c acc $acc, decoded without the slow" \
         "rank: ${skipped:-?} of 40 steps"
    [ "$c" = 5 ] || { echo "FAIL: sync $name: $c weight checks"; fail=1; }
    [ "${skipped:-0}" -gt 0 ] ||
        { echo "FAIL: sync $name: no step was decoded without the slow rank"; \
          cat "$tmp/$name.log"; fail=1; }
done

for mode in pgc-fr dense; do
    "$gcxrun" -n 4 -- "$train" $common --batch 12 --sync "$mode" \
        --straggler exp:2 --json "$tmp/exp-$mode.json" \
        > "$tmp/exp-$mode.log" 2>&1 ||
        { echo "FAIL: sync $mode, exp:2"; cat "$tmp/exp-$mode.log"; fail=1;
          continue; }
    c=$(field "$tmp/exp-$mode.json" weight_checks)
    x=$(field "$tmp/exp-$mode.json" straggler_exp)
    echo "sync $mode, --straggler exp:2: weight_checks $c straggler_exp $x"
    [ "$c" = 5 ] && [ "$x" = 2 ] ||
        { echo "FAIL: sync $mode, exp:2: $c weight checks, exp $x"; fail=1; }
done

# 5. One full epoch of a tiny model (a few seconds in all).
epoch="--epochs 1 --batch 250 --hidden 16 --lr 0.05 --check-every 0 --progress none"
dense_steps=0
for run in dense@4 pgc-fr:s=1@4 pgc-cr:s=1@4 dense@3 pgc-fr:s=2@3 dense@2 \
           pgc-fr:s=1,master=1@3; do
    n=${run##*@}
    mode=${run%@*}
    case $mode in
    dense) p=1 ;;
    *) p=$(( $(echo "$mode" | sed 's/.*:s=\([0-9]*\).*/\1/') + 1 )) ;;
    esac
    w=$n # workers: a master computes no part of the global batch
    case $mode in *master=1*) w=$((n - 1)) ;; esac
    name=trace-$(echo "$mode" | tr ':=,' '---')-$n
    GCX_TRAIN_TRACE_SAMPLES="$tmp/$name" "$gcxrun" -n "$n" -- "$train" \
        $epoch --sync "$mode" --json "$tmp/$name.json" > "$tmp/$name.log" 2>&1 ||
        { echo "FAIL: sync $mode on $n ranks"; cat "$tmp/$name.log"; fail=1;
          continue; }
    steps=$(field "$tmp/$name.json" steps)
    [ "$mode" = dense ] && dense_steps=$steps
    # Identical lines are one partition computed by several holders at
    # the same step (the code's redundancy): count them once.
    res=$(cat "$tmp/$name".[0-9]* | sort -u | awk -v G=$((250 * w)) -v P="$p" \
        -v D="$dense_steps" -v S="$steps" '
        $1 != 1 { bad = bad " epoch " $1 }
        int($2 / P) != int($3 / G) {   # read another global batch
            if (!other++) bad = bad " step " $2 " read " $3
        }
        { for (i = $3; i < $3 + $4; i++) { if (seen[i]++) twice++; n++ } }
        END {
            for (i = 0; i < D * G; i++) if (!(i in seen)) missed++
            if (S != P * D) bad = bad " steps " S " != " P " x " D
            if (twice) bad = bad " " twice " computed twice"
            if (missed) bad = bad " " missed " of " D * G " never computed"
            if (n != D * G) bad = bad " " n " computed for " D * G
            print (bad == "" ? "ok" : "bad:" bad)
        }')
    echo "trace $mode on $n ranks ($w workers): $steps steps (P = $p, dense $dense_steps)," \
         "samples $res"
    [ "$res" = ok ] ||
        { echo "FAIL: sync $mode on $n ranks: an epoch is not one pass over" \
               "the data"; fail=1; }
done

# 6. A dead coded worker stops nothing: the others finish, checks passed.
# With a master (7.) rank 3 is worker 2: the root's mask of dead workers
# must be turned into ranks (a 32-wide MLP: cheap).
# Master-less (gc-cr, pgc-fr): every rank counts the dead one gone, so the
# checks leave it out without a failed receive from it (no library error).
for run in gc-cr gc-cr:s=1,master=1 gc-cr@masterless pgc-fr@masterless; do
    mode=${run%@*}; algo=star
    [ "$run" = "$mode" ] || algo=${run#*@}
    name=kill-$(echo "$run" | tr ':=,@' '----')
    extra=
    case $mode in *master=1*) extra="--hidden 32" ;; esac
    GCX_CODED_ALGO=$algo GCX_TRAIN_KILL=3:12 UCX_TLS=tcp,self GCX_TIMEOUT=10 \
        "$gcxrun" -n 4 \
        --keep-going -- "$train" $common $extra --batch 12 --sync "$mode" \
        --json "$tmp/$name.json" > "$tmp/$name.log" 2>&1
    c=$(field "$tmp/$name.json" weight_checks 2>/dev/null)
    acc=$(field "$tmp/$name.json" final_test_acc 2>/dev/null)
    echo "sync $run, rank 3 killed after step 12: weight_checks ${c:-none}" \
         "acc ${acc:-none}"
    if ! grep -q "rank 3 was killed by signal 9" "$tmp/$name.log" ||
       grep -q "gcx-train\[[012]\]: error" "$tmp/$name.log" ||
       { [ $algo = masterless ] && grep -q "\] error: " "$tmp/$name.log"; } ||
       [ "${c:-0}" != 5 ]; then
        echo "FAIL: sync $run did not finish on the live ranks"
        cat "$tmp/$name.log"; fail=1
    fi
done

# 6b. A coded worker that dies inside a reduction over the live ranks (a
# weight check): before it sent its value (the root's receive from it
# fails: before the pair channels, that failed the root's communicator and
# so every rank) or after (the root's result send to it may fail); or that
# stalls there for GCX_TIMEOUT + 2 s before it sends (as a SIGSTOP): the
# root waits GCX_TIMEOUT for it, leaves it out and answers the others,
# which must not time out meanwhile (they wait 2 GCX_TIMEOUT + 2 s on their
# pair channel); the stalled rank then fails naming the cause. The others
# finish with every check passed. The fault is the rank's own
# (GCX_TRAIN_KILL=R:S:send|recv|stall), so it lands there on every run.
for where in send recv stall; do
    name=kill-in-check-$where
    t=10
    [ $where = stall ] && t=6
    GCX_TRAIN_KILL=3:12:$where UCX_TLS=tcp,self GCX_TIMEOUT=$t "$gcxrun" -n 4 \
        --keep-going -- "$train" $common --hidden 32 --batch 12 --sync gc-cr \
        --json "$tmp/$name.json" > "$tmp/$name.log" 2>&1
    c=$(field "$tmp/$name.json" weight_checks 2>/dev/null)
    echo "sync gc-cr, rank 3 $where in the weight check after step 12:" \
         "weight_checks ${c:-none}"
    if [ $where = stall ]; then
        grep -q "rank 3 exited with status 1" "$tmp/$name.log" &&
            grep -Eq "gcx-train\[3\]: error: .*(timed out|peer failed)" \
                "$tmp/$name.log"
    else
        grep -q "rank 3 was killed by signal 9" "$tmp/$name.log"
    fi
    if [ $? -ne 0 ] || grep -q "gcx-train\[[012]\]: error" "$tmp/$name.log" ||
       [ "${c:-0}" != 5 ]; then
        echo "FAIL: rank 3 $where in a weight check: the live ranks did" \
             "not finish, or rank 3 did not fail cleanly"
        cat "$tmp/$name.log"; fail=1
    fi
done

# 7. A master that is not a worker.
for mode in pgc-fr ignore; do
    name=master-$mode
    GCX_TRAIN_TRACE_SAMPLES="$tmp/$name" "$gcxrun" -n 3 -- "$train" $common \
        --hidden 32 --batch 12 --sync "$mode:s=1,master=1" --straggler exp:2 \
        --json "$tmp/$name.json" > "$tmp/$name.log" 2>&1 ||
        { echo "FAIL: sync $mode with a master"; cat "$tmp/$name.log"; fail=1;
          continue; }
    c=$(field "$tmp/$name.json" weight_checks)
    w=$(field "$tmp/$name.json" workers)
    m=$(sed -n "s/^gcx-train\[0\]: $mode: this rank is the master, .* computed \([0-9]*\) partition.*/\1/p" \
        "$tmp/$name.log")
    c1=$(sed -n "s/^gcx-train\[1\]: $mode: .* it computed \([0-9]*\) partition.*/\1/p" \
        "$tmp/$name.log")
    c2=$(sed -n "s/^gcx-train\[2\]: $mode: .* it computed \([0-9]*\) partition.*/\1/p" \
        "$tmp/$name.log")
    t0=$(wc -l < "$tmp/$name.0")
    echo "sync $mode:s=1,master=1 on 3 ranks: weight_checks $c workers $w," \
         "partitions computed: master ${m:-?} (trace lines $t0)," \
         "workers ${c1:-?} and ${c2:-?}"
    [ "$c" = 5 ] && [ "$w" = 2 ] && [ "${m:-x}" = 0 ] && [ "$t0" = 0 ] &&
        [ "${c1:-0}" -gt 0 ] && [ "${c2:-0}" -gt 0 ] ||
        { echo "FAIL: sync $mode with a master"; cat "$tmp/$name.log"; fail=1; }
done
exit $fail
