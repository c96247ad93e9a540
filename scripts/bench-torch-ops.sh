#!/usr/bin/env bash
# Cost of PyTorch operator recording per operator, on the CPU (issue 13; no GPU needed):
# scripts/bench/torch_ops.py runs OPS cheap CPU operators per step under each mode, and this
# prints the median step time (wall, and CPU time of the program's thread: cuprof's writer
# thread works beside it, which on a loaded 2-core machine shows in the wall time) and the µs
# added per operator over the untraced run, for cuprof
# (operators off, shapes off, shapes on, with Python stacks) next to torch.profiler's CPU
# activity (shapes off, on; with what its stop and export cost the program per operator: Kineto
# builds its results when the profiler stops, cuprof's writer thread builds its trace beside
# the program), and PyTorch's NVTX observer alone; and each mode's whole-process CPU time, start to
# exit, per recorded operator over the untraced run's (its own share of cuprof's cost). cuprof runs the release libcuprof.so started through the libcupti
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
  # The whole process's CPU time (user + system, every thread, start to exit: cuprof's writer
  # and its last writes at exit, torch.profiler's stop and export) beside the step times.
  local timed=(/usr/bin/time -o "$out/cpu" -f "%U %S")
  case $name in
    none|torch|torch-shapes|observer|observer-shapes)
      env PYTHONPATH="$root/tests/apps" "${timed[@]}" "$python" scripts/bench/torch_ops.py "$name" "$ops" "$steps" ;;
    *)
      rm -rf "$out/$name"
      env "$@" PYTHONPATH="$root/tests/apps" CUPTI_DOUBLE_LIB="$double" LD_PRELOAD="$lib" \
        CUPROF_ENABLED=1 CUPROF_CUPTI_PATH="$double" CUPROF_DIR="$out/$name" CUPROF_NAME=b \
        CUPROF_QUIET=1 "${timed[@]}" "$python" scripts/bench/torch_ops.py cuprof "$ops" "$steps"
      local n
      n=$(zcat "$out/$name"/b-rank0.trace.json.gz | grep -c '"cat": "cpu_op", "name": "aten::add"' || true)
      echo "{\"mode\": \"$name\", \"aten_add_in_trace\": $n}" ;;
  esac
  echo "{\"mode\": \"$name\", \"process_cpu_s\": $(awk '{print $1 + $2}' "$out/cpu")}"
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
stop, export, pcpu = {}, {}, {}
for r in rows:
    if "process_cpu_s" in r:
        pcpu.setdefault(r["name"], []).append(r["process_cpu_s"])
    if "stop_s" in r:
        stop.setdefault(r["name"], []).append(r["stop_s"] / r["recorded_ops"] * 1e6)
        export.setdefault(r["name"], []).append(r["export_s"] / r["recorded_ops"] * 1e6)
    if "median_step_s" in r:
        by.setdefault(r["name"], []).append(r["median_step_s"])
        cpu.setdefault(r["name"], []).append(r["median_step_thread_cpu_s"])
    if "aten_add_in_trace" in r:
        kept.setdefault(r["name"], []).append(r["aten_add_in_trace"])
base = statistics.median(by["none"])
cbase = statistics.median(cpu["none"])
print(f"{ops} operators per step, {steps} steps, median of {len(by['none'])} rounds")
print("| mode | ms/step (wall) | µs added per operator (wall) | program thread CPU ms/step | µs added per operator (program thread CPU) | aten::add in the trace (expected %d) | µs per operator at stop | µs per operator to export | process CPU s | µs of process CPU added per operator |" % (ops * (steps + 1)))
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
pbase = statistics.median(pcpu["none"])
at = lambda d, name: f"{statistics.median(d[name]):.2f}" if name in d else "-"
for name in by:
    m, c = statistics.median(by[name]), statistics.median(cpu[name])
    added, cadded = (m - base) / ops * 1e6, (c - cbase) / ops * 1e6
    k = ",".join(str(x) for x in kept.get(name, [])) or "-"
    p = statistics.median(pcpu[name])
    padded = (p - pbase) / (ops * (steps + 1)) * 1e6
    print(f"| {name} | {m*1e3:.1f} | {added:.2f} | {c*1e3:.1f} | {cadded:.2f} | {k} | {at(stop, name)} | {at(export, name)} | {p:.2f} | {padded:.2f} |")
PY
