#!/usr/bin/env bash
# decodeprio (issue 23, the p90 of staggered clients): a GPU's codec decodes (eager, graph replays, the copy to the
# host) on a stream of their own at the device's highest priority, behind only the end of the step that finished their
# tokens, not behind the steps the host queued since for the other members of the running batch
# (docs/wip/decodeprio.patch, engine/decode_stream.py). It is applied in a copy of the tree (/tmp/new) and measured
# against this tree (main), alternated old, new, new, old, with clients all at once and 15 ms apart.
# Run from the repo root of a main checkout WITHOUT the patch (it needs bench_clients --stagger-ms, ef681ed), on a
# machine with torch CUDA and triton; logs and JSON into $OUT. SITE: wheels from .carry/wheels, FULL checkpoint, LIMIT
# seconds (default 540), STEPS in order; a step is skipped when too little time is left. ~10-11 min for all: with the
# default LIMIT the last stagger-0 steps may be skipped (run again with STEPS="ckpt old0 new0 new0b old0b").
#   ckpt        the random checkpoint at true sizes (RANDOM WEIGHTS: say so with every figure)
#   tests       in /tmp/new: test_decode_stream (GPU: the stream's priority is priority_range()'s greatest and not the
#               default stream; a decode, 40 frames from a graph and 300 eager, waits for spins queued before its span's
#               end and returns while spins queued after still run, with an idle decode's waves), test_device_span,
#               test_decode_graphs (the engine's decodes from graphs on the decode stream, the pool on its capture
#               stream), test_runner_host_wait (its busy helper moved to device_work.py), test_batch_engine
#               [all pass; skipped: the two-GPU tests only]
#   old15 new15 new15b old15b
#               bench_clients --clients 1,8 --rounds 3 --stagger-ms 15, main / the patch (JSON clients_<step>.json).
#               Main at 17:23 (30be7f9, BENCHMARKS.md): p90 703 ms (12.8x), the ladder 53-55, 83-84, 111-112,
#               140-141, 168-173, 656-730 x3 ms every round; clients 1-4's `decode` 34-121 ms is their wait for the
#               steps the host queued before their first (Timings.decode_s, 4f9f7c4), 5-7 wait behind the early
#               streams' big groups. Expected: the patch lowers only what a decode itself waits for behind steps
#               queued after its tokens' (a call that finishes while others in its batch run on: the two early
#               clients of the 17:10 third round, 9.5-12.2 ms against 2.3 alone): a few ms off some `decode` spans,
#               the ladder and the p90 about as on main (neither wait above is a decode's)
#   plant       (cheap; after the stagger-15 pairs) in /tmp/plantw: the patch without the wait for the span, and in
#               /tmp/plants: the patch with the decodes queued on the default stream again; test_decode_stream's
#               decode test. [plantw: both parametrisations fail at `busy.query()` (the decode no longer waits for
#               the work that made its tokens); plants: both fail at `returned_while_the_device_was_busy` (it waits
#               for the later spins)]
#   old0 new0 new0b old0b
#               the same at --stagger-ms 0 (today's bench). Expected: within the spread of each other (all eight
#               finish at one step, nothing but their own decodes queued after it); server GPU GiB may be a little
#               higher with the patch (eager decodes keep their blocks for their stream)
# At the end: one row per bench (8 clients: audio s/s x one, first audio p50/p90, p90 x lone, Server-Timing decode
# and engine median (max), server GPU GiB); each step's whole log is $OUT/<step>.log.
set -uo pipefail
START=$(date +%s); LIMIT=${LIMIT:-540}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
STEPS=${STEPS:-ckpt tests old15 new15 new15b old15b plant old0 new0 new0b old0b}
SITE=/tmp/site; FULL=$PWD/results/full; mkdir -p results; ROOT=$PWD
PATCH=$ROOT/docs/wip/decodeprio.patch
[ -d $SITE ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE \
  .carry/wheels/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=$SITE:$PWD OMP_NUM_THREADS=4
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
step() {  # step NAME SECONDS_NEEDED COMMAND: its log in $OUT/NAME.log, its tail (TAIL lines) here
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then echo "=== $name skipped ($(left) s left)"; return; fi
  echo "=== $name $(date -u +%H:%M:%S)"
  timeout $(( $(left) - 3 )) bash -c "$*" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"
  grep -v "it/s\]" "$OUT/$name.log" | grep -v "^{\|^\s*$\|^SKIPPED" | tail -${TAIL:-14}
}
tree() {  # /tmp/$1: this tree with the patch applied, then one edit (file, old, new) if given
  local v=$1 file=${2:-}
  rm -rf /tmp/$v; mkdir /tmp/$v; cp -r app engine kernels tests tools assets launcher.py pyproject.toml /tmp/$v/
  cp --parents docs/ARCHITECTURE.md /tmp/$v/  # the patch's one docs file
  (cd /tmp/$v && patch -p1 -s < $PATCH) || { echo "the patch failed in /tmp/$v"; return 1; }
  [ -z "$file" ] || python3 - /tmp/$v/$file "$3" "$4" <<'PY'
import sys
p, old, new = sys.argv[1:]; s = open(p).read()
assert s.count(old) == 1, (p, old); open(p, "w").write(s.replace(old, new))
PY
}
in_tree() { local v=$1; shift; echo "cd /tmp/$v && PYTHONPATH=$SITE:/tmp/$v $*"; }
PYTEST="python3 -m pytest -q -p no:cacheprovider -p no:xdist"
BENCH="python3 -m tools.bench_clients --model $FULL --mode hifi --clients 1,8 --rounds 3"
DECODE_TEST="tests/engine/test_decode_stream.py -k waits_for_the_work"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline -1 | cut -c1-100
tree new || exit 1
for s in $STEPS; do case $s in
  ckpt) step ckpt 60 "[ -f $FULL/config.json ] || python3 -m tools.make_checkpoint --full $FULL" ;;
  tests) step tests 90 "$(in_tree new $PYTEST tests/engine/test_decode_stream.py tests/engine/test_device_span.py \
           tests/engine/test_decode_graphs.py tests/engine/test_runner_host_wait.py \
           tests/engine/test_batch_engine.py)" ;;
  plant) tree plantw engine/decode_stream.py "        made.wait_in(self.stream)" "        pass" \
           && step plant_wait 30 "$(in_tree plantw $PYTEST $DECODE_TEST)"
         tree plants engine/decode_stream.py "        with torch.cuda.stream(self.stream):" \
           "        with contextlib.nullcontext():" && step plant_stream 30 "$(in_tree plants $PYTEST $DECODE_TEST)" ;;
  old*) ms=${s#old}; ms=${ms%b}; step $s 80 "$BENCH --stagger-ms $ms --json $OUT/clients_$s.json" ;;
  new*) ms=${s#new}; ms=${ms%b}; step $s 80 "$(in_tree new $BENCH --stagger-ms $ms --json $OUT/clients_$s.json)" ;;
esac; done
echo "=== done $(date -u +%H:%M:%S), $(left) s left"
python3 - "$OUT" <<'PY'
import glob, json, os, statistics, sys
print("| bench | stagger ms | 1 client p90 ms | 8: audio s/s (x one) | first audio p50 / p90 ms | p90 x lone "
      "| decode ms median (max) | engine ms median (max) | server GPU GiB |")
print("|---|---|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(f"{sys.argv[1]}/clients_*.json"), key=os.path.getmtime):
    one, eight = json.load(open(path))
    def span(name):
        values = [s[name] for s in eight["server_ms"] if name in s]
        return f"{statistics.median(values):.1f} ({max(values):.1f})" if values else "-"
    print(f"| {os.path.basename(path)[8:-5]} | {eight['stagger_ms']:g} | {1e3 * one['first_p90_s']:.0f} | "
          f"{eight['audio_per_s']:.1f} ({eight['audio_per_s'] / one['audio_per_s']:.2f}x) | "
          f"{1e3 * eight['first_p50_s']:.0f} / {1e3 * eight['first_p90_s']:.0f} | "
          f"{eight['first_p90_s'] / one['first_p90_s']:.2f} | {span('decode')} | {span('engine')} | "
          f"{'-' if eight['server_gpu_gib'] is None else format(eight['server_gpu_gib'], '.2f')} |")
print("8 clients, each client's first audio ms / decode ms by its index (sent order) within each round:")
for path in sorted(glob.glob(f"{sys.argv[1]}/clients_*.json"), key=os.path.getmtime):
    eight = json.load(open(path))[1]
    n = eight["clients"]
    rounds = [list(zip(eight["first_s"][k:k + n], eight["sent_ms"][k:k + n], eight["server_ms"][k:k + n]))
              for k in range(0, len(eight["first_s"]), n)]
    for k, clients in enumerate(rounds):
        cells = [f"{1e3 * first:.0f}/{spans.get('decode', float('nan')):.0f}"
                 for first, _, spans in sorted(clients, key=lambda c: c[1])]
        print(f"  {os.path.basename(path)[8:-5]} round {k}: " + " ".join(cells))
PY
