#!/usr/bin/env bash
# The GPU checks docs/wip/joinlatency.patch waits for. Run from the repo root of a checkout with the patch applied
# (`git am docs/wip/joinlatency.patch`) on a machine with torch CUDA and triton; logs into $OUT. The app's wheels for
# the GPU image in .carry/wheels (`bash ../shared/gpu/app_wheels.sh .carry/wheels --no-av --upstream`), installed once
# into /tmp/site; the full-size random checkpoint made once in results/full. LIMIT: the seconds it may use; STEPS in
# order. Every test step runs without xdist, one process per line. Main's own figures to set beside `ahead`: the same
# bench_clients command on main (before the patch) in the same call.
#   tests     the branch's GPU tests (decode stream, host wait incl. review7's catch_up test), whole files
#   alone     each decode-stream GPU test in a process of its own: the decode stream is then the first high-priority
#             pool stream, as in the engine (in one process test 2 gets the second, test 3's engine the third); a
#             pass together and a fail alone (or the reverse) points at stream-to-hardware-queue sharing
#   conns     if `tests` failed in test_decode_stream: the same with CUDA_DEVICE_MAX_CONNECTIONS=32 (a pass there:
#             the decode stream shared a hardware queue with the default stream, a false dependency, not a code bug)
#   plants    in copies of the tree, expected results in brackets:
#             nostream  (DecodeStream never makes a stream)         [tests 1 and 4 pass, tests 2 and 3 fail]
#             nowait    (after() skips made.wait_in)                 [tests 1 and 4 fail (4: the decode reads zeros)]
#             newest    (catch_up waits for the newest step)         [both catch_up tests fail]
#             device    (catch_up waits for the whole device)        [does_not_wait_for_the_last_steps fails]
#   ahead     8 clients with RUN_AHEAD 2 (the branch), 4, 8 and 1000 (~ main's unbounded run-ahead): audio s/s, first
#             audio p50/p90, Server-Timing generate/decode; starvation shows as audio s/s falling with RUN_AHEAD small
set -uo pipefail
START=$(date +%s); LIMIT=${LIMIT:-570}
STEPS=${STEPS:-tests alone conns plants ckpt ahead}
SITE=/tmp/site; FULL=$PWD/results/full; mkdir -p results
[ -d $SITE ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE .carry/wheels/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=$SITE:$PWD OMP_NUM_THREADS=4
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
step() {  # name, seconds it needs at least, command
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then echo "=== $name skipped ($(left) s left)"; return; fi
  echo "=== $name $(date -u +%H:%M:%S)"
  timeout $(( $(left) - 3 )) bash -c "$*" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"
  grep -v "it/s\]" "$OUT/$name.log" | tail -${TAIL:-12}
}
copy() {  # a copy of the tree at /tmp/$1
  rm -rf /tmp/$1; mkdir /tmp/$1; cp -r app engine kernels tests tools assets launcher.py pyproject.toml /tmp/$1/
}
PYTEST="python3 -m pytest -q -p no:cacheprovider"
DS=tests/engine/test_decode_stream.py; HW=tests/engine/test_runner_host_wait.py
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
git log --oneline -1
for s in $STEPS; do case $s in
  tests) step tests 90 "$PYTEST $DS $HW tests/engine/test_device_span.py" ;;
  alone) for t in waits_for_the_work_that_made does_not_wait_for_work_queued read_back_while_later reads_the_codes_once; do
           step alone_$t 40 "$PYTEST $DS -k $t"; done ;;
  conns) grep -q "FAILED $DS" $OUT/tests.log 2>/dev/null && step conns 60 "CUDA_DEVICE_MAX_CONNECTIONS=32 $PYTEST $DS" ;;
  plants)
    copy nostream; sed -i 's/        self.stream = torch.cuda.Stream(device, priority=PRIORITY) if device.type == "cuda" else None/        self.stream = None/' /tmp/nostream/engine/decode_stream.py
    copy nowait; sed -i 's/^        made.wait_in(self.stream)$/        pass/' /tmp/nowait/engine/decode_stream.py
    copy newest; sed -i 's/self.queued.popleft().synchronize()/self.queued.pop().synchronize()/' /tmp/newest/engine/lm/continuous.py
    copy device; sed -i 's/            self.queued.popleft().synchronize()/            torch.cuda.synchronize(); self.queued.popleft()/' /tmp/device/engine/lm/continuous.py
    grep -c "self.stream = None" /tmp/nostream/engine/decode_stream.py; grep -c "^        pass" /tmp/nowait/engine/decode_stream.py
    grep -c "queued.pop()" /tmp/newest/engine/lm/continuous.py; grep -c "torch.cuda.synchronize(); self.queued" /tmp/device/engine/lm/continuous.py
    for v in nostream nowait; do step plant_$v 50 "cd /tmp/$v && PYTHONPATH=$SITE:/tmp/$v $PYTEST $DS"; done
    for v in newest device; do step plant_$v 50 "cd /tmp/$v && PYTHONPATH=$SITE:/tmp/$v $PYTEST $HW -k catch_up"; done ;;
  ckpt) step ckpt 90 "[ -f $FULL/config.json ] || python3 -m tools.make_checkpoint --full $FULL" ;;
  ahead) for n in ${AHEADS:-2 4 8 1000}; do
           copy ahead$n; sed -i "s/^RUN_AHEAD = 2$/RUN_AHEAD = $n/" /tmp/ahead$n/engine/lm/continuous.py
           grep "^RUN_AHEAD" /tmp/ahead$n/engine/lm/continuous.py
           step ahead$n 80 "cd /tmp/ahead$n && PYTHONPATH=$SITE:/tmp/ahead$n python3 -m tools.bench_clients --model $FULL --mode hifi --clients 1,8 --rounds 3 --json $OUT/clients_ahead$n.json"
         done ;;
  *) echo "unknown $s" ;;
esac; done
echo "done $(date -u +%H:%M:%S), $(left) s left"
