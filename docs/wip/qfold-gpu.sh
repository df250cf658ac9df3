#!/usr/bin/env bash
# qfold (issue 22 target 2, issue 23's step): q's per-head RMSNorm + RoPE done by the ragged attention kernel as it
# loads its q tile, straight from the qkv GEMM's output; kernels/qk_norm_rope.py then does k alone (k_norm_rope: half
# the programs, no q write, no q read-back). H200 trace 2026-12-04 15:29, 896-row step: qk-norm+RoPE 4.2-5.2 us per
# layer, attention 20.1 us. The norm's mean square is now summed in one fixed order (pairwise) and its products are
# mul.rn (never contracted into an fma), so the attention (fp fusion on) and qk_norm_rope (off) give the same q bits;
# against main the q and k bits move in ~3e-5 of the elements (the summation order; interpreter count at 64 rows).
# docs/wip/qfold.patch (made on main 3195872) is applied in a copy of the tree (/tmp/new) and measured against this
# tree (main), alternated.
# Run from the repo root of a main checkout WITHOUT the patch, on a machine with torch CUDA and triton; logs and JSON
# into $OUT. SITE: wheels from .carry/wheels (bash ../shared/gpu/app_wheels.sh .carry/wheels --no-av --upstream), FULL
# checkpoint, LIMIT seconds, STEPS in order. ~8 min on an H100 (a step is skipped when too little time is left).
#   ckpt          the random checkpoint at true sizes
#   tests         in /tmp/new: test_ragged_attention (GPU: + the folded q bit for bit the unfolded one at the model's
#                 shapes, 896 and 2 x 192 rows, fp16 and bf16), test_bench_qfold, test_fused_model / test_batch /
#                 test_continuous / test_runner_capture (the runner from CUDA graphs with the fold); then
#                 test_kernels_fused and test_fused_gemm -k 'qk_norm_rope or cuda_graph or reject' (k_norm_rope =
#                 qk_norm_rope's k, CUDA graphs; the GEMM epilogue, the other user of norm_rope_halves)   [all pass;
#                 in the interpreter here: 205 passed, 94 skipped]
#   plant_weight  in /tmp/plantw: the patch, then q's second-half norm weight read from the first half, in the
#                 attention only; the fold tests                     [all 14 fail; in the interpreter 10 of 10 did]
#   plant_tree    in /tmp/plantt: the patch, then the mean square summed by tl.sum again (its order follows each
#                 kernel's register layout; Triton 3.9 here: 4 per thread + 16 lanes in qk_norm_rope's q tile,
#                 8 + 8 in the attention's); the fold tests   [expected: the model-shape ones fail at least; the
#                 interpreter cannot tell (numpy sums both alike: 10 passed here) - the GPU run is what shows it]
#   micro         tools.kernels.bench_qfold --baseline . in /tmp/new: fold = unfold and k = qk's k bit for bit,
#                 elements differing from main (expected <= ~1e-4 of them, a few ulps), errors vs fp32; then us per
#                 layer (28 layers per CUDA graph) of main's qk_norm_rope + attention against k_norm_rope + attention
#                 with q folded at 192 / 896 / 1536 rows. Expected at 896 rows: the q/k kernel ~4.5 -> ~1.5-2 us (a
#                 third of its bytes: 6 KB/row read + 6 KB/row written -> 2 + 2), attention +0.5-1.5 us (each
#                 program norms its 64 x 128 q tile before its loop; q reaches the MMA from registers), so ~1.5-3
#                 us saved per layer; less, maybe none, at 192 rows (latency-bound)
#   bench*        launcher.py bench --modes hifi (en-ref3-out3, baseline; 5 runs, 2 warm-up), main and /tmp/new
#                 alternated: `kernels` per generation unchanged (still two launches per layer); medians ~1-2.5 ms
#                 lower at the baseline (28 x 32 x 1.5-3 us), the spread is ~2 ms: read the two pairs together
#   profile       launcher.py profile --mode hifi (baseline), main and /tmp/new: the q/k kernel and attention ms
#   plant_rn      (last, if time is left) in /tmp/plantr: the patch, then norm_rope_halves' multiply as a plain
#                 mul.f32 (ptxas may fuse it with the next add where fp fusion is on: the attention); the fold tests
#                 [expected: the model-shape ones fail; if they pass, ptxas fused nothing there this time]
# At the end, the bench table from the JSON; each step's whole log is $OUT/<step>.log.
LIMIT=${LIMIT:-480}
STEPS=${STEPS:-ckpt tests plant_weight plant_tree micro bench_old1 bench_new1 bench_new2 bench_old2 profile plant_rn}
source docs/wip/gpu_steps.sh
PROFILE="python3 launcher.py profile --model $FULL --random-weights --mode hifi"
FOLD="tests/kernels/test_ragged_attention.py -k norms_and_rotates"
tree new qfold || exit 1
for s in $STEPS; do case $s in
  ckpt) step ckpt 60 "[ -f $FULL/config.json ] || python3 -m tools.make_checkpoint --full $FULL" ;;
  tests) step tests 120 "$(in_tree new $PYTEST tests/kernels/test_ragged_attention.py tests/tools/test_bench_qfold.py \
           tests/engine/test_fused_model.py tests/engine/test_batch.py tests/engine/test_continuous.py \
           tests/engine/test_runner_capture.py); $(in_tree new $PYTEST tests/kernels/test_kernels_fused.py \
           tests/tools/test_fused_gemm.py) -k 'qk_norm_rope or cuda_graph or reject'" ;;
  plant_weight) tree plantw qfold kernels/ragged_attention.py 'tl.load(weight_ptr + HALF + cols)' \
                'tl.load(weight_ptr + cols)' && step plant_weight 30 "$(in_tree plantw $PYTEST $FOLD)" ;;
  plant_tree) tree plantt qfold kernels/qk_norm_rope.py '    x = mul_rn_f32(x, x)' \
              '    return tl.sum(mul_rn_f32(x, x), axis=1)' && step plant_tree 30 "$(in_tree plantt $PYTEST $FOLD)" ;;
  plant_rn) tree plantr qfold kernels/_triton.py '"mul.rn.f32 $0, $1, $2;"' '"mul.f32 $0, $1, $2;"' \
            && step plant_rn 30 "$(in_tree plantr $PYTEST $FOLD)" ;;
  micro) TAIL=8 step micro 45 "$(in_tree new python3 -m tools.kernels.bench_qfold --baseline $ROOT \
           --json $OUT/bench_qfold.json)" ;;
  bench_old*) TAIL=2 step $s 50 "$BENCH --results $OUT/$s" ;;
  bench_new*) TAIL=2 step $s 50 "$(in_tree new $BENCH --results $OUT/$s)" ;;
  profile)
    TAIL=16 step profile_old 30 "$PROFILE --out $OUT/trace-old.json.gz"
    TAIL=16 step profile_new 30 "$(in_tree new $PROFILE --out $OUT/trace-new.json.gz)" ;;
  *) echo "unknown $s" ;;
esac; done
echo "=== summary (RANDOM weights)"
bench_table
echo "=== done $(date -u +%H:%M:%S), $(left) s left"
