#!/usr/bin/env bash
# What `cuprof top` costs a recording process (issue 27: at most 2 %). BATCHES x 1,000 kernel
# launches through ctypes into the libcupti double, a cuprof_step() every 100, all recorded, in
# three modes, ROUNDS alternating rounds:
#   recording  a whole-run recording (CUPROF_ENABLED=1): no live figures kept
#   on-demand  recording by `cuprof capture --duration 0`: the writer keeps the live figures
#   top        as on-demand, with `cuprof top` asking for them once a second meanwhile
# Figures per mode, median of rounds: the program thread's CPU ns per launch (fastest batch:
# the one least disturbed), the writer thread's and the control thread's CPU ns per launch
# (from /proc, 10 ms ticks; the writer keeps the figures, the control thread serves them), and
# the whole process's (all threads). The launch rate (about 100,000 kernels a second recorded)
# is the worst case for the aggregation, which costs per record. Then the aggregation alone
# (cargo bench -p cuprof-core --bench live).
#   scripts/bench/top_overhead.sh [RELEASE_TARGET_DIR [BATCHES [ROUNDS]]]
#   (default target/release, built; 400 batches; 5 rounds)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
rel=${1:-$root/target/release}
batches=${2:-400}
rounds=${3:-5}
lib=$rel/libcuprof.so
dbl=$rel/libcupti_double.so
cuprof=$rel/cuprof
for f in "$lib" "$dbl" "$cuprof"; do [ -f "$f" ] || { echo "missing $f (cargo build --release)" >&2; exit 1; }; done
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
mkdir -m 700 "$log/rt"
export XDG_RUNTIME_DIR=$log/rt
cat >"$log/loop.py" <<'PY'
import ctypes, json, os, sys, time
import double as dbl
d = dbl.load()
assert d.cuInit(0) == 0
step = ctypes.CDLL(None).cuprof_step
go = sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.01)
def threads():
    """CPU ns of this process's threads, by name."""
    tick = 1e9 / os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            name = open(f"/proc/self/task/{tid}/comm").read().strip()
            f = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = out.get(name, 0) + (int(f[11]) + int(f[12])) * tick
    return out
per = []
t0 = threads()
p0 = time.process_time_ns()
for _ in range(int(sys.argv[1])):
    t = time.thread_time_ns()
    for i in range(1000):
        d.double_launch_kernel(b"_Z4gemmv", 0, 7, 132, 1, 1, 256, 1, 1, 40_000)
        if i % 100 == 99:
            step()
    per.append((time.thread_time_ns() - t) / 1000)
launches = 1000 * int(sys.argv[1])
process = (time.process_time_ns() - p0) / launches
t1 = threads()
used = lambda name: (t1.get(name, 0) - t0.get(name, 0)) / launches
print(json.dumps({"thread_ns": min(per), "process_ns": process,
                  "writer_ns": used("cuprof-writer"), "control_ns": used("cuprof-control")}))
PY
run() { # MODE ROUND
  local mode=$1 out=$log/$1$2.json go=$log/go
  rm -f "$go"
  rm -rf "$log/out"
  local extra=(CUPROF_ON_DEMAND=1)
  [ "$mode" = recording ] && extra=()
  env -u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH OPENBLAS_NUM_THREADS=1 \
    PYTHONPATH="$root/tests/apps" CUPTI_DOUBLE_LIB="$dbl" LD_PRELOAD="$lib" CUPROF_ENABLED=1 \
    CUPROF_CUPTI_PATH="$dbl" CUPROF_DIR="$log/out" CUPROF_QUIET=1 "${extra[@]}" \
    python3 "$log/loop.py" "$batches" "$go" >"$out" 2>"$log/err" &
  local pid=$! capture= top=
  if [ "$mode" != recording ]; then
    until [ -S "$log/rt/cuprof/$pid.sock" ]; do sleep 0.05; done
    "$cuprof" capture --pid "$pid" --duration 0 --no-report --dir "$log/out" 2>>"$log/err" &
    capture=$!
    until "$cuprof" ps 2>/dev/null | grep -q recording; do sleep 0.05; done
  fi
  if [ "$mode" = top ]; then
    "$cuprof" top --pid "$pid" >"$log/top.txt" 2>&1 &
    top=$!
  fi
  touch "$go"
  wait "$pid"
  # The capture and top end by themselves once the process has exited.
  [ -z "$capture" ] || wait "$capture"
  [ -z "$top" ] || wait "$top"
  if [ "$mode" = top ] && ! grep -q "kernels, last second:" "$log/top.txt"; then
    echo "cuprof top showed no kernels:" >&2; cat "$log/top.txt" >&2; exit 1
  fi
}
echo "== cuprof top: $batches x 1,000 launches recorded, 3 modes, $rounds alternating rounds"
for r in $(seq "$rounds"); do
  for m in recording on-demand top; do run "$m" "$r"; done
done
python3 - "$log" "$rounds" <<'PY'
import json, statistics, sys
log, rounds = sys.argv[1], int(sys.argv[2])
keys = ["thread_ns", "writer_ns", "control_ns", "process_ns"]
res = {}
for m in ["recording", "on-demand", "top"]:
    rs = [json.load(open(f"{log}/{m}{r}.json")) for r in range(1, rounds + 1)]
    res[m] = {k: [x[k] for x in rs] for k in keys}
base = {k: statistics.median(res["recording"][k]) for k in keys}
for m, v in res.items():
    print(f"{m}:")
    for k, label in zip(keys, ["program thread", "writer thread", "control thread", "process"]):
        med = statistics.median(v[k])
        rel = f" ({100 * (med / base[k] - 1):+.1f} %)" if base[k] else ""
        print(f"  {label:15}: {med:6.0f} ns per launch{rel}; rounds {', '.join(f'{x:.0f}' for x in v[k])}")
print(json.dumps({"top_overhead": res}))
PY
cargo bench -q -p cuprof-core --bench live 2>/dev/null | grep "live figures"
