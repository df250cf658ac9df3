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
LIMIT=${LIMIT:-540}
STEPS=${STEPS:-ckpt tests plant micro bench_old1 bench_new1 clients_old1 clients_new1 bench_new2 bench_old2 profile}
source docs/wip/gpu_steps.sh
CLIENTS="python3 -m tools.bench_clients --model $FULL --mode hifi --clients 1,8 --rounds 3"
PROFILE="python3 launcher.py profile --model $FULL --random-weights --mode hifi"
tree new fusedembed || exit 1
for s in $STEPS; do case $s in
  ckpt) step ckpt 60 "[ -f $FULL/config.json ] || python3 -m tools.make_checkpoint --full $FULL" ;;
  tests) step tests 60 "$(in_tree new $PYTEST tests/kernels/test_embed.py tests/tools/test_bench_embed.py \
           tests/engine/test_fused_model.py tests/engine/test_batch.py tests/engine/test_continuous.py \
           tests/engine/test_runner_capture.py tests/engine/test_model.py tests/engine/test_modes.py)" ;;
  plant) tree plant fusedembed kernels/embed.py 'tl.static_range(BOOKS)' 'tl.static_range(BOOKS - 1)' \
         && step plant 30 "$(in_tree plant $PYTEST tests/kernels/test_embed.py \
              tests/engine/test_fused_model.py) -k 'embed or matches_the_torch_path or reference_tokens'" ;;
  micro) TAIL=22 step micro 60 "$(in_tree new python3 -m tools.kernels.bench_embed --json $OUT/bench_embed.json)" ;;
  bench_old*) TAIL=2 step $s 50 "$BENCH --results $OUT/$s" ;;
  bench_new*) TAIL=2 step $s 50 "$(in_tree new $BENCH --results $OUT/$s)" ;;
  clients_old*) TAIL=2 step $s 70 "$CLIENTS --json $OUT/$s.json" ;;
  clients_new*) TAIL=2 step $s 70 "$(in_tree new $CLIENTS --json $OUT/$s.json)" ;;
  profile)
    TAIL=16 step profile_old 30 "$PROFILE --out $OUT/trace-old.json.gz"
    TAIL=16 step profile_new 30 "$(in_tree new $PROFILE --out $OUT/trace-new.json.gz)" ;;
  *) echo "unknown $s" ;;
esac; done
echo "=== summary (RANDOM weights)"
bench_table
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print("\n| run | clients | audio s/s | first audio p50 / p90 ms |\n|---|---|---|---|")
for path in sorted(glob.glob(f"{out}/clients_*.json"), key=os.path.getmtime):
    for r in json.load(open(path)):
        print(f"| {os.path.basename(path)[:-5]} | {r['clients']} | {r['audio_per_s']:.1f} | "
              f"{1e3 * r['first_p50_s']:.0f} / {1e3 * r['first_p90_s']:.0f} |")
PY
echo "=== done $(date -u +%H:%M:%S), $(left) s left"
