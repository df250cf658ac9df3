#!/usr/bin/env bash
# docs/wip/joinahead.patch on a GPU (issue 23: a stream that starts while others play gets its first audio soon).
# Run from the repo root of main on a machine with torch CUDA and triton, results into $OUT:
#   OUT=... bash docs/wip/joinahead-gpu.sh [STEP ...]      (default: every step, in this order; LIMIT s, default 540)
# Steps (a step is skipped when too little of LIMIT is left: a bench takes ~1-1.5 min, so two calls, `tests s0` and
# `s15`, fit where one does not):
#   tests   the patch's tree (/tmp/new): tests/engine/test_continuous.py test_batch.py test_runner_capture.py
#           test_run_ahead.py, the gather tests and test_batch_engine.py. Expected: all pass; test_run_ahead's GPU
#           test runs (not skipped): catch_up leaves only the last steps unfinished.
#   s15     bench_clients --clients 1,8 --rounds 3 --stagger-ms 15, main / patch / patch / main. Expected with the
#           patch: every first audio near a lone client's plus a step's share, p90 x lone <= 2.5 (main 12.8x, 703 ms,
#           docs/bench/h100-issue23-clients-stagger15-20261206-1723.json); 8 clients' audio s/s about main's.
#   s0      the same all at once (--stagger-ms 0), main then patch. Expected: p90 x lone and audio s/s within main's
#           spread (main 3.04x); a lone client's first audio p50 within ~2 ms of main's (the run-ahead bound makes the
#           host hand a finished call out when the device is 2 steps from done, not 30).
# At the end: one line per bench run (tree, stagger, lone p50, 8 clients' audio s/s, p50/p90, p90 x lone) and each
# 8-client run's first audios, per round in client order (ms from the client's own send). RANDOM WEIGHTS.
set -uo pipefail
START=$(date +%s); LIMIT=${LIMIT:-540}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
SITE=/tmp/site; FULL=$PWD/results/full; ROOT=$PWD; mkdir -p results
[ -d $SITE ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE \
  .carry/wheels/*.whl
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
step() {  # step NAME SECONDS_NEEDED DIR COMMAND: run in DIR with PYTHONPATH=$SITE:DIR, its log in $OUT/NAME.log
  local name=$1 need=$2 dir=$3; shift 3
  if [ "$(left)" -lt "$need" ]; then echo "=== $name skipped ($(left) s left)"; return; fi
  echo "=== $name $(date -u +%H:%M:%S)"
  (cd "$dir" && PYTHONPATH=$SITE:$dir timeout $(( $(left) - 3 )) bash -c "$*") > "$OUT/$name.log" 2>&1
  echo "rc=$?" >> "$OUT/$name.log"; grep -v "^{" "$OUT/$name.log" | tail -${TAIL:-6}
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log --oneline -1
[ -f $FULL/config.json ] || PYTHONPATH=$SITE:$PWD python3 -m tools.make_checkpoint --full $FULL \
  > "$OUT/checkpoint.log" 2>&1
rm -rf /tmp/new; mkdir /tmp/new; cp -r app engine kernels tests tools assets launcher.py pyproject.toml /tmp/new/
(cd /tmp/new && patch -p1 -s < $ROOT/docs/wip/joinahead.patch) || { echo "joinahead.patch failed in /tmp/new"; exit 1; }
bench() {  # bench NAME DIR STAGGER
  step "$1" 100 "$2" python3 -m tools.bench_clients --model $FULL --mode hifi --clients 1,8 --rounds 3 \
    --stagger-ms "$3" --json "$OUT/$1.json"
}
for s in ${@:-tests s15 s0}; do
  case $s in
    tests) TAIL=4 step tests 200 /tmp/new python3 -m pytest -q -p no:cacheprovider tests/engine/test_continuous.py \
             tests/engine/test_batch.py tests/engine/test_runner_capture.py tests/engine/test_run_ahead.py \
             tests/engine/test_gather.py tests/engine/test_gather_joins.py tests/engine/test_gather_give_way.py \
             tests/engine/test_gather_engine.py tests/engine/test_gather_engine_joins.py \
             tests/engine/test_gather_engine_give_way.py tests/engine/test_batch_engine.py -rs ;;
    s15) bench s15-1-main $ROOT 15; bench s15-2-new /tmp/new 15; bench s15-3-new /tmp/new 15
         bench s15-4-main $ROOT 15 ;;
    s0) bench s0-1-main $ROOT 0; bench s0-2-new /tmp/new 0 ;;
  esac
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
print("| run | stagger ms | 1 client first audio p50 ms | 8 clients audio s/s (x one) | p50 / p90 ms | p90 x lone |")
print("|---|---|---|---|---|---|")
runs = sorted(glob.glob(f"{sys.argv[1]}/s*.json"), key=os.path.getmtime)
for path in runs:
    one, eight = json.load(open(path))
    print(f"| {os.path.basename(path)[:-5]} | {eight['stagger_ms']:g} | {1e3 * one['first_p50_s']:.0f} | "
          f"{eight['audio_per_s']:.1f} ({eight['audio_per_s'] / one['audio_per_s']:.2f}x) | "
          f"{1e3 * eight['first_p50_s']:.0f} / {1e3 * eight['first_p90_s']:.0f} | "
          f"{eight['first_p90_s'] / one['first_p90_s']:.2f} |")
for path in runs:
    eight = json.load(open(path))[1]
    firsts = [round(1e3 * f) for f in eight["first_s"]]
    rounds = [firsts[i:i + eight["clients"]] for i in range(0, len(firsts), eight["clients"])]
    print(os.path.basename(path)[:-5], "first audio per round, client order:", rounds)
PY
