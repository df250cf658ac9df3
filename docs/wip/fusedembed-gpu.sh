#!/usr/bin/env bash
# fusedembed (issue 22 target 2, issue 23's step at 1536 rows): the LM's input embedding as one Triton kernel
# (kernels/embed.py) in place of the eight PyTorch ops every step launches for it (arange, two integer ops, the
# 8-codebook gather, its sum, the text gather, the select: 30.8 us of a 896-row step on the H200, trace
# docs/bench/h200-issue22-closing-trace-hifi-20261204-1529.json.gz). docs/wip/fusedembed.patch is applied in a copy of
# the tree (/tmp/new) and measured against this tree (main, /tmp/old's role), alternated. Run from the repo root of a
# main checkout WITHOUT the patch, on a machine with torch CUDA and triton; logs and JSON into $OUT.
# SITE: wheels from .carry/wheels (bash ../shared/gpu/app_wheels.sh .carry/wheels --no-av --upstream), FULL checkpoint,
# LIMIT seconds, STEPS in order. ~9 min on an H100 (a step is skipped when too little time is left).
#   ckpt     the random checkpoint at true sizes
#   tests    in /tmp/new: test_embed (GPU: the model's shapes, bit for bit on exact sums), test_bench_embed,
#            test_fused_model (the runner from CUDA graphs), test_batch / test_continuous (batched = separate through
#            the fused runner), test_runner_capture, test_model, test_modes                             [all pass]
#   plant    in /tmp/plant: the patch, then the kernel's sum without the last codebook; test_embed and
#            test_fused_model                             [test_embed fails nearly all, both fused-model tests fail]
#   micro    tools.kernels.bench_embed in /tmp/new: ops vs kernel per call at 192-7168 rows (expected ~30 -> ~4 us at
#            896 rows, 8 kernels -> 1), then the whole model's step with each at 192 / 896 / 1536 rows, replayed
#            alternately (expected 20-50 us per step saved, logits max diff ~0 or a few fp16 ulps)
#   bench*   launcher.py bench --modes hifi (en-ref3-out3, baseline; 5 runs, 2 warm-up), old and new alternated:
#            `kernels` per generation must fall by 7 x 32 = 224 (the baseline's 8781 -> 8557); medians ~1 ms lower
#            (the spread is ~2 ms: read the two pairs together)
#   clients* bench_clients --clients 1,8 --rounds 3, old and new alternated (p90 ratio: expected within the spread)
#   profile  launcher.py profile --mode hifi (baseline), old and new: kernels, busy, elementwise/copy and reduction ms
# At the end, compact tables from the JSON (bench medians / p90 / kernels per tree and run, clients' audio s/s and
# first audio p50 / p90); each step's whole log is $OUT/<step>.log.
set -uo pipefail
START=$(date +%s); LIMIT=${LIMIT:-540}
STEPS=${STEPS:-ckpt tests plant micro bench_old1 bench_new1 clients_old1 clients_new1 bench_new2 bench_old2 profile}
SITE=/tmp/site; FULL=$PWD/results/full; mkdir -p results; ROOT=$PWD
[ -d $SITE ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE \
  .carry/wheels/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=$SITE:$PWD OMP_NUM_THREADS=4
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
step() {
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then echo "=== $name skipped ($(left) s left)"; return; fi
  echo "=== $name $(date -u +%H:%M:%S)"
  timeout $(( $(left) - 3 )) bash -c "$*" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"
  grep -v "it/s\]" "$OUT/$name.log" | grep -v "^{\|^\s*$\|^SKIPPED\|Warning\|warn(\|_warn_once\|re.match(" \
    | tail -${TAIL:-12}
}
tree() {  # /tmp/$1: a copy of this tree with the patch applied, then python edits old -> new (pairs) in file $2
  local v=$1 file=${2:-}; shift; [ $# -gt 0 ] && shift
  rm -rf /tmp/$v; mkdir /tmp/$v; cp -r app engine kernels tests tools assets launcher.py pyproject.toml /tmp/$v/
  (cd /tmp/$v && patch -p1 -s < $ROOT/docs/wip/fusedembed.patch) || { echo "patch failed in /tmp/$v"; return 1; }
  [ -z "$file" ] || python3 - /tmp/$v/$file "$@" <<'PY'
import sys
p, *edits = sys.argv[1:]; s = open(p).read()
for old, new in zip(edits[::2], edits[1::2]):
    assert s.count(old) == 1, (p, old); s = s.replace(old, new)
open(p, "w").write(s)
PY
}
in_new() { echo "cd /tmp/new && PYTHONPATH=$SITE:/tmp/new $*"; }
PYTEST="python3 -m pytest -q -p no:cacheprovider"
BENCH="python3 launcher.py bench --model $FULL --random-weights --modes hifi --workloads en-ref3-out3,baseline"
BENCH="$BENCH --runs 5 --warmup 2"
CLIENTS="python3 -m tools.bench_clients --model $FULL --mode hifi --clients 1,8 --rounds 3"
PROFILE="python3 launcher.py profile --model $FULL --random-weights --mode hifi"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline -1
tree new || exit 1
for s in $STEPS; do case $s in
  ckpt) step ckpt 60 "[ -f $FULL/config.json ] || python3 -m tools.make_checkpoint --full $FULL" ;;
  tests) step tests 60 "$(in_new $PYTEST tests/kernels/test_embed.py tests/tools/test_bench_embed.py \
           tests/engine/test_fused_model.py tests/engine/test_batch.py tests/engine/test_continuous.py \
           tests/engine/test_runner_capture.py tests/engine/test_model.py tests/engine/test_modes.py)" ;;
  plant) tree plant kernels/embed.py 'tl.static_range(BOOKS)' 'tl.static_range(BOOKS - 1)' \
         && step plant 30 "cd /tmp/plant && PYTHONPATH=$SITE:/tmp/plant $PYTEST tests/kernels/test_embed.py \
              tests/engine/test_fused_model.py -k 'embed or matches_the_torch_path or reference_tokens'" ;;
  micro) TAIL=22 step micro 60 "$(in_new python3 -m tools.kernels.bench_embed --json $OUT/bench_embed.json)" ;;
  bench_old*) TAIL=2 step $s 50 "$BENCH --results $OUT/$s" ;;
  bench_new*) TAIL=2 step $s 50 "$(in_new $BENCH --results $OUT/$s)" ;;
  clients_old*) TAIL=2 step $s 70 "$CLIENTS --json $OUT/$s.json" ;;
  clients_new*) TAIL=2 step $s 70 "$(in_new $CLIENTS --json $OUT/$s.json)" ;;
  profile)
    TAIL=16 step profile_old 30 "$PROFILE --out $OUT/trace-old.json.gz"
    TAIL=16 step profile_new 30 "$(in_new $PROFILE --out $OUT/trace-new.json.gz)" ;;
  *) echo "unknown $s" ;;
esac; done
echo "=== summary (RANDOM weights)"
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print("| run | mode | workload | median ms (min-max) | p90 ms | kernels | first audio ms |")
print("|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(f"{out}/bench_*/bench-*.json"), key=os.path.getmtime):
    for r in json.load(open(path))["rows"]:
        lo, hi = r["spread_s"]
        print(f"| {path.split('/')[-2]} | {r['mode']} | {r['workload']} | {1e3 * r['median_s']:.1f} "
              f"({1e3 * lo:.0f}-{1e3 * hi:.0f}) | {1e3 * r['p90_s']:.1f} | {r['kernels']} | "
              f"{1e3 * (r['first_audio_s'] or 0):.0f} |")
print("\n| run | clients | audio s/s | first audio p50 / p90 ms |\n|---|---|---|---|")
for path in sorted(glob.glob(f"{out}/clients_*.json"), key=os.path.getmtime):
    for r in json.load(open(path)):
        print(f"| {os.path.basename(path)[:-5]} | {r['clients']} | {r['audio_per_s']:.1f} | "
              f"{1e3 * r['first_p50_s']:.0f} / {1e3 * r['first_p90_s']:.0f} |")
PY
echo "=== done $(date -u +%H:%M:%S), $(left) s left"
