# Sourced by the docs/wip/*-gpu.sh scripts (after they set LIMIT and STEPS): the wheels, the time budget, `step`,
# patched copies of the tree (`tree`, `in_tree`), the commands they share and the bench table. Run from the repo root.
set -uo pipefail
START=$(date +%s)
SITE=/tmp/site; FULL=$PWD/results/full; mkdir -p results; ROOT=$PWD
[ -d $SITE ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE \
  .carry/wheels/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=$SITE:$PWD OMP_NUM_THREADS=4
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
step() {  # step NAME SECONDS_NEEDED COMMAND: its log in $OUT/NAME.log, its tail (TAIL lines) here
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then echo "=== $name skipped ($(left) s left)"; return; fi
  echo "=== $name $(date -u +%H:%M:%S)"
  timeout $(( $(left) - 3 )) bash -c "$*" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"
  grep -v "it/s\]" "$OUT/$name.log" | grep -v "^{\|^\s*$\|^SKIPPED\|Warning\|warn(\|_warn_once\|re.match(" \
    | tail -${TAIL:-12}
}
tree() {  # /tmp/$1: a copy of this tree with patches $2 (space-separated docs/wip names) applied, then python edits
  local v=$1 patches=$2 file=${3:-}; shift 2; [ $# -gt 0 ] && shift
  rm -rf /tmp/$v; mkdir /tmp/$v; cp -r app engine kernels tests tools assets launcher.py pyproject.toml /tmp/$v/
  for p in $patches; do
    (cd /tmp/$v && patch -p1 -s < $ROOT/docs/wip/$p.patch) || { echo "$p.patch failed in /tmp/$v"; return 1; }
  done
  [ -z "$file" ] || python3 - /tmp/$v/$file "$@" <<'PY'
import sys
p, *edits = sys.argv[1:]; s = open(p).read()
for old, new in zip(edits[::2], edits[1::2]):
    assert s.count(old) == 1, (p, old); s = s.replace(old, new)
open(p, "w").write(s)
PY
}
in_tree() { local v=$1; shift; echo "cd /tmp/$v && PYTHONPATH=$SITE:/tmp/$v $*"; }
PYTEST="python3 -m pytest -q -p no:cacheprovider"
BENCH="python3 launcher.py bench --model $FULL --random-weights --modes hifi --workloads en-ref3-out3,baseline"
BENCH="$BENCH --runs 5 --warmup 2"
bench_table() {  # the launcher benches' rows under $OUT/bench_*/, in the order they ran
  python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print("| run | mode | workload | median ms (min-max) | p90 ms | kernels | first audio ms |")
print("|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(f"{out}/bench_*/bench-*.json"), key=os.path.getmtime):
    for r in json.load(open(path))["rows"]:
        lo, hi = r["spread_s"]
        print(f"| {path.split('/')[-2]} | {r['mode']} | {r['workload']} | {1e3 * r['median_s']:.1f} "
              f"({1e3 * lo:.0f}-{1e3 * hi:.0f}) | {1e3 * r['p90_s']:.1f} | {r['kernels']} | "
              f"{1e3 * (r['first_audio_s'] or 0):.0f} |")
PY
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline -1
