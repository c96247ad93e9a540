#!/usr/bin/env bash
# Many launching threads (issue 19), on any machine (no GPU needed): tests/apps/flood.py launches
# PER_THREAD kernels (default 2,000) on each of N threads at once through the libcupti test double
# in CUPTI 13's per-thread buffer mode, with the release libcuprof.so preloaded and default
# settings, then the same run untraced. For each N it prints the kernels launched and kept (kernel
# events counted in the trace), the loss line if any, the peak RSS tracing adds (the program's
# VmHWM after its forced flush, traced minus untraced), and wall times (the launch phase, and the
# whole process including the exit drain) traced against untraced. One run each.
#
# Usage: scripts/bench-threads.sh [N ...]     (default: 8 64 256 512 1024)
# Environment: PER_THREAD, CARGO_TARGET_DIR (default target/), and any CUPROF_* variable, e.g.
#   CUPROF_BUFFERS=128 scripts/bench-threads.sh 256
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target=${CARGO_TARGET_DIR:-$root/target}
per_thread=${PER_THREAD:-2000}
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(8 64 256 512 1024)

cargo build --release -p cuprof-preload -p cupti-double >&2
lib=$target/release/libcuprof.so
double=$target/release/libcupti_double.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs flood.py; prints its JSON line, then the process's wall seconds, on two lines.
flood() {
  local n=$1
  shift
  local t0 t1
  t0=$(date +%s.%N)
  env PYTHONPATH="$root/tests/apps" CUPTI_DOUBLE_LIB="$double" PYTHONUNBUFFERED=1 "$@" \
    python3 "$root/tests/apps/flood.py" "$per_thread" "$n" 0 2>"$work/stderr" | tail -n 1
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}

field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

echo "| threads | kernels launched | kernels in the trace | records lost | peak RSS added | launch phase traced / untraced | process traced / untraced |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for n in "${counts[@]}"; do
  out=$work/out-$n
  mkdir -p "$out"
  traced=$(flood "$n" LD_PRELOAD="$lib" CUPROF_ENABLED=1 CUPROF_CUPTI_PATH="$double" \
    CUPROF_DIR="$out" CUPROF_NAME=t)
  lost=$(grep -o 'cuprof: [0-9]* records were lost' "$work/stderr" | grep -o '[0-9]*' || echo 0)
  plain=$(flood "$n")
  t_json=$(sed -n 1p <<<"$traced") t_wall=$(sed -n 2p <<<"$traced")
  p_json=$(sed -n 1p <<<"$plain") p_wall=$(sed -n 2p <<<"$plain")
  kept=$(zcat "$out/t-rank0.trace.json.gz" | grep -c '"cat": "kernel"' || true)
  added=$(( $(field "$t_json" peak_rss_kib) - $(field "$p_json" peak_rss_kib) ))
  printf '| %s | %s | %s | %s | %+.0f MiB | %.2f s / %.2f s | %.2f s / %.2f s |\n' \
    "$n" "$(field "$t_json" kernels)" "$kept" "$lost" "$(echo "$added / 1024" | bc -l)" \
    "$(field "$t_json" seconds)" "$(field "$p_json" seconds)" "$t_wall" "$p_wall"
  rm -rf "$out"
done
