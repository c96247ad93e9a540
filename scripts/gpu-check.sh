#!/usr/bin/env bash
# cuprof's acceptance run on a CUDA machine (H100/H200, CUDA 13, PyTorch 2.11). Builds nothing:
# libcuprof.so and cuprof are built on x86_64 Debian 12 and copied (CUPROF_BIN, default
# target/release). One command: `bash scripts/gpu-check.sh [check...]` with checks among
# basic inject dump transformer operators torchmem compiled collectives findings ondemand window api block memory faults offline (default: all). Prints one PASS/FAIL line
# per claim with its figures and `N passed, M failed`; writes gpu-check.json into $OUT or cwd.
set -uo pipefail
cd "$(dirname "$0")/.."
export CUPROF_BIN="${CUPROF_BIN:-target/release}"
[ -f "$CUPROF_BIN/libcuprof.so" ] || { echo "gpu-check: $CUPROF_BIN/libcuprof.so missing: build with cargo build --release and copy target/release here" >&2; exit 2; }
export PYTHONUNBUFFERED=1
python3 scripts/gpu/gpu_check.py "$@"
