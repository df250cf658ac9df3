#!/usr/bin/env bash
# hostpath (issue 23, the host's share of 8 clients' first audio): 8 streaming clients with main's host-path cuts
# (noise keys on ints, pack and build_prompt in NumPy, time_steps cached, the tokenizer without __call__) and without
# them (docs/wip/hostpath-before.patch, main's 439db00..044421b in engine/, reversed in a copy of the tree), alternated. Run from the
# repo root of a main checkout that holds the cuts, on a machine with torch CUDA and triton; logs and JSON into $OUT.
# SITE: wheels from .carry/wheels (bash ../shared/gpu/app_wheels.sh .carry/wheels --no-av --upstream), FULL checkpoint, LIMIT seconds, STEPS in order. ~7 min.
#   ckpt     the random checkpoint at true sizes
#   new*     bench_clients --clients 1,8 --rounds 3 on this tree        (JSON: clients_new*.json)
#   old*     the same with docs/wip/hostpath-before.patch reversed (the code before)    (JSON: clients_old*.json)
# Read: first audio p50/p90 at 8 clients and its ratio to 1 client (target p90 <= 2.5x), audio s/s, the Server-Timing
# table (accept, queue, engine, generate, decode): old vs new should move `accept` and `engine` down, never the tokens.
set -uo pipefail
START=$(date +%s); LIMIT=${LIMIT:-560}
STEPS=${STEPS:-ckpt new1 old1 new2 old2 new3 old3}
SITE=/tmp/site; FULL=$PWD/results/full; mkdir -p results; ROOT=$PWD
[ -d $SITE ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE .carry/wheels/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=$SITE:$PWD OMP_NUM_THREADS=4
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
step() {
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then echo "=== $name skipped ($(left) s left)"; return; fi
  echo "=== $name $(date -u +%H:%M:%S)"
  timeout $(( $(left) - 3 )) bash -c "$*" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"
  grep -v "it/s\]" "$OUT/$name.log" | grep -v "^{\|^\s*$\|^SKIPPED" | tail -${TAIL:-14}
}
old_tree() {
  [ -d /tmp/old ] && return
  mkdir /tmp/old; cp -r app engine kernels tests tools assets launcher.py pyproject.toml /tmp/old/
  (cd /tmp/old && patch -R -p1 -s < $ROOT/docs/wip/hostpath-before.patch) || { echo "patch -R failed"; rm -rf /tmp/old; }
}
BENCH="python3 -m tools.bench_clients --model $FULL --mode hifi --clients 1,8 --rounds 3"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for s in $STEPS; do case $s in
  ckpt) step ckpt 60 "[ -f $FULL/config.json ] || python3 -m tools.make_checkpoint --full $FULL" ;;
  new*) step $s 60 "$BENCH --json $OUT/clients_$s.json" ;;
  old*) old_tree; step $s 60 "cd /tmp/old && PYTHONPATH=$SITE:/tmp/old $BENCH --json $OUT/clients_$s.json" ;;
esac; done
echo "=== done $(date -u +%H:%M:%S), $(left) s left"
