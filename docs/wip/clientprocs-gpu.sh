#!/usr/bin/env bash
# docs/wip/clientprocs-gpu.sh (`LIMIT=470 bash docs/wip/clientprocs-gpu.sh`): bench_clients' clients as threads of one process (the default, every JSON so far) against a process
# each (--processes, spawn), alternated threads, processes, threads, processes, all at once (--stagger-ms 0), and the
# time outside the server in each (the spans table's "outside ms": first audio minus accept + queue + engine + handoff).
# Why: H100 19:29 (docs/bench/h100-issue23-joinahead-20261206-1929.json, s0-*): 8 clients' first audio p50 165 ms
# against ~148 ms of server spans; outside 12.4-16.5 ms median (max 26-28) at 8 clients, 3.0-3.4 ms alone. Expected:
# if the clients' own GIL is the cause, outside at 8 clients in processes near the lone client's and first audio p50
# a little lower; the server's spans about the same in both modes.
# Run from the repo root of a main checkout that has bench_clients --processes, on a machine with torch CUDA and
# triton; logs and JSON into $OUT. RANDOM WEIGHTS (true sizes): say so with every figure. LIMIT seconds (default 470),
# STEPS in order (a step is skipped when too little time is left); each bench ~35-60 s on an H100 plus ~30-60 s to
# start its server; ~5-7 min in all.
#   ckpt            the random checkpoint at true sizes, if results/full/config.json is missing
#   threads1 processes1 threads2 processes2
#                   python3 -m tools.bench_clients --model results/full --mode hifi --clients 1,8 --rounds 3
#                   --stagger-ms 0 [--processes]; JSON $OUT/clients_<step>.json, log $OUT/<step>.log
# At the end: one row per bench (1 and 8 clients: first audio p50/p90, outside median (max); 8: audio s/s (x one),
# p90 x lone, accept/queue/engine/handoff medians), then each bench's 8-client outside ms per client, round by round.
set -uo pipefail
OUT=${OUT:-/tmp/clientprocs-out}; mkdir -p "$OUT"
START=$(date +%s); LIMIT=${LIMIT:-470}
STEPS=${STEPS:-ckpt threads1 processes1 threads2 processes2}
SITE=/tmp/site; FULL=results/full; mkdir -p results
[ -d $SITE ] || python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE .carry/wheels/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=$SITE:$PWD OMP_NUM_THREADS=4
grep -q -- '--processes' tools/bench_clients.py || { echo "this checkout's bench_clients has no --processes"; exit 1; }
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
step() {  # step NAME SECONDS_NEEDED COMMAND: its log in $OUT/NAME.log, its tables here
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then echo "=== $name skipped ($(left) s left)"; return; fi
  echo "=== $name $(date -u +%H:%M:%S)"
  timeout $(( $(left) - 3 )) bash -c "$*" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"
  grep -v "it/s\]" "$OUT/$name.log" | grep -v "^{\|^\s*$" | tail -12
}
BENCH="python3 -m tools.bench_clients --model $FULL --mode hifi --clients 1,8 --rounds 3 --stagger-ms 0"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline -1 | cut -c1-100
date -u
python3 -c "import time; print('perf_counter:', time.get_clock_info('perf_counter'))"
for s in $STEPS; do case $s in
  ckpt) step ckpt 60 "[ -f $FULL/config.json ] || python3 -m tools.make_checkpoint --full $FULL" ;;
  threads*) step $s 75 "$BENCH --json $OUT/clients_$s.json" ;;
  processes*) step $s 75 "$BENCH --processes --json $OUT/clients_$s.json" ;;
esac; done
echo "=== done $(date -u +%H:%M:%S), $(left) s left"
python3 - "$OUT" <<'PY'
import glob, json, os, statistics, sys
from tools.bench_clients import median_max, outside_ms

def outside(row):
    return [outside_ms(first, spans) for first, spans in zip(row["first_s"], row["server_ms"])]

def span(row, name):
    values = [s[name] for s in row["server_ms"] if name in s]
    return f"{statistics.median(values):.1f}" if values else "-"

paths = sorted(glob.glob(f"{sys.argv[1]}/clients_*.json"), key=os.path.getmtime)
print("| bench | clients as | 1: first p50 / p90 ms | 1: outside ms | 8: audio s/s (x one) | 8: first p50 / p90 ms "
      "| p90 x lone | 8: accept / queue / engine / handoff ms (median) | 8: outside ms |")
print("|---|---|---|---|---|---|---|---|---|")
for path in paths:
    one, eight = json.load(open(path))
    print(f"| {os.path.basename(path)[8:-5]} | {eight['clients_as']} | "
          f"{1e3 * one['first_p50_s']:.0f} / {1e3 * one['first_p90_s']:.0f} | "
          f"{median_max([ms for ms in outside(one) if ms is not None])} | "
          f"{eight['audio_per_s']:.1f} ({eight['audio_per_s'] / one['audio_per_s']:.2f}x) | "
          f"{1e3 * eight['first_p50_s']:.0f} / {1e3 * eight['first_p90_s']:.0f} | "
          f"{eight['first_p90_s'] / one['first_p90_s']:.2f} | "
          + " / ".join(span(eight, name) for name in ("accept", "queue", "engine", "handoff"))
          + f" | {median_max([ms for ms in outside(eight) if ms is not None])} |")
print("8 clients, each client's outside ms (sent_ms) by client index, round by round:")
for path in paths:
    eight = json.load(open(path))[1]
    n = eight["clients"]
    for k in range(0, len(eight["first_s"]), n):
        cells = [f"{'-' if ms is None else format(ms, '.1f')} ({sent:g})"
                 for ms, sent in zip(outside(eight)[k:k + n], eight["sent_ms"][k:k + n])]
        print(f"  {os.path.basename(path)[8:-5]} round {k // n}: " + " ".join(cells))
PY
