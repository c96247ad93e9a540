#!/usr/bin/env bash
# One big trace read on every core (issue 53, item 3): writes a trace of CHUNKED_MB MiB of JSON
# (default 1024) with cuprof's own writer (chunked gzip with its index), then times `load`,
# `report` (and its load+model and sections apart), `merge` and `export` on it with 1 and
# BENCH_WORKERS (default 2) workers (alternating, medians of BENCH_REPS runs, default 5), the
# same file without its index (one stream: load, merge, export), and what the full flushes cost
# in size. States the machine's load before and after. On a machine with more cores the
# on-paper figures it prints (Amdahl, from the measured serial fraction) can be checked with
# BENCH_WORKERS=4: scripts/bench-cpu.sh runs this too (CHUNKED_MB=5120 there by default).
#   CHUNKED_MB=1024 BENCH_REPS=5 [CHUNKED_DIR=/tmp] scripts/bench/chunked_read.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "== machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) (before)"
CHUNKED_MB="${CHUNKED_MB:-1024}" BENCH_WORKERS="${BENCH_WORKERS:-2}" BENCH_REPS="${BENCH_REPS:-5}" \
  cargo bench -p cuprof-analysis --bench chunked_read
echo "== load $(cut -d' ' -f1-3 /proc/loadavg) (after)"
