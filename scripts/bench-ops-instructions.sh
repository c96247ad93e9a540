#!/usr/bin/env bash
# Instructions the program thread runs per PyTorch operator inside recorded steps, counted by
# valgrind's callgrind (scripts/bench/ops_instructions.py), on the real models of
# scripts/bench-real-ops.sh: a count repeats exactly from run to run, where time on a shared
# machine spreads by more than the differences it must show (PYTHONHASHSEED is fixed: dict
# layouts, and so the interpreter's instructions, follow it). For each model and mode: the
# instructions per operator over untraced steps (mode `none` of the same model), split by
# library, and for torch.profiler what its stop and export cost per operator recorded.
# An instruction is not a nanosecond (a cache miss, a system call or a lock costs time and
# few instructions): scripts/bench-real-ops.sh measures time.
#
# Usage: scripts/bench-ops-instructions.sh [STEPS] [MODELS] [MODES]
#   defaults: 20 steps, "flux llama", "none floor torch torch+stack cuprof-native
#   cuprof-native+stack cuprof-nvtx-fallback". Each run takes 3-5 minutes (valgrind runs the
#   whole import); two run at once. Needs valgrind and a C compiler. CUPROF_LIB and
#   CUPTI_DOUBLE_LIB, both given, count those builds (of any profile) instead of building the
#   release ones; OUT keeps the raw dumps there.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
steps=${1:-20}
models=${2:-flux llama}
modes=${3:-none floor torch torch+stack cuprof-native cuprof-native+stack cuprof-nvtx-fallback}
target=${CARGO_TARGET_DIR:-$root/target}
python=${PYTHON:-$(bash scripts/python-env.sh)/python3}
command -v valgrind > /dev/null || { echo "bench-ops-instructions: valgrind is not installed (apt install valgrind)" >&2; exit 1; }
if [ -n "${CUPROF_LIB:-}" ] && [ -n "${CUPTI_DOUBLE_LIB:-}" ]; then
  lib=$(realpath "$CUPROF_LIB")
  double=$(realpath "$CUPTI_DOUBLE_LIB")
else
  cargo build --release -q -p cuprof-preload -p cupti-double
  lib=$target/release/libcuprof.so
  double=$target/release/libcupti_double.so
fi
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
cc -O0 -shared -fPIC -o "$out/steps_helper.so" scripts/bench/steps_helper.c

run() { # model mode
  local model=$1 mode=$2 dir=$out/$1-$2 env=()
  mkdir -p "$dir"
  case $mode in
    none | floor | torch) ;;
    torch+stack) env=(BENCH_WITH_STACK=1) ;;
    cuprof-*)
      env=(CUPTI_DOUBLE_LIB="$double" LD_PRELOAD="$lib" CUPROF_ENABLED=1 CUPROF_CUPTI_PATH="$double"
        CUPROF_DIR="$dir/t" CUPROF_NAME=b CUPROF_QUIET=1 CUPROF_WAIT=1 CUPROF_WARMUP=0
        CUPROF_ACTIVE=100000 CUPROF_REPEAT=1 CUPROF_RECORD_SHAPES=1 CUPROF_CACHE="$dir/cache")
      case $mode in
        cuprof-native+stack) env+=(CUPROF_WITH_STACK=1) ;;
        cuprof-nvtx-fallback) env+=(CXX=false) ;;
      esac ;;
  esac
  local pymode=${mode%%[-+]*}
  # The observer's first build is not what is measured: build it outside valgrind.
  if [ "$mode" = cuprof-native ] || [ "$mode" = cuprof-native+stack ]; then
    env "${env[@]}" PYTHONPATH="$root/tests/apps" OMP_NUM_THREADS=1 \
      "$python" scripts/bench/ops_instructions.py "$pymode" "$model" 1 "$out/steps_helper.so" > /dev/null 2>&1
  fi
  (cd "$dir" && env "${env[@]}" PYTHONPATH="$root/tests/apps" OMP_NUM_THREADS=1 PYTHONHASHSEED=0 \
    valgrind --tool=callgrind --collect-atstart=no --separate-threads=yes \
      --callgrind-out-file="$dir/cg.out" \
      "$python" "$root/scripts/bench/ops_instructions.py" "$pymode" "$model" "$steps" \
      "$out/steps_helper.so" > "$dir/result.json" 2> "$dir/valgrind.log") ||
    echo "bench-ops-instructions: $model $mode failed: $dir/valgrind.log" >&2
}

jobs=()
for model in $models; do
  for mode in $modes; do
    jobs+=("$model $mode")
  done
done
for ((i = 0; i < ${#jobs[@]}; i += 2)); do
  run ${jobs[i]} &
  [ $((i + 1)) -lt ${#jobs[@]} ] && run ${jobs[i + 1]} &
  wait
done

"$python" scripts/bench/callgrind_costs.py "$out" "$models" "$modes"
echo "raw: $out"
