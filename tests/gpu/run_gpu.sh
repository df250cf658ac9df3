#!/usr/bin/env bash
# GPU session script for the lent H200 (see BENCHMARKS.md). Runs from the repo root there:
#   bash tests/gpu/run_gpu.sh STEP...   (steps: setup ckpt bench profile kernels attention realtime w4a4 decode gputests)
# Carries: .whl (omnivoice 0.2.1, pydub, soundfile, cffi, pycparser, platformdirs wheels; see BENCHMARKS.md).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
FULL=/tmp/full_random
BENCH_ARGS=${BENCH_ARGS:---runs 5 --warmup 2}
for step in "$@"; do
  echo "=== $step $(date -u +%H:%M:%S)"
  case $step in
    setup) python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
           nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
           python3 -c "import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)" ;;
    ckpt) [ -f $FULL/config.json ] || python3 -m tools.make_checkpoint --full $FULL 2>&1 | tail -3 ;;
    bench) python3 launcher.py bench --model $FULL --random-weights --modes ${MODES:-upstream,eager,hifi} \
             --workloads ${WORKLOADS:-all} $BENCH_ARGS --results "$OUT" --append-md "$OUT/bench.md" 2>&1 | grep -v "it/s\]" ;;
    profile) for m in ${PROFILE_MODES:-upstream eager hifi realtime}; do
               python3 launcher.py profile --model $FULL --random-weights --mode $m --out "$OUT/trace-$m.json.gz" 2>&1 | tail -25
             done ;;
    kernels) python3 -m tools.kernels.bench_fused --dtype fp16 --rows 600 1200 2>&1 | tail -30 ;;
    attention) timeout 150 python3 -m tools.kernels.bench_attention 2>&1 | tail -40 ;;
    realtime) timeout 120 python3 -m tools.kernels.check_realtime_gpu 2>&1 | tail -45 ;;
    w4a4) timeout 90 python3 -m tools.kernels.check_w4a4_cuda --quick --no-bench 2>&1 | tail -25 ;;
    decode) timeout 60 python3 -m tools.kernels.bench_decode 2>&1 | tail -15 ;;
    gputests) timeout 240 python3 -m pytest -q -p no:cacheprovider tests/kernels tests/engine/test_model.py tests/engine/test_runner.py 2>&1 | tail -25 ;;
  esac
done
