#!/usr/bin/env bash
# Issue 23's tables in one call at one commit: long text streamed (1, 5, 10, 30 min) and best of N in both modes
# (`launcher.py bench --batching`), then 1, 2, 4, 8 streaming API clients in High fidelity with the server's GPU memory.
# From the repo root on any NVIDIA GPU, with the app's wheels carried (carry [".carry/wheels"]); results into $OUT:
#   T=570 bash docs/wip/issue23-closing-gpu.sh
# ~1.5 min per batching mode, ~3.5 min of clients. RANDOM WEIGHTS (true sizes): say so with every figure.
set -uo pipefail
START=$(date +%s); T=${T:-570}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SITE=/tmp/site; python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE .carry/wheels/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=$SITE:$PWD FULL=${FULL:-/tmp/full}
[ -f "$FULL/config.json" ] || python3 -m tools.make_checkpoint --full "$FULL" 2>&1 | tail -2
left() { echo $(( T - ($(date +%s) - START) )); }
for mode in hifi realtime; do
  echo "=== batching $mode $(date -u +%H:%M:%S) ($(left) s left)"
  timeout $(( $(left) - 240 )) python3 launcher.py bench --batching --model "$FULL" --random-weights --modes $mode \
    --runs 1 --results "$OUT/batching-$mode" 2>&1 | grep -v "it/s\]" | tail -40
done
echo "=== clients $(date -u +%H:%M:%S) ($(left) s left)"
timeout $(( $(left) - 10 )) python3 -m tools.bench_clients --model "$FULL" --mode hifi --clients 1,2,4,8 --rounds 3 \
  --json "$OUT/clients-1248.json" 2>&1 | tail -14
