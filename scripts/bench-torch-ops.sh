#!/usr/bin/env bash
# Cost of PyTorch operator recording per operator, on the CPU (issue 13; no GPU needed):
# scripts/bench/torch_ops.py runs OPS cheap CPU operators per step under each mode, and this
# prints the median step time (wall, and CPU time of the program's thread: cuprof's writer
# thread works beside it, which on a loaded 2-core machine shows in the wall time) and the µs
# added per operator over the untraced run, for cuprof
# (operators off, shapes off, shapes on, with Python stacks) next to torch.profiler's CPU
# activity (shapes off, on), and PyTorch's NVTX observer alone (its own share of cuprof's cost). cuprof runs the release libcuprof.so started through the libcupti
# double's cuInit, recording the whole run; the trace's operator count is checked.
#
# Usage: scripts/bench-torch-ops.sh [ROUNDS]   (default 3; modes interleaved in each round)
# Environment: OPS (operators per step, default 20000), STEPS (default 10), PYTHON (default
#   the tests' virtual environment from scripts/python-env.sh), CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
rounds=${1:-3}
ops=${OPS:-20000}
steps=${STEPS:-10}
target=${CARGO_TARGET_DIR:-$root/target}
python=${PYTHON:-$(bash scripts/python-env.sh)/python3}
cargo build --release -q -p cuprof-preload -p cupti-double
lib=$target/release/libcuprof.so
double=$target/release/libcupti_double.so
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run_mode() { # NAME then env assignments
  local name=$1; shift
  case $name in
    none|torch|torch-shapes|observer|observer-shapes)
      env PYTHONPATH="$root/tests/apps" "$python" scripts/bench/torch_ops.py "$name" "$ops" "$steps" ;;
    *)
      rm -rf "$out/$name"
      env "$@" PYTHONPATH="$root/tests/apps" CUPTI_DOUBLE_LIB="$double" LD_PRELOAD="$lib" \
        CUPROF_ENABLED=1 CUPROF_CUPTI_PATH="$double" CUPROF_DIR="$out/$name" CUPROF_NAME=b \
        CUPROF_QUIET=1 "$python" scripts/bench/torch_ops.py cuprof "$ops" "$steps"
      local n
      n=$(zcat "$out/$name"/b-rank0.trace.json.gz | grep -c '"cat": "cpu_op", "name": "aten::add"' || true)
      echo "{\"mode\": \"$name\", \"aten_add_in_trace\": $n}" ;;
  esac
}

declare -A env_of=(
  [cuprof-ops-off]="CUPROF_TORCH_OPS=0"
  [cuprof-no-shapes]="CUPROF_RECORD_SHAPES=0"
  [cuprof-shapes]="CUPROF_RECORD_SHAPES=1"
  [cuprof-stacks]="CUPROF_RECORD_SHAPES=1 CUPROF_WITH_STACK=1"
)
modes=(none observer observer-shapes cuprof-ops-off cuprof-no-shapes cuprof-shapes cuprof-stacks torch torch-shapes)
results=$out/results.jsonl
for r in $(seq "$rounds"); do
  for m in "${modes[@]}"; do
    # shellcheck disable=SC2086
    run_mode "$m" ${env_of[$m]:-X=1} 2>/dev/null | sed "s/^{/{\"round\": $r, \"name\": \"$m\", /" >>"$results"
  done
done
"$python" - "$results" "$ops" "$steps" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ops, steps = int(sys.argv[2]), int(sys.argv[3])
by, cpu = {}, {}
kept = {}
for r in rows:
    if "median_step_s" in r:
        by.setdefault(r["name"], []).append(r["median_step_s"])
        cpu.setdefault(r["name"], []).append(r["median_step_thread_cpu_s"])
    if "aten_add_in_trace" in r:
        kept.setdefault(r["name"], []).append(r["aten_add_in_trace"])
base = statistics.median(by["none"])
cbase = statistics.median(cpu["none"])
print(f"{ops} operators per step, {steps} steps, median of {len(by['none'])} rounds")
print("| mode | ms/step (wall) | µs added per operator (wall) | program thread CPU ms/step | µs added per operator (program thread CPU) | aten::add in the trace (expected %d) |" % (ops * (steps + 1)))
print("| --- | --- | --- | --- | --- | --- |")
for name in by:
    m, c = statistics.median(by[name]), statistics.median(cpu[name])
    added, cadded = (m - base) / ops * 1e6, (c - cbase) / ops * 1e6
    k = ",".join(str(x) for x in kept.get(name, [])) or "-"
    print(f"| {name} | {m*1e3:.1f} | {added:.2f} | {c*1e3:.1f} | {cadded:.2f} | {k} |")
PY
