#!/usr/bin/env bash
# stepkernels (issue 22 targets 2 and 3): the step's two scoring kernels made faster with the same results.
# docs/wip/scorekernels.patch: kernels/reveal.py finds each sequence's quota key by 3-bit digits (11 counting passes,
# not 32 bisection steps) and, when the quota splits a tie, the tied slots' flat order the same way (6, not 24); its
# tiles are no wider than the bucket (128 frames at a first piece's 192 rows, not 512);
# kernels/cfg_score.py takes the class count as a constant (the padding lanes' exps fold away; the reductions are the
# same ops in the same order, so the same bits). H200 trace 2026-12-04 15:29, 896-row step: cfg_score 33.0 us, reveal
# 25.0 us. Applied in copies of the tree: /tmp/b (the patch alone), /tmp/c (docs/wip/fusedembed.patch + it; fusedembed
# alone is docs/wip/fusedembed-gpu.sh's). Run from the repo root of a main checkout WITHOUT the patches, on a machine
# with torch CUDA and triton; logs into $OUT.
# SITE: wheels from .carry/wheels (bash ../shared/gpu/app_wheels.sh .carry/wheels --no-av --upstream), FULL checkpoint,
# LIMIT seconds, STEPS in order. ~8 min on an H100 (a step is skipped when too little time is left).
#   ckpt     the random checkpoint at true sizes
#   tests_b  in /tmp/b: test_reveal (GPU: + the baseline grid, 32 sequences), test_bench_scoring, test_kernels_fused
#            -k cfg_score (+ 300 and 600 frames, a CUDA graph), test_fused_model -k reference_tokens (the runner's
#            fused scoring from CUDA graphs = the eager reference)                                          [all pass]
#   tests_c  in /tmp/c: test_reveal, test_embed, test_fused_model -k reference_tokens                      [all pass]
#   plant    in /tmp/plant: the patch, then the digit's slots above it not taken from the quota; test_reveal
#                                                        [the reveal's tests fail: 21 of 22 in the interpreter]
#   micro    tools.kernels.bench_scoring --baseline . in /tmp/b: equal first (cfg_score bit for bit, the reveal's
#            tokens and ids), then old/new us per call at 62 frames (bucket 192), 290 (896), 8 x 62 (1536). Expected:
#            cfg_score ~0.65-0.75x; reveal ~0.3-0.5x (more at 62 frames: tiles of 128, not 512)
#   bench*   launcher.py bench --modes hifi (en-ref3-out3, baseline; 5 runs, 2 warm-up), main and /tmp/c alternated;
#            expected medians ~1-2 ms lower at the baseline (~30 us x 32 steps + fusedembed's ~0.9 ms), kernels
#            per generation 224 fewer (fusedembed's); the spread is ~2 ms: read the two pairs together
# At the end, a compact table from the JSON; each step's whole log is $OUT/<step>.log.
LIMIT=${LIMIT:-480}
STEPS=${STEPS:-ckpt tests_b tests_c plant micro bench_old1 bench_new1 bench_new2 bench_old2}
source docs/wip/gpu_steps.sh
RUNNER="tests/engine/test_fused_model.py -k reference_tokens"
tree b scorekernels || exit 1
tree c "fusedembed scorekernels" || exit 1
for s in $STEPS; do case $s in
  ckpt) step ckpt 60 "[ -f $FULL/config.json ] || python3 -m tools.make_checkpoint --full $FULL" ;;
  tests_b) step tests_b 60 "$(in_tree b $PYTEST tests/kernels/test_reveal.py tests/tools/test_bench_scoring.py); \
             $(in_tree b $PYTEST $RUNNER); $(in_tree b $PYTEST tests/kernels/test_kernels_fused.py) -k \
             'cfg_score or cuda_graph'" ;;
  tests_c) step tests_c 60 "$(in_tree c $PYTEST tests/kernels/test_reveal.py tests/kernels/test_embed.py); \
             $(in_tree c $PYTEST $RUNNER)" ;;
  plant) tree plant scorekernels kernels/reveal.py 'bins == digit + 1' 'bins == digit' \
         && step plant 30 "$(in_tree plant $PYTEST tests/kernels/test_reveal.py) -k 'not noise'" ;;
  micro) TAIL=10 step micro 45 "$(in_tree b python3 -m tools.kernels.bench_scoring --baseline $ROOT)" ;;
  bench_old*) TAIL=2 step $s 50 "$BENCH --results $OUT/$s" ;;
  bench_new*) TAIL=2 step $s 50 "$(in_tree c $BENCH --results $OUT/$s)" ;;
  *) echo "unknown $s" ;;
esac; done
echo "=== summary (RANDOM weights; new = fusedembed + scorekernels)"
bench_table
echo "=== done $(date -u +%H:%M:%S), $(left) s left"
