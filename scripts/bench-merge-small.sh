#!/usr/bin/env bash
# merge against report on one rank of many small events (BENCHMARKS.md, "merge on many small
# events", issue 26): MB/s of uncompressed JSON, best of 3 wall-clock runs, of `report` and
# `merge` pinned to one core (`-j 1`) and of `merge -j N`, on two traces of the same 400,000
# kernels: one without a host name (as torch.profiler or another tool writes them) and one with
# cuprof's header.
#   scripts/bench-merge-small.sh                 # CUPROF_BENCH_KERNELS=400000, N = every core
#   CUPROF_BENCH_BIN=/tmp/old/cuprof scripts/bench-merge-small.sh   # time another build
# Traces are generated into ${CUPROF_BENCH_DIR:-/tmp/cuprof-bench-small} and reused.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${CUPROF_BENCH_JOBS:-$(nproc)}"
if [ -z "${CUPROF_BENCH_BIN:-}" ]; then
    cargo build --release -p cuprof-launcher --bin cuprof >&2
fi
bin="${CUPROF_BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/cuprof}"
# shellcheck source=scripts/bench/small_traces.sh
source scripts/bench/small_traces.sh
# shellcheck source=scripts/bench/best.sh
source scripts/bench/best.sh
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for trace in "$plain" "$host"; do
    raw=$(gzip -dc "$trace" | wc -c)
    rep=$(best taskset -c 0 "$bin" report "$trace" -j 1)
    m1=$(best taskset -c 0 "$bin" merge "$trace" -o "$dir/out/m1.trace.json.gz" -j 1)
    mN=$(best "$bin" merge "$trace" -o "$dir/out/mN.trace.json.gz" -j "$jobs")
    python3 - "$(basename "$trace")" "$raw" "$rep" "$m1" "$mN" "$jobs" <<'PY'
import sys
name = sys.argv[1]
raw, rep, m1, mN, jobs = map(float, sys.argv[2:])
mb = lambda s: raw / 1e6 / s
print(f"{name}: {raw/1e6:.0f} MB of JSON")
print(f"  report, one core:   {rep:.2f} s, {mb(rep):.1f} MB/s")
print(f"  merge, one core:    {m1:.2f} s, {mb(m1):.1f} MB/s ({rep/m1:.2f}x report)")
print(f"  merge, -j {int(jobs)}:       {mN:.2f} s, {mb(mN):.1f} MB/s ({rep/mN:.2f}x report on one core)")
PY
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
