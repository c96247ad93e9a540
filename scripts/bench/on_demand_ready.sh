#!/usr/bin/env bash
# A ready on-demand process (CUPROF_ON_DEMAND=1, nothing asked) against the same process
# untraced (no preload): BATCHES x 1,000 kernel launches through ctypes into the libcupti
# double, a cuprof_step() every 100 launches in the ready process (the untraced one has no
# cuprof_step: the comparison counts the step calls against cuprof). 7 alternating rounds.
# Measured on the thread's CPU clock (steadier than wall time while other work shares the
# cores): each round's figure is the fastest batch's ns per launch (the batch least disturbed),
# and the medians of the rounds are compared. Then, in the ready process, 200,000 more
# cuprof_step() calls alone: the ns one costs (its fastest batch of 10,000). Part 4 of scripts/bench-cpu.sh; runs alone as
#   scripts/bench/on_demand_ready.sh [RELEASE_TARGET_DIR]   (default target/release, built)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
rel=${1:-$root/target/release}
lib=$rel/libcuprof.so
dbl=$rel/libcupti_double.so
for f in "$lib" "$dbl"; do [ -f "$f" ] || { echo "missing $f (cargo build --release -p cuprof-preload -p cupti-double)" >&2; exit 1; }; done
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
cat >"$log/loop.py" <<'PY'
import ctypes, json, sys, time
import double as dbl
d = dbl.load()
assert d.cuInit(0) == 0
step = getattr(ctypes.CDLL(None), "cuprof_step", None)
per = []
for _ in range(int(sys.argv[1])):
    t = time.thread_time_ns()
    for i in range(1000):
        d.double_launch_kernel(b"_Z4gemmv", 0, 7, 132, 1, 1, 256, 1, 1, 40_000)
        if step is not None and i % 100 == 99:
            step()
    per.append((time.thread_time_ns() - t) / 1000)
steps = []
if step is not None:
    for _ in range(20):
        t = time.thread_time_ns()
        for _ in range(10_000):
            step()
        steps.append((time.thread_time_ns() - t) / 10_000)
print(json.dumps({"ns_per_launch": min(per), "ns_per_step": min(steps, default=0)}))
PY
run() { # ready|untraced
  if [ "$1" = ready ]; then
    env -u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH OPENBLAS_NUM_THREADS=1 \
      PYTHONPATH="$root/tests/apps" CUPTI_DOUBLE_LIB="$dbl" LD_PRELOAD="$lib" CUPROF_ENABLED=1 \
      CUPROF_ON_DEMAND=1 CUPROF_CUPTI_PATH="$dbl" CUPROF_DIR="$log/out" XDG_RUNTIME_DIR="$log" \
      CUPROF_QUIET=1 python3 "$log/loop.py" 200
  else
    env -u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH -u LD_PRELOAD OPENBLAS_NUM_THREADS=1 \
      PYTHONPATH="$root/tests/apps" CUPTI_DOUBLE_LIB="$dbl" python3 "$log/loop.py" 200
  fi
}
echo "== on-demand, ready: 200 x 1,000 launches, untraced and ready, 7 alternating rounds"
for r in 1 2 3 4 5 6 7; do
  run untraced | tail -1 >"$log/u$r.json"
  run ready | tail -1 >"$log/r$r.json"
done
[ ! -e "$log/out" ] || { echo "a ready process wrote files:" >&2; ls "$log/out" >&2; exit 1; }
python3 - "$log" <<'PY'
import json, statistics, sys
log = sys.argv[1]
u = [json.load(open(f"{log}/u{r}.json"))["ns_per_launch"] for r in range(1, 8)]
r = [json.load(open(f"{log}/r{r}.json"))["ns_per_launch"] for r in range(1, 8)]
mu, mr = statistics.median(u), statistics.median(r)
print(f"untraced : {mu:.0f} ns per launch (rounds: {', '.join(f'{x:.0f}' for x in u)})")
print(f"ready    : {mr:.0f} ns per launch (rounds: {', '.join(f'{x:.0f}' for x in r)})")
st = statistics.median(json.load(open(f"{log}/r{r}.json"))["ns_per_step"] for r in range(1, 8))
print(f"added    : {mr - mu:+.0f} ns per launch ({100 * (mr - mu) / mu:+.2f} %); no file written")
print(f"cuprof_step() in a ready process: {st:.0f} ns per call")
print(json.dumps({"on_demand_ready": {"untraced_ns": u, "ready_ns": r, "step_ns": st}}))
PY
