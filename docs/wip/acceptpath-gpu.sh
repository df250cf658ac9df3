#!/usr/bin/env bash
# docs/wip/acceptpath-gpu.sh (`LIMIT=560 bash docs/wip/acceptpath-gpu.sh`): does queuing an API request without the thread hop help first audio on a GPU? On this 2-core CPU it
# does not (docs/bench/cpu-api-accept-20261206.txt): the `accept` span falls (8 at once: ~4-6 ms -> ~0.7 ms median),
# but the time the clients wait outside the server's spans rises by more (the event loop, now doing the checks, and
# the engine, now started sooner, take the CPU from the other requests' connections). On the CPU the demo engine's
# torch work shares the 2 cores with everything; on a GPU it does not, so the answer may differ there.
# Variants, each a copy of this checkout with one patch from docs/wip/ (acceptpath-VARIANT.patch) (kept out of main until measured):
#   main       this checkout as it is
#   inline     inline.patch: app/api/routes.py builds SpeechStream (checks, voice, submit) on the event loop instead of
#              `await anyio.to_thread.run_sync(SpeechStream, ...)` (its CPU work is ~0.3 ms a request, the hop waited
#              ~4 ms median for the GIL with 8 at once on the CPU; the voice lookup is GIL-bound: cpu == wall)
#   switch1ms  switch1ms.patch: `voicedesk serve` sets sys.setswitchinterval(0.001) (GIL handoffs within 1 ms, not 5)
# Run from the repo root of a main checkout on a machine with torch CUDA and triton; logs and JSON into $OUT.
# RANDOM WEIGHTS (true sizes): say so with every figure. LIMIT seconds (default 560), STEPS in order (a step is
# skipped when too little time is left); each bench ~35-60 s on an H100 plus ~30-60 s to start its server.
#   ckpt                       the random checkpoint at true sizes, if results/full/config.json is missing
#   main1 inline1 main2 inline2 (default), switch1ms1 switch1ms2 (add them to STEPS to try the switch interval)
#                              python3 -m tools.bench_clients --model results/full --mode hifi --clients 1,8 --rounds 3
#                              --stagger-ms 0, from the variant's tree; JSON $OUT/clients_<step>.json, log $OUT/<step>.log
# What decides: 8 clients' first audio p50/p90 (and p90 x lone) of inline against main, beside the accept span.
set -uo pipefail
OUT=${OUT:-/tmp/acceptpath-out}; mkdir -p "$OUT"
START=$(date +%s); LIMIT=${LIMIT:-560}
STEPS=${STEPS:-ckpt main1 inline1 main2 inline2}
SITE=/tmp/site; FULL=$PWD/results/full; mkdir -p results
[ -d $SITE ] || python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE .carry/wheels/*.whl
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
for variant in inline switch1ms; do  # a copy of this checkout with the variant's patch
  rm -rf /tmp/acceptpath-$variant && mkdir -p /tmp/acceptpath-$variant
  tar --exclude=./results --exclude=./.carry --exclude=./.venv --exclude=./.git -cf - . | tar -x -C /tmp/acceptpath-$variant
  patch -s -p1 -d /tmp/acceptpath-$variant < docs/wip/acceptpath-$variant.patch || { echo "$variant.patch does not apply"; exit 1; }
done
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
step() {  # step NAME SECONDS_NEEDED TREE COMMAND: its log in $OUT/NAME.log, its tables here
  local name=$1 need=$2 tree=$3; shift 3
  if [ "$(left)" -lt "$need" ]; then echo "=== $name skipped ($(left) s left)"; return; fi
  echo "=== $name $(date -u +%H:%M:%S) ($tree)"
  (cd "$tree" && PYTHONPATH=$SITE:$tree timeout $(( $(left) - 3 )) bash -c "$*") > "$OUT/$name.log" 2>&1
  echo "rc=$?" >> "$OUT/$name.log"
  grep -v "it/s\]" "$OUT/$name.log" | grep -v "^{\|^\s*$" | tail -12
}
BENCH="python3 -m tools.bench_clients --model $FULL --mode hifi --clients 1,8 --rounds 3 --stagger-ms 0"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null | cut -c1-100
date -u
for s in $STEPS; do case $s in
  ckpt) step ckpt 60 "$PWD" "[ -f $FULL/config.json ] || python3 -m tools.make_checkpoint --full $FULL" ;;
  main*) step $s 90 "$PWD" "$BENCH --json $OUT/clients_$s.json" ;;
  inline*) step $s 90 /tmp/acceptpath-inline "$BENCH --json $OUT/clients_$s.json" ;;
  switch1ms*) step $s 90 /tmp/acceptpath-switch1ms "$BENCH --json $OUT/clients_$s.json" ;;
esac; done
echo "=== done $(date -u +%H:%M:%S), $(left) s left"
