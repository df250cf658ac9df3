#!/usr/bin/env bash
# Benchmarks, profiles, kernel checks and the GPU-only tests on any machine with an NVIDIA GPU, from the repo
# root, in a Python that already has torch (CUDA build), triton and transformers:
#
#   bash tests/gpu/run_gpu.sh [--wheels DIR] STEP...
#
# Steps: setup ckpt bench profile kernels attention attnfp8 realtime fp8wait normfp8 fp8acc fp8scaling gemm gemmfused cutlass fa3 w4a4 decode clients captures i8down gputests
# archs smallcard notriton int4graphs. `--wheels DIR` names a folder of
# wheels to install first (without dependencies) for what the GPU image lacks, e.g. omnivoice 0.2.1 (for the
# `upstream` bench mode), pydub, soundfile, cffi, pycparser and platformdirs built for its Python.
# Results go to $OUT (default: a new temporary folder); the full-size random-weight checkpoint is made once
# in $FULL (default: VoiceDesk's cache). Figures from it are random-weight figures: say so where they are used.
# normfp8 times the quantizing norms beside those of $BEFORE/kernels when BEFORE names such a folder.
set -uo pipefail
WHEELS=""
if [ "${1:-}" = "--wheels" ]; then WHEELS=$2; shift 2; fi
OUT=${OUT:-$(mktemp -d)}; mkdir -p "$OUT"
SITE=$(mktemp -d)
export PYTHONUNBUFFERED=1 PYTHONPATH=$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}  # keeps a caller's (e.g. wheels installed already)
FULL=${FULL:-$(python3 -c "from engine.folders import user_folders; print(user_folders().cache / 'random-full-size')")}
BENCH_ARGS=${BENCH_ARGS:---runs 5 --warmup 2}
echo "results in $OUT"
for step in "$@"; do
  echo "=== $step $(date -u +%H:%M:%S)"
  case $step in
    setup) [ -n "$WHEELS" ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
             --target "$SITE" "$WHEELS"/*.whl
           nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
           python3 -c "import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)" ;;
    ckpt) [ -f "$FULL/config.json" ] || python3 -m tools.make_checkpoint --full "$FULL" 2>&1 | tail -3 ;;
    bench) python3 launcher.py bench --model "$FULL" --random-weights --modes ${MODES:-upstream,eager,hifi} \
             --workloads ${WORKLOADS:-all} $BENCH_ARGS --results "$OUT" --append-md "$OUT/bench.md" 2>&1 | grep -v "it/s\]" ;;
    profile) for m in ${PROFILE_MODES:-upstream eager hifi realtime}; do
               python3 launcher.py profile --model "$FULL" --random-weights --mode $m --out "$OUT/trace-$m.json.gz" 2>&1 | tail -25
             done ;;
    kernels) python3 -m tools.kernels.bench_fused --dtype fp16 --rows 600 1200 2>&1 | tail -30 ;;
    attention) timeout 150 python3 -m tools.kernels.bench_attention 2>&1 | tail -40 ;;
    attnfp8) python3 -m tools.kernels.aot_attention_fp8 2>&1 | tail -2; timeout 150 python3 -m pytest -q -p no:cacheprovider \
             tests/tools/test_attention_fp8.py 2>&1 | tail -5; timeout 120 python3 -m tools.kernels.bench_attention_fp8 --json "$OUT/attention_fp8.jsonl" 2>&1 | tail -20 ;;
    realtime) timeout 120 python3 -m tools.kernels.check_realtime_gpu 2>&1 | tail -45 ;;
    # why Realtime's GPU idles before gate_up's FP8 GEMM: _scaled_mm's output/scaling variants, one replay's activities
    fp8wait) timeout 120 python3 -m tools.kernels.fp8_product_wait 2>&1 | tail -40 ;;
    normfp8) timeout 120 python3 -m tools.kernels.bench_rmsnorm_fp8 ${BEFORE:+--before "$BEFORE"} \
               --json "$OUT/rmsnorm_fp8.jsonl" 2>&1 | tail -20 ;;
    fp8acc) timeout 120 python3 -m tools.kernels.fp8_accumulation 2>&1 | tail -20 ;;
    fp8scaling) timeout 120 python3 -m tools.kernels.bench_fp8_scaling --json "$OUT/fp8_scaling.json" 2>&1 | tail -30 ;;
    # which of o_proj / down_proj pay in FP8 with unit scales (issue 22 target 1): one layer's chains, the candidates,
    # the whole model's step per choice of FP8 linears (engine/quant/realtime.py FP8_LINEARS is the switch)
    fp8layer) timeout 150 python3 -m tools.kernels.bench_fp8_layer --json "$OUT/bench_fp8_layer.json" 2>&1 | tail -80 ;;
    gemm) timeout 120 python3 -m tools.kernels.bench_gemm_n1024 2>&1 | tail -20 ;;
    gemmfused) timeout 200 python3 -m tools.kernels.bench_gemm_fused 2>&1 | tail -60 ;;
    # CUTLASS 3 sm90 GEMMs against cuBLAS (tools/kernels/cutlass_gemm): CUTLASS_LIB names a built library; if it is
    # unset or does not load, the library is built here from CUTLASS_SRC (nvidia-cutlass 4.2.0.0's cutlass_library/source);
    # CUTLASS_ARGS adds bench options (e.g. --rows 256 896 --no-swiglu)
    cutlass) LIB=${CUTLASS_LIB:-}
             if [ -z "$LIB" ] || ! python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$LIB"; then
               if ! LIB=$(python3 -m tools.kernels.cutlass_gemm.build --cutlass "${CUTLASS_SRC:-}" \
                            --out /tmp/cutlass_gemm_build); then echo "cutlass bench exit 1 (build failed)"; continue; fi
             fi
             timeout 420 python3 -m tools.kernels.cutlass_gemm.bench --library "$LIB" --json "$OUT/cutlass_gemm.json" \
               ${CUTLASS_ARGS:-} 2>&1 | tail -600; echo "cutlass bench exit ${PIPESTATUS[0]}" ;;
    # FlashAttention-3's varlen forward beside the ragged kernel (tools/kernels/fa3_probe): FA3_LIB names a built library;
    # if it is unset or does not load, it is built here from FA3_SRC (a flash-attention checkout) and CUTLASS_SRC
    fa3) LIB=${FA3_LIB:-}
         if [ -z "$LIB" ] || ! python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$LIB"; then
           if ! LIB=$(python3 -m tools.kernels.fa3_probe.build --fa3 "${FA3_SRC:-}" --cutlass "${CUTLASS_SRC:-}" \
                        --out /tmp/fa3_probe_build); then echo "fa3 bench exit 1 (build failed)"; continue; fi
         fi
         timeout 300 python3 -m tools.kernels.fa3_probe.bench --library "$LIB" --json "$OUT/fa3_probe.json" 2>&1 \
           | tail -60; echo "fa3 bench exit ${PIPESTATUS[0]}" ;;
    w4a4) timeout 90 python3 -m tools.kernels.check_w4a4_cuda --quick --no-bench 2>&1 | tail -25 ;;
    # W8A8 int8 down_proj with its own kernels (kernels/int8.py): its GPU tests, then the chains timed against fp16
    i8down) OMP_NUM_THREADS=2 timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -k int8 tests/kernels/test_int8.py \
              tests/tools/test_bench_int8_down.py tests/engine/test_fused_model.py 2>&1 | tail -8
            timeout 150 python3 -m tools.kernels.bench_int8_down --json "$OUT/int8_down.json" 2>&1 | tail -100 ;;
    decode) timeout 60 python3 -m tools.kernels.bench_decode 2>&1 | tail -15 ;;
    # Concurrent streaming API clients through a launched server (issue 23): audio per second, first audio p50/p90
    clients) timeout 300 python3 -m tools.bench_clients --model "$FULL" --mode ${CLIENT_MODE:-hifi} \
               --clients ${CLIENTS:-1,8} --rounds ${ROUNDS:-3} --json "$OUT/clients.json" 2>&1 | tail -12 ;;
    # Whether the host waits for queued replays when a running batch re-packs (issue 23: engine/lm/continuous.py)
    repackwait) timeout 150 python3 -m tools.repack_host_wait --model "$FULL" --json "$OUT/repack_host_wait.json" \
                  2>&1 | tail -20 ;;
    # Which CUDA calls of another thread break a CUDA-graph capture (tools/capture_overlap.py), one process each
    captures) for mode in global thread_local; do
                for op in none kernel_only event_query event_synchronize tensor_cpu small_model new_device_memory \
                          pinned_alloc mem_get_info; do
                  timeout 20 python3 -m tools.capture_overlap $op $mode 2>/dev/null | tee -a "$OUT/capture_overlap.jsonl" \
                    || echo "{\"op\": \"$op\", \"mode\": \"$mode\", \"process\": \"failed\"}"
                done
              done ;;
    # Every test that takes the GPU when there is one (the wheels' soundfile is needed; test_normalize and
    # the normalize_* goldens need the tn extra, which the GPU image lacks). pytest-xdist is in the image.
    gputests) OMP_NUM_THREADS=2 timeout 400 python3 -m pytest -q -p no:cacheprovider -n 8 tests/kernels tests/engine \
                tests/tools/test_bench.py 2>&1 | tail -45 ;;
    # What the users' GPUs meet (docs/portability.md): every Triton kernel built for sm_80/86/89/90/120 by this
    # machine's Triton against each arch's shared memory (no GPU used); the engine in 7 GiB as on an 8 GB card;
    # the engine and the kernel/engine tests with Triton unimportable, as with pip's PyTorch for Windows.
    archs) timeout 120 python3 -m tools.kernels.aot_archs 2>&1 | grep -v " ok$"; echo "aot_archs exit ${PIPESTATUS[0]}" ;;
    smallcard) for gib in ${SMALL_GIB:-7.0}; do for m in ${SMALL_MODES:-hifi realtime}; do
                 timeout 150 python3 -m tools.small_card --model "$FULL" --mode $m --gib $gib \
                   --json "$OUT/small_card.jsonl" 2>&1 | grep -v "it/s\]" | tail -8
               done; done ;;
    notriton) BLOCK=$(mktemp -d); mkdir -p "$BLOCK/triton"
              echo 'raise ModuleNotFoundError("No module named triton (blocked)", name="triton")' > "$BLOCK/triton/__init__.py"
              PYTHONPATH=$BLOCK:$PYTHONPATH timeout 150 python3 -m tools.small_card --model "$FULL" --mode realtime \
                --gib 60 --quick --json "$OUT/small_card_notriton.jsonl" 2>&1 | grep -v "it/s\]" | tail -8
              PYTHONPATH=$BLOCK:$PYTHONPATH timeout 240 python3 -m tools.kernels.check_int4_runner --model "$FULL" \
                --json "$OUT/int4_runner_notriton.json" 2>&1 | grep -v "it/s\]" | tail -6
              PYTHONPATH=$BLOCK:$PYTHONPATH OMP_NUM_THREADS=2 timeout 100 python3 -m pytest -q -p no:cacheprovider -n 8 \
                tests/kernels 2>&1 | tail -25 ;;
    # the CUDA INT4 GEMM inside the runner's graphs (RTX 30/40, L4 Realtime), emulated on a GPU without INT4 MMA
    int4graphs) timeout 240 python3 -m tools.kernels.check_int4_runner --model "$FULL" --json "$OUT/int4_runner.json" \
                  2>&1 | grep -v "it/s\]" | tail -8 ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
