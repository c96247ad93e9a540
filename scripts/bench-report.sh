#!/usr/bin/env bash
# Throughput of `cuprof report` on a generated ~1 GB trace (MB/s of uncompressed JSON, one core).
#   scripts/bench-report.sh                 # CUPROF_BENCH_MB=1024 CUPROF_BENCH_RUNS=2
# The trace is generated into ${CUPROF_BENCH_DIR:-/tmp/cuprof-bench} and reused; delete that
# directory to free the disk. The report runs pinned to one CPU (taskset) when available.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p cuprof-launcher --bench report "$@"
