#!/usr/bin/env bash
# review8's GPU checks of engine/decode_graphs.py (commits 43cfc34 one capture stream, cfd3818 capture OOM -> eager,
# d484172 two-GPU test). Run from the repo root of a main checkout holding them, on a machine with torch CUDA and
# triton; logs into $OUT. SITE: wheels from .carry/wheels (bash ../shared/gpu/app_wheels.sh .carry/wheels --no-av --upstream), FULL: the random full-size checkpoint, LIMIT seconds, STEPS in order.
#   tests   test_decode_graphs (GPU: bit for bit, out of range, back to back latest first, pool reuse, capture OOM),
#           test_codec, test_batch_engine                                              [all pass]
#   plants  in copies of the tree, expected results in brackets:
#           streameach  (a new torch.cuda.Stream per capture, as before 43cfc34)
#                       [test_each_capture_reuses_the_pool_memory... fails: held[-1] ~ 12 x held[0]; the rest pass]
#           latecopy    (a replay's copy to the host queued only when its waves are read)
#                       [test_graphs_of_the_shared_pool_replayed_back_to_back fails; the rest pass]
#           nopoolreset (a failed first capture leaves DecodeGraphs._pool as it was)
#                       [test_a_capture_short_of_memory_gives_the_eager_waves_and_leaves_a_pool... fails with a
#                        RuntimeError from capture_begin (the pool's use_count 0); a pass would mean this PyTorch
#                        takes captures into a released pool and the reset is only harmless]
#           nofallback  (a capture's OutOfMemoryError not caught)          [both short_of_memory tests fail]
#   probe   docs/wip/decodegraphs_pool_probe.py on the full codec, this tree and streameach: the pool's MiB after 24
#           captures by one thread and by 8 threads (expected: streameach several times this tree's; this tree's
#           about one decode's peak plus a cuBLAS workspace per capturing thread)
#   bench   8 clients, graphs (this tree) and no graphs (decoder_for -> codec), a pair: server GPU GiB, decode
#           spans (compare with the lead's 5.48 GiB eager, 6.93-7.57 GiB with a stream per capture)
#   twogpu  ONLY on a 2-GPU machine (kind nvidia-h100-x2): the cuda:1 test, and its plant
#           nodevice (no torch.cuda.device guard in _capture, torch.cuda.Stream() on the current device)  [it fails]
set -uo pipefail
START=$(date +%s); LIMIT=${LIMIT:-570}
STEPS=${STEPS:-ckpt tests probe plants bench}
SITE=/tmp/site; FULL=$PWD/results/full; mkdir -p results
[ -d $SITE ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE .carry/wheels/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=$SITE:$PWD OMP_NUM_THREADS=4
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
step() {
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then echo "=== $name skipped ($(left) s left)"; return; fi
  echo "=== $name $(date -u +%H:%M:%S)"
  timeout $(( $(left) - 3 )) bash -c "$*" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"
  grep -v "it/s\]" "$OUT/$name.log" | grep -v "^{\|^\s*$\|^SKIPPED" | tail -${TAIL:-8}
}
tree() {  # a copy of the tree at /tmp/$1 with python edits: old -> new (pairs) in file
  local v=$1 file=$2; shift 2
  rm -rf /tmp/$v; mkdir /tmp/$v; cp -r app engine kernels tests tools assets launcher.py pyproject.toml /tmp/$v/
  python3 - /tmp/$v/$file "$@" <<'PY'
import sys
p, *edits = sys.argv[1:]; s = open(p).read()
for old, new in zip(edits[::2], edits[1::2]):
    assert s.count(old) == 1, (p, old); s = s.replace(old, new)
open(p, "w").write(s)
PY
}
PYTEST="python3 -m pytest -q -p no:cacheprovider"
T=tests/engine/test_decode_graphs.py; DG=engine/decode_graphs.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline -1
for s in $STEPS; do case $s in
  ckpt) step ckpt 60 "[ -f $FULL/config.json ] || python3 -m tools.make_checkpoint --full $FULL" ;;
  tests) step tests 60 "$PYTEST $T tests/engine/test_codec.py tests/engine/test_batch_engine.py" ;;
  plants)
    tree streameach $DG 'with torch.cuda.stream(self._stream):' 'with torch.cuda.stream(torch.cuda.Stream(device)):'
    tree latecopy $DG '        return codec.queue_readback(self.waves, ranges)' '        class Late:  # planted
            def waves(late):
                return codec.queue_readback(self.waves, ranges).waves()
        return Late()'
    tree nopoolreset $DG '                    self._pool = None' '                    pass'
    tree nofallback $DG 'except torch.OutOfMemoryError:' 'except KeyError:'
    for v in streameach latecopy nopoolreset nofallback; do step plant_$v 25 "cd /tmp/$v && PYTHONPATH=$SITE:/tmp/$v $PYTEST $T"; done ;;
  probe)
    [ -d /tmp/streameach ] || tree streameach $DG 'with torch.cuda.stream(self._stream):' 'with torch.cuda.stream(torch.cuda.Stream(device)):'
    step probe 50 "python3 docs/wip/decodegraphs_pool_probe.py $FULL $OUT/pool_probe.json"
    step probe_streameach 50 "cd /tmp/streameach && PYTHONPATH=$SITE:/tmp/streameach python3 $PWD/docs/wip/decodegraphs_pool_probe.py $FULL $OUT/pool_probe_streameach.json" ;;
  bench)
    [ -d /tmp/nographs ] || tree nographs engine/engine.py 'self._decoder = decoder_for(codec, device)' 'self._decoder = codec'
    for r in ${PAIRS:-1}; do  # PAIRS="1 2": two alternated pairs
      step c_graphs$r 45 "python3 -m tools.bench_clients --model $FULL --mode hifi --clients 1,8 --rounds 3 --json $OUT/clients_graphs$r.json"
      step c_nographs$r 45 "cd /tmp/nographs && PYTHONPATH=$SITE:/tmp/nographs python3 -m tools.bench_clients --model $FULL --mode hifi --clients 1,8 --rounds 3 --json $OUT/clients_nographs$r.json"
    done ;;
  twogpu)
    step twogpu 40 "$PYTEST $T -k second_gpu -rs"
    tree nodevice $DG 'with torch.cuda.device(device), torch.inference_mode():' 'with torch.inference_mode():' 'self._stream = torch.cuda.Stream(device)' 'self._stream = torch.cuda.Stream()'
    step plant_nodevice 40 "cd /tmp/nodevice && PYTHONPATH=$SITE:/tmp/nodevice $PYTEST $T -k second_gpu -rs" ;;
  *) echo "unknown $s" ;;
esac; done
echo "done $(date -u +%H:%M:%S), $(left) s left"
