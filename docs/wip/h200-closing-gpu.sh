#!/usr/bin/env bash
# Issue 22's closing run on an H200 (no H200 could be started since 2026-12-05): the GPU tests (target 4: BENCHMARKS.md
# records the H200 run's summary line), the realtime kernel checks (target 7) and the W4A4 CUDA kernel with its SASS,
# both modes beside upstream on the 3 s line and the baseline (targets 1-3, 5), then both modes' profiles if time is
# left. From the repo root of main on the
# H200, with the app's wheels carried (`bash ../shared/gpu/app_wheels.sh .carry/wheels --no-av --upstream`, carry
# [".carry/wheels"]); results into $OUT:  T=570 bash docs/wip/h200-closing-gpu.sh
# ~2 min of tests (-n 8), ~0.5 min of checks, ~3 min of bench; profiles ~1 min each. RANDOM WEIGHTS (true sizes).
set -uo pipefail
START=$(date +%s); T=${T:-570}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || echo "NOT an H200: say so with every figure"
FULL=/tmp/full MODES=upstream,hifi,realtime WORKLOADS=en-ref3-out3,baseline BENCH_ARGS="${BENCH_ARGS:---runs 10 --warmup 2}" \
  timeout $(( T - 30 )) bash tests/gpu/run_gpu.sh --wheels .carry/wheels setup ckpt gputests realtime w4a4 bench 2>&1 \
    | tail -120
LEFT=$(( T - ($(date +%s) - START) ))
if [ "$LEFT" -gt 150 ]; then
  FULL=/tmp/full PROFILE_MODES="hifi realtime" timeout $(( LEFT - 10 )) \
    bash tests/gpu/run_gpu.sh --wheels .carry/wheels setup profile 2>&1 | tail -60
else
  echo "profiles skipped ($LEFT s left)"
fi
