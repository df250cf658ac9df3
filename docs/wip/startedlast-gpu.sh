#!/usr/bin/env bash
# docs/wip/startedlast.patch (engine/gather.py: a give_way counts as a starting batch taken; with a runner that gives
# way a first call starts no batch of other calls) on a GPU. Run from the repo root of main WITHOUT the patch, on a
# machine with torch CUDA and triton, results into $OUT:  LIMIT=540 bash docs/wip/startedlast-gpu.sh [STEP ...]
# Steps (default all; a step is skipped when too little of LIMIT is left, a bench takes ~1-1.5 min):
#   tests  the gather tests (the GPU ones run, not skipped) and test_batch_engine.py in /tmp/new (main + the patch).
#          Expected: all pass.
#   s15    bench_clients --clients 1,8 --rounds 3 --stagger-ms 15: old (main) / new (/tmp/new) / new / old. Expected: p90 x lone within old's spread (the change only moves
#          which batch is taken after a give_way; it should not make a first piece ride a big batch).
#   s0     the same at --stagger-ms 0, old then new. Expected: within old's spread.
# RANDOM WEIGHTS (tools.make_checkpoint). The summary table is printed at the end.
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
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log --oneline -1 2>/dev/null
[ -f $FULL/config.json ] || PYTHONPATH=$SITE:$PWD python3 -m tools.make_checkpoint --full $FULL \
  > "$OUT/checkpoint.log" 2>&1
rm -rf /tmp/new; mkdir /tmp/new; cp -r app engine kernels tests tools assets launcher.py pyproject.toml /tmp/new/
(cd /tmp/new && patch -p1 -s < $ROOT/docs/wip/startedlast.patch) || { echo "startedlast.patch failed in /tmp/new"; exit 1; }
bench() {  # bench NAME DIR STAGGER
  step "$1" 100 "$2" python3 -m tools.bench_clients --model $FULL --mode hifi --clients 1,8 --rounds 3 \
    --stagger-ms "$3" --json "$OUT/$1.json"
}
for s in ${@:-tests s15 s0}; do
  case $s in
    tests) TAIL=4 step tests 200 /tmp/new python3 -m pytest -q -p no:cacheprovider tests/engine/test_gather.py \
             tests/engine/test_gather_joins.py tests/engine/test_gather_give_way.py tests/engine/test_gather_engine.py \
             tests/engine/test_gather_engine_joins.py tests/engine/test_gather_engine_give_way.py \
             tests/engine/test_continuous.py tests/engine/test_batch_engine.py -rs ;;
    s15) bench s15-1-old $ROOT 15; bench s15-2-new /tmp/new 15; bench s15-3-new /tmp/new 15; bench s15-4-old $ROOT 15 ;;
    s0) bench s0-1-old $ROOT 0; bench s0-2-new /tmp/new 0 ;;
  esac
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
print("| run | stagger ms | 1 client first audio p50 ms | 8 clients audio s/s | p50 / p90 ms | p90 x lone |")
print("|---|---|---|---|---|---|")
for path in sorted(glob.glob(f"{sys.argv[1]}/s*.json"), key=os.path.getmtime):
    one, eight = json.load(open(path))
    print(f"| {os.path.basename(path)[:-5]} | {eight['stagger_ms']:g} | {1e3 * one['first_p50_s']:.0f} | "
          f"{eight['audio_per_s']:.1f} | {1e3 * eight['first_p50_s']:.0f} / {1e3 * eight['first_p90_s']:.0f} | "
          f"{eight['first_p90_s'] / one['first_p90_s']:.2f} |")
PY
