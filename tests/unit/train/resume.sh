#!/bin/sh
# resume.sh GCXRUN GCX_TRAIN - gcx-train --save/--resume continues a run
# exactly: on 3 ranks, a GraVAC run (short windows, the controller's modeled
# throughput so that its decisions do not depend on the clock) stopped at
# step 25 and resumed to step 60 ends with byte-identical checkpoints
# (weights, SGD velocity, residuals, the controller's whole state) and the
# same CF trace as a run of 60 steps that never stopped; the same for a
# top-k run. A resume under other options, a missing checkpoint and --save
# with a coded mode fail on every rank with a message naming the cause.
# Skips (77) when Fashion-MNIST is not installed.
. "$(dirname "$0")/setup.sh"
common="--epochs 1 --hidden 256,128 --check-every 10 --progress none --lr 0.05 --batch 16"

run() { # name, then gcx-train arguments
    name=$1
    shift
    "$gcxrun" -n 3 -- "$train" $common "$@" > "$tmp/$name.log" 2>&1
}

for sync in "gravac:window=5,eps=0.1,theta_min=2,theta_max=1000,model_gbit=1" \
            "topk:cf=50"; do
    mode=${sync%%:*}
    run "$mode-a" --sync "$sync" --max-steps 60 --save "$tmp/$mode-a" \
        --csv "$tmp/$mode-a.csv" &&
    run "$mode-b" --sync "$sync" --max-steps 25 --save "$tmp/$mode-b" &&
    run "$mode-c" --sync "$sync" --max-steps 60 --resume "$tmp/$mode-b" \
        --save "$tmp/$mode-c" --csv "$tmp/$mode-c.csv" ||
        { echo "FAIL: $mode runs"; cat "$tmp/$mode"-?.log; fail=1; continue; }
    grep -q "resumed from .* at step 25" "$tmp/$mode-c.log" ||
        { echo "FAIL: $mode: no resume message"; fail=1; }
    for r in 0 1 2; do
        cmp "$tmp/$mode-a.$r" "$tmp/$mode-c.$r" ||
            { echo "FAIL: $mode: rank $r's state after the resumed run" \
                   "differs from the uninterrupted run's"; fail=1; }
    done
    # the CF column of steps 25..59: the same decisions
    cut -d, -f1,8 "$tmp/$mode-a.csv" | awk -F, 'NR > 1 && $1 >= 25' > "$tmp/a.cf"
    cut -d, -f1,8 "$tmp/$mode-c.csv" | awk -F, 'NR > 1 && $1 >= 25' > "$tmp/c.cf"
    [ "$(wc -l < "$tmp/a.cf")" -eq 35 ] && cmp -s "$tmp/a.cf" "$tmp/c.cf" ||
        { echo "FAIL: $mode: CF traces differ"; diff "$tmp/a.cf" "$tmp/c.cf"
          fail=1; }
    n=$(cut -d, -f2 "$tmp/c.cf" | sort -u | wc -l)
    echo "$mode: resumed at 25, identical at 60; $n distinct CFs after 25"
    if [ "$mode" = gravac ] && [ "$n" -lt 2 ]; then
        echo "FAIL: gravac: the controller never moved the CF after the resume"
        fail=1
    fi
done

expect_fail() { # name, pattern, gcx-train arguments
    name=$1 pattern=$2
    shift 2
    if run "$name" "$@"; then
        echo "FAIL: $name: succeeded"; fail=1; return
    fi
    for r in 0 1 2; do
        grep -q "gcx-train\[$r\].*$pattern" "$tmp/$name.log" ||
        grep -q "stopping: another rank failed" "$tmp/$name.log" ||
            { echo "FAIL: $name: rank $r did not report '$pattern'"
              cat "$tmp/$name.log"; fail=1; return; }
    done
    echo "$name: $(grep -m1 "$pattern" "$tmp/$name.log")"
}
expect_fail other-sync "written by another run" --sync topk:cf=20 \
    --max-steps 30 --resume "$tmp/topk-b"
expect_fail missing "cannot read" --sync topk:cf=50 --resume "$tmp/none"
expect_fail coded "cannot be checkpointed" --sync gc-cr:s=1 --max-steps 5 \
    --save "$tmp/coded"
exit $fail
