#!/usr/bin/env bash
# Program-thread CPU per PyTorch operator inside recorded steps, on real models (issue 25): a
# diffusers transformer's inference and a Hugging Face causal LM's training step
# (scripts/bench/real_ops.py), in one process where idle and recording steps alternate, for
# cuprof's native observer, its NVTX fallback, and torch.profiler (record_shapes). Prints
# per model and mode the median idle and recording step CPU, their ratio and the µs added per
# operator (operators per step counted by torch.profiler's run).
#
# Usage: scripts/bench-real-ops.sh [STEPS]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
steps=${1:-60}
target=${CARGO_TARGET_DIR:-$root/target}
python=${PYTHON:-$(bash scripts/python-env.sh)/python3}
cargo build --release -q -p cuprof-preload -p cupti-double
lib=$target/release/libcuprof.so
double=$target/release/libcupti_double.so
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cuprof() { # env assignments
  env "$@" PYTHONPATH="$root/tests/apps" CUPTI_DOUBLE_LIB="$double" LD_PRELOAD="$lib" \
    CUPROF_ENABLED=1 CUPROF_CUPTI_PATH="$double" CUPROF_DIR="$out/t" CUPROF_NAME=b CUPROF_QUIET=1 \
    CUPROF_WAIT=1 CUPROF_WARMUP=1 CUPROF_ACTIVE=1 CUPROF_REPEAT=0 OMP_NUM_THREADS=1 \
    "$python" scripts/bench/real_ops.py cuprof "$model" "$steps" 2>/dev/null | tail -1
}
for model in flux llama; do
  t=$(OMP_NUM_THREADS=1 PYTHONPATH="$root/tests/apps" "$python" scripts/bench/real_ops.py torch "$model" "$steps" 2>/dev/null | tail -1)
  n=$(echo "$t" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["ops_per_step"])')
  native=$(cuprof CUPROF_RECORD_SHAPES=1)
  stacks=$(cuprof CUPROF_RECORD_SHAPES=1 CUPROF_WITH_STACK=1)
  nvtx=$(cuprof CUPROF_RECORD_SHAPES=1 CXX=false CUPROF_CACHE="$out/nocache")
  for row in "torch.profiler:$t" "cuprof-native:$native" "cuprof-native+stack:$stacks" "cuprof-nvtx-fallback:$nvtx"; do
    echo "${row#*:}" | "$python" -c '
import json, sys
name, n = sys.argv[1], int(sys.argv[2])
r = json.load(sys.stdin)
print("%-8s %-22s idle %7.2f ms  recording %7.2f ms  %.2fx  %+.2f us/op  (%d ops/step)" % (
    r["model"], name, r["idle_ms"], r["recording_ms"], r["recording_ms"] / r["idle_ms"],
    (r["recording_ms"] - r["idle_ms"]) * 1e3 / n, n))' "${row%%:*}" "$n"
  done
done
