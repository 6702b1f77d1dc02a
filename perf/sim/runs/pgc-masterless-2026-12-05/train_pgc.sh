#!/bin/bash
# gcx-train pgc-fr on 8 emulated ranks: master-less vs star vs dense, with and without a 200 ms straggler
cd /work/main
run() { echo "== $* $(date +%T)"; perf/cluster/emulate.sh -n 8 --rate 1gbit --subnet 10.233.7 --port 29733 -q --timeout 600 -- env GCX_CODED_ALGO=$1 \
          build/programs/train/gcx-train --sync $2 --max-steps 120 --check-every 0 --progress none "${@:3}" 2>&1 | grep -E "done:|decoded without|lost" | head -6; }
for rep in 1 2; do
  run masterless pgc-fr:s=1
  run masterless pgc-fr:s=1 --straggler 3:200
  run star dense
  run star dense --straggler 3:200
done
run star pgc-fr:s=1 --straggler 3:200
date
